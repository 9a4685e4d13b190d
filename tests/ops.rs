//! The deep operations (`deepmerge::ops`, the `flatten`, `slice`, `crop` and `transform`
//! commands): their stated semantics on hand-built pixels, property tests on random images,
//! the corpus (volumetric files for the slice), the streamed path against the whole image, and
//! the command line (bytes of `flatten` and of the merge of one input, PNG previews, refusals).

mod common;

use std::path::{Path, PathBuf};

use common::{data, image, point, read, run, volume, S};
use deepmerge::composite::{merge_images, MergeOptions, MergeOutput, OutputKind, SortPolicy};
use deepmerge::deep::{Bounds, DeepImage, DeepState, FlatImage, Plane};
use deepmerge::exr::{read_deep, write_deep, Codec, MetadataMode, OutputOptions, ReadOptions};
use deepmerge::ops::{run_op, Crop, DeepOp, OpWindows, Slice, Transform};
use deepmerge::stream::StreamOptions;
use proptest::prelude::*;

/// The op applied to the whole image as one band.
fn apply(op: &dyn DeepOp, input: &DeepImage) -> DeepImage {
    let windows = op
        .windows(input.data_window, input.display_window)
        .unwrap_or_else(|e| panic!("{e}"));
    let band = if windows.read == input.data_window {
        input.clone()
    } else {
        crop_rows(input, &windows)
    };
    let mut out = op.apply(&band, &windows).unwrap_or_else(|e| panic!("{e}"));
    out.display_window = windows.display;
    out
}

/// The input's rows `windows.read` at the input's full width (what the reader hands a band).
fn crop_rows(input: &DeepImage, windows: &OpWindows) -> DeepImage {
    let w = input.data_window;
    let rows = Bounds {
        y0: windows.read.y0,
        y1: windows.read.y1,
        ..w
    };
    let first = w.index_of(w.x0, rows.y0).unwrap();
    let last = w.index_of(w.x1, rows.y1).unwrap();
    let (s0, s1) = (
        input.offsets[first] as usize,
        input.offsets[last + 1] as usize,
    );
    let counts: Vec<u32> = input.counts()[first..=last].to_vec();
    let planes = input
        .planes
        .iter()
        .map(|p| slice_plane(p, s0..s1))
        .collect();
    DeepImage::from_counts(
        input.display_window,
        rows,
        input.channels.clone(),
        &counts,
        planes,
        input.state,
    )
    .unwrap()
}

fn slice_plane(plane: &Plane, range: std::ops::Range<usize>) -> Plane {
    match plane {
        Plane::U32(v) => Plane::U32(v[range].to_vec()),
        Plane::F16(v) => Plane::F16(v[range].to_vec()),
        Plane::F32(v) => Plane::F32(v[range].to_vec()),
    }
}

/// Deep output with the merge's defaults (compression ZIPS, `deepImageState`, no tidy).
fn deep_options() -> StreamOptions {
    StreamOptions {
        merge: MergeOptions {
            output: OutputKind::Deep,
            ..MergeOptions::default()
        },
        ..StreamOptions::default()
    }
}

fn flat(inputs: &[&DeepImage]) -> FlatImage {
    let options = MergeOptions {
        output: OutputKind::Flat { z: false },
        ..MergeOptions::default()
    };
    match merge_images(inputs, &options).unwrap_or_else(|e| panic!("{e}")) {
        MergeOutput::Flat(f) => f,
        MergeOutput::Deep(_) => unreachable!(),
    }
}

fn deep_merge(inputs: &[&DeepImage]) -> DeepImage {
    let options = MergeOptions {
        output: OutputKind::Deep,
        sort: SortPolicy::Always,
        ..MergeOptions::default()
    };
    match merge_images(inputs, &options).unwrap_or_else(|e| panic!("{e}")) {
        MergeOutput::Deep(d) => d,
        MergeOutput::Flat(_) => unreachable!(),
    }
}

/// The largest difference between two flat composites over the same window, per channel.
fn flat_difference(a: &FlatImage, b: &FlatImage) -> f32 {
    assert_eq!(a.data_window, b.data_window);
    let mut worst = 0f32;
    for channel in &a.channels {
        let x = a.channel(&channel.name).unwrap();
        let y = b
            .channel(&channel.name)
            .unwrap_or_else(|| panic!("{} missing", channel.name));
        for (p, q) in x.iter().zip(y) {
            worst = worst.max((p - q).abs());
        }
    }
    worst
}

fn plane_f32(image: &DeepImage, name: &str) -> Vec<f32> {
    let c = image.channel_index(name).unwrap();
    (0..image.sample_count())
        .map(|i| image.planes[c].get_f32(i))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// slice

#[test]
fn slice_keeps_half_open_ranges_and_points_at_far_belong_to_the_back() {
    let input = common::pixel_image(&[
        point(1.0, 0.5, [0.1, 0.2, 0.3]),
        point(2.0, 0.5, [0.2, 0.2, 0.2]),
        point(3.0, 0.5, [0.3, 0.2, 0.1]),
    ]);
    let front = apply(&Slice::new(None, Some(2.0), false).unwrap(), &input);
    let back = apply(&Slice::new(Some(2.0), None, false).unwrap(), &input);
    let outside = apply(&Slice::new(Some(2.0), Some(3.0), true).unwrap(), &input);
    assert_eq!(plane_f32(&front, "Z"), [1.0]);
    assert_eq!(plane_f32(&back, "Z"), [2.0, 3.0]);
    assert_eq!(plane_f32(&outside, "Z"), [1.0, 3.0]);
    // Kept points are copied bit for bit.
    assert_eq!(plane_f32(&back, "R"), [0.2, 0.3]);
}

#[test]
fn slice_splits_a_volume_with_the_tidy_rule() {
    // A volume of alpha 0.75 over [0, 2) cut at 1: each half has alpha 1 - sqrt(0.25) = 0.5,
    // and colour scaled by 0.5 / 0.75.
    let input = common::pixel_image(&[volume(0.0, 2.0, 0.75, [0.6, 0.3, 0.15])]);
    let front = apply(&Slice::new(None, Some(1.0), false).unwrap(), &input);
    let back = apply(&Slice::new(Some(1.0), None, false).unwrap(), &input);
    let both = apply(&Slice::new(Some(0.5), Some(1.5), true).unwrap(), &input);
    assert_eq!(plane_f32(&front, "Z"), [0.0]);
    assert_eq!(plane_f32(&front, "ZBack"), [1.0]);
    assert_eq!(plane_f32(&back, "Z"), [1.0]);
    assert_eq!(plane_f32(&back, "ZBack"), [2.0]);
    for piece in [&front, &back] {
        assert!((plane_f32(piece, "A")[0] - 0.5).abs() < 1e-6);
        assert!((plane_f32(piece, "R")[0] - 0.4).abs() < 1e-6);
    }
    // --keep-outside with both planes inside: two pieces, front first.
    assert_eq!(plane_f32(&both, "Z"), [0.0, 1.5]);
    assert_eq!(plane_f32(&both, "ZBack"), [0.5, 2.0]);
    let merged = flat(&[&front, &back]);
    let original = flat(&[&input]);
    assert!(flat_difference(&merged, &original) < 1e-6);
}

#[test]
fn slice_refuses_a_near_plane_behind_the_far_one_and_nan() {
    assert!(Slice::new(Some(2.0), Some(1.0), false).is_err());
    assert!(Slice::new(Some(f32::NAN), None, false).is_err());
    // An empty slice at one depth is allowed: it keeps nothing (or, outside, everything).
    assert!(Slice::new(Some(1.0), Some(1.0), false).is_ok());
}

/// The depths at which the corpus's volumetric files are cut: the middles of volumes spread
/// through the file (so that every cut splits at least one), and a spread of their samples' Z.
fn cut_depths(image: &DeepImage) -> Vec<f32> {
    let (z, zback) = (plane_f32(image, "Z"), plane_f32(image, "ZBack"));
    let mut middles: Vec<f32> = z
        .iter()
        .zip(&zback)
        .filter(|(a, b)| b > a)
        .map(|(a, b)| a + (b - a) / 2.0)
        .collect();
    middles.sort_by(f32::total_cmp);
    let mut sorted = z.clone();
    sorted.sort_by(f32::total_cmp);
    let at = |v: &[f32], q: f64| v[((v.len() - 1) as f64 * q) as usize];
    let mut cuts: Vec<f32> = [0.1, 0.5, 0.9].iter().map(|&q| at(&middles, q)).collect();
    cuts.extend([0.3, 0.7].iter().map(|&q| at(&sorted, q) + 1e-4));
    cuts
}

#[test]
fn slices_of_volumetric_files_merge_back_to_the_original_within_half_rounding() {
    let dir = tempfile::tempdir().unwrap();
    for file in [
        "oiio/input-crop.deep.exr",
        "oiio/holdout-crop.deep.exr",
        "hostile/overlapping-volumes.exr",
    ] {
        let path = data(file);
        let original = read(&path, 0);
        let want = flat(&[&original]);
        let mut split = 0;
        for z in cut_depths(&original) {
            let mut pieces = Vec::new();
            for (name, near, far) in [("front", None, Some(z)), ("back", Some(z), None)] {
                let out = dir.path().join(format!("{name}.exr"));
                let slice = Slice::new(near, far, false).unwrap();
                run_op(&slice, &path, &out, &deep_options(), None)
                    .unwrap_or_else(|e| panic!("{file} at {z}: {e}"));
                pieces.push(read(&out, 0));
            }
            let refs: Vec<&DeepImage> = pieces.iter().collect();
            let got = flat(&refs);
            let worst = flat_difference(&got, &want);
            // Each cut piece is stored in half (11 bits): a few units in the last place of
            // values up to 1, summed over the pixel's samples.
            assert!(worst < 1e-3, "{file} cut at {z}: differs by {worst}");
            let samples = pieces[0].sample_count() + pieces[1].sample_count();
            assert!(
                samples >= original.sample_count(),
                "{file} at {z}: lost samples"
            );
            split += samples - original.sample_count();
        }
        assert!(
            split > 0,
            "{file}: no cut crossed a volume; the test proves nothing"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// crop and transform

#[test]
fn crop_keeps_the_box_and_shrinks_the_window_to_it() {
    let input = common::synthetic(Bounds::from_origin_size(-3, 2, 9, 7), 5, |i| (i % 4) as u32);
    let crop = Crop::parse("0,4,20,5", false).unwrap();
    let out = apply(&crop, &input);
    assert_eq!(
        out.data_window,
        Bounds {
            x0: 0,
            y0: 4,
            x1: 5,
            y1: 5
        }
    );
    assert_eq!(out.display_window, input.display_window);
    for y in 4..=5 {
        for x in 0..=5 {
            let p = input.pixel_index(x, y).unwrap();
            let q = out.pixel_index(x, y).unwrap();
            assert_eq!(out.count(q), input.count(p));
            for (i, j) in input.range(p).zip(out.range(q)) {
                for c in 0..input.channels.len() {
                    assert_eq!(
                        input.planes[c].get_f32(i).to_bits(),
                        out.planes[c].get_f32(j).to_bits()
                    );
                }
            }
        }
    }
    // A box that misses the image leaves an output of the box itself, read from no row.
    let missed = Crop::parse("100,100,120,120", false).unwrap();
    let windows = missed
        .windows(input.data_window, input.display_window)
        .unwrap();
    assert_eq!(windows.data, missed.area);
    assert_eq!(windows.read.area(), 0);
}

#[test]
fn transform_moves_windows_and_maps_depths() {
    let input = common::pixel_image(&[
        point(1.0, 0.5, [0.1, 0.2, 0.3]),
        volume(2.0, f32::INFINITY, 0.5, [0.2, 0.2, 0.2]),
    ]);
    let t = Transform::new(Some("5,-2"), 3.0, 2.0).unwrap();
    let out = apply(&t, &input);
    assert_eq!(
        out.data_window,
        Bounds {
            x0: 5,
            y0: -2,
            x1: 5,
            y1: -2
        }
    );
    // The display window (the format) stays, as Nuke's DeepTransform keeps it, unless asked.
    assert_eq!(out.display_window, input.display_window);
    let moved = apply(&t.moving_display(true), &input);
    assert_eq!(moved.data_window, out.data_window);
    assert_eq!(
        moved.display_window,
        Bounds {
            x0: 5,
            y0: -2,
            x1: 5,
            y1: -2
        }
    );
    assert_eq!(plane_f32(&out, "Z"), [5.0, 7.0]);
    assert_eq!(plane_f32(&out, "ZBack"), [5.0, f32::INFINITY]);
    assert_eq!(plane_f32(&out, "R"), plane_f32(&input, "R"));
}

// ---------------------------------------------------------------------------------------------
// Property tests on random images

fn arb_sample() -> impl Strategy<Value = S> {
    (0u32..40, 0u32..12, 0u32..=20, 0u32..=20, 0u32..=20).prop_map(|(z, len, a, r, g)| {
        let z = z as f32 * 0.25;
        // A third of the samples are points.
        let zback = if len % 3 == 0 {
            z
        } else {
            z + len as f32 * 0.25
        };
        let a = a as f32 / 20.0;
        volume(
            z,
            zback,
            a,
            [a * r as f32 / 20.0, a * g as f32 / 20.0, a * 0.5],
        )
    })
}

fn arb_image() -> impl Strategy<Value = DeepImage> {
    (1usize..5, 1usize..5).prop_flat_map(|(w, h)| {
        proptest::collection::vec(proptest::collection::vec(arb_sample(), 0..5), w * h).prop_map(
            move |mut pixels| {
                for p in &mut pixels {
                    p.sort_by(|a, b| (a.z, a.zback).partial_cmp(&(b.z, b.zback)).unwrap());
                }
                image(w, &pixels, DeepState::Sorted)
            },
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn slice_front_and_back_recombine(input in arb_image(), cut in 0u32..60) {
        let z = cut as f32 * 0.2 + 0.05;
        let front = apply(&Slice::new(None, Some(z), false).unwrap(), &input);
        let back = apply(&Slice::new(Some(z), None, false).unwrap(), &input);
        let worst = flat_difference(&flat(&[&front, &back]), &flat(&[&input]));
        prop_assert!(worst < 1e-5, "differs by {}", worst);
        // Inside and --keep-outside of one range recombine as well.
        let (near, far) = (z, z + 1.3);
        let inside = apply(&Slice::new(Some(near), Some(far), false).unwrap(), &input);
        let outside = apply(&Slice::new(Some(near), Some(far), true).unwrap(), &input);
        let worst = flat_difference(&flat(&[&inside, &outside]), &flat(&[&input]));
        prop_assert!(worst < 1e-5, "inside + outside differs by {}", worst);
        // Every kept piece lies in its range.
        for (z, zb) in plane_f32(&inside, "Z").iter().zip(plane_f32(&inside, "ZBack")) {
            prop_assert!(*z >= near && zb.max(*z) <= far && (*z < far || zb > *z));
        }
    }

    #[test]
    fn transform_identity_is_exact_and_depths_follow_the_formula(
        input in arb_image(), s in 1u32..40, d in -50i32..50, dx in -9i32..9, dy in -9i32..9
    ) {
        let identity = apply(&Transform::new(None, 0.0, 1.0).unwrap(), &input);
        prop_assert_eq!(&identity, &input);
        let (s, d) = (s as f64 / 8.0, d as f64 / 3.0);
        let t = Transform::new(Some(&format!("{dx},{dy}")), d, s).unwrap();
        let out = apply(&t, &input);
        prop_assert_eq!(out.data_window.x0, input.data_window.x0 + dx);
        prop_assert_eq!(out.data_window.y1, input.data_window.y1 + dy);
        for name in ["Z", "ZBack"] {
            let want: Vec<f32> =
                plane_f32(&input, name).iter().map(|&z| (z as f64 * s + d) as f32).collect();
            prop_assert_eq!(plane_f32(&out, name), want);
        }
        prop_assert_eq!(plane_f32(&out, "A"), plane_f32(&input, "A"));
    }

    #[test]
    fn crop_and_its_outside_merge_to_the_input(
        input in arb_image(), x0 in -1i32..5, y0 in -1i32..5, w in 0i32..5, h in 0i32..5
    ) {
        let area = format!("{},{},{},{}", x0, y0, x0 + w, y0 + h);
        let inside = Crop::parse(&area, false).unwrap();
        let outside = Crop::parse(&area, true).unwrap();
        let window = input.data_window;
        let kept: Vec<DeepImage> = [&inside, &outside]
            .into_iter()
            // A side that keeps nothing reads no row (its output has no samples).
            .filter(|op| op.windows(window, window).unwrap().read.area() > 0)
            .map(|op| apply(op, &input))
            .collect();
        prop_assert!(!kept.is_empty());
        let refs: Vec<&DeepImage> = kept.iter().collect();
        prop_assert_eq!(deep_merge(&refs), deep_merge(&[&input]));
        let total: usize = kept.iter().map(DeepImage::sample_count).sum();
        prop_assert_eq!(total, input.sample_count());
    }
}

// ---------------------------------------------------------------------------------------------
// The streamed path

fn write_temp(dir: &Path, name: &str, image: &DeepImage) -> PathBuf {
    let path = dir.join(name);
    write_deep(&path, image, Codec::Zips).unwrap();
    path
}

#[test]
fn streamed_operations_give_the_bytes_of_the_whole_image_for_any_band_height() {
    let dir = tempfile::tempdir().unwrap();
    let input = data("oiio/input-crop.deep.exr");
    let ops: Vec<(&str, Box<dyn DeepOp>)> = vec![
        (
            "slice",
            Box::new(Slice::new(Some(6.24), Some(6.3), false).unwrap()),
        ),
        ("crop", Box::new(Crop::parse("3,5,20,29", true).unwrap())),
        (
            "transform",
            Box::new(Transform::new(Some("-4,7"), 1.5, 0.5).unwrap()),
        ),
    ];
    for (name, op) in &ops {
        let whole = dir.path().join(format!("{name}.exr"));
        run_op(op.as_ref(), &input, &whole, &deep_options(), None).unwrap();
        let whole_bytes = std::fs::read(&whole).unwrap();
        // The whole-image result, written by the whole-image writer.
        let image = read(&input, 0);
        let expected = write_temp(dir.path(), "expected.exr", &apply(op.as_ref(), &image));
        assert_eq!(
            whole_bytes,
            std::fs::read(&expected).unwrap(),
            "{name}: streamed output differs from the whole image's"
        );
        for rows in [1, 3, 16, 17] {
            let banded = dir.path().join(format!("{name}-{rows}.exr"));
            let options = StreamOptions {
                band_rows: Some(rows),
                ..deep_options()
            };
            run_op(op.as_ref(), &input, &banded, &options, None).unwrap();
            assert_eq!(
                std::fs::read(&banded).unwrap(),
                whole_bytes,
                "{name}: bands of {rows} rows"
            );
        }
    }
}

#[test]
fn tidy_deep_output_is_the_merge_of_one_input_with_tidy() {
    let dir = tempfile::tempdir().unwrap();
    let input = data("hostile/overlapping-volumes.exr");
    let out = dir.path().join("t.exr");
    let options = StreamOptions {
        merge: MergeOptions {
            output: OutputKind::Deep,
            tidy: true,
            ..MergeOptions::default()
        },
        // The CLI's output options: its default compression and `software`, the input's
        // attributes carried (`--metadata first`).
        deep_write: OutputOptions::default().deep(true).unwrap(),
        metadata: MetadataMode::First,
        ..StreamOptions::default()
    };
    let identity = Transform::default();
    run_op(&identity, &input, &out, &options, None).unwrap();
    let merged = dir.path().join("m.exr");
    let (ok, _, err) = run(&[
        input.to_str().unwrap(),
        "--deep",
        "--tidy",
        "--backend",
        "cpu",
        "-q",
        "-o",
        merged.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert_eq!(
        std::fs::read(&out).unwrap(),
        std::fs::read(&merged).unwrap()
    );
    let tidy = read_deep(&out, &ReadOptions::default()).unwrap();
    assert_eq!(tidy.state, DeepState::Tidy);
}

// ---------------------------------------------------------------------------------------------
// The command line

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn flatten_is_the_merge_of_one_input() {
    let dir = tempfile::tempdir().unwrap();
    let input = data("openexr-images/Balls.exr");
    let flattened = dir.path().join("f.exr");
    let merged = dir.path().join("m.exr");
    let (ok, _, err) = run(&["flatten", s(&input), "-o", s(&flattened), "--flat-z"]);
    assert!(ok, "{err}");
    let (ok, _, err) = run(&[
        s(&input),
        "-o",
        s(&merged),
        "--flat-z",
        "--backend",
        "cpu",
        "-q",
    ]);
    assert!(ok, "{err}");
    assert_eq!(
        std::fs::read(&flattened).unwrap(),
        std::fs::read(&merged).unwrap()
    );
}

#[test]
fn png_output_is_an_srgb_preview_of_the_flat_composite() {
    let dir = tempfile::tempdir().unwrap();
    let input = data("openexr-images/Balls.exr");
    let png_path = dir.path().join("preview.PNG");
    let (ok, _, err) = run(&["flatten", s(&input), "-o", s(&png_path)]);
    assert!(ok, "{err}");
    let decoder = png::Decoder::new(std::fs::File::open(&png_path).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0u8; reader.output_buffer_size()];
    let info = reader.next_frame(&mut pixels).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgba);
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    assert!(reader.info().srgb.is_some(), "the sRGB chunk");
    let composite = flat(&[&read(&input, 0)]);
    let window = composite.data_window;
    assert_eq!(
        (info.width as usize, info.height as usize),
        (window.width(), window.height())
    );
    let [r, g, b, a] = ["R", "G", "B", "A"].map(|n| composite.channel(n).unwrap());
    let mut opaque = 0;
    for i in 0..window.area() {
        let want = deepmerge::preview::preview_rgba(Some([r[i], g[i], b[i]]), Some(a[i]));
        assert_eq!(pixels[4 * i..4 * i + 4], want, "pixel {i}");
        opaque += (want[3] == 255) as usize;
    }
    assert!(opaque > 1000, "the balls are there");
    // Straight alpha, sRGB: a half-covered mid-grey premultiplied pixel.
    assert_eq!(
        deepmerge::preview::preview_rgba(Some([0.25; 3]), Some(0.5)),
        [188, 188, 188, 128]
    );
}

#[test]
fn output_names_say_the_format_and_bad_ones_are_refused_without_output() {
    let dir = tempfile::tempdir().unwrap();
    let input = data("oiio/input-crop.deep.exr");
    let out = |n: &str| dir.path().join(n);
    for (args, expect) in [
        (
            vec!["flatten", s(&input), "-o"],
            ("x.tif", "from the extension"),
        ),
        (vec![s(&input), "--deep", "-o"], ("x.png", "name it *.exr")),
        (vec![s(&input), "-o"], ("x.jpg", "from the extension")),
        (
            vec!["slice", s(&input), "--far", "6", "-o"],
            ("x", "from the extension"),
        ),
        (
            vec!["slice", s(&input), "--far", "6", "--tidy", "-o"],
            ("x.png", "--tidy applies to EXR output, not a PNG preview"),
        ),
        (
            vec!["slice", s(&input), "--near", "7", "--far", "6", "-o"],
            ("x.exr", "behind --far"),
        ),
        (
            vec!["transform", s(&input), "--z-scale", "0", "-o"],
            ("x.exr", "--z-scale must be"),
        ),
        (
            vec!["transform", s(&input), "--z-scale", "-2", "-o"],
            ("x.exr", "--z-scale must be"),
        ),
        (
            vec!["crop", s(&input), "--box", "1,2,3", "-o"],
            ("x.exr", "--box takes"),
        ),
    ] {
        let (name, expect) = expect;
        let target = out(name);
        let mut args = args.clone();
        args.push(s(&target));
        let output = common::deepmerge().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(expect), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err}");
        assert!(!target.exists(), "{args:?} wrote {name}");
    }
    // A box that misses the image succeeds: an image of the box with no samples, and one
    // note (none under -q).
    let target = out("miss.exr");
    let args = [
        "crop",
        s(&input),
        "--box",
        "100,100,110,110",
        "-o",
        s(&target),
    ];
    let (ok, _, err) = run(&args);
    assert!(ok && err.lines().count() == 1, "{err}");
    assert!(err.contains("no samples"), "{err}");
    let empty = read(&target, 0);
    assert_eq!(
        (empty.data_window.x0, empty.data_window.y1),
        (100, 110),
        "the box is the data window"
    );
    assert_eq!(empty.sample_count(), 0);
    let (ok, _, err) = run(&[&args[..], &["-q"]].concat());
    assert!(ok && err.is_empty(), "{err}");
    // A broken input is one named line too.
    let target = out("from-broken.exr");
    let broken = out("broken.exr");
    let bytes = std::fs::read(&input).unwrap();
    std::fs::write(&broken, &bytes[..bytes.len() / 2]).unwrap();
    for op in [
        &["slice", "--far", "6"][..],
        &["crop", "--box", "0,0,3,3"],
        &["transform"],
    ] {
        let mut args = op.to_vec();
        args.insert(1, s(&broken));
        args.extend(["-o", s(&target)]);
        let (ok, _, err) = run(&args);
        assert!(
            !ok && err.contains("broken.exr") && err.lines().count() == 1,
            "{op:?}: {err}"
        );
        assert!(!target.exists());
    }
}

#[test]
fn operations_run_from_the_cli_with_the_merge_output_options() {
    let dir = tempfile::tempdir().unwrap();
    let input = data("oiio/input-crop.deep.exr");
    let out = dir.path().join("s.exr");
    let (ok, _, err) = run(&[
        "slice",
        s(&input),
        "--near",
        "6.24",
        "--compression",
        "none",
        "--no-deep-state",
        "--band-rows",
        "5",
        "-o",
        s(&out),
    ]);
    assert!(ok, "{err}");
    let slice = Slice::new(Some(6.24), None, false).unwrap();
    let want = apply(&slice, &read(&input, 0));
    let got = read(&out, 0);
    assert_eq!(got.planes, want.planes);
    assert_eq!(got.state, DeepState::Messy, "no deepImageState: messy");
    let preview = dir.path().join("s.png");
    let (ok, _, err) = run(&["crop", s(&input), "--box", "0,0,9,9", "-o", s(&preview)]);
    assert!(ok, "{err}");
    assert_eq!(&std::fs::read(&preview).unwrap()[1..4], b"PNG");
}

// ---------------------------------------------------------------------------------------------
// Peers: oiiotool --crop and --flatten on the corpus

/// Read a flat EXR's float channel with the `exr` crate (independent of our code), as
/// (x0, y0, width, values).
fn read_flat_channel(path: &Path, name: &str) -> (i32, i32, usize, Vec<f32>) {
    let image = exr::prelude::read_all_flat_layers_from_file(path).unwrap();
    let layer = &image.layer_data[0];
    let c = layer
        .channel_data
        .list
        .iter()
        .find(|c| c.name.to_string() == name)
        .unwrap_or_else(|| panic!("{} has no {name}", path.display()));
    (
        layer.attributes.layer_position.x(),
        layer.attributes.layer_position.y(),
        layer.size.x(),
        c.sample_data.values_as_f32().collect(),
    )
}

#[test]
fn crop_matches_oiiotool_crop_sample_for_sample() {
    let dir = tempfile::tempdir().unwrap();
    for (file, area) in [
        ("oiio/input-crop.deep.exr", "3,4,20,30"),
        ("openexr-images/Balls.exr", "100,150,600,400"),
        ("oiio/deepalpha.exr", "70,20,140,110"),
    ] {
        let input = data(file);
        let theirs = dir.path().join("oiio.exr");
        let status = common::oiiotool()
            .arg(&input)
            .args(["--crop", area, "-o"])
            .arg(&theirs)
            .status()
            .unwrap();
        assert!(status.success(), "oiiotool --crop on {file}");
        let ours = dir.path().join("ours.exr");
        let (ok, _, err) = run(&["crop", s(&input), "--box", area, "-o", s(&ours)]);
        assert!(ok, "{err}");
        let (a, b) = (read(&ours, 0), read(&theirs, 0));
        // oiiotool's window is the box itself (empty pixels where it leaves the input); ours
        // shrinks to what remains, the box cut to the input's data window.
        let (wa, wb) = (a.data_window, b.data_window);
        assert_eq!(wb, Crop::parse(area, false).unwrap().area, "{file}");
        assert!(wa.x0 >= wb.x0 && wa.y0 >= wb.y0 && wa.x1 <= wb.x1 && wa.y1 <= wb.y1);
        let mut compared = 0;
        for y in wb.y0..=wb.y1 {
            for x in wb.x0..=wb.x1 {
                let q = b.pixel_index(x, y).unwrap();
                let Some(p) = a.pixel_index(x, y) else {
                    assert_eq!(b.count(q), 0, "{file}: oiiotool has samples at ({x}, {y})");
                    continue;
                };
                assert_eq!(a.count(p), b.count(q), "{file}: samples at ({x}, {y})");
                for channel in &a.channels {
                    // oiiotool stores every channel as float; ours keeps the input's types.
                    let (ca, cb) = (
                        a.channel_index(&channel.name).unwrap(),
                        b.channel_index(&channel.name).unwrap(),
                    );
                    for (i, j) in a.range(p).zip(b.range(q)) {
                        assert_eq!(
                            a.planes[ca].get_f32(i).to_bits(),
                            b.planes[cb].get_f32(j).to_bits(),
                            "{file} ({x}, {y})"
                        );
                        compared += 1;
                    }
                }
            }
        }
        assert!(compared > 1000, "{file}: {compared} values compared");
    }
}

#[test]
fn flatten_matches_oiiotool_flatten_but_where_samples_share_a_depth() {
    let dir = tempfile::tempdir().unwrap();
    let input = data("openexr-images/Balls.exr");
    let theirs = dir.path().join("oiio.exr");
    let status = common::oiiotool()
        .arg(&input)
        .args(["--flatten", "-o"])
        .arg(&theirs)
        .status()
        .unwrap();
    assert!(status.success());
    let ours = dir.path().join("ours.exr");
    let (ok, _, err) = run(&["flatten", s(&input), "-o", s(&ours)]);
    assert!(ok, "{err}");
    let mut differing = std::collections::BTreeSet::new();
    for channel in ["R", "G", "B", "A"] {
        let (x0, y0, w, a) = read_flat_channel(&ours, channel);
        let (x1, y1, w1, b) = read_flat_channel(&theirs, channel);
        assert_eq!((x0, y0, w, a.len()), (x1, y1, w1, b.len()));
        for (i, (p, q)) in a.iter().zip(&b).enumerate() {
            if (p - q).abs() > 1e-3 {
                differing.insert(i);
            }
        }
    }
    // oiiotool blends samples that share a Z; the merge composites them in order. Balls has
    // 15 pixels with two samples at one depth (tests/data/PROVENANCE.md).
    assert!(differing.len() <= 15, "{} pixels differ", differing.len());
}

// ---------------------------------------------------------------------------------------------
// The merge's --drop-transparent and --drop-hidden

fn alpha_sum(image: &DeepImage) -> usize {
    plane_f32(image, "A").iter().filter(|&&a| a <= 1e-7).count()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn drop_hidden_keeps_the_composite_and_never_adds_samples(
        a in arb_image(), b in arb_image(), threshold in 1u32..=20
    ) {
        let merged = deep_merge(&[&a, &b]);
        let pruned = deepmerge::composite::prune::drop_hidden(&merged, 1.0);
        prop_assert!(pruned.sample_count() <= merged.sample_count());
        let worst = flat_difference(&flat(&[&pruned]), &flat(&[&merged]));
        prop_assert!(worst < 1e-6, "composite changed by {}", worst);
        // A lower threshold drops at least as much, and only from the back of each pixel.
        let lower = deepmerge::composite::prune::drop_hidden(&merged, threshold as f32 / 20.0);
        prop_assert!(lower.sample_count() <= pruned.sample_count());
        for p in 0..merged.pixel_count() {
            let kept = lower.count(p);
            for (i, j) in merged.range(p).zip(lower.range(p)) {
                for c in 0..merged.channels.len() {
                    prop_assert_eq!(merged.planes[c].get_f32(i).to_bits(),
                        lower.planes[c].get_f32(j).to_bits(), "pixel {} keeps a prefix", p);
                }
            }
            prop_assert!(kept <= merged.count(p));
        }
    }

    #[test]
    fn drop_transparent_drops_exactly_the_transparent_samples(input in arb_image()) {
        let kept = deepmerge::composite::prune::drop_transparent(&input, 1e-7);
        prop_assert_eq!(kept.sample_count(), input.sample_count() - alpha_sum(&input));
        prop_assert!(plane_f32(&kept, "A").iter().all(|&a| a > 1e-7));
    }
}

#[test]
fn drop_hidden_counts_only_the_samples_wholly_in_front() {
    use deepmerge::composite::prune::drop_hidden;
    // A volume from 1.5 to 4 (alpha 0.9), then an opaque and a clear point at 1.75. The opaque
    // point hides the clear one at its depth whatever the threshold; the volume hides nothing
    // alone, as nothing lies wholly behind it. (Found by the property above: a rule that cut at
    // the back of the first sample to reach the threshold kept more at a lower threshold.)
    let pixel = vec![
        volume(1.5, 4.0, 0.9, [0.45, 0.0, 0.0]),
        volume(1.75, 1.75, 1.0, [0.5, 0.0, 0.0]),
        volume(1.75, 1.75, 0.0, [0.0, 0.0, 0.0]),
    ];
    let input = image(1, &[pixel], DeepState::Sorted);
    for threshold in [0.05, 0.5, 1.0] {
        let kept = drop_hidden(&input, threshold);
        assert_eq!(plane_f32(&kept, "Z"), [1.5, 1.75], "threshold {threshold}");
    }
    // A sample inside the volume, behind a half-transparent point: at 0.9 it shows (the part of
    // the volume in front of it is thinner than the whole), at 0.5 the point alone hides it.
    let pixel = vec![
        volume(1.5, 4.0, 0.9, [0.45, 0.0, 0.0]),
        volume(1.75, 1.75, 0.5, [0.25, 0.0, 0.0]),
        volume(2.0, 2.0, 1.0, [1.0, 0.0, 0.0]),
    ];
    let input = image(1, &[pixel], DeepState::Sorted);
    assert_eq!(plane_f32(&drop_hidden(&input, 0.9), "Z"), [1.5, 1.75, 2.0]);
    assert_eq!(plane_f32(&drop_hidden(&input, 0.5), "Z"), [1.5, 1.75]);
}

#[test]
fn drop_options_from_the_cli_give_the_same_bytes_on_both_engines() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        data("oiio/input-crop.deep.exr"),
        data("oiio/holdout-crop.deep.exr"),
    );
    let plain = dir.path().join("plain.exr");
    let (ok, _, err) = run(&[
        s(&a),
        s(&b),
        "--deep",
        "-q",
        "--backend",
        "cpu",
        "-o",
        s(&plain),
    ]);
    assert!(ok, "{err}");
    let mut outputs = Vec::new();
    for backend in ["cpu", "gl"] {
        let out = dir.path().join(format!("{backend}.exr"));
        let mut args = vec![s(&a), s(&b), "--deep", "--tidy", "-q", "--backend", backend];
        if backend == "gl" {
            // The host's sort and tidy, so that the engines' own bytes agree too.
            args.extend(["--gpu-stages", "host"]);
        }
        args.extend(["-o", s(&out), "--drop-transparent", "--drop-hidden"]);
        let (ok, _, err) = run(&args);
        assert!(ok, "{backend}: {err}");
        outputs.push(std::fs::read(&out).unwrap());
    }
    assert!(outputs[0] == outputs[1], "the engines differ");
    let pruned = read(&dir.path().join("cpu.exr"), 0);
    let whole = read(&plain, 0);
    assert!(
        pruned.sample_count() < whole.sample_count(),
        "something was dropped"
    );
    let worst = flat_difference(&flat(&[&pruned]), &flat(&[&whole]));
    assert!(worst < 1e-3, "the composite changed by {worst}");
    // On flat output --drop-hidden has nothing to do: refused.
    let (ok, _, err) = run(&[
        s(&a),
        s(&b),
        "--drop-hidden",
        "-o",
        s(&dir.path().join("f.exr")),
    ]);
    assert!(!ok && err.contains("applies to deep output"), "{err}");
}

#[test]
fn heatmap_refuses_a_name_that_is_not_png() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("hm.exr");
    let input = data("oiio/input-crop.deep.exr");
    let output = common::deepmerge()
        .args(["heatmap", s(&input), "-o", s(&out)])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.contains("name it *.png"), "{err}");
    assert!(!out.exists());
}
