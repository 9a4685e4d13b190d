//! `deepmerge deepen` (`deepmerge::ops::deepen`): a flat image made deep, one sample per pixel.
//! Flattening the result gives the flat input back (corpus files and random ones, bit for bit
//! in half), the peer `oiiotool --deepen` makes the same samples, depths come from constants
//! or channels as stated, the flat reader gives the same pixels whatever the input's encoding
//! and the bands, and bad input gets one line naming the file.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{data, read, run};
use deepmerge::deep::{Bounds, DeepImage, FlatChannel, FlatImage, FlatValues};
use deepmerge::exr::{write_flat, write_flat_with, Codec, FlatType, FlatWriteOptions};
use proptest::prelude::*;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A flat EXR's window and float channels, read with the `exr` crate (not our reader).
fn flat_values(path: &Path) -> (Bounds, BTreeMap<String, Vec<f32>>) {
    let image = exr::prelude::read_all_flat_layers_from_file(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let layer = &image.layer_data[0];
    let (x0, y0) = (
        layer.attributes.layer_position.x(),
        layer.attributes.layer_position.y(),
    );
    let window = Bounds::from_origin_size(x0, y0, layer.size.x(), layer.size.y());
    let channels = layer
        .channel_data
        .list
        .iter()
        .map(|c| (c.name.to_string(), c.sample_data.values_as_f32().collect()))
        .collect();
    (window, channels)
}

/// `deepen ARGS` of `input` into `out`, then its flatten into `flat`.
fn deepen_and_flatten(input: &Path, args: &[&str], out: &Path, flat: &Path) {
    let mut all = vec!["deepen", s(input), "-o", s(out)];
    all.extend_from_slice(args);
    let (ok, _, err) = run(&all);
    assert!(ok, "deepen {args:?}: {err}");
    let (ok, _, err) = run(&["flatten", s(out), "-o", s(flat)]);
    assert!(ok, "flatten: {err}");
}

/// Every channel of `input` but its depths equals the flatten's, value for value (0 and -0
/// alike: a pixel dropped as empty flattens to 0).
fn assert_flat_equal(input: &Path, flat: &Path) {
    let (w_in, want) = flat_values(input);
    let (w_out, got) = flat_values(flat);
    assert_eq!(w_in, w_out, "{}: data window", input.display());
    for (name, values) in &want {
        if name == "Z" || name == "ZBack" {
            continue;
        }
        let ours = got
            .get(name)
            .unwrap_or_else(|| panic!("the flatten lacks {name}"));
        for (p, (a, b)) in values.iter().zip(ours).enumerate() {
            assert!(
                a == b || (a.is_nan() && b.is_nan()),
                "{}: {name} at pixel {p}: input {a}, flatten of deepen {b}",
                input.display()
            );
        }
    }
}

/// A flat image over `window` with these channels (values row-major).
fn flat_image(window: Bounds, channels: &[(&str, Vec<f32>)]) -> FlatImage {
    FlatImage {
        display_window: window,
        data_window: window,
        channels: channels
            .iter()
            .map(|(n, v)| FlatChannel {
                name: n.to_string(),
                values: FlatValues::F32(v.clone()),
            })
            .collect(),
    }
}

#[test]
fn deepen_then_flatten_gives_the_corpus_flat_files_back() {
    let dir = tempfile::tempdir().unwrap();
    let (out, flat) = (dir.path().join("d.exr"), dir.path().join("f.exr"));
    // The reference composite (half RGBA, ZIPS) at a constant depth.
    let composited = data("openexr-images/composited.exr");
    deepen_and_flatten(&composited, &["--z", "1"], &out, &flat);
    assert_flat_equal(&composited, &flat);
    let deep = read(&out, 0);
    assert_eq!(deep.max_count(), 1);
    // A flatten with its depth (Z of the front sample), deepened at that depth as volumes.
    let balls = dir.path().join("balls.exr");
    let (ok, _, err) = run(&[
        "flatten",
        s(&data("openexr-images/Balls.exr")),
        "--flat-z",
        "-o",
        s(&balls),
    ]);
    assert!(ok, "{err}");
    deepen_and_flatten(
        &balls,
        &["--z-channel", "Z", "--thickness", "0.5"],
        &out,
        &flat,
    );
    assert_flat_equal(&balls, &flat);
}

#[test]
fn deepen_makes_the_samples_oiiotool_deepen_makes() {
    // oiiotool 2.4 deepens only an image with a Z channel (it takes the depth from it), and
    // gives a sample to a pixel with any non-zero channel, a Z under 1e30 counting.
    let dir = tempfile::tempdir().unwrap();
    let balls = dir.path().join("balls.exr");
    let (ok, _, err) = run(&[
        "flatten",
        s(&data("openexr-images/Balls.exr")),
        "--flat-z",
        "-o",
        s(&balls),
    ]);
    assert!(ok, "{err}");
    // Far background depths in some empty pixels, a lone depth in others: both rules show.
    let (window, mut channels) = flat_values(&balls);
    let z = channels.get_mut("Z").unwrap();
    for (p, v) in z.iter_mut().enumerate() {
        if *v == 0.0 {
            *v = if p % 3 == 0 {
                2e30
            } else if p % 3 == 1 {
                7.0
            } else {
                0.0
            };
        }
    }
    let named: Vec<(&str, Vec<f32>)> = channels
        .iter()
        .map(|(n, v)| (n.as_str(), v.clone()))
        .collect();
    let input = dir.path().join("in.exr");
    write_flat(&input, &flat_image(window, &named), FlatType::Float).unwrap();
    let theirs = dir.path().join("oiio.exr");
    let status = common::oiiotool()
        .arg(&input)
        .args(["--deepen", "-o"])
        .arg(&theirs)
        .status()
        .unwrap();
    assert!(status.success(), "oiiotool --deepen");
    let ours = dir.path().join("ours.exr");
    let (ok, _, err) = run(&["deepen", s(&input), "--z-channel", "Z", "-o", s(&ours)]);
    assert!(ok, "{err}");
    let (a, b) = (read(&theirs, 0), read(&ours, 0));
    assert_eq!(a.data_window, b.data_window);
    assert_eq!(a.counts(), b.counts(), "the pixels that get a sample");
    assert!(b.sample_count() > 0 && b.sample_count() < b.pixel_count());
    let names = |i: &DeepImage| {
        i.channels
            .iter()
            .map(|c| c.name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&a), names(&b));
    for c in 0..a.channels.len() {
        for i in 0..a.sample_count() {
            assert_eq!(
                a.planes[c].get_f32(i),
                b.planes[c].get_f32(i),
                "{} of sample {i}",
                a.channels[c].name
            );
        }
    }
}

#[test]
fn depths_come_from_constants_or_channels_and_empty_pixels_are_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let window = Bounds::from_origin_size(-2, 5, 5, 1);
    let input = dir.path().join("in.exr");
    // Pixel 0: all zero. 1: colour. 2: only a far depth. 3: only a depth. 4: only an id-less
    // extra channel.
    let image = flat_image(
        window,
        &[
            ("A", vec![0.0, 0.5, 0.0, 0.0, 0.0]),
            ("R", vec![0.0, 0.25, 0.0, 0.0, 0.0]),
            ("depth", vec![0.0, 3.0, 1e31, 4.0, 0.0]),
            ("back", vec![0.0, 3.5, 1e31, 4.0, 0.0]),
            ("spec", vec![0.0, 0.0, 0.0, 0.0, -1.0]),
        ],
    );
    write_flat(&input, &image, FlatType::Float).unwrap();
    let out = dir.path().join("out.exr");
    let deepen = |args: &[&str]| {
        let mut all = vec!["deepen", s(&input), "-o", s(&out)];
        all.extend_from_slice(args);
        let (ok, _, err) = run(&all);
        assert!(ok, "{args:?}: {err}");
        read(&out, 0)
    };
    let column = |image: &DeepImage, name: &str| -> Vec<f32> {
        let c = image
            .channel_index(name)
            .unwrap_or_else(|| panic!("no {name}"));
        (0..image.sample_count())
            .map(|i| image.planes[c].get_f32(i))
            .collect()
    };
    // A constant depth: the depth channels are ordinary channels, so only pixel 0 is empty.
    let points = deepen(&["--z", "-2.5"]);
    assert_eq!(points.counts(), vec![0, 1, 1, 1, 1]);
    assert_eq!(column(&points, "Z"), vec![-2.5; 4]);
    assert!(points.channel_index("ZBack").is_none(), "point samples");
    assert_eq!(column(&points, "depth"), vec![3.0, 1e31, 4.0, 0.0]);
    assert_eq!(points.data_window, window);
    assert_eq!(points.state, deepmerge::deep::DeepState::Tidy);
    // Depths from channels: a far depth alone makes no sample, a near one does.
    let volumes = deepen(&["--z-channel", "depth", "--zback-channel", "back"]);
    assert_eq!(volumes.counts(), vec![0, 1, 0, 1, 1]);
    assert_eq!(column(&volumes, "Z"), vec![3.0, 4.0, 0.0]);
    assert_eq!(column(&volumes, "ZBack"), vec![3.5, 4.0, 0.0]);
    assert_eq!(column(&volumes, "R"), vec![0.25, 0.0, 0.0]);
    let thick = deepen(&["--z-channel", "depth", "--thickness", "2"]);
    // Here `back` is an ordinary channel, so pixel 2 (back 1e31) is not empty.
    assert_eq!(thick.counts(), vec![0, 1, 1, 1, 1]);
    assert_eq!(column(&thick, "ZBack"), vec![5.0, 1e31 + 2.0, 6.0, 2.0]);
    // A PNG preview of the deepened image.
    let png = dir.path().join("p.png");
    let (ok, _, err) = run(&["deepen", s(&input), "--z", "1", "-o", s(&png)]);
    assert!(ok, "{err}");
    assert_eq!(&std::fs::read(&png).unwrap()[1..4], b"PNG");
}

#[test]
fn the_flat_reader_gives_the_same_pixels_in_every_encoding_and_band() {
    let dir = tempfile::tempdir().unwrap();
    let source = data("openexr-images/composited.exr");
    let reference = dir.path().join("ref.exr");
    let (ok, _, err) = run(&["deepen", s(&source), "--z", "1", "-o", s(&reference)]);
    assert!(ok, "{err}");
    let want = read(&reference, 0);
    let reference_bytes = std::fs::read(&reference).unwrap();
    // Bands of any height write the same bytes.
    for rows in ["1", "7", "100"] {
        let out = dir.path().join(format!("b{rows}.exr"));
        let (ok, _, err) = run(&[
            "deepen",
            s(&source),
            "--z",
            "1",
            "--band-rows",
            rows,
            "-o",
            s(&out),
        ]);
        assert!(ok, "{err}");
        assert_eq!(
            std::fs::read(&out).unwrap(),
            reference_bytes,
            "bands of {rows}"
        );
    }
    // The same pixels in other encodings: oiiotool's (the exr crate's codecs, tiles) and ours.
    let mut inputs = Vec::new();
    for (name, args) in [
        ("zip", vec!["--compression", "zip"]),
        ("piz", vec!["--compression", "piz"]),
        ("rle", vec!["--compression", "rle"]),
        ("tiled", vec!["--tile", "32", "16", "--compression", "zips"]),
        ("none", vec!["--compression", "none"]),
    ] {
        let path = dir.path().join(format!("{name}.exr"));
        let status = common::oiiotool()
            .arg(&source)
            .args(&args)
            .arg("-o")
            .arg(&path)
            .status()
            .unwrap();
        assert!(status.success(), "oiiotool {args:?}");
        inputs.push(path);
    }
    let (window, channels) = flat_values(&source);
    let named: Vec<(&str, Vec<f32>)> = channels
        .iter()
        .map(|(n, v)| (n.as_str(), v.clone()))
        .collect();
    let zstd = dir.path().join("zstd.exr");
    let options = FlatWriteOptions {
        codec: Codec::Zstd { level: 5 },
        ..FlatWriteOptions::default()
    };
    let mut image = flat_image(window, &named);
    image.display_window = Bounds::from_origin_size(0, 0, 1024, 576);
    write_flat_with(&zstd, &image, &options).unwrap();
    inputs.push(zstd);
    for input in &inputs {
        let out = dir.path().join("out.exr");
        let (ok, _, err) = run(&[
            "deepen",
            s(input),
            "--z",
            "1",
            "--band-rows",
            "5",
            "-o",
            s(&out),
        ]);
        assert!(ok, "{}: {err}", input.display());
        let got = read(&out, 0);
        assert_eq!(got.counts(), want.counts(), "{}", input.display());
        assert_eq!(got.planes, want.planes, "{}", input.display());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Random flat images (half or float, an origin anywhere, a third of the pixels empty,
    /// bands of any height): the flatten of their deepen is themselves.
    #[test]
    fn deepen_then_flatten_is_the_identity_on_random_flat_images(
        x0 in -20i32..20, y0 in -20i32..20, w in 1usize..24, h in 1usize..24,
        seed in any::<u64>(), rows in 1u32..6, float in any::<bool>(),
    ) {
        let window = Bounds::from_origin_size(x0, y0, w, h);
        let mut state = seed | 1;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % 10_000) as f32 / 10_000.0
        };
        let n = window.area();
        let mut columns: Vec<(&str, Vec<f32>)> = vec![("A", vec![]), ("B", vec![]), ("G", vec![]), ("R", vec![]), ("spec", vec![])];
        for _ in 0..n {
            let empty = next() < 0.33;
            let a = next();
            for (name, values) in columns.iter_mut() {
                let v = match *name {
                    _ if empty => 0.0,
                    "A" => a,
                    "spec" => next() * 4.0 - 2.0,
                    _ => a * next(),
                };
                values.push(v);
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.exr");
        let kind = if float { FlatType::Float } else { FlatType::Half };
        write_flat(&input, &flat_image(window, &columns), kind).unwrap();
        let (out, flat) = (dir.path().join("d.exr"), dir.path().join("f.exr"));
        let rows = rows.to_string();
        let all = vec!["deepen", s(&input), "--z", "3", "--thickness", "1", "--band-rows", &rows, "-o", s(&out)];
        let (ok, _, err) = run(&all);
        prop_assert!(ok, "{}", err);
        let flat_type = if float { "float" } else { "half" };
        let (ok, _, err) = run(&["flatten", s(&out), "--flat-type", flat_type, "-o", s(&flat)]);
        prop_assert!(ok, "{}", err);
        if float {
            // One sample over nothing in f32: colour exact, alpha 1 - (1 - a) within an ulp.
            let (_, want) = flat_values(&input);
            let (_, got) = flat_values(&flat);
            for (name, values) in &want {
                for (a, b) in values.iter().zip(&got[name]) {
                    prop_assert!((a - b).abs() <= 1e-7, "{}: {} vs {}", name, a, b);
                }
            }
        } else {
            assert_flat_equal(&input, &flat);
        }
    }
}

#[test]
fn bad_input_gets_one_line_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let window = Bounds::from_origin_size(0, 0, 3, 2);
    let write = |name: &str, channels: &[(&str, Vec<f32>)]| {
        let path = dir.path().join(name);
        write_flat(&path, &flat_image(window, channels), FlatType::Float).unwrap();
        path
    };
    let rgb = write("rgb.exr", &[("R", vec![1.0; 6]), ("G", vec![1.0; 6])]);
    let nan = write(
        "nan.exr",
        &[
            ("A", vec![1.0; 6]),
            ("d", vec![1.0, f32::NAN, 1.0, 1.0, 1.0, 1.0]),
        ],
    );
    let inverted = write(
        "inv.exr",
        &[
            ("A", vec![1.0; 6]),
            ("d", vec![2.0; 6]),
            ("e", vec![1.0; 6]),
        ],
    );
    let truncated = dir.path().join("trunc.exr");
    let bytes = std::fs::read(data("openexr-images/composited.exr")).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let deep = data("openexr-images/Balls.exr");
    let out = dir.path().join("out.exr");
    for (args, file, says) in [
        (vec![s(&rgb), "--z", "1"], Some(&rgb), "no alpha channel"),
        (vec![s(&deep), "--z", "1"], Some(&deep), "is a deep EXR"),
        (
            vec![s(&nan), "--z-channel", "depth"],
            Some(&nan),
            "no channel \"depth\"",
        ),
        (
            vec![s(&nan), "--z-channel", "d"],
            Some(&nan),
            "pixel (1, 0)",
        ),
        (
            vec![s(&inverted), "--z-channel", "d", "--zback-channel", "e"],
            Some(&inverted),
            "in front of its Z",
        ),
        (
            vec![s(&truncated), "--z", "1"],
            Some(&truncated),
            "truncated",
        ),
        (vec![s(&rgb)], None, "--z"),
        (
            vec![s(&rgb), "--z", "1", "--z-channel", "R"],
            None,
            "cannot be used with",
        ),
        (
            vec![s(&rgb), "--z", "1", "--thickness", "-1"],
            None,
            "--thickness",
        ),
        (vec![s(&rgb), "--z", "inf"], None, "finite"),
    ] {
        let mut all = vec!["deepen"];
        all.extend(args.iter().copied());
        all.extend(["-o", s(&out)]);
        let (ok, _, err) = run(&all);
        assert!(!ok, "{args:?} succeeded");
        assert!(err.contains(says), "{args:?}: {err}");
        if let Some(file) = file {
            assert!(err.contains(s(file)), "{args:?} names the file: {err}");
            assert_eq!(err.trim().lines().count(), 1, "{args:?}: one line: {err}");
        }
        assert!(!out.exists(), "{args:?} left an output");
    }
    // The output may not be the input.
    let (ok, _, err) = run(&["deepen", s(&nan), "--z", "1", "-o", s(&nan)]);
    assert!(!ok && err.contains("input"), "{err}");
}
