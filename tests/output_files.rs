//! Outputs other accounts can read: a new output gets 0666 less the umask, a replaced one keeps
//! its mode, leftovers of killed runs are cleaned and errors name the user's path (issue 13).
//!
//! The umask is set in a shell around the CLI, not in this process (a process-wide setting
//! would race with the other tests' threads).
#![cfg(unix)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use common::synthetic;
use deepmerge::deep::Bounds;
use deepmerge::exr::{write_deep, Codec};

/// Two small deep inputs in `dir`.
fn inputs(dir: &Path) -> (PathBuf, PathBuf) {
    let window = Bounds::from_origin_size(0, 0, 6, 4);
    let (a, b) = (dir.join("a.exr"), dir.join("b.exr"));
    write_deep(&a, &synthetic(window, 1, |p| (p % 3) as u32), Codec::Zips).unwrap();
    write_deep(
        &b,
        &synthetic(window, 2, |p| (p % 2 + 1) as u32),
        Codec::Zips,
    )
    .unwrap();
    (a, b)
}

/// Run the CLI merging `a` and `b` into `out` under `umask`; panics unless it succeeds.
fn merge_under_umask(umask: &str, a: &Path, b: &Path, out: &Path) {
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!("umask {umask} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_deepmerge"))
        .args([a, b])
        .arg("-o")
        .arg(out)
        .arg("-q")
        .status()
        .unwrap();
    assert!(status.success());
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn a_new_output_gets_0666_less_the_umask() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = inputs(dir.path());
    let out = dir.path().join("out.exr");
    merge_under_umask("022", &a, &b, &out);
    assert_eq!(mode(&out), 0o644, "umask 022");
    let out2 = dir.path().join("out2.exr");
    merge_under_umask("027", &a, &b, &out2);
    assert_eq!(mode(&out2), 0o640, "umask 027");
}

#[test]
fn a_replaced_output_keeps_its_mode() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = inputs(dir.path());
    let out = dir.path().join("out.exr");
    std::fs::write(&out, b"old").unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o640)).unwrap();
    merge_under_umask("022", &a, &b, &out);
    assert_eq!(mode(&out), 0o640);
    assert_ne!(
        std::fs::read(&out).unwrap(),
        b"old",
        "the output was replaced"
    );
}

#[test]
fn stale_temporary_files_of_the_same_output_are_removed_fresh_ones_left() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = inputs(dir.path());
    let out = dir.path().join("out.exr");
    let temp = |random: &str, age: i64| {
        let path = dir.path().join(format!(".deepmerge-out.exr.{random}.tmp"));
        let file = std::fs::File::create(&path).unwrap();
        let now = SystemTime::now();
        let when = if age >= 0 {
            now - Duration::from_secs(age as u64)
        } else {
            now + Duration::from_secs((-age) as u64)
        };
        file.set_modified(when).unwrap();
        path
    };
    // Left by a run killed an hour ago: removed.
    let stale = temp("Stale1", 3600);
    // Written after this run started (by a later run still writing): left alone.
    let fresh = temp("Fresh1", -3600);
    // Another output's leftover, however old: not this run's business.
    let other = dir.path().join(".deepmerge-other.exr.Stale2.tmp");
    std::fs::write(&other, b"").unwrap();
    std::fs::File::options()
        .write(true)
        .open(&other)
        .unwrap()
        .set_modified(SystemTime::now() - Duration::from_secs(3600))
        .unwrap();
    merge_under_umask("022", &a, &b, &out);
    assert!(!stale.exists(), "a stale temporary file is removed");
    assert!(
        fresh.exists(),
        "a temporary file newer than the run is left"
    );
    assert!(other.exists(), "another output's temporary file is left");
    assert!(out.exists());
}

#[test]
fn an_error_about_the_output_names_the_path_given() {
    let dir = tempfile::Builder::new().prefix("dm").tempdir().unwrap();
    let (a, b) = inputs(dir.path());
    let out = dir.path().join("no-such-dir/out.exr");
    let result = common::deepmerge()
        .args([&a, &b])
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(result.status.code(), Some(1));
    let err = String::from_utf8_lossy(&result.stderr);
    assert!(
        err.contains(&format!("{}: cannot write: ", out.display())),
        "{err}"
    );
    assert!(
        !err.contains(".deepmerge-") && !err.contains(".tmp"),
        "{err}"
    );
}
