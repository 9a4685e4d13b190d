//! The library's Cargo features keep the front ends out of builds that do not ask for them:
//! the Python module's dependency tree holds no CLI, viewer or bench crate, and the library
//! builds alone (no default features) and with only the GL engine. Both run cargo itself, as a
//! user of the crate would.

use std::process::Command;

fn cargo(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_python_module_links_no_front_end_crate() {
    let tree = cargo(&[
        "tree",
        "-p",
        "deepmerge-python",
        "-e",
        "normal",
        "--prefix",
        "none",
        "--offline",
    ]);
    let crates: Vec<&str> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(crates.contains(&"deepmerge"), "{tree}");
    assert!(crates.contains(&"glow"), "the GL engine is in: {tree}");
    for front_end in ["winit", "egui", "egui-winit", "egui_glow", "clap", "indicatif"] {
        assert!(
            !crates.contains(&front_end),
            "{front_end} is in the Python module's tree:\n{tree}"
        );
    }
}

#[test]
fn the_library_builds_without_front_ends_and_without_gl() {
    // A target directory of its own: the check must not invalidate the suite's build.
    let target = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("features");
    let target = target.to_str().unwrap();
    for features in [&["--no-default-features"][..], &["--no-default-features", "--features", "gl"]] {
        let mut args = vec!["check", "--lib", "--offline", "--quiet", "--target-dir", target];
        args.extend_from_slice(features);
        cargo(&args);
    }
}
