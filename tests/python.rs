//! The Python bindings (`python/`): build and install them into the tests' Python environment
//! with the README's `pip install ./python`, then run their pytest suite (`python/tests/`),
//! which compares them with this build's CLI. A pytest failure fails this test, with pytest's
//! report in the message.
//!
//! The build shares this run's target directory (the extension is a member of this workspace),
//! so the library's dependencies that the tests already compiled with the same features are
//! reused; the time it took is printed.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use common::{test_python, test_venv};

/// The target directory of this run (the test environment lives there too).
fn target_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target/tmp has a parent")
        .to_path_buf()
}

fn run(cmd: &mut Command, what: &str) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{text}",
        out.status
    );
    text
}

#[test]
fn python_bindings_pass_their_pytest_suite() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let venv = test_venv();
    // maturin's PEP 517 hook runs `maturin` from the PATH; without build isolation it is the
    // pinned one in the environment, so the install needs no download.
    let path = format!(
        "{}:{}",
        venv.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let started = Instant::now();
    run(
        test_python()
            .args([
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                "--no-build-isolation",
                "--no-deps",
                "--force-reinstall",
            ])
            .arg(root.join("python"))
            .env("PATH", &path)
            .env("CARGO_TARGET_DIR", target_dir()),
        "pip install ./python",
    );
    eprintln!(
        "tests/python: pip install ./python took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let report = run(
        test_python()
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-s"])
            .arg(root.join("python/tests"))
            .current_dir(root)
            .env("PATH", &path)
            .env("DEEPMERGE_CLI", env!("CARGO_BIN_EXE_deepmerge"))
            .env("DEEPMERGE_DATA", root.join("tests/data")),
        "pytest python/tests",
    );
    eprintln!("{report}");
}
