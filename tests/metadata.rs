//! Header attributes carried through: flat and deep merges keep the first input's attributes
//! (typed, as PyPI OpenEXR 3.5 reads them back), but for those the writer states itself;
//! `software` names deepmerge; `--metadata none` carries nothing; `info --all-attributes`
//! prints them.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::*;
use deepmerge::exr::WRITER_OWNED;

/// A part's attributes as PyPI OpenEXR reads them: name -> (Python type, value).
fn header(path: &Path) -> BTreeMap<String, (String, String)> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/independent/openexr35.py");
    let out = test_python()
        .arg(script)
        .arg("header")
        .arg(path)
        .arg("0")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .map(|line| {
            let mut fields = line.splitn(3, '\t');
            let name = fields.next().unwrap().to_string();
            let kind = fields.next().unwrap().to_string();
            (name, (kind, fields.next().unwrap_or("").to_string()))
        })
        .collect()
}

/// The attributes an output must carry from `input`: all but the writer's.
fn carried(input: &Path) -> BTreeMap<String, (String, String)> {
    header(input)
        .into_iter()
        .filter(|(name, _)| !WRITER_OWNED.contains(&name.as_str()))
        .collect()
}

fn merge(args: &[&str]) {
    let (ok, _, err) = run(args);
    assert!(ok, "deepmerge {args:?}: {err}");
}

/// The volumetric render (camera matrices, clip range, capture date, strings, v2f and box2f
/// attributes from the renderer and oiiotool) and the Arnold render (tiled): both survive a
/// flat and a deep merge with their types and values.
#[test]
fn the_first_inputs_attributes_survive_flat_and_deep_merges() {
    let dir = tempfile::tempdir().unwrap();
    for (first, second) in [
        ("oiio/input-crop.deep.exr", "oiio/holdout-crop.deep.exr"),
        ("oiio/deepalpha.exr", "oiio/deepalpha.exr"),
    ] {
        let (first, second) = (data(first), data(second));
        let expected = carried(&first);
        assert!(expected.len() >= 5, "{}: {expected:?}", first.display());
        for extra in [
            &[][..],
            &["--deep"][..],
            &["--deep", "--compression", "zstd"][..],
        ] {
            let out = dir.path().join("out.exr");
            let mut args = vec![
                first.to_str().unwrap(),
                second.to_str().unwrap(),
                "--backend",
                "cpu",
                "-q",
                "-o",
                out.to_str().unwrap(),
            ];
            args.extend(extra);
            merge(&args);
            let got = header(&out);
            for (name, value) in &expected {
                assert_eq!(
                    got.get(name),
                    Some(value),
                    "{} {extra:?}: attribute {name}",
                    first.display()
                );
            }
            let software = &got.get("software").expect("software is set").1;
            assert_eq!(
                software,
                &format!("'deepmerge {}'", env!("CARGO_PKG_VERSION"))
            );
            // The writer's own attributes are its own: a scanline output of a tiled input.
            assert!(!got.contains_key("tiles"), "{extra:?}");
        }
    }
}

/// `--metadata none`: only what the writer states, and `software`.
#[test]
fn metadata_none_carries_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let first = data("oiio/input-crop.deep.exr");
    let out = dir.path().join("out.exr");
    merge(&[
        first.to_str().unwrap(),
        first.to_str().unwrap(),
        "--metadata",
        "none",
        "--backend",
        "cpu",
        "-q",
        "-o",
        out.to_str().unwrap(),
    ]);
    let names: Vec<String> = header(&out).into_keys().collect();
    assert_eq!(
        names,
        [
            "channels",
            "compression",
            "dataWindow",
            "displayWindow",
            "lineOrder",
            "pixelAspectRatio",
            "screenWindowCenter",
            "screenWindowWidth",
            "software",
            "type"
        ]
    );
}

/// `info --all-attributes` prints the other attributes with their types and values.
#[test]
fn info_prints_every_other_attribute() {
    let input = data("oiio/deepalpha.exr");
    let (ok, text, err) = run(&["info", "--all-attributes", input.to_str().unwrap()]);
    assert!(ok, "{err}");
    for line in [
        "  part 0: 10 other attributes",
        "    capDate (string): \"2013:10:29 16:22:56\"",
        "    camerainfo (string): \"camera1\"",
        "    worldToCamera (m44f): 1 0 0 0 0 1 0 0 0 0 -1 0 1.5 0 4 1",
        "    pixelAspectRatio (float): 1",
        "    chunkCount (int): 6",
    ] {
        assert!(text.contains(line), "{line:?} in:\n{text}");
    }
}
