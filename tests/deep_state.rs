//! `deepImageState` as OpenEXR defines it (`ImfDeepImageState.h`): every written deep file is read
//! back and each of its pixels checked against the state its header stamps, by the definitions
//! word for word over every pair of samples ([`check_stamped_state`], independent of the
//! writer's one-pass check). On real corpus merges that hold coincident samples, through the CLI
//! on both engines (the GL engine with its GPU tidy and with its host stages), and on synthetic
//! edge cases written by the library's writers, whole and band by band.
//!
//! Every case also states the stamp it expects, so a writer that claimed nothing ("messy")
//! everywhere would fail here too.

mod common;

use std::path::{Path, PathBuf};

use common::{data, run, synthetic};
use deepmerge::deep::{Bounds, Channel, ChannelRole, DeepImage, DeepState, Plane, SampleType};
use deepmerge::exr::{
    read_deep, write_deep, write_deep_with, Codec, DeepChunkWriter, DeepWriteOptions, ReadOptions,
};

/// OpenEXR's SORTED for one pixel: for every i < j, `Z[i] < Z[j]` or `Z[i] == Z[j]` and
/// `ZBack[i] < ZBack[j]`.
fn pixel_sorted(z: &[f32], zb: &[f32]) -> bool {
    let n = z.len();
    (0..n).all(|i| (i + 1..n).all(|j| z[i] < z[j] || (z[i] == z[j] && zb[i] < zb[j])))
}

/// OpenEXR's NON_OVERLAPPING for one pixel, every ordered pair i ≠ j.
fn pixel_non_overlapping(z: &[f32], zb: &[f32]) -> bool {
    let n = z.len();
    (0..n).all(|i| {
        (0..n).filter(|&j| j != i).all(|j| {
            (z[i] < z[j] && zb[i] <= z[j])
                || (z[j] < z[i] && zb[j] <= z[i])
                || (z[i] == z[j] && zb[i] <= z[i] && zb[j] > z[j])
                || (z[i] == z[j] && zb[j] <= z[j] && zb[i] > z[i])
        })
    })
}

/// What a file's pixels hold, counted.
#[derive(Debug, Default)]
struct Census {
    /// Pixels that are not SORTED.
    unsorted: usize,
    /// Pixels that are not NON_OVERLAPPING.
    overlapping: usize,
    /// Pixels holding two samples with equal (Z, ZBack).
    coincident: usize,
    samples: usize,
}

/// Read `path` back, check every pixel against the state its header stamps (no Z channel: Z is
/// 0; no ZBack: ZBack is Z) and return the stamp with what the pixels hold.
fn check_stamped_state(path: &Path) -> (DeepState, Census) {
    let image = read_deep(path, &ReadOptions::default()).unwrap();
    let plane = |role| {
        image
            .channels
            .iter()
            .position(|c| c.role == role)
            .map(|c| &image.planes[c])
    };
    let (z_plane, zb_plane) = (plane(ChannelRole::Z), plane(ChannelRole::ZBack));
    let stamped = image.state;
    let mut census = Census {
        samples: image.sample_count(),
        ..Census::default()
    };
    for p in 0..image.pixel_count() {
        let range = image.range(p);
        let z: Vec<f32> = range
            .clone()
            .map(|i| z_plane.map_or(0.0, |z| z.get_f32(i)))
            .collect();
        let zb: Vec<f32> = range
            .clone()
            .enumerate()
            .map(|(k, i)| zb_plane.map_or(z[k], |zb| zb.get_f32(i)))
            .collect();
        let sorted = pixel_sorted(&z, &zb);
        let non_overlapping = pixel_non_overlapping(&z, &zb);
        let coincident =
            (0..z.len()).any(|i| (i + 1..z.len()).any(|j| z[i] == z[j] && zb[i] == zb[j]));
        census.unsorted += usize::from(!sorted);
        census.overlapping += usize::from(!non_overlapping);
        census.coincident += usize::from(coincident);
        let (x, y) = image.data_window.coords_of(p);
        let what = format!("{}: pixel ({x}, {y}) {z:?} {zb:?}", path.display());
        if stamped.is_sorted() {
            assert!(sorted, "{what} is not sorted, yet stamped {stamped:?}");
        }
        if stamped.is_non_overlapping() {
            assert!(non_overlapping, "{what} overlaps, yet stamped {stamped:?}");
        }
    }
    (stamped, census)
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// The engines as the CLI picks them: the CPU engine, the GL engine with its GPU sort and tidy
/// (`tidy.comp`), and the GL engine with the host stages (what `auto` picks on llvmpipe).
const ENGINES: [&[&str]; 3] = [
    &["--backend", "cpu"],
    &["--backend", "gl", "--gpu-stages", "gpu"],
    &["--backend", "gl", "--gpu-stages", "host"],
];

/// Merge `inputs` with `extra` options through the CLI into `out`.
fn merge(inputs: &[PathBuf], extra: &[&str], out: &Path) {
    let mut args: Vec<&str> = inputs.iter().map(|p| s(p)).collect();
    args.extend_from_slice(extra);
    args.extend_from_slice(&["-q", "-o", s(out)]);
    let (ok, _, err) = run(&args);
    assert!(ok, "{args:?}: {err}");
}

/// Every sample of a deep file: per pixel, its (Z, ZBack) and every channel's value.
fn samples_of(path: &Path) -> (Vec<u32>, Vec<Vec<f32>>) {
    let image = read_deep(path, &ReadOptions::default()).unwrap();
    let values = image
        .planes
        .iter()
        .map(|p| (0..p.len()).map(|i| p.get_f32(i)).collect())
        .collect();
    (image.counts(), values)
}

#[test]
fn corpus_merges_with_coincident_samples_stamp_what_their_pixels_hold() {
    let dir = tempfile::tempdir().unwrap();
    // Balls, Leaves and Trunks hold pixels with two samples at one Z (points: no ZBack); 11 and
    // multivariate share thousands of samples, ids and half Z included.
    let corpora = [
        (
            "balls-leaves-trunks",
            vec![
                data("openexr-images/Balls.exr"),
                data("openexr-images/Leaves.exr"),
                data("openexr-images/Trunks.exr"),
            ],
        ),
        (
            "11-multivariate",
            vec![
                data("openexr/11.deep.exr"),
                data("openexr/multivariate.deep.exr"),
            ],
        ),
    ];
    for (name, inputs) in &corpora {
        let mut tidy_outputs = Vec::new();
        for engine in ENGINES {
            let what = format!("{name} {engine:?}");
            // Plain deep output keeps the coincident samples: not sorted by OpenEXR's
            // definition (equal keys), and not non-overlapping, so messy.
            let plain = dir.path().join(format!("{name}-plain.exr"));
            merge(inputs, &[&["--deep"], engine].concat(), &plain);
            let (stamped, census) = check_stamped_state(&plain);
            assert!(census.coincident > 0, "{what}: {census:?}");
            assert_eq!(census.unsorted, census.coincident, "{what}: {census:?}");
            assert_eq!(stamped, DeepState::Messy, "{what}: {census:?}");
            // The tidy output merges them and is stamped tidy, which every pixel is.
            let tidy = dir
                .path()
                .join(format!("{name}-tidy-{}.exr", tidy_outputs.len()));
            merge(inputs, &[&["--deep", "--tidy"], engine].concat(), &tidy);
            let (stamped, tidy_census) = check_stamped_state(&tidy);
            assert_eq!(stamped, DeepState::Tidy, "{what}: {tidy_census:?}");
            assert_eq!(tidy_census.coincident, 0, "{what}");
            assert!(tidy_census.samples < census.samples, "{what}");
            eprintln!(
                "{what}: {} pixels with coincident samples, {} samples plain, {} tidy",
                census.coincident, census.samples, tidy_census.samples
            );
            tidy_outputs.push(tidy);
        }
        // The engines agree on the tidy output: the same samples, values within the GPU
        // tidy's f32 tolerance of the reference.
        let (counts, values) = samples_of(&tidy_outputs[0]);
        for other in &tidy_outputs[1..] {
            let (other_counts, other_values) = samples_of(other);
            assert_eq!(other_counts, counts, "{name}: {}", other.display());
            for (a, b) in values.iter().flatten().zip(other_values.iter().flatten()) {
                assert!(
                    (a - b).abs() <= 1e-5 * a.abs().max(1.0),
                    "{name}: {a} vs {b}"
                );
            }
        }
    }
}

#[test]
fn merges_without_coincident_samples_stay_sorted() {
    // Two synthetic inputs whose depths never tie: plain deep output is sorted (strictly), on
    // both engines.
    let dir = tempfile::tempdir().unwrap();
    let window = Bounds::from_origin_size(0, 0, 24, 17);
    let inputs: Vec<PathBuf> = (0..2)
        .map(|k| {
            let path = dir.path().join(format!("in{k}.exr"));
            let image = synthetic(window, 7 + k, |p| (p % 5) as u32);
            write_deep(&path, &image, Codec::Zips).unwrap();
            path
        })
        .collect();
    for engine in ENGINES {
        let out = dir.path().join("sorted.exr");
        merge(&inputs, &[&["--deep"], engine].concat(), &out);
        let (stamped, census) = check_stamped_state(&out);
        assert_eq!(census.coincident, 0, "{engine:?}");
        assert_eq!(stamped, DeepState::Sorted, "{engine:?}: {census:?}");
    }
}

/// A one-row image of `pixels` (each a list of (Z, ZBack, A)), channels A, Z, ZBack (all float),
/// claiming `state`.
fn row_image(pixels: &[Vec<(f32, f32, f32)>], state: DeepState) -> DeepImage {
    image_of(
        Bounds::from_origin_size(0, 0, pixels.len(), 1),
        pixels,
        state,
    )
}

/// [`row_image`] over `window` (pixels in row-major order).
fn image_of(window: Bounds, pixels: &[Vec<(f32, f32, f32)>], state: DeepState) -> DeepImage {
    let channels = vec![
        Channel::new("A", SampleType::F32),
        Channel::new("Z", SampleType::F32),
        Channel::new("ZBack", SampleType::F32),
    ];
    let counts: Vec<u32> = pixels.iter().map(|p| p.len() as u32).collect();
    let all: Vec<(f32, f32, f32)> = pixels.iter().flatten().copied().collect();
    let planes = vec![
        Plane::F32(all.iter().map(|s| s.2).collect()),
        Plane::F32(all.iter().map(|s| s.0).collect()),
        Plane::F32(all.iter().map(|s| s.1).collect()),
    ];
    DeepImage::from_counts(window, window, channels, &counts, planes, state).unwrap()
}

/// What a case is, its pixels (each a list of (Z, ZBack, A)), the claim written and the stamp
/// expected.
type EdgeCase = (
    &'static str,
    Vec<Vec<(f32, f32, f32)>>,
    DeepState,
    DeepState,
);

#[test]
fn edge_cases_are_stamped_by_the_definition() {
    use DeepState::*;
    let dir = tempfile::tempdir().unwrap();
    let inf = f32::INFINITY;
    let tidy_pixels = vec![
        vec![],
        vec![(1.0, 1.0, 0.5)],
        // A point at a volume's front and one at its back are allowed.
        vec![(1.0, 1.0, 0.5), (1.0, 2.0, 0.5), (2.0, 2.0, 0.5)],
        // Volumes end to end, an infinite one last.
        vec![(0.0, 1.0, 0.5), (1.0, 3.0, 0.5), (3.0, inf, 0.5)],
        // A point stored with ZBack < Z, then a volume from the same Z.
        vec![(2.0, 1.5, 0.5), (2.0, 4.0, 0.5)],
    ];
    let cases: Vec<EdgeCase> = vec![
        ("tidy pixels", tidy_pixels.clone(), Tidy, Tidy),
        (
            "tidy pixels claimed sorted",
            tidy_pixels.clone(),
            Sorted,
            Sorted,
        ),
        ("tidy pixels claimed messy", tidy_pixels, Messy, Messy),
        (
            "coincident points",
            vec![vec![(1.0, 1.0, 0.5), (1.0, 1.0, 0.25)], vec![]],
            Tidy,
            Messy,
        ),
        (
            "-0.0 and 0.0 are one depth",
            vec![vec![(-0.0, -0.0, 0.5), (0.0, 0.0, 0.25)]],
            Tidy,
            Messy,
        ),
        (
            "identical volumes",
            vec![vec![(1.0, 2.0, 0.5), (1.0, 2.0, 0.25)]],
            Sorted,
            Messy,
        ),
        (
            "a point inside a volume",
            vec![vec![(1.0, 3.0, 0.5), (2.0, 2.0, 0.25)]],
            Tidy,
            Sorted,
        ),
        (
            "overlapping volumes",
            vec![
                vec![(1.0, 3.0, 0.5), (2.0, 4.0, 0.25)],
                vec![(0.0, 0.0, 1.0)],
            ],
            Tidy,
            Sorted,
        ),
        (
            "two points stored with ZBack < Z at one Z",
            vec![vec![(2.0, 1.0, 0.5), (2.0, 1.5, 0.25)]],
            Tidy,
            Sorted,
        ),
        (
            "non-overlapping out of order",
            vec![vec![(3.0, 4.0, 0.5), (1.0, 2.0, 0.25), (2.0, 2.0, 0.5)]],
            Tidy,
            NonOverlapping,
        ),
        (
            "out of order, claimed non-overlapping",
            vec![vec![(3.0, 4.0, 0.5), (1.0, 2.0, 0.25)]],
            NonOverlapping,
            NonOverlapping,
        ),
        (
            "out of order and coincident",
            vec![vec![(3.0, 3.0, 0.5), (1.0, 1.0, 0.25), (3.0, 3.0, 0.5)]],
            NonOverlapping,
            Messy,
        ),
    ];
    for (what, pixels, claim, want) in cases {
        let image = row_image(&pixels, claim);
        let path = dir.path().join("edge.exr");
        write_deep(&path, &image, Codec::Zips).unwrap();
        let (stamped, _) = check_stamped_state(&path);
        assert_eq!(stamped, want, "{what}");
        // The streaming writer, one pixel row at a time, stamps the same.
        let streamed = dir.path().join("edge-streamed.exr");
        let mut writer =
            DeepChunkWriter::create(&streamed, image.data_window, &DeepWriteOptions::default())
                .unwrap();
        writer.write_band(&image).unwrap();
        writer.finish().unwrap();
        assert_eq!(
            std::fs::read(&streamed).unwrap(),
            std::fs::read(&path).unwrap(),
            "{what}"
        );
    }
}

#[test]
fn without_z_every_sample_is_at_depth_zero() {
    // No Z channel: samples sit at Z = 0, so two in one pixel coincide.
    let dir = tempfile::tempdir().unwrap();
    let window = Bounds::from_origin_size(0, 0, 2, 1);
    let image = |counts: &[u32]| {
        let total = counts.iter().sum::<u32>() as usize;
        DeepImage::from_counts(
            window,
            window,
            vec![Channel::new("A", SampleType::F32)],
            counts,
            vec![Plane::F32(vec![0.5; total])],
            DeepState::Tidy,
        )
        .unwrap()
    };
    let path = dir.path().join("noz.exr");
    for (counts, want) in [([1, 0], DeepState::Tidy), ([1, 2], DeepState::Messy)] {
        write_deep(&path, &image(&counts), Codec::Zips).unwrap();
        assert_eq!(check_stamped_state(&path).0, want, "{counts:?}");
    }
}

#[test]
fn streamed_bands_stamp_what_every_band_holds() {
    // 64 rows written in bands of 10, 20, 30 and 4 rows: only the last band holds coincident
    // points, so the file cannot keep the tidy claim its header was started with. With ZIP's 16
    // lines per chunk the band edges fall inside chunks, so the writer holds partial chunks too.
    let dir = tempfile::tempdir().unwrap();
    let width = 5;
    let pixels = |coincident: bool| -> Vec<Vec<(f32, f32, f32)>> {
        (0..64 * width)
            .map(|p| {
                let z = 1.0 + (p % width + p / width) as f32;
                let second = if coincident && p == 60 * width + 3 {
                    z
                } else {
                    z + 0.5
                };
                vec![(z, z, 0.5), (second, second, 0.5)]
            })
            .collect()
    };
    let window = Bounds::from_origin_size(0, 0, width, 64);
    for coincident in [true, false] {
        let whole = image_of(window, &pixels(coincident), DeepState::Tidy);
        for codec in [Codec::Zip, Codec::Zips, Codec::None] {
            let path = dir.path().join("bands.exr");
            let options = DeepWriteOptions {
                codec,
                ..DeepWriteOptions::default()
            };
            let mut writer = DeepChunkWriter::create(&path, window, &options).unwrap();
            let mut y0 = 0;
            for height in [10, 20, 30, 4] {
                writer.write_band(&rows(&whole, y0, height)).unwrap();
                y0 += height;
            }
            writer.finish().unwrap();
            let (stamped, census) = check_stamped_state(&path);
            assert_eq!(census.coincident, usize::from(coincident), "{codec:?}");
            // Coincident points are neither sorted nor non-overlapping.
            let want = if coincident {
                DeepState::Messy
            } else {
                DeepState::Tidy
            };
            assert_eq!(stamped, want, "{codec:?} coincident {coincident}");
            // The whole-image writer stamps the same bytes.
            let at_once = dir.path().join("at-once.exr");
            write_deep_with(&at_once, &whole, &options).unwrap();
            assert_eq!(
                std::fs::read(&at_once).unwrap(),
                std::fs::read(&path).unwrap()
            );
        }
    }
}

/// Rows `y0..y0 + height` of `image` (full width) as a band of their own.
fn rows(image: &DeepImage, y0: usize, height: usize) -> DeepImage {
    let width = image.data_window.width();
    let (first, end) = (y0 * width, (y0 + height) * width);
    let range = image.offsets[first] as usize..image.offsets[end] as usize;
    let planes = image
        .planes
        .iter()
        .map(|p| match p {
            Plane::F32(v) => Plane::F32(v[range.clone()].to_vec()),
            _ => unreachable!("row_image is all float"),
        })
        .collect();
    let window = Bounds {
        y0: y0 as i32,
        y1: (y0 + height) as i32 - 1,
        ..image.data_window
    };
    DeepImage::from_counts(
        image.display_window,
        window,
        image.channels.clone(),
        &image.counts()[first..end],
        planes,
        image.state,
    )
    .unwrap()
}
