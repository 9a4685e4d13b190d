//! Errors with kinds: a real bad input of each kind gives that [`ErrorKind`] in the library and
//! the exit code the table of docs/cli.md ("Exit codes") gives it in the CLI; every refusal of
//! the memory budget reads the same way and exits alike; the band writers refuse misuse with a
//! usage error instead of panicking, and leave no file behind.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use common::{data, deepmerge};
use deepmerge::deep::{Bounds, Channel, DeepImage, DeepState, FlatChannel, FlatImage, FlatValues};
use deepmerge::deep::{Plane, SampleType};
use deepmerge::error::{Error, ErrorKind};
use deepmerge::exr::{
    read_deep, DeepChunkWriter, DeepWriteOptions, FlatChunkWriter, FlatWriteOptions, PartSelector,
    ReadOptions,
};
use deepmerge::preview::PngBandWriter;

/// The kinds' exit codes as docs/cli.md's table states them: kind name -> code.
fn documented_exit_codes() -> HashMap<String, i32> {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/cli.md"))
        .expect("docs/cli.md");
    let section = doc
        .split("## Exit codes")
        .nth(1)
        .expect("an Exit codes section");
    let mut codes = HashMap::new();
    for line in section.lines().take_while(|l| !l.starts_with("## ")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // | code | kind | Python class | meaning |
        if cells.len() == 6 {
            if let Ok(code) = cells[1].parse::<i32>() {
                if !cells[2].is_empty() {
                    codes.insert(cells[2].to_string(), code);
                }
            }
        }
    }
    codes
}

/// Run the CLI with `args` (and `env`); its exit code and its stderr, which must be one
/// `deepmerge: error:` line.
fn cli_error(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let out = deepmerge()
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run deepmerge");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err}");
    assert!(err.starts_with("deepmerge: error: "), "{args:?}: {err}");
    (out.status.code().expect("an exit code, not a signal"), err)
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

struct Inputs {
    _dir: tempfile::TempDir,
    balls: PathBuf,
    leaves: PathBuf,
    flat: PathBuf,
    not_exr: PathBuf,
    missing: PathBuf,
    out: PathBuf,
}

fn inputs() -> Inputs {
    let dir = tempfile::tempdir().unwrap();
    let not_exr = dir.path().join("notes.exr");
    std::fs::write(&not_exr, "not an image\n").unwrap();
    Inputs {
        balls: data("openexr-images/Balls.exr"),
        leaves: data("openexr-images/Leaves.exr"),
        flat: data("openexr-images/composited.exr"),
        missing: dir.path().join("missing.exr"),
        out: dir.path().join("out.exr"),
        not_exr,
        _dir: dir,
    }
}

#[test]
fn each_kind_from_a_real_input_is_the_kind_in_the_library() {
    let i = inputs();
    let kind = |path: &Path, options: &ReadOptions| {
        read_deep(path, options).expect_err("a bad input").kind()
    };
    let whole = ReadOptions::default();
    assert_eq!(kind(&i.missing, &whole), ErrorKind::Io);
    assert_eq!(kind(&i.not_exr, &whole), ErrorKind::Malformed);
    assert_eq!(kind(&i.flat, &whole), ErrorKind::Unsupported);
    let part_4 = ReadOptions {
        part: PartSelector::Index(4),
        ..ReadOptions::default()
    };
    assert_eq!(kind(&i.balls, &part_4), ErrorKind::Usage);
    let tiny = ReadOptions {
        max_memory: 100_000,
        ..ReadOptions::default()
    };
    let refused = read_deep(&i.balls, &tiny).unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::OverBudget);
    // The library names no CLI flag, and a small size is shown in a unit that shows it.
    let text = refused.to_string();
    assert!(!text.contains("--"), "{text}");
    assert!(
        text.ends_with("over the memory budget of 97.7 KiB"),
        "{text}"
    );
}

#[test]
fn each_kind_from_a_real_input_exits_with_its_documented_code() {
    let codes = documented_exit_codes();
    let i = inputs();
    let (balls, leaves, out) = (path_str(&i.balls), path_str(&i.leaves), path_str(&i.out));
    // (kind, arguments, environment)
    type Case<'a> = (&'a str, Vec<&'a str>, Vec<(&'a str, &'a str)>);
    let cases: Vec<Case> = vec![
        ("I/O", vec![path_str(&i.missing), balls, "-o", out], vec![]),
        (
            "malformed",
            vec![path_str(&i.not_exr), balls, "-o", out],
            vec![],
        ),
        (
            "unsupported",
            vec![path_str(&i.flat), balls, "-o", out],
            vec![],
        ),
        (
            "usage",
            vec![balls, leaves, "-o", out, "--part", "4"],
            vec![],
        ),
        (
            "over budget",
            vec![balls, leaves, "-o", out, "--memory-budget", "0.0001"],
            vec![],
        ),
        // A machine whose EGL finds no vendor library: no OpenGL at all.
        (
            "OpenGL",
            vec![balls, leaves, "-o", out, "--backend", "gl"],
            vec![("__EGL_VENDOR_LIBRARY_FILENAMES", "/nonexistent")],
        ),
    ];
    for (kind, args, env) in cases {
        let documented = *codes
            .get(kind)
            .unwrap_or_else(|| panic!("docs/cli.md gives no exit code for {kind}: {codes:?}"));
        let (code, err) = cli_error(&args, &env);
        assert_eq!(code, documented, "{kind}: {err}");
        assert!(!i.out.exists(), "{kind}: no output is left");
    }
    // The kinds that share a code are still told apart by the message; the codes themselves
    // are the ones scripts rely on.
    assert_eq!(codes.get("usage"), Some(&2));
    assert_eq!(codes.get("malformed"), Some(&1));
    assert_eq!(codes.get("over budget"), Some(&3));
}

/// `0.0001` was refused by the planner (exit 2), `0.00001` by the reader (exit 1), each in its
/// own words: every refusal now exits alike and reads "WHAT would need SIZE, over the memory
/// budget of SIZE (raise it with FLAG)", sizes never "0.0 MiB".
#[test]
fn every_memory_budget_refusal_has_one_exit_code_and_one_form() {
    let codes = documented_exit_codes();
    let over_budget = codes["over budget"];
    let i = inputs();
    let (balls, leaves, out) = (path_str(&i.balls), path_str(&i.leaves), path_str(&i.out));
    let merge = |budget: &'static str, extra: &[&'static str]| {
        let mut args = vec![balls, leaves, "-o", out, "--memory-budget", budget];
        args.extend_from_slice(extra);
        args
    };
    let cases = [
        (merge("0.0001", &[]), "--memory-budget"),
        (merge("0.00001", &[]), "--memory-budget"),
        (merge("0.000001", &["--deep"]), "--memory-budget"),
        (merge("0.0001", &["--deep"]), "--memory-budget"),
        (
            vec!["info", balls, "--max-memory", "0.0001"],
            "--max-memory",
        ),
        (
            vec!["flatten", balls, "-o", out, "--memory-budget", "0.00001"],
            "--memory-budget",
        ),
    ];
    let form = regex_lite_form();
    for (args, flag) in cases {
        let (code, err) = cli_error(&args, &[]);
        assert_eq!(code, over_budget, "{args:?}: {err}");
        let line = err.trim_end();
        assert!(form(line, flag), "{args:?}: not the one form: {line}");
        assert!(!line.contains(" 0.0 "), "{line}");
    }
    // A budget that is not a positive number is a bad value, not a refusal: usage.
    let (code, err) = cli_error(&merge("0", &[]), &[]);
    assert_eq!(code, codes["usage"], "{err}");
    assert!(
        err.contains("--memory-budget: a memory size must be positive"),
        "{err}"
    );
}

/// A matcher for "... would need N UNIT, over the memory budget of N UNIT (raise it with FLAG)".
fn regex_lite_form() -> impl Fn(&str, &str) -> bool {
    |line: &str, flag: &str| {
        let size = |s: &str| {
            let mut words = s.split(' ');
            let number = words.next().unwrap_or("");
            let unit = words.next().unwrap_or("");
            number.parse::<f64>().is_ok_and(|n| n > 0.0)
                && ["bytes", "KiB", "MiB", "GiB"].contains(&unit)
                && words.next().is_none()
        };
        let Some((_, rest)) = line.split_once(" would need ") else {
            return false;
        };
        let Some((needed, rest)) = rest.split_once(", over the memory budget of ") else {
            return false;
        };
        let Some(budget) = rest.strip_suffix(&format!(" (raise it with {flag})")) else {
            return false;
        };
        size(needed) && size(budget)
    }
}

/// Rows `y0..=y1` over columns 0..=3 without samples, with channels `names` (float).
fn deep_rows(y0: i32, y1: i32, names: &[&str]) -> DeepImage {
    let window = Bounds {
        x0: 0,
        y0,
        x1: 3,
        y1,
    };
    let channels: Vec<Channel> = names
        .iter()
        .map(|n| Channel::new(*n, SampleType::F32))
        .collect();
    let planes = channels
        .iter()
        .map(|c| Plane::with_capacity(c.sample_type, 0))
        .collect();
    DeepImage::from_counts(
        window,
        window,
        channels,
        &vec![0; window.area()],
        planes,
        DeepState::Tidy,
    )
    .unwrap()
}

fn output_window() -> Bounds {
    Bounds {
        x0: 0,
        y0: 0,
        x1: 3,
        y1: 39,
    }
}

/// A usage error naming `out`, with `words` in it.
fn assert_misuse(result: Result<(), Error>, out: &Path, words: &str) {
    let err = result.expect_err("misuse is refused");
    assert_eq!(err.kind(), ErrorKind::Usage, "{err}");
    let text = err.to_string();
    assert!(text.starts_with(&out.display().to_string()), "{text}");
    assert!(text.contains(words), "{text}");
}

#[test]
fn the_deep_band_writer_refuses_misuse_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("deep.exr");
    let options = DeepWriteOptions::default();
    let mut writer = DeepChunkWriter::create(&out, output_window(), &options).unwrap();
    let zr = ["R", "Z"];
    // Rows that skip ahead, that come again, that leave the window, or that do not span it.
    assert_misuse(
        writer.write_band(&deep_rows(5, 9, &zr)),
        &out,
        "rows 5 to 9 were given where row 0 is next",
    );
    writer.write_band(&deep_rows(0, 19, &zr)).unwrap();
    assert_misuse(
        writer.write_band(&deep_rows(0, 19, &zr)),
        &out,
        "where row 20 is next",
    );
    assert_misuse(
        writer.write_band(&deep_rows(20, 45, &zr)),
        &out,
        "are not rows of the output's data window",
    );
    let mut narrow = deep_rows(20, 29, &zr);
    narrow.data_window.x1 = 2;
    assert_misuse(
        writer.write_band(&narrow),
        &out,
        "a band over columns 0 to 2",
    );
    assert_misuse(
        writer.write_empty_rows(&deep_rows(20, 20, &["G", "Z"]), 20, 29),
        &out,
        "not the first band's R (float), Z (float)",
    );
    assert_misuse(
        writer.write_empty_rows(&deep_rows(20, 20, &zr), 25, 29),
        &out,
        "where row 20 is next",
    );
    // A refused band changes nothing: the right one still follows.
    writer
        .write_empty_rows(&deep_rows(20, 20, &zr), 20, 29)
        .unwrap();
    // Finished early.
    assert_misuse(
        writer.finish(),
        &out,
        "finished with rows 30 to 39 not written",
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing left"
    );
    // Used in order, the same writer makes a file.
    let mut writer = DeepChunkWriter::create(&out, output_window(), &options).unwrap();
    writer.write_band(&deep_rows(0, 19, &zr)).unwrap();
    writer.write_band(&deep_rows(20, 39, &zr)).unwrap();
    writer.finish().unwrap();
    let back = read_deep(&out, &ReadOptions::default()).unwrap();
    assert_eq!(back.data_window, output_window());
}

fn flat_rows(y0: i32, y1: i32, names: &[&str]) -> FlatImage {
    let window = Bounds {
        x0: 0,
        y0,
        x1: 3,
        y1,
    };
    FlatImage {
        display_window: window,
        data_window: window,
        channels: names
            .iter()
            .map(|n| FlatChannel {
                name: n.to_string(),
                values: FlatValues::F32(vec![0.5; window.area()]),
            })
            .collect(),
    }
}

#[test]
fn the_flat_and_png_band_writers_refuse_misuse_and_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("flat.exr");
    let mut writer =
        FlatChunkWriter::create(&out, output_window(), &FlatWriteOptions::default()).unwrap();
    let ra = ["A", "R"];
    assert_misuse(
        writer.write_band(&flat_rows(3, 9, &ra)),
        &out,
        "rows 3 to 9 were given where row 0 is next",
    );
    writer.write_band(&flat_rows(0, 9, &ra)).unwrap();
    let mut narrow = flat_rows(10, 19, &ra);
    narrow.data_window.x0 = 1;
    assert_misuse(
        writer.write_band(&narrow),
        &out,
        "a band over columns 1 to 3",
    );
    assert_misuse(
        writer.write_band(&flat_rows(10, 19, &["A", "G"])),
        &out,
        "not the first band's A (half), R (half)",
    );
    assert_misuse(
        writer.write_empty_rows(&flat_rows(10, 10, &ra), 10, 40),
        &out,
        "are not rows of the output's data window",
    );
    assert_misuse(
        writer.finish(),
        &out,
        "finished with rows 10 to 39 not written",
    );

    let png = dir.path().join("preview.png");
    let mut writer = PngBandWriter::create(&png, output_window()).unwrap();
    assert_misuse(
        writer.write_band(&flat_rows(1, 9, &ra)),
        &png,
        "rows 1 to 9 were given where row 0 is next",
    );
    drop(writer);
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing left"
    );
}
