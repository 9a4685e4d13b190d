//! Issue 20's properties on the real corpus where the other test files prove them on random
//! images only: `transform` with 0 and 1 is the identity and its depth change is exact (one
//! rounding of `Z·S + D` to the channel's type, half Z included), and `crop` plus `crop
//! --keep-outside` merge back to the input; `--drop-hidden` keeps the composite of corpus merges
//! and only drops the back of each pixel. `transform` and `crop` run the streamed operation the
//! CLI runs (`ops::run_op`, written to a file and read back). The other properties of the issue are
//! proved beside each operation's own tests (tests/ops.rs, deepen.rs, recolor.rs, idselect.rs).

mod common;

use std::path::Path;

use common::{data, read};
use deepmerge::composite::{merge_images, MergeOptions, MergeOutput, OutputKind, SortPolicy};
use deepmerge::deep::{DeepImage, Plane};
use deepmerge::ops::{run_op, Crop, DeepOp, Transform};
use deepmerge::stream::StreamOptions;

/// Corpus files with every depth kind: float Z (scanline and tiled), half Z with uint ids,
/// volumes with ZBack.
const FILES: [&str; 5] = [
    "openexr-images/Balls.exr",
    "openexr/11.deep.exr",
    "openexr/multivariate.deep.exr",
    "oiio/input-crop.deep.exr",
    "oiio/deepalpha.exr",
];

fn deep_options() -> StreamOptions {
    StreamOptions {
        merge: MergeOptions {
            output: OutputKind::Deep,
            ..MergeOptions::default()
        },
        ..StreamOptions::default()
    }
}

/// `op` run on `file` as the CLI runs it, read back.
fn run(op: &dyn DeepOp, file: &Path, dir: &Path, name: &str) -> DeepImage {
    let out = dir.join(name);
    run_op(op, file, &out, &deep_options(), None)
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    read(&out, 0)
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

/// Every value of `plane` as its bits (halves widened to u32), for exact comparison.
fn bits(plane: &Plane) -> Vec<u32> {
    match plane {
        Plane::U32(v) => v.clone(),
        Plane::F16(v) => v.iter().map(|h| h.to_bits() as u32).collect(),
        Plane::F32(v) => v.iter().map(|f| f.to_bits()).collect(),
    }
}

#[test]
fn transform_is_the_identity_with_0_and_1_and_exact_on_the_depths_of_the_corpus() {
    let dir = tempfile::tempdir().unwrap();
    for file in FILES {
        let path = data(file);
        let input = read(&path, 0);
        let identity = run(
            &Transform::new(None, 0.0, 1.0).unwrap(),
            &path,
            dir.path(),
            "identity.exr",
        );
        assert_eq!(identity.data_window, input.data_window, "{file}");
        assert_eq!(identity.display_window, input.display_window, "{file}");
        assert_eq!(identity.channels, input.channels, "{file}");
        assert_eq!(identity.offsets, input.offsets, "{file}");
        for (c, channel) in input.channels.iter().enumerate() {
            assert!(
                bits(&identity.planes[c]) == bits(&input.planes[c]),
                "{file}: the identity changed {}",
                channel.name
            );
        }
        // A scale and offset that round in every type: each depth is Z·S + D computed in f64
        // and rounded once to float (a half depth is promoted to float: half could not hold
        // most changes, see `ops::transform`); everything else is kept bit for bit.
        let (s, d) = (1.37, -0.618);
        let moved = run(
            &Transform::new(Some("3,-2"), d, s).unwrap(),
            &path,
            dir.path(),
            "moved.exr",
        );
        assert_eq!(moved.data_window.x0, input.data_window.x0 + 3, "{file}");
        assert_eq!(moved.data_window.y0, input.data_window.y0 - 2, "{file}");
        assert_eq!(moved.offsets, input.offsets, "{file}");
        let mut depths = 0;
        for (c, channel) in input.channels.iter().enumerate() {
            let want = if matches!(channel.name.as_str(), "Z" | "ZBack") {
                depths += 1;
                match &input.planes[c] {
                    Plane::F16(v) => {
                        Plane::F32(v.iter().map(|z| (z.to_f64() * s + d) as f32).collect())
                    }
                    Plane::F32(v) => {
                        Plane::F32(v.iter().map(|&z| (z as f64 * s + d) as f32).collect())
                    }
                    Plane::U32(_) => panic!("{file}: a uint depth"),
                }
            } else {
                input.planes[c].clone()
            };
            assert!(
                bits(&moved.planes[c]) == bits(&want),
                "{file}: {} is not Z·S + D rounded once",
                channel.name
            );
        }
        assert!(depths > 0, "{file}: no depth channel checked");
    }
}

#[test]
fn crop_and_crop_keep_outside_of_the_corpus_merge_to_the_input() {
    let dir = tempfile::tempdir().unwrap();
    for file in FILES {
        let path = data(file);
        let input = read(&path, 0);
        let w = input.data_window;
        // Boxes about the pixel that holds the middle sample (sparse files have most pixels
        // empty): around it, from past a corner to it, and its row.
        let middle = input
            .offsets
            .partition_point(|&o| o <= input.sample_count() as u64 / 2)
            - 1;
        let (cx, cy) = w.coords_of(middle);
        let boxes = [
            format!("{},{},{},{}", cx - 20, cy - 10, cx + 15, cy + 25),
            format!("{},{},{},{}", w.x0 - 5, w.y0 - 5, cx, cy),
            format!("{},{},{},{}", w.x0, cy, w.x1, cy),
        ];
        for area in &boxes {
            let inside = run(
                &Crop::parse(area, false).unwrap(),
                &path,
                dir.path(),
                "inside.exr",
            );
            let outside = run(
                &Crop::parse(area, true).unwrap(),
                &path,
                dir.path(),
                "outside.exr",
            );
            assert!(
                inside.sample_count() > 0 && outside.sample_count() > 0,
                "{file} {area}: a side is empty; the test would prove little"
            );
            assert_eq!(
                inside.sample_count() + outside.sample_count(),
                input.sample_count(),
                "{file} {area}"
            );
            assert!(
                deep_merge(&[&inside, &outside]) == deep_merge(&[&input]),
                "{file} {area}: crop and its outside do not merge to the input"
            );
        }
    }
}

fn flat(inputs: &[&DeepImage]) -> deepmerge::deep::FlatImage {
    let options = MergeOptions {
        output: OutputKind::Flat { z: false },
        ..MergeOptions::default()
    };
    match merge_images(inputs, &options).unwrap_or_else(|e| panic!("{e}")) {
        MergeOutput::Flat(f) => f,
        MergeOutput::Deep(_) => unreachable!(),
    }
}

#[test]
fn drop_hidden_keeps_the_corpus_composite_and_only_drops_the_back_of_each_pixel() {
    for files in [
        &[
            "openexr-images/Balls.exr",
            "openexr-images/Leaves.exr",
            "openexr-images/Trunks.exr",
        ][..],
        &["oiio/input-crop.deep.exr", "oiio/holdout-crop.deep.exr"][..],
    ] {
        let inputs: Vec<DeepImage> = files.iter().map(|f| read(&data(f), 0)).collect();
        let refs: Vec<&DeepImage> = inputs.iter().collect();
        let merged = deep_merge(&refs);
        let pruned = deepmerge::composite::prune::drop_hidden(&merged, 1.0);
        assert!(
            pruned.sample_count() < merged.sample_count(),
            "{files:?}: nothing hidden; the test would prove little"
        );
        // Each pixel keeps a prefix of its samples, bit for bit: nothing added or changed.
        for p in 0..merged.pixel_count() {
            assert!(pruned.count(p) <= merged.count(p), "{files:?} pixel {p}");
            for (i, j) in merged.range(p).zip(pruned.range(p)) {
                for c in 0..merged.channels.len() {
                    assert_eq!(
                        merged.planes[c].get_f32(i).to_bits(),
                        pruned.planes[c].get_f32(j).to_bits(),
                        "{files:?} pixel {p}"
                    );
                }
            }
        }
        let (a, b) = (flat(&[&pruned]), flat(&[&merged]));
        assert_eq!(a.data_window, b.data_window);
        for channel in &b.channels {
            let (x, y) = (
                a.channel(&channel.name).unwrap(),
                b.channel(&channel.name).unwrap(),
            );
            let worst = x
                .iter()
                .zip(y)
                .map(|(p, q)| (p - q).abs())
                .fold(0f32, f32::max);
            // The flat output is stored in half: within half rounding (here the composites
            // are computed in f32 and agree far closer).
            assert!(
                worst < 1e-6,
                "{files:?} {}: differs by {worst}",
                channel.name
            );
        }
    }
}
