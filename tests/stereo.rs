//! Stereo and multi-part merges: inputs with the same deep parts (a left and a right eye) merge
//! part by part into a multi-part output with the first input's part names and views; a part is
//! chosen per input with `--part` given once per input; a part missing under `--all-parts` is an
//! error naming the file and the part; an input whose first deep part is merged among several
//! says so on stderr.
//!
//! The inputs: the corpus's `Stereo-Trunks-multipart.exr` (`rgba.left`, `rgba.right`, with
//! `view` attributes) and a pair PyPI OpenEXR makes here from the corpus
//! (`tests/independent/stereo.py pair`): part 0 `right` (view right) holding Balls.exr, part 1
//! `left` (view left) holding Leaves.exr, so its parts match the corpus file's only by view and
//! in the other order. Each part of a part-by-part merge must hold exactly what a single-part
//! merge of that eye alone writes, read by our reader and by OpenEXR's.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use deepmerge::composite::{merge_images, MergeOptions, MergeOutput, OutputKind};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/independent/stereo.py")
}

/// Run `stereo.py ARGS` in the tests' Python: (success, stdout).
fn peer(args: &[&str]) -> (bool, String) {
    let out = test_python()
        .arg(script())
        .args(args)
        .output()
        .expect("python runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() || out.status.code() == Some(1),
        "stereo.py {args:?} failed:\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn stereo() -> PathBuf {
    data("openexr-images/Stereo-Trunks-multipart.exr")
}

/// The pair made from the corpus by OpenEXR (see the module docs).
fn make_pair(dir: &Path) -> PathBuf {
    let pair = dir.join("pair.exr");
    let (ok, _) = peer(&[
        "pair",
        s(&pair),
        s(&data("openexr-images/Balls.exr")),
        s(&data("openexr-images/Leaves.exr")),
    ]);
    assert!(ok);
    pair
}

/// Run the CLI with `args`, which must succeed; its stderr.
fn cli(args: &[&str]) -> String {
    let (ok, _, err) = run(args);
    assert!(ok, "deepmerge {args:?} failed:\n{err}");
    err
}

/// What OpenEXR says of each part: (name, view, type).
fn parts_of(path: &Path) -> Vec<(String, String, String)> {
    let (ok, text) = peer(&["parts", s(path)]);
    assert!(ok);
    text.lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f[1].into(), f[2].into(), f[3].into())
        })
        .collect()
}

/// Whether part `pa` of `a` and part `pb` of `b` hold the same pixels, as OpenEXR reads them.
fn same_part(a: &Path, pa: usize, b: &Path, pb: usize) -> bool {
    peer(&["same-part", s(a), &pa.to_string(), s(b), &pb.to_string()]).0
}

/// Merge the stereo file and the pair part by part (`extra` options, and `--all-parts` when
/// `all`), then each eye alone
/// (single-part merges choosing the eye's part per input), and check that each output part is
/// the single-part merge of its eye: names and views kept, samples (deep) and values the same
/// bits, by our reader for deep output and by OpenEXR's for both.
fn check_part_by_part(dir: &Path, pair: &Path, deep: bool, all: bool, extra: &[&str], tag: &str) {
    let out = dir.join(format!("both-{tag}.exr"));
    let stereo = stereo();
    let mut args = vec![s(&stereo), s(pair), "-q", "-o", s(&out)];
    if deep {
        args.push("--deep");
    }
    args.extend(extra);
    if all {
        args.push("--all-parts");
    }
    cli(&args);
    let kind = if deep {
        "deepscanline"
    } else {
        "scanlineimage"
    };
    let expected: Vec<(String, String, String)> = ["left", "right"]
        .iter()
        .map(|eye| (format!("rgba.{eye}"), eye.to_string(), kind.to_string()))
        .collect();
    assert_eq!(parts_of(&out), expected, "{tag}");
    for (k, eye) in ["left", "right"].iter().enumerate() {
        let alone = dir.join(format!("{eye}-{tag}.exr"));
        let stereo_part = format!("rgba.{eye}");
        let mut args = vec![
            s(&stereo),
            s(pair),
            "--part",
            &stereo_part,
            "--part",
            eye,
            "-q",
            "-o",
            s(&alone),
        ];
        if deep {
            args.push("--deep");
        }
        args.extend(extra);
        cli(&args);
        assert_eq!(parts_of(&alone).len(), 1, "{tag}: one eye is a single part");
        if deep {
            assert!(
                read(&out, k) == read(&alone, 0),
                "{tag}: part {k} differs from the merge of the {eye} eye alone"
            );
        }
        assert!(
            same_part(&out, k, &alone, 0),
            "{tag}: OpenEXR reads part {k} differently from the merge of the {eye} eye alone"
        );
    }
    // The check can fail: the eyes differ.
    assert!(!same_part(&out, 0, &out, 1), "{tag}: the eyes are alike");
}

#[test]
fn a_stereo_pair_merges_part_by_part_as_each_eye_alone_deep_and_flat() {
    let dir = tempfile::tempdir().unwrap();
    let pair = make_pair(dir.path());
    for deep in [true, false] {
        let tag = if deep { "deep" } else { "flat" };
        // Without a word: both inputs hold a left and a right part.
        check_part_by_part(dir.path(), &pair, deep, false, &["--backend", "cpu"], tag);
        // And when asked, with the same bytes.
        check_part_by_part(
            dir.path(),
            &pair,
            deep,
            true,
            &["--backend", "cpu"],
            &format!("{tag}-all"),
        );
        let auto = std::fs::read(dir.path().join(format!("both-{tag}.exr"))).unwrap();
        let asked = std::fs::read(dir.path().join(format!("both-{tag}-all.exr"))).unwrap();
        assert!(auto == asked, "{tag}: --all-parts changes the output");
    }
    // No scratch file is left beside the outputs.
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(!name.starts_with('.'), "left behind: {name}");
    }
}

#[test]
fn the_gl_engine_merges_part_by_part_as_each_eye_alone() {
    let dir = tempfile::tempdir().unwrap();
    let pair = make_pair(dir.path());
    check_part_by_part(
        dir.path(),
        &pair,
        true,
        false,
        &["--backend", "gl"],
        "gl-deep",
    );
}

#[test]
fn the_corpus_stereo_file_merged_with_itself_keeps_names_views_and_other_attributes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("twice.exr");
    cli(&[
        s(&stereo()),
        s(&stereo()),
        "--deep",
        "--backend",
        "cpu",
        "-q",
        "-o",
        s(&out),
    ]);
    let parts = parts_of(&out);
    let names: Vec<(&str, &str)> = parts
        .iter()
        .map(|(n, v, _)| (n.as_str(), v.as_str()))
        .collect();
    assert_eq!(names, [("rgba.left", "left"), ("rgba.right", "right")]);
    for k in 0..2 {
        // Each part is the merge of that part of the file with itself.
        let part = read(&stereo(), k);
        let options = MergeOptions {
            output: OutputKind::Deep,
            ..MergeOptions::default()
        };
        let MergeOutput::Deep(expected) = merge_images(&[&part, &part], &options).unwrap() else {
            panic!("deep output")
        };
        let got = read(&out, k);
        assert_eq!(got.counts(), expected.counts(), "part {k}");
        assert!(got.planes == expected.planes, "part {k}: samples differ");
        // The first input's part's other attributes come along.
        let attributes = &deepmerge::exr::read_parts_info(&out).unwrap()[k].attributes;
        assert!(
            attributes.iter().any(|a| a.name == "owner"
                && a.text().as_deref() == Some("Copyright 2012 Weta Digital Ltd")),
            "part {k}: {attributes:?}"
        );
    }
}

#[test]
fn a_part_missing_from_an_input_is_an_error_naming_the_file_and_the_part() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.exr");
    let balls = data("openexr-images/Balls.exr");
    let (ok, _, err) = run(&[
        s(&stereo()),
        s(&balls),
        "--all-parts",
        "--backend",
        "cpu",
        "-o",
        s(&out),
    ]);
    assert!(!ok);
    assert_eq!(err.lines().count(), 1, "{err}");
    // Balls.exr is the corpus's left view: its one part is `rgba.left`.
    assert!(
        err.contains(&format!(
            "{}: has no deep part \"rgba.right\" (view \"right\")",
            balls.display()
        )),
        "{err}"
    );
    assert!(!out.exists());
    // A part named for one input that another lacks: the reader's error, naming both.
    let (ok, _, err) = run(&[
        s(&stereo()),
        s(&balls),
        "--part",
        "rgba.right",
        "--backend",
        "cpu",
        "-o",
        s(&out),
    ]);
    assert!(
        !ok && err.contains(s(&balls)) && err.contains("rgba.right"),
        "{err}"
    );
    assert!(!out.exists());
    // --part given neither once nor once per input.
    let out_s = s(&out);
    let (ok, _, err) = run(&[
        s(&balls),
        s(&balls),
        "--part",
        "0",
        "--part",
        "0",
        "--part",
        "0",
        "-o",
        out_s,
    ]);
    assert!(
        !ok && err.contains("--part names 3 parts for 2 inputs"),
        "{err}"
    );
    // A PNG preview is one image: a part-by-part merge cannot be one.
    let png = dir.path().join("o.png");
    let out = deepmerge()
        .args([s(&stereo()), s(&stereo()), "-o", s(&png)])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("inputs have 2 parts: choose one with --part"),
        "{err}"
    );
    assert!(!png.exists());
}

#[test]
fn a_part_per_input_merges_a_right_eye_with_a_single_part_element() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("right.exr");
    let balls = data("openexr-images/Balls.exr");
    cli(&[
        s(&stereo()),
        s(&balls),
        "--part",
        "rgba.right",
        "--part",
        "0",
        "--deep",
        "--backend",
        "cpu",
        "-q",
        "-o",
        s(&out),
    ]);
    let right = read(&stereo(), 1);
    let element = read(&balls, 0);
    let options = MergeOptions {
        output: OutputKind::Deep,
        ..MergeOptions::default()
    };
    let MergeOutput::Deep(expected) = merge_images(&[&right, &element], &options).unwrap() else {
        panic!("deep output")
    };
    let got = read(&out, 0);
    assert_eq!(got.data_window, expected.data_window);
    assert_eq!(got.counts(), expected.counts());
    assert!(got.planes == expected.planes, "samples differ");
}

#[test]
fn a_first_deep_part_merged_among_several_is_said_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.exr");
    let chosen = dir.path().join("chosen.exr");
    let balls = data("openexr-images/Balls.exr");
    let err = cli(&[s(&stereo()), s(&balls), "--backend", "cpu", "-o", s(&out)]);
    let note = format!(
        "deepmerge: {}: merging its first deep part \"rgba.left\" of 2 (not \"rgba.right\")",
        stereo().display()
    );
    let notes: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("first deep part"))
        .collect();
    assert_eq!(notes.len(), 1, "{err}");
    assert!(notes[0].starts_with(&note), "{err}");
    // The output is what choosing that part gives, and nothing is said then, nor under -q.
    let err = cli(&[
        s(&stereo()),
        s(&balls),
        "--part",
        "0",
        "--backend",
        "cpu",
        "-o",
        s(&chosen),
    ]);
    assert!(!err.contains("first deep part"), "{err}");
    assert!(std::fs::read(&out).unwrap() == std::fs::read(&chosen).unwrap());
    let err = cli(&[
        s(&stereo()),
        s(&balls),
        "-q",
        "--backend",
        "cpu",
        "-o",
        s(&out),
    ]);
    assert!(err.is_empty(), "{err}");
}
