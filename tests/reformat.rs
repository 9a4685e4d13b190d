//! `reformat` (`deepmerge::ops::Reformat`, the `reformat` command): the box filter commutes
//! with flattening, `flatten(reformat(D)) = resize(flatten(D))` within 1e-5, on real files
//! (their channels promoted to float, so the stored type's rounding does not hide a mistake)
//! and random ones with volumes and coincident points, downscaling, upscaling and odd ratios;
//! the resize of the reference is written here (area-weighted box); `nearest` copies one
//! pixel's samples bit for bit; the streamed command equals the whole-image operation for
//! any band height; the gather limit is refused in one line.

mod common;

use std::path::Path;

use common::{data, read, run, synthetic};
use deepmerge::composite::{merge_images, MergeOptions, MergeOutput};
use deepmerge::deep::{Bounds, Channel, DeepImage, DeepState, FlatImage, Plane, SampleType};
use deepmerge::ops::reformat::DEFAULT_MAX_GATHER;
use deepmerge::ops::{DeepOp, Filter, Reformat};
use deepmerge::scene::SceneRng;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `image` with every float channel stored as float.
fn promoted(image: &DeepImage) -> DeepImage {
    let mut out = image.clone();
    for (channel, plane) in out.channels.iter_mut().zip(&mut out.planes) {
        if let Plane::F16(values) = plane {
            *plane = Plane::F32(values.iter().map(|v| v.to_f32()).collect());
            *channel = Channel::new(channel.name.clone(), SampleType::F32);
        }
    }
    out
}

fn flatten(image: &DeepImage) -> FlatImage {
    match merge_images(&[image], &MergeOptions::default()).unwrap() {
        MergeOutput::Flat(flat) => flat,
        MergeOutput::Deep(_) => unreachable!("flat asked for"),
    }
}

fn reformat(image: &DeepImage, size: &str, filter: Filter) -> DeepImage {
    let op = Reformat::new(Some(size), None, filter, DEFAULT_MAX_GATHER).unwrap();
    let windows = op.windows(image.data_window, image.display_window).unwrap();
    let out = op.apply(image, &windows).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.data_window, windows.data);
    out
}

/// The box resize of a flat channel from `from` (input data window, display window `display`)
/// to an output of display size `w` x `h` over `to`: each output pixel is the average of the
/// input over its footprint, input pixels weighted by the area they share with it, outside the
/// data window 0. Written from the definition, independently of the library's geometry.
fn box_resize(
    values: &[f32],
    from: Bounds,
    display: Bounds,
    (w, h): (usize, usize),
    to: Bounds,
) -> Vec<f64> {
    let (sx, sy) = (
        display.width() as f64 / w as f64,
        display.height() as f64 / h as f64,
    );
    let mut out = Vec::with_capacity(to.area());
    for y in to.y0..=to.y1 {
        let (fy0, fy1) = (
            display.y0 as f64 + (y - display.y0) as f64 * sy,
            display.y0 as f64 + (y + 1 - display.y0) as f64 * sy,
        );
        for x in to.x0..=to.x1 {
            let (fx0, fx1) = (
                display.x0 as f64 + (x - display.x0) as f64 * sx,
                display.x0 as f64 + (x + 1 - display.x0) as f64 * sx,
            );
            let mut sum = 0.0;
            for iy in from.y0..=from.y1 {
                let oy = (fy1.min(iy as f64 + 1.0) - fy0.max(iy as f64)).max(0.0);
                if oy == 0.0 {
                    continue;
                }
                for ix in from.x0..=from.x1 {
                    let ox = (fx1.min(ix as f64 + 1.0) - fx0.max(ix as f64)).max(0.0);
                    if ox > 0.0 {
                        let p = from.index_of(ix, iy).unwrap();
                        sum += values[p] as f64 * ox * oy;
                    }
                }
            }
            out.push(sum / (sx * sy));
        }
    }
    out
}

/// flatten(reformat(D)) against resize(flatten(D)) for every flat channel.
fn check_commutes(image: &DeepImage, size: &str, what: &str) {
    let (w, h) = size.split_once('x').unwrap();
    let (w, h): (usize, usize) = (w.parse().unwrap(), h.parse().unwrap());
    let out = reformat(image, size, Filter::Box);
    assert!(
        out.state == DeepState::Tidy || out.sample_count() == 0,
        "{what}: tidy output"
    );
    let flat_out = flatten(&out);
    let flat_in = flatten(image);
    let mut worst = 0.0f64;
    for channel in &flat_in.channels {
        // uint ids are taken, not averaged: only the composited channels resize.
        let Some(values) = flat_in.channel(&channel.name) else {
            continue;
        };
        let expected = box_resize(
            values,
            flat_in.data_window,
            image.display_window,
            (w, h),
            out.data_window,
        );
        let got = flat_out.channel(&channel.name).unwrap_or_else(|| {
            panic!("{what}: output lacks {}", channel.name);
        });
        for (p, (&g, &e)) in got.iter().zip(&expected).enumerate() {
            let diff = (g as f64 - e).abs();
            worst = worst.max(diff);
            assert!(
                diff <= 1e-5,
                "{what}: {} at {:?}: flatten(reformat) {g} vs resize(flatten) {e}",
                channel.name,
                out.data_window.coords_of(p)
            );
        }
    }
    eprintln!("{what} -> {size}: worst difference {worst:.2e}");
}

#[test]
fn the_box_filter_commutes_with_flattening_on_real_files() {
    for (file, sizes) in [
        (
            "openexr-images/Balls.exr",
            &["256x144", "100x57", "2048x1152"][..],
        ),
        ("oiio/input-crop.deep.exr", &["16x16", "11x7", "45x45"][..]),
        ("oiio/deepalpha.exr", &["80x60", "37x29"][..]),
        ("openexr/multivariate.deep.exr", &["13x9"][..]),
    ] {
        let image = promoted(&read(&data(file), 0));
        for size in sizes {
            check_commutes(&image, size, file);
        }
    }
}

/// A random image with volumes that overlap within a pixel, coincident points and opaque
/// samples, over a data window wider than the display window (overscan).
fn random_image(seed: u64) -> DeepImage {
    let mut rng = SceneRng::new(seed, "reformat");
    let mut next = move || rng.below(10_000) as f32 / 10_000.0;
    let display = Bounds::from_origin_size(0, 0, 9, 7);
    let window = Bounds {
        x0: -2,
        y0: -1,
        x1: 10,
        y1: 7,
    };
    let names = ["A", "B", "G", "R", "Z", "ZBack"];
    let mut counts = Vec::new();
    let mut columns: Vec<Vec<f32>> = vec![Vec::new(); names.len()];
    for _ in 0..window.area() {
        let n = (next() * 6.0) as u32;
        counts.push(n);
        for _ in 0..n {
            let z = (next() * 8.0).floor() * 0.5 + 1.0;
            let thick = if next() < 0.4 {
                0.0
            } else {
                0.25 + next() * 2.0
            };
            let a = if next() < 0.1 { 1.0 } else { next() * 0.8 };
            let rgb = [next() * a, next() * a, next() * a];
            for (k, v) in [a, rgb[2], rgb[1], rgb[0], z, z + thick]
                .into_iter()
                .enumerate()
            {
                columns[k].push(v);
            }
        }
    }
    let channels = names
        .iter()
        .map(|n| Channel::new(*n, SampleType::F32))
        .collect();
    let planes = columns.into_iter().map(Plane::F32).collect();
    DeepImage::from_counts(display, window, channels, &counts, planes, DeepState::Messy).unwrap()
}

#[test]
fn the_box_filter_commutes_with_flattening_on_random_images() {
    for seed in 0..12 {
        let image = random_image(seed);
        for size in ["4x3", "9x7", "5x6", "20x15", "1x1"] {
            check_commutes(&image, size, &format!("random seed {seed}"));
        }
    }
    let half = promoted(&synthetic(Bounds::from_origin_size(0, 0, 13, 11), 5, |i| {
        (i % 7) as u32
    }));
    check_commutes(&half, "6x5", "synthetic");
}

#[test]
fn nearest_copies_one_pixel_bit_for_bit() {
    let image = read(&data("openexr-images/Balls.exr"), 0);
    let out = reformat(&image, "300x100", Filter::Nearest);
    let (w, h) = (
        image.display_window.width() as i64,
        image.display_window.height() as i64,
    );
    let mut copied = 0;
    for p in 0..out.pixel_count() {
        let (x, y) = out.data_window.coords_of(p);
        // The input pixel under the output pixel's centre.
        let ix = ((2 * x as i64 + 1) * w).div_euclid(2 * 300) as i32;
        let iy = ((2 * y as i64 + 1) * h).div_euclid(2 * 100) as i32;
        let source: Vec<usize> = image
            .pixel_index(ix, iy)
            .map(|q| image.range(q).collect())
            .unwrap_or_default();
        let got: Vec<usize> = out.range(p).collect();
        assert_eq!(got.len(), source.len(), "pixel ({x}, {y})");
        for (&i, &j) in got.iter().zip(&source) {
            for (a, b) in out.planes.iter().zip(&image.planes) {
                assert_eq!(a.get_f32(i).to_bits(), b.get_f32(j).to_bits());
            }
        }
        copied += got.len();
    }
    assert!(copied > 0);
    assert_eq!(out.display_window, Bounds::from_origin_size(0, 0, 300, 100));
}

#[test]
fn the_streamed_command_equals_the_whole_image_for_any_band_height() {
    let dir = tempfile::tempdir().unwrap();
    for (file, size, filter) in [
        ("oiio/input-crop.deep.exr", "11x7", "box"),
        ("oiio/input-crop.deep.exr", "45x45", "box"),
        ("oiio/input-crop.deep.exr", "9x20", "nearest"),
        // Tiled; a nearest reduction whose last input rows no output row reads.
        ("oiio/deepalpha.exr", "37x29", "nearest"),
        ("oiio/deepalpha.exr", "160x7", "nearest"),
        ("oiio/deepalpha.exr", "333x250", "box"),
    ] {
        let input = data(file);
        let image = read(&input, 0);
        let whole = reformat(
            &image,
            size,
            if filter == "box" {
                Filter::Box
            } else {
                Filter::Nearest
            },
        );
        for rows in ["1", "2", "5", "64"] {
            let out = dir.path().join(format!("{size}-{rows}.exr"));
            let (ok, _, err) = run(&[
                "reformat",
                s(&input),
                "-o",
                s(&out),
                "--size",
                size,
                "--filter",
                filter,
                "--band-rows",
                rows,
            ]);
            assert!(ok, "{size} {rows}: {err}");
            let streamed = read(&out, 0);
            assert_eq!(streamed.data_window, whole.data_window, "{size} {rows}");
            assert_eq!(streamed.counts(), whole.counts(), "{size} {rows}");
            for (c, channel) in whole.channels.iter().enumerate() {
                let k = streamed.channel_index(&channel.name).unwrap();
                assert_eq!(
                    streamed.planes[k], whole.planes[c],
                    "{size} {rows} {}",
                    channel.name
                );
            }
        }
    }
}

#[test]
fn bad_arguments_and_a_gather_over_the_limit_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let input = data("openexr-images/Balls.exr");
    let out = dir.path().join("o.exr");
    let cases: [(&[&str], &str); 6] = [
        (&["--size", "0x10"], "--size takes"),
        (&["--scale", "0"], "--scale must be"),
        (&["--scale", "-2"], "--scale must be"),
        (&["--scale", "100000"], "is refused"),
        (&["--size", "8x4", "--max-gather", "100"], "would gather"),
        (
            &["--scale", "200", "--memory-budget", "256MiB"],
            "over the memory budget",
        ),
    ];
    for (args, says) in cases {
        let mut all = vec!["reformat", s(&input), "-o", s(&out)];
        all.extend_from_slice(args);
        let (ok, _, err) = run(&all);
        assert!(!ok, "{args:?}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(!out.exists(), "{args:?} wrote a file");
    }
}
