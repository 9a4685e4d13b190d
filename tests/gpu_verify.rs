//! `deepmerge gpu-info --verify`, as a user runs it after a driver update: on llvmpipe (the
//! reduced set) every merge equals the CPU engine's, one table line per group; with the pool's
//! release fences off (a hidden flag), strict mode turns the hazard into failures that the
//! command lists, naming the renderer, and exits 1.

mod common;

use common::deepmerge;

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = deepmerge().args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn verify_passes_every_group_on_this_machine() {
    let (code, out, err) = run(&["gpu-info", "--verify"]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("renderer:"), "{out}");
    assert!(
        out.contains("verifying the GL engine against the CPU engine on"),
        "{out}"
    );
    assert!(
        !out.contains("skipped"),
        "the bundled real files are found: {out}"
    );
    // Seven case sets, k-way and chain each: one line per group.
    let groups: Vec<&str> = out
        .lines()
        .filter(|l| l.contains(" runs, ") && l.contains(" ok "))
        .collect();
    assert_eq!(groups.len(), 14, "{out}");
    for case in [
        "Leaves.exr + Trunks.exr, k-way",
        "Balls.exr + Leaves.exr + Trunks.exr, chain",
        "hairball",
        "overlapping volumes",
        "an empty input",
        "disjoint windows",
        "in small bands",
    ] {
        assert!(groups.iter().any(|g| g.contains(case)), "{case}: {out}");
    }
    assert!(out.contains("merges equal the CPU engine's on"), "{out}");
    // The small-bands case is cut into several bands.
    let small = groups
        .iter()
        .find(|g| g.contains("in small bands"))
        .unwrap();
    let bands: usize = small
        .split(" runs, ")
        .nth(1)
        .unwrap()
        .trim()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(bands > 1, "{small}");
}

#[test]
fn verify_lists_the_failing_cases_and_exits_1() {
    let (code, out, err) = run(&[
        "gpu-info",
        "--verify",
        "--only",
        "an empty input",
        "--unfenced-pool",
    ]);
    assert_eq!(code, Some(1), "{out}\n{err}");
    assert!(out.contains("FAILED"), "{out}");
    let listed: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("deepmerge: verify: an empty input, "))
        .collect();
    assert!(!listed.is_empty(), "{err}");
    assert!(
        listed
            .iter()
            .any(|l| l.contains("hazard: pool take of buffer")),
        "{err}"
    );
    // The device the failures are reported on: the renderer gpu-info printed (llvmpipe in CI).
    let renderer = out
        .lines()
        .find_map(|l| l.strip_prefix("renderer:"))
        .map(|r| r.trim().trim_end_matches(" (software)"))
        .unwrap_or_else(|| panic!("no renderer line: {out}"));
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.contains("merges did not equal the CPU engine's on")
            && last.contains(renderer)
            && last.contains(&format!("0 differ, {} failed", listed.len())),
        "{last}"
    );
}

#[test]
fn verify_refuses_an_unknown_case_and_flags_without_it() {
    let (code, _, err) = run(&["gpu-info", "--verify", "--only", "no such case"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("no case set's name contains it"), "{err}");
    let (code, _, err) = run(&["gpu-info", "--full"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--verify"), "{err}");
}

/// The full-size small-bands case with overlapped bands, as a GPU runs it (overlap halves the
/// budget): on an H200 its 64 KiB budget left 32 KiB, under one row of the 160x90 hairball, and
/// every merge of the group failed. Its budget now leaves room for the longest row.
#[test]
fn full_size_small_bands_fit_their_longest_row_when_bands_overlap() {
    let out = deepmerge()
        .args(["gpu-info", "--verify", "--full", "--only", "small bands"])
        .env("DEEPMERGE_GL_OVERLAP", "1")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let groups: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("hairball 160x90 in small bands") && l.contains(" ok "))
        .collect();
    assert_eq!(groups.len(), 2, "k-way and chain: {stdout}");
}
