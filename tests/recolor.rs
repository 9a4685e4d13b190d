//! `deepmerge recolor` (`deepmerge::ops::recolor`): a deep image takes a flat image's colour and
//! keeps its opacity. Proved through the flatten: the recolored image flattens to the flat
//! colour (within half rounding) wherever the deep image's flattened alpha is above 0, and to 0
//! elsewhere, with its flattened alpha unchanged; with `--target-alpha` its flattened alpha is
//! the flat alpha. On the corpus (hard surfaces, a volumetric file with per-channel alphas,
//! windows that differ) and on random images in bands of any height; bad input gets one line.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{data, read, run, synthetic};
use deepmerge::deep::{Bounds, FlatChannel, FlatImage, FlatValues};
use deepmerge::exr::{write_deep, write_flat, Codec, FlatType};
use proptest::prelude::*;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A flat EXR's window and float channels, read with the `exr` crate (not our reader).
fn flat_values(path: &Path) -> (Bounds, BTreeMap<String, Vec<f32>>) {
    let image = exr::prelude::read_all_flat_layers_from_file(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let layer = &image.layer_data[0];
    let window = Bounds::from_origin_size(
        layer.attributes.layer_position.x(),
        layer.attributes.layer_position.y(),
        layer.size.x(),
        layer.size.y(),
    );
    let channels = layer
        .channel_data
        .list
        .iter()
        .map(|c| (c.name.to_string(), c.sample_data.values_as_f32().collect()))
        .collect();
    (window, channels)
}

/// The value of `channel` at (x, y) of a flat image read by [`flat_values`] (0 outside).
fn at(flat: &(Bounds, BTreeMap<String, Vec<f32>>), channel: &str, x: i32, y: i32) -> f32 {
    flat.0.index_of(x, y).map_or(0.0, |p| flat.1[channel][p])
}

/// The float flatten of `deep`.
fn flatten(deep: &Path, out: &Path) -> (Bounds, BTreeMap<String, Vec<f32>>) {
    let (ok, _, err) = run(&["flatten", s(deep), "--flat-type", "float", "-o", s(out)]);
    assert!(ok, "flatten {}: {err}", deep.display());
    flat_values(out)
}

/// Half rounding of one stored colour per sample and of the flat input: the flattened colour
/// is within 2^-10 of the flat colour, relative, plus f32 noise.
fn close(got: f32, want: f32, tolerance: f32) -> bool {
    (got - want).abs() <= tolerance * want.abs().max(1e-3)
}

/// Recolor `deep` with `flat` (`args` added) and check the flatten against the flat image:
/// colour (each flat colour channel, with the alpha the flatten uses for it), alpha, and 0
/// where the deep image is transparent or the flat image has no pixel. Returns the pixels
/// checked where the colour had to match.
fn check_recolor(deep: &Path, flat: &Path, args: &[&str], dir: &Path) -> usize {
    let out = dir.join("recolored.exr");
    let mut all = vec!["recolor", s(deep), s(flat), "-o", s(&out)];
    all.extend_from_slice(args);
    let (ok, _, err) = run(&all);
    assert!(ok, "recolor {args:?}: {err}");
    let target = args.contains(&"--target-alpha");
    let before = flatten(deep, &dir.join("before.exr"));
    let after = flatten(&out, &dir.join("after.exr"));
    let colour = flat_values(flat);
    assert_eq!(before.0, after.0, "the deep window is kept");
    let alpha_for = |name: &str| {
        let own = format!("{}A", name);
        if after.1.contains_key(&own) {
            own
        } else {
            "A".to_string()
        }
    };
    let mut matched = 0;
    let window = after.0;
    for name in colour.1.keys().filter(|n| !n.ends_with('A') && *n != "Z") {
        let alpha = alpha_for(name);
        for y in window.y0..=window.y1 {
            for x in window.x0..=window.x1 {
                let deep_alpha = at(&before, &alpha, x, y);
                let got = at(&after, name, x, y);
                let inside = colour.0.index_of(x, y).is_some();
                let want = if target {
                    let t = at(&colour, &alpha, x, y).clamp(0.0, 1.0);
                    let alpha_now = at(&after, &alpha, x, y);
                    if deep_alpha > 0.0 {
                        assert!(
                            (alpha_now - t).abs() <= 2e-3,
                            "{}: {alpha} at ({x}, {y}) flattens to {alpha_now}, target {t}",
                            deep.display()
                        );
                    }
                    if alpha_now > 0.0 {
                        Some(at(&colour, name, x, y))
                    } else {
                        None
                    }
                } else {
                    assert_eq!(
                        at(&after, &alpha, x, y),
                        deep_alpha,
                        "{alpha} at ({x}, {y}) is the deep image's"
                    );
                    (deep_alpha > 0.0).then(|| at(&colour, name, x, y))
                };
                match want {
                    Some(want) if inside => {
                        matched += 1;
                        let tolerance = 1.0 / 1024.0;
                        assert!(
                            close(got, want, tolerance),
                            "{}: {name} at ({x}, {y}) flattens to {got}, flat colour {want} \
                             (deep alpha {deep_alpha})",
                            deep.display()
                        );
                    }
                    // Transparent, or no flat pixel: no colour.
                    _ => assert_eq!(got, 0.0, "{name} at ({x}, {y})"),
                }
            }
        }
    }
    matched
}

#[test]
fn recolor_flattens_to_the_flat_colour_on_the_corpus() {
    let dir = tempfile::tempdir().unwrap();
    let composited = data("openexr-images/composited.exr");
    // Hard surfaces, windows that differ (Balls' last row lies below the composite's window).
    for deep in ["openexr-images/Balls.exr", "openexr-images/Leaves.exr"] {
        for args in [vec![], vec!["--target-alpha"]] {
            let n = check_recolor(&data(deep), &composited, &args, dir.path());
            assert!(n > 10_000, "{deep} {args:?}: {n} pixels checked");
        }
    }
    // Volumes that overlap, per-channel alphas: the colour of another volumetric file.
    let volumes = data("oiio/input-crop.deep.exr");
    let other = dir.path().join("holdout-flat.exr");
    let (ok, _, err) = run(&[
        "flatten",
        s(&data("oiio/holdout-crop.deep.exr")),
        "-o",
        s(&other),
    ]);
    assert!(ok, "{err}");
    for args in [vec![], vec!["--target-alpha"]] {
        let n = check_recolor(&volumes, &other, &args, dir.path());
        assert!(n > 100, "{args:?}: {n} pixels checked");
    }
}

#[test]
fn recolor_keeps_the_samples_and_streams_in_bands() {
    let dir = tempfile::tempdir().unwrap();
    let deep = data("oiio/input-crop.deep.exr");
    let flat = dir.path().join("flat.exr");
    let (ok, _, err) = run(&[
        "flatten",
        s(&data("oiio/holdout-crop.deep.exr")),
        "-o",
        s(&flat),
    ]);
    assert!(ok, "{err}");
    let whole = dir.path().join("whole.exr");
    let (ok, _, err) = run(&["recolor", s(&deep), s(&flat), "-o", s(&whole)]);
    assert!(ok, "{err}");
    let (input, output) = (read(&deep, 0), read(&whole, 0));
    assert_eq!(input.offsets, output.offsets, "the same samples");
    assert_eq!(input.state, output.state);
    for name in ["Z", "ZBack", "A", "RA", "GA", "BA"] {
        let (a, b) = (
            input.channel_index(name).unwrap(),
            output.channel_index(name).unwrap(),
        );
        assert_eq!(input.planes[a], output.planes[b], "{name} kept bit for bit");
    }
    let bytes = std::fs::read(&whole).unwrap();
    for rows in ["1", "5"] {
        let out = dir.path().join(format!("b{rows}.exr"));
        let (ok, _, err) = run(&[
            "recolor",
            s(&deep),
            s(&flat),
            "--target-alpha",
            "--band-rows",
            rows,
            "-o",
            s(&out),
        ]);
        assert!(ok, "{err}");
        let (ok, _, err) = run(&[
            "recolor",
            s(&deep),
            s(&flat),
            "--band-rows",
            rows,
            "-o",
            s(&out),
        ]);
        assert!(ok, "{err}");
        assert_eq!(std::fs::read(&out).unwrap(), bytes, "bands of {rows} rows");
    }
    let png = dir.path().join("r.png");
    let (ok, _, err) = run(&["recolor", s(&deep), s(&flat), "-o", s(&png)]);
    assert!(ok, "{err}");
    assert_eq!(&std::fs::read(&png).unwrap()[1..4], b"PNG");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, ..ProptestConfig::default() })]

    /// Random deep images recolored by random flat images whose windows overlap them only in
    /// part, in bands of any height, with and without the target alpha.
    #[test]
    fn recolor_flattens_to_the_flat_colour_on_random_images(
        seed in 0u32..1000, dx in -6i32..6, dy in -6i32..6, rows in 1u32..5,
        target in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let window = Bounds::from_origin_size(0, 0, 12, 9);
        let deep_image = synthetic(window, seed, |i| (i as u32 * 7 + seed) % 4);
        let deep = dir.path().join("deep.exr");
        write_deep(&deep, &deep_image, Codec::Zips).unwrap();
        let flat_window = Bounds::from_origin_size(dx, dy, 12, 9);
        let n = flat_window.area();
        let value = |k: usize, c: usize| ((k * 31 + c * 17 + seed as usize) % 97) as f32 / 97.0;
        let flat_image = FlatImage {
            display_window: flat_window,
            data_window: flat_window,
            channels: ["A", "B", "G", "R"]
                .iter()
                .enumerate()
                .map(|(c, name)| FlatChannel {
                    name: name.to_string(),
                    values: FlatValues::F32((0..n).map(|k| value(k, c) * 2.0 - 0.2).collect()),
                })
                .collect(),
        };
        let flat = dir.path().join("flat.exr");
        write_flat(&flat, &flat_image, FlatType::Half).unwrap();
        let rows = rows.to_string();
        let mut args = vec!["--band-rows", rows.as_str()];
        if target {
            args.push("--target-alpha");
        }
        check_recolor(&deep, &flat, &args, dir.path());
    }
}

#[test]
fn bad_input_gets_one_line_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let deep = data("openexr-images/Balls.exr");
    let flat = data("openexr-images/composited.exr");
    let window = Bounds::from_origin_size(0, 0, 4, 4);
    let write = |name: &str, channels: &[&str]| {
        let path = dir.path().join(name);
        let image = FlatImage {
            display_window: window,
            data_window: window,
            channels: channels
                .iter()
                .map(|n| FlatChannel {
                    name: n.to_string(),
                    values: FlatValues::F32(vec![0.5; 16]),
                })
                .collect(),
        };
        write_flat(&path, &image, FlatType::Half).unwrap();
        path
    };
    let alpha_only = write("a.exr", &["A"]);
    let rgb = write("rgb.exr", &["B", "G", "R"]);
    let out = dir.path().join("out.exr");
    for (args, file, says) in [
        (vec![s(&flat), s(&flat)], &flat, "flat (non-deep)"),
        (vec![s(&deep), s(&deep)], &deep, "is a deep EXR"),
        (
            vec![s(&deep), s(&alpha_only)],
            &alpha_only,
            "no colour channel",
        ),
        (
            vec![s(&deep), s(&rgb), "--target-alpha"],
            &rgb,
            "no channel \"A\"",
        ),
    ] {
        let mut all = vec!["recolor"];
        all.extend(args.iter().copied());
        all.extend(["-o", s(&out)]);
        let (ok, _, err) = run(&all);
        assert!(!ok, "{args:?} succeeded");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(err.contains(s(file)), "{args:?} names the file: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: one line: {err}");
        assert!(!out.exists(), "{args:?} left an output");
    }
    let (ok, _, err) = run(&["recolor", s(&deep), s(&rgb), "-o", s(&rgb)]);
    assert!(!ok && err.contains("input"), "{err}");
}
