//! The library's Cargo features keep the front ends out of builds that do not ask for them: the
//! Python module's dependency tree holds no CLI, viewer or bench crate (asked of cargo itself,
//! as a user of the crate would). That the library builds with no features and with `gl` alone
//! is checked by `.ci/run` (clippy on both, sharing the checked dependencies of the main clippy
//! run; a build inside a test would need a target directory of its own and a full build).

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
    for front_end in [
        "winit",
        "egui",
        "egui-winit",
        "egui_glow",
        "clap",
        "indicatif",
    ] {
        assert!(
            !crates.contains(&front_end),
            "{front_end} is in the Python module's tree:\n{tree}"
        );
    }
}
