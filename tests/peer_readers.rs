//! Every command's output is read by the OpenEXR readers in use: the installed `oiiotool`
//! (OpenImageIO on the system's OpenEXR, 3.1 on Debian 12) and PyPI OpenEXR 3.5 (the tests'
//! Python). The inputs are chosen to carry an `idManifest` wherever they can
//! (`multivariate.deep.exr`, `11.deep.exr`): OpenEXR 3.1 could not read the sample counts of
//! a deep file, nor the pixels of a flat one, whose `idManifest` came after the writer's own
//! attributes, and OpenEXR's order (by name) is what it reads.
//!
//! Each output is read whole by both: `oiiotool --stats` (every part, every pixel; for deep
//! parts the sample total is compared with ours), and PyPI OpenEXR, which must decode deep
//! parts sample for sample and bit for bit as our reader does, and open flat ones. ZSTD output
//! goes to PyPI OpenEXR only: OpenEXR learnt ZSTD in 3.5, and older readers (oiiotool 2.4)
//! report "Unknown compression type", as `--help` says.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use deepmerge::exr::read_parts_info;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn cli(args: &[&str]) {
    let (ok, _, err) = run(args);
    assert!(ok, "deepmerge {args:?} failed: {err}");
}

/// `oiiotool -a --stats FILE`: reads every pixel of every part; fails the test with
/// oiiotool's message when it cannot. Returns the deep sample total of each deep part.
fn oiiotool_reads(path: &Path) -> Vec<u64> {
    let out = oiiotool()
        .args(["-a", "--stats"])
        .arg(path)
        .output()
        .expect("oiiotool runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && !text.contains("ERROR"),
        "oiiotool cannot read {}:\n{text}",
        path.display()
    );
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("Total deep samples in all pixels:"))
        .map(|n| n.trim().parse().unwrap())
        .collect()
}

/// PyPI OpenEXR opens `path` whole (every part's pixels), through `openexr35.py header`.
fn openexr_opens(path: &Path) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/independent/openexr35.py");
    let out = test_python()
        .arg(script)
        .arg("header")
        .arg(path)
        .arg("0")
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "PyPI OpenEXR cannot read {}:\n{}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Both peers read `path`: deep parts as our reader does, flat parts at all.
fn peers_read(path: &Path, oiiotool_too: bool) {
    let parts = read_parts_info(path).unwrap();
    if oiiotool_too {
        let totals = oiiotool_reads(path);
        let ours: Vec<u64> = parts
            .iter()
            .filter(|p| p.deep)
            .map(|p| read(path, p.index).sample_count() as u64)
            .collect();
        assert_eq!(totals, ours, "{}: oiiotool's sample totals", path.display());
    }
    openexr_opens(path);
    for part in parts.iter().filter(|p| p.deep) {
        let what = format!("{} part {}", path.display(), part.index);
        assert_matches_dump(
            &read(path, part.index),
            &independent_dump(path, part.index),
            &what,
        );
    }
}

#[test]
fn every_commands_output_is_read_by_oiiotool_and_openexr() {
    let dir = tempfile::tempdir().unwrap();
    let out = |name: &str| -> PathBuf { dir.path().join(name) };
    let multivariate = data("openexr/multivariate.deep.exr");
    let eleven = data("openexr/11.deep.exr");
    let stereo = data("openexr-images/Stereo-Trunks-multipart.exr");
    let (mv, el, st) = (s(&multivariate), s(&eleven), s(&stereo));
    let has_manifest = |p: &Path| {
        read_parts_info(p).unwrap()[0]
            .attributes
            .iter()
            .any(|a| a.name == "idManifest")
    };
    assert!(has_manifest(&multivariate) && has_manifest(&eleven));

    // (output, arguments before `-o OUTPUT`); later commands read earlier outputs.
    let idselected = out("idselect.exr");
    let flattened = out("flatten.exr");
    let commands: Vec<(PathBuf, Vec<&str>)> = vec![
        (out("merge-flat.exr"), vec![mv, el]),
        (out("merge-deep.exr"), vec![mv, el, "--deep"]),
        (
            out("merge-tidy-rle.exr"),
            vec![el, mv, "--deep", "--tidy", "--compression", "rle"],
        ),
        (out("merge-parts-flat.exr"), vec![st, st, "--all-parts"]),
        (
            out("merge-parts-deep.exr"),
            vec![st, st, "--all-parts", "--deep"],
        ),
        (
            idselected.clone(),
            vec!["idselect", mv, "--id", "id=blob/*"],
        ),
        (flattened.clone(), vec!["flatten", s(&idselected)]),
        (out("crop.exr"), vec!["crop", el, "--box", "10,20,120,200"]),
        (
            out("slice.exr"),
            vec!["slice", mv, "--near", "0.5", "--far", "40"],
        ),
        (
            out("transform.exr"),
            vec!["transform", el, "--translate", "3,-2", "--z-scale", "2"],
        ),
        (out("holdout.exr"), vec!["holdout", mv, el]),
        (out("holdout-flat.exr"), vec!["holdout", mv, el, "--flat"]),
        (
            out("deepen.exr"),
            vec!["deepen", s(&flattened), "--z", "5", "--thickness", "1"],
        ),
        (out("recolor.exr"), vec!["recolor", mv, s(&flattened)]),
        (
            out("grade.exr"),
            vec![
                "grade",
                mv,
                "--gain",
                "2",
                "--saturation",
                "0.5",
                "--id",
                "id=blob/*",
            ],
        ),
        (out("reformat.exr"), vec!["reformat", mv, "--scale", "0.4"]),
        (
            out("reformat-nearest.exr"),
            vec!["reformat", el, "--size", "50x30", "--filter", "nearest"],
        ),
        (
            out("idselect-none.exr"),
            vec!["idselect", mv, "--id", "id=blob/*", "--metadata", "none"],
        ),
    ];
    for (output, args) in &commands {
        cli(&[args.as_slice(), &["-o", s(output)]].concat());
        // The idManifest is carried wherever the first input has one.
        if args.contains(&mv) && !args.contains(&"none") {
            assert!(has_manifest(output), "{}: no idManifest", output.display());
        }
        peers_read(output, true);
    }

    // ZSTD: PyPI OpenEXR 3.5 only (see the module docs).
    let zstd = out("idselect-zstd.exr");
    cli(&[
        "idselect",
        mv,
        "--id",
        "id=blob/*",
        "--compression",
        "zstd",
        "-o",
        s(&zstd),
    ]);
    peers_read(&zstd, false);
    let flat_zstd = out("merge-flat-zstd.exr");
    cli(&[s(&zstd), "--compression", "zstd", "-o", s(&flat_zstd)]);
    peers_read(&flat_zstd, false);
}

/// Header attributes are written in OpenEXR's order (by name, byte by byte), whatever the
/// command and whatever the input's order.
#[test]
fn header_attributes_are_in_openexrs_order() {
    let dir = tempfile::tempdir().unwrap();
    let multivariate = data("openexr/multivariate.deep.exr");
    let mv = s(&multivariate);
    let deep = dir.path().join("deep.exr");
    let flat = dir.path().join("flat.exr");
    cli(&[mv, mv, "--deep", "-o", s(&deep)]);
    cli(&["flatten", mv, "-o", s(&flat)]);
    for path in [&deep, &flat] {
        let names: Vec<String> = read_parts_info(path).unwrap()[0]
            .attributes
            .iter()
            .map(|a| a.name.clone())
            .collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted, "{}", path.display());
        assert!(names.iter().any(|n| n == "idManifest"));
    }
}
