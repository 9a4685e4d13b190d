//! The merge's `--bbox` (`deepmerge::stream::OutputWindow`): each mode's output data window,
//! every pixel inside it equal to the union merge's pixel there (deep sample for sample, flat
//! bit for bit), on both engines and both merge strategies, streamed in bands, with the same
//! bytes everywhere; and the refusals.

mod common;

use std::path::{Path, PathBuf};

use common::{read, run, synthetic};
use deepmerge::deep::{Bounds, DeepImage, Plane};
use deepmerge::exr::{write_deep, Codec};

fn b(x0: i32, y0: i32, x1: i32, y1: i32) -> Bounds {
    Bounds { x0, y0, x1, y1 }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Two inputs whose windows overlap in part: A (0,0)-(11,7) and B (6,4)-(19,15).
fn inputs(dir: &Path) -> (PathBuf, PathBuf) {
    let a = synthetic(b(0, 0, 11, 7), 1, |p| (p % 4) as u32);
    let bb = synthetic(b(6, 4, 19, 15), 2, |p| (p % 3) as u32 + 1);
    let (pa, pb) = (dir.join("a.exr"), dir.join("b.exr"));
    write_deep(&pa, &a, Codec::Zips).unwrap();
    write_deep(&pb, &bb, Codec::Zips).unwrap();
    (pa, pb)
}

/// Every channel of a flat EXR, read with the `exr` crate (independent of our code), as its
/// data window and (name, values).
fn read_flat(path: &Path) -> (Bounds, Vec<(String, Vec<f32>)>) {
    let image = exr::prelude::read_all_flat_layers_from_file(path).unwrap();
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

/// The bits of every sample of pixel (x, y), or none outside the window.
fn pixel_samples(image: &DeepImage, x: i32, y: i32) -> Vec<Vec<u32>> {
    let Some(p) = image.pixel_index(x, y) else {
        return Vec::new();
    };
    image
        .range(p)
        .map(|i| {
            image
                .planes
                .iter()
                .map(|plane| match plane {
                    Plane::U32(v) => v[i],
                    Plane::F16(v) => v[i].to_bits() as u32,
                    Plane::F32(v) => v[i].to_bits(),
                })
                .collect()
        })
        .collect()
}

fn merge(args: &[&str]) {
    let (ok, _, err) = run(args);
    assert!(ok, "{args:?}: {err}");
}

#[test]
fn each_bbox_mode_writes_its_window_with_the_union_merges_pixels_on_both_engines() {
    let dir = tempfile::tempdir().unwrap();
    let (a, bb) = inputs(dir.path());
    let modes = [
        ("union", b(0, 0, 19, 15)),
        ("intersection", b(6, 4, 11, 7)),
        ("first", b(0, 0, 11, 7)),
        // A box reaching past both inputs on the left and the right, and cutting rows.
        ("-3,5,25,9", b(-3, 5, 25, 9)),
    ];
    for deep in [true, false] {
        let kind = if deep { "deep" } else { "flat" };
        // The union merge, as the merge has always written it (no --bbox).
        let union = dir.path().join(format!("union-{kind}.exr"));
        let mut args = vec![s(&a), s(&bb), "-q", "--backend", "cpu", "-o", s(&union)];
        if deep {
            args.push("--deep");
        }
        merge(&args);
        for (mode, want) in modes {
            let mut outputs: Vec<(String, Vec<u8>)> = Vec::new();
            for backend in ["cpu", "gl"] {
                for strategy in ["kway", "chain"] {
                    let out = dir.path().join(format!("{kind}-{backend}-{strategy}.exr"));
                    let mut args = vec![
                        s(&a),
                        s(&bb),
                        "-q",
                        "--bbox",
                        mode,
                        "--backend",
                        backend,
                        "--merge-strategy",
                        strategy,
                        "--band-rows",
                        "3",
                        "-o",
                        s(&out),
                    ];
                    if deep {
                        args.push("--deep");
                    }
                    merge(&args);
                    outputs.push((
                        format!("{backend} {strategy}"),
                        std::fs::read(&out).unwrap(),
                    ));
                }
            }
            for (name, bytes) in &outputs[1..] {
                assert!(
                    *bytes == outputs[0].1,
                    "{kind} --bbox {mode}: {name} differs from {}",
                    outputs[0].0
                );
            }
            let out = dir.path().join(format!("{kind}-cpu-kway.exr"));
            if mode == "union" {
                assert!(
                    std::fs::read(&union).unwrap() == outputs[0].1,
                    "--bbox union is the default"
                );
            }
            if deep {
                let got = read(&out, 0);
                let whole = read(&union, 0);
                assert_eq!(got.data_window, want, "deep --bbox {mode}");
                assert_eq!(got.display_window, whole.display_window);
                let mut samples = 0;
                for y in want.y0..=want.y1 {
                    for x in want.x0..=want.x1 {
                        let pixel = pixel_samples(&got, x, y);
                        samples += pixel.len();
                        assert_eq!(pixel, pixel_samples(&whole, x, y), "{mode} ({x}, {y})");
                    }
                }
                assert!(samples > 0, "{mode}: the window holds samples");
            } else {
                let (window, channels) = read_flat(&out);
                let (whole_window, whole) = read_flat(&union);
                assert_eq!(window, want, "flat --bbox {mode}");
                for ((name, values), (whole_name, whole_values)) in channels.iter().zip(&whole) {
                    assert_eq!(name, whole_name);
                    for y in want.y0..=want.y1 {
                        for x in want.x0..=want.x1 {
                            let got = values[window.index_of(x, y).unwrap()];
                            let expected =
                                whole_window.index_of(x, y).map_or(0.0, |p| whole_values[p]);
                            assert_eq!(
                                got.to_bits(),
                                expected.to_bits(),
                                "{mode} {name} ({x}, {y})"
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn bad_bboxes_are_refused_with_one_line_and_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let (a, _) = inputs(dir.path());
    let far = synthetic(b(100, 100, 101, 101), 3, |_| 1);
    let far_path = dir.path().join("far.exr");
    write_deep(&far_path, &far, Codec::Zips).unwrap();
    let out = dir.path().join("o.exr");
    for (mode, says) in [
        ("intersection", "do not meet"),
        ("everything", "union, intersection, first or X0,Y0,X1,Y1"),
        ("5,5,1,1", "union, intersection, first or X0,Y0,X1,Y1"),
        ("1,2,3", "union, intersection, first or X0,Y0,X1,Y1"),
    ] {
        let (ok, _, err) = run(&[s(&a), s(&far_path), "--bbox", mode, "-o", s(&out)]);
        assert!(!ok, "{mode}");
        assert!(err.contains(says), "{mode}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{mode}: {err}");
        assert!(!out.exists());
    }
}
