//! What a command-line user expects of any Unix tool (`src/cli_conventions.rs`): completions
//! and a manual page, a `--version` naming the features, a quiet end on a closed standard
//! output, every `info` file described with the bad ones reported, negative `--pixel`
//! coordinates, `info --pixel` saying why a pixel has no samples, and an output that must be a
//! file.

mod common;

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;

use common::{data, deepmerge, run};

#[test]
fn completions_for_each_shell_name_the_commands_and_options() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef deepmerge"),
        ("fish", "complete -c deepmerge"),
    ] {
        let (ok, out, err) = run(&["completions", shell]);
        assert!(ok, "{shell}: {err}");
        assert!(out.contains(marker), "{shell}: no `{marker}` in\n{out}");
        for word in ["holdout", "comp", "info", "memory-budget", "merge-strategy"] {
            assert!(out.contains(word), "{shell} completions lack {word}");
        }
    }
    let (ok, _, err) = run(&["completions", "tcsh"]);
    assert!(!ok && err.contains("tcsh"), "{err}");
}

#[test]
fn the_manual_page_is_roff_with_every_command() {
    let (ok, out, err) = run(&["manpage"]);
    assert!(ok, "{err}");
    assert!(out.contains(".TH deepmerge 1"), "{out}");
    assert!(
        out.contains(".SH SYNOPSIS") && out.contains(".SH OPTIONS"),
        "{out}"
    );
    for word in ["holdout", "comp", "completions", "memory\\-budget"] {
        assert!(out.contains(word), "the manual page lacks {word}");
    }
    // Its EXIT STATUS section, before VERSION, lists every exit code docs/cli.md lists.
    let exit = out
        .find(".SH \"EXIT STATUS\"")
        .expect("an EXIT STATUS section");
    assert!(exit < out.find(".SH VERSION").unwrap(), "{out}");
    for code in ["0", "1", "2", "3"] {
        assert!(
            out[exit..].contains(&format!("\n\\fB{code}\\fR\n")),
            "no exit status {code}"
        );
    }
    // The pages the SUBCOMMANDS section points at (deepmerge-holdout(1), ...) exist too.
    let (ok, out, err) = run(&["manpage", "holdout"]);
    assert!(ok, "{err}");
    assert!(
        out.contains(concat!(
            ".TH deepmerge-holdout 1  \"deepmerge-holdout ",
            env!("CARGO_PKG_VERSION")
        )),
        "{out}"
    );
    assert!(out.contains("\\-\\-cull"), "{out}");
    assert!(out.contains(".SH \"EXIT STATUS\""), "{out}");
    let (ok, _, err) = run(&["manpage", "nonsense"]);
    assert!(!ok && err.contains("nonsense"), "{err}");
}

/// The package's features, as Cargo.toml declares them.
fn declared_features() -> Vec<String> {
    let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"));
    let manifest: toml::Table = manifest.unwrap().parse().unwrap();
    manifest
        .get("features")
        .and_then(|f| f.as_table())
        .map(|t| t.keys().filter(|k| *k != "default").cloned().collect())
        .unwrap_or_default()
}

#[test]
fn version_names_the_version_and_the_features() {
    let (ok, out, err) = run(&["--version"]);
    assert!(ok, "{err}");
    let mut lines = out.lines();
    assert_eq!(
        lines.next(),
        Some(concat!("deepmerge ", env!("CARGO_PKG_VERSION")))
    );
    let features = lines
        .next()
        .and_then(|l| l.strip_prefix("features: "))
        .unwrap_or_else(|| panic!("no features line in {out:?}"));
    let declared = declared_features();
    if features == "none" {
        // This test build enables no feature beyond what it declares by default.
        return;
    }
    for f in features.split(',') {
        assert!(
            declared.iter().any(|d| d == f),
            "{f} is not a feature of Cargo.toml ({declared:?})"
        );
    }
}

/// Run `args` with standard output closed before the program writes anything; its status and
/// standard error.
fn run_with_stdout_closed(args: &[&str]) -> (std::process::ExitStatus, String) {
    let mut child = deepmerge()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The read end closes here: every write the program makes meets a closed pipe.
    drop(child.stdout.take());
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (child.wait().unwrap(), err)
}

#[test]
fn a_closed_stdout_ends_quietly_wherever_the_cli_prints() {
    let balls = data("openexr-images/Balls.exr");
    let balls = balls.to_str().unwrap();
    let stereo = data("openexr-images/Stereo-Trunks-multipart.exr");
    let stereo = stereo.to_str().unwrap();
    for args in [
        &["info", balls, stereo][..],
        &["info", balls, "--pixel", "500,300"][..],
        &["completions", "bash"][..],
        &["manpage"][..],
        &["--help"][..],
    ] {
        let (status, err) = run_with_stdout_closed(args);
        // Killed by SIGPIPE as `cat` would be, or done: never a panic, never a message.
        assert!(
            status.success() || status.signal() == Some(libc::SIGPIPE),
            "{args:?}: {status:?}\n{err}"
        );
        assert!(err.is_empty(), "{args:?} printed on stderr:\n{err}");
    }
}

#[test]
fn info_describes_every_file_and_reports_the_bad_ones() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.exr");
    let junk = dir.path().join("junk.exr");
    std::fs::write(&junk, b"not an exr file").unwrap();
    let balls = data("openexr-images/Balls.exr");
    let trunks = data("openexr-images/Trunks.exr");
    let (ok, out, err) = run(&[
        "info",
        balls.to_str().unwrap(),
        missing.to_str().unwrap(),
        trunks.to_str().unwrap(),
        junk.to_str().unwrap(),
    ]);
    assert!(!ok, "bad files must fail the run");
    // Both good files are described, in order, whatever fails between them.
    let at_balls = out.find(&format!("{}: 1 part(s)", balls.display()));
    let at_trunks = out.find(&format!("{}: 1 part(s)", trunks.display()));
    assert!(
        matches!((at_balls, at_trunks), (Some(b), Some(t)) if b < t),
        "{out}"
    );
    // One line per bad file naming it, then the count.
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "{err}");
    assert!(lines[0].contains("missing.exr"), "{err}");
    assert!(lines[1].contains("junk.exr"), "{err}");
    assert!(lines[2].contains("2 of 4 file(s)"), "{err}");
    // One bad file alone: its error is the one line, exit code 1.
    let output = deepmerge()
        .args(["info", missing.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("missing.exr"), "{err}");
}

#[test]
fn pixel_takes_negative_coordinates() {
    let balls = data("openexr-images/Balls.exr");
    // Separate and joined forms: clap must not take `-50,-5` for an option.
    for args in [
        ["info", balls.to_str().unwrap(), "--pixel", "-50,-5"],
        [
            "info",
            balls.to_str().unwrap(),
            "--pixel=-50,-5",
            "--accumulated",
        ],
    ] {
        let (ok, out, err) = run(&args);
        assert!(ok, "{args:?}: {err}");
        assert!(out.contains("pixel (-50, -5)"), "{out}");
    }
}

#[test]
fn info_pixel_says_why_a_pixel_has_no_samples() {
    let balls = data("openexr-images/Balls.exr");
    let balls = balls.to_str().unwrap();
    let (ok, head, _) = run(&["info", balls]);
    assert!(ok);
    // Outside the data window: one line that says so and names the window.
    let window = head
        .lines()
        .find_map(|l| l.trim().strip_prefix("data window: "))
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    let (ok, out, err) = run(&["info", balls, "--pixel", "-50,-5"]);
    assert!(ok, "{err}");
    let note: Vec<&str> = out.lines().filter(|l| l.contains("outside")).collect();
    assert_eq!(note.len(), 1, "{out}");
    assert!(note[0].contains(&window), "{out}");
    // Inside it, no such line.
    let (ok, out, _) = run(&["info", balls, "--pixel", "500,300"]);
    assert!(ok && !out.contains("outside"), "{out}");
    // A file with only flat parts: one line saying there is no deep part, and a failure, as
    // for any file that cannot be described; beside a deep file, that one is still described.
    let flat = data("openexr-images/composited.exr");
    let (ok, out, err) = run(&["info", flat.to_str().unwrap(), "--pixel", "0,0"]);
    assert!(!ok, "{out}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("composited.exr") && err.contains("no deep part"),
        "{err}"
    );
    let (ok, out, err) = run(&["info", flat.to_str().unwrap(), balls, "--pixel", "500,300"]);
    assert!(!ok, "{out}");
    assert!(out.contains("pixel (500, 300) of"), "{out}");
    assert!(
        err.lines().next().unwrap().contains("no deep part"),
        "{err}"
    );
    assert!(err.contains("1 of 2 file(s)"), "{err}");
}

#[test]
fn an_output_that_is_a_directory_is_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let a = data("openexr-images/Balls.exr");
    let b = data("openexr-images/Trunks.exr");
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let existing = dir.path().to_str().unwrap().to_string();
    let slashed = format!("{}/new/", dir.path().display());
    for out in [existing.as_str(), slashed.as_str()] {
        for args in [
            vec![a, b, "--backend", "cpu", "-o", out],
            vec!["holdout", a, b, "-o", out],
            vec!["heatmap", a, "-o", out],
            // The deep toolbox too, before it reads (it used to do the work, then fail).
            vec!["flatten", a, "-o", out],
            vec!["slice", a, "--near", "1", "-o", out],
            vec!["grade", a, "--gain", "2", "-o", out],
            vec!["points", a, "-o", out],
        ] {
            let output = deepmerge().args(&args).output().unwrap();
            let err = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(2), "{args:?}: {err}");
            assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
            assert!(
                err.contains("the output must be a file, not a directory"),
                "{args:?}: {err}"
            );
        }
    }
    // Nothing was made, not even the directory the slash named.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// A slip in a command's name (`deepmerge flaten IN -o OUT`, which clap reads as a merge of a
/// file named `flaten`) is named as one, with the command meant; a missing file that is no
/// command's slip stays an I/O error.
#[test]
fn a_misspelt_command_is_named_with_the_one_meant() {
    let dir = tempfile::tempdir().unwrap();
    let balls = data("openexr-images/Balls.exr");
    let out = dir.path().join("o.exr");
    let run = |first: &str| {
        let output = deepmerge()
            .arg(first)
            .arg(&balls)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    for (slip, meant) in [("flaten", "flatten"), ("slcie", "slice"), ("grad", "grade")] {
        let (code, err) = run(slip);
        assert_eq!(code, Some(2), "{slip}: {err}");
        assert_eq!(err.lines().count(), 1, "{slip}: {err}");
        assert!(
            err.contains(&format!("did you mean `deepmerge {meant}`")),
            "{slip}: {err}"
        );
    }
    let (code, err) = run("no-such-shot");
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("no-such-shot: cannot read"), "{err}");
    assert!(!out.exists());
}

/// The README's test command is `tests/run`, `.ci/run` runs it, and the one `apt-get` line the
/// README gives installs exactly the packages `tests/run` installs.
#[test]
fn the_readme_test_command_sets_up_what_the_readme_lists() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
    let readme = read("README.md");
    let script = read("tests/run");
    let ci = read(".ci/run");
    assert!(
        readme.contains("```sh\ntests/run\n```"),
        "README's test command"
    );
    assert!(
        ci.lines().any(|l| l.trim() == "tests/run"),
        ".ci/run runs it"
    );
    let list = script
        .split("packages=(")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .expect("tests/run lists its packages");
    let mut from_script: Vec<&str> = list.split_whitespace().collect();
    let apt = readme
        .lines()
        .find(|l| l.starts_with("apt-get install "))
        .expect("README's apt-get line");
    let mut from_readme: Vec<&str> = apt.split_whitespace().skip(2).collect();
    from_script.sort_unstable();
    from_readme.sort_unstable();
    assert_eq!(from_script, from_readme);
}
