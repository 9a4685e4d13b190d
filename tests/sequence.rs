//! Frame sequences end to end (issue 13): the range parser against PyPI `fileseq` on generated
//! expressions, a sequence run equal frame by frame to single-frame runs, bad frames, progress
//! lines, `-q`, `--runstats` and exit codes.

mod common;

use std::path::Path;

use common::{run, synthetic, test_python};
use deepmerge::deep::Bounds;
use deepmerge::exr::{write_deep, Codec};
use deepmerge::scene::SceneRng;
use deepmerge::sequence::parse_frames;

/// Range expressions of every form the parser takes: single frames, ranges up and down,
/// steps, negative frames, comma lists with overlaps.
fn generated_expressions() -> Vec<String> {
    let mut rng = SceneRng::new(13, "frame ranges");
    let mut int = |lo: i64, hi: i64| lo + rng.below((hi - lo + 1) as usize) as i64;
    let mut out = Vec::new();
    for _ in 0..300 {
        let items = int(1, 4);
        let mut parts = Vec::new();
        for _ in 0..items {
            let a = int(-30, 120);
            parts.push(match int(0, 3) {
                0 => format!("{a}"),
                1 => format!("{a}-{}", int(-30, 120)),
                _ => format!("{a}-{}x{}", int(-30, 120), int(1, 9)),
            });
        }
        out.push(parts.join(","));
    }
    out
}

#[test]
fn the_range_parser_agrees_with_fileseq() {
    let exprs = generated_expressions();
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("exprs.txt");
    std::fs::write(&list, exprs.join("\n")).unwrap();
    let out = test_python()
        .args([
            "-c",
            "import sys\nfrom fileseq import FrameSet\nfor line in open(sys.argv[1]).read().split('\\n'):\n    print(' '.join(str(f) for f in FrameSet(line)))",
        ])
        .arg(&list)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "fileseq failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs = String::from_utf8(out.stdout).unwrap();
    let theirs: Vec<&str> = theirs.lines().collect();
    assert_eq!(theirs.len(), exprs.len());
    for (expr, line) in exprs.iter().zip(theirs) {
        let expected: Vec<i64> = line
            .split_whitespace()
            .map(|f| f.parse().unwrap())
            .collect();
        let ours = parse_frames(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
        assert_eq!(ours, expected, "frames of {expr:?}");
    }
}

/// Frames `frames` of two input sequences `a.####.exr`, `b.####.exr` in `dir`, each frame
/// different.
fn make_sequence(dir: &Path, frames: &[i64]) {
    let window = Bounds::from_origin_size(0, 0, 8, 5);
    for &f in frames {
        let seed = (f + 100) as u32;
        write_deep(
            &dir.join(format!("a.{f:04}.exr")),
            &synthetic(window, seed, |p| (p % 3) as u32),
            Codec::Zips,
        )
        .unwrap();
        write_deep(
            &dir.join(format!("b.{f:04}.exr")),
            &synthetic(window, seed + 1000, |p| (p % 4 + 1) as u32 / 2),
            Codec::Zips,
        )
        .unwrap();
    }
}

fn p(dir: &Path, name: &str) -> String {
    dir.join(name).to_string_lossy().into_owned()
}

/// Arguments merging the sequences `a.####.exr` and `b.####.exr` in `d` into
/// `{output}.####.exr` over `frames`, followed by `extra`.
fn sequence_args(d: &Path, output: &str, frames: &str, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        p(d, "a.####.exr"),
        p(d, "b.####.exr"),
        "-o".into(),
        p(d, &format!("{output}.####.exr")),
        "--frames".into(),
        frames.into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

#[test]
fn every_frame_equals_a_single_frame_run_in_every_token_syntax() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    make_sequence(d, &[1, 2, 3, 4, 5]);
    // Frames 1, 3, 5, in parallel, deep output so every sample counts.
    for (k, (a, b, out)) in [
        ("a.####.exr", "b.####.exr", "seq1.####.exr"),
        ("a.%04d.exr", "b.@@@@.exr", "seq2.$F4.exr"),
    ]
    .into_iter()
    .enumerate()
    {
        let (ok, _, err) = run(&[
            &p(d, a),
            &p(d, b),
            "-o",
            &p(d, out),
            "--frames",
            "1-5x2",
            "-j",
            "3",
            "--deep",
            "--backend",
            "cpu",
        ]);
        assert!(ok, "{err}");
        assert!(err.contains("3 frames written, 0 failed"), "{err}");
        for f in [1, 3, 5] {
            let single = p(d, &format!("single.{f}.exr"));
            let (ok, _, err) = run(&[
                &p(d, &format!("a.{f:04}.exr")),
                &p(d, &format!("b.{f:04}.exr")),
                "-o",
                &single,
                "--deep",
                "--backend",
                "cpu",
            ]);
            assert!(ok, "{err}");
            let seq = d.join(format!("seq{}.{f:04}.exr", k + 1));
            assert!(
                std::fs::read(&seq).unwrap() == std::fs::read(&single).unwrap(),
                "frame {f} of {out} differs from a single-frame run"
            );
        }
        for f in [2, 4] {
            assert!(!d.join(format!("seq{}.{f:04}.exr", k + 1)).exists());
        }
    }
}

#[test]
fn a_missing_frame_is_an_error_naming_its_file_and_the_others_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    make_sequence(d, &[1, 2, 4]);
    let args = |extra: &[&str]| sequence_args(d, "out", "1-4", extra);
    let out = common::deepmerge().args(args(&[])).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("frame 3: {}: cannot read", p(d, "a.0003.exr"))),
        "{err}"
    );
    assert!(err.contains("3 frames written, 1 failed"), "{err}");
    for f in [1, 2, 4] {
        assert!(d.join(format!("out.{f:04}.exr")).exists(), "frame {f}");
    }
    assert!(!d.join("out.0003.exr").exists());

    // --skip-bad-frames: a warning, exit 0, the summary counts the skipped frame.
    let out = common::deepmerge()
        .args(args(&["--skip-bad-frames"]))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("warning: frame 3: "), "{err}");
    assert!(err.contains("3 frames written, 1 skipped"), "{err}");

    // ... but not when no frame at all could be written.
    let out = common::deepmerge()
        .args(sequence_args(d, "none", "7-8", &["--skip-bad-frames"]))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("0 frames written, 2 skipped"), "{err}");
}

#[test]
fn progress_lines_for_runners_and_quiet_runs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    make_sequence(d, &[1, 2, 3, 4]);
    let seq = |extra: &[&str]| {
        let args = sequence_args(d, "out", "1-4", extra);
        let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        run(&args)
    };
    let (ok, out, err) = seq(&["--progress", "openjd", "-j", "2"]);
    assert!(ok, "{err}");
    let percents: Vec<u32> = out
        .lines()
        .map(|l| {
            l.strip_prefix("openjd_progress: ")
                .unwrap_or_else(|| panic!("not a progress line: {l:?}"))
                .parse()
                .unwrap()
        })
        .collect();
    assert_eq!(percents, vec![0, 25, 50, 75, 100]);

    let (ok, out, _) = seq(&["--progress", "plain"]);
    assert!(ok);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "Progress: 0%",
            "Progress: 25%",
            "Progress: 50%",
            "Progress: 75%",
            "Progress: 100%"
        ]
    );

    // A single merge reports its stages.
    let (ok, out, _) = run(&[
        &p(d, "a.0001.exr"),
        &p(d, "b.0001.exr"),
        "-o",
        &p(d, "one.exr"),
        "--progress",
        "openjd",
    ]);
    assert!(ok);
    assert_eq!(out.lines().last(), Some("openjd_progress: 100"));
    assert!(out.lines().count() >= 3, "{out}");

    // -q: nothing at all on success.
    let (ok, out, err) = seq(&["-q"]);
    assert!(ok, "{err}");
    assert_eq!((out.as_str(), err.as_str()), ("", ""));

    // Not a terminal: the default shows no bar and prints no progress lines.
    let (ok, out, err) = seq(&[]);
    assert!(ok);
    assert_eq!(out, "");
    assert!(!err.contains("0/4"), "{err}");
}

#[test]
fn runstats_prints_each_stage_and_peak_memory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    make_sequence(d, &[1]);
    let (ok, _, err) = run(&[
        &p(d, "a.0001.exr"),
        &p(d, "b.0001.exr"),
        "-o",
        &p(d, "one.exr"),
        "--runstats",
    ]);
    assert!(ok, "{err}");
    for stage in ["read", "merge", "write", "total (wall)", "peak memory"] {
        assert!(err.contains(&format!("  {stage}")), "{stage}: {err}");
    }
    let peak: f64 = err
        .lines()
        .find(|l| l.contains("peak memory"))
        .and_then(|l| l.split_whitespace().nth(2))
        .and_then(|v| v.parse().ok())
        .expect("a peak memory figure");
    assert!(peak > 1.0, "{err}");
    // The CPU time beside the wall time: user + system, and the threads' busy share.
    let cpu = err
        .lines()
        .find(|l| l.trim_start().starts_with("cpu time"))
        .unwrap_or_else(|| panic!("a cpu time line: {err}"));
    let seconds: f64 = cpu
        .split_whitespace()
        .nth(2)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{cpu}"));
    assert!(seconds > 0.0, "{cpu}");
    assert!(
        cpu.contains(" busy; ") && cpu.ends_with("page faults"),
        "{cpu}"
    );
}

#[test]
fn usage_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    make_sequence(d, &[1]);
    let code = |args: &[&str]| {
        let out = common::deepmerge().args(args).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (a, b) = (p(d, "a.####.exr"), p(d, "b.####.exr"));
    let out = p(d, "o.####.exr");
    // clap's own: an unknown option.
    assert_eq!(code(&[&a, &b, "-o", &out, "--no-such-option"]).0, Some(2));
    // Ours: a malformed range, a token without --frames, --frames without a token.
    let (c, err) = code(&[&a, &b, "-o", &out, "--frames", "1-x"]);
    assert_eq!(c, Some(2), "{err}");
    assert!(err.contains("--frames"), "{err}");
    assert_eq!(code(&[&a, &b, "-o", &out]).0, Some(2));
    assert_eq!(
        code(&[&a, &b, "-o", &p(d, "plain.exr"), "--frames", "1"]).0,
        Some(2)
    );
}

#[test]
fn negative_frames_through_the_command_line() {
    // `--frames -2-0` starts with a hyphen: it must reach the range parser, not clap's options.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    make_sequence(d, &[-2, -1, 0]);
    let (ok, _, err) = run(&[
        &p(d, "a.####.exr"),
        &p(d, "b.####.exr"),
        "-o",
        &p(d, "out.####.exr"),
        "--frames",
        "-2-0",
    ]);
    assert!(ok, "{err}");
    for name in ["out.-002.exr", "out.-001.exr", "out.0000.exr"] {
        assert!(d.join(name).exists(), "{name}: {err}");
    }
}
