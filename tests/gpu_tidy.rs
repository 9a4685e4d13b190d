//! The GPU tidy-and-flatten stage (`glsl/tidy.comp`) against its CPU twin (`cpu::tidy`) and
//! against the definition, `composite::tidy_pixel` + `composite::flatten_pixel`: hand-built
//! pixels (overlapping volumes, a volume containing a point, identical intervals, alpha 0 with
//! colour, opaque volumes, per-channel alpha, stop at alpha 1), random pixels including long
//! lists, and every pixel of the volumetric corpus merge that needs a tidy.
//!
//! Tolerance: 1e-5 absolute, relative above magnitude 1 (`close`). The GPU and the twin work in
//! f32 with series `log1p`/`expm1` good to a few ulp, the reference in f64 rounded to f32 per
//! piece; flattening is f32 in all three, so the gap is a few f32 ulp per piece and stays far
//! below 1e-5 for pixels of tens to hundreds of samples. The twin and the GPU run the same
//! operations, so they are held to 1e-6. Fronts (ids and Z source) must match exactly.

mod common;
mod gpu_common;

use std::path::Path;

use common::{interleaving_shift, shifted, shifted_points};
use deepmerge::composite::{
    flatten_pixel, is_tidy, needs_deep_tidy, needs_tidy, tidy_deep_pixel, tidy_pixel,
    CompositeChannels, MergePlan, PixelSamples, Sample,
};
use deepmerge::cpu::tidy::{
    tidy_count_pixels as tidy_count_twin, tidy_deep as tidy_deep_twin,
    tidy_flatten_pixels as cpu_tidy, TidiedDeep,
};
use deepmerge::deep::DeepImage;
use deepmerge::exr::{read_deep, ReadOptions};
use deepmerge::gpu::resident::{build_image, ColumnSpec};
use deepmerge::gpu::tidy::{
    tidy_count_pixels, tidy_deep, tidy_flatten_pixels, tidy_flatten_pixels_host, WalkList,
};
use deepmerge::gpu::GpuBuffer;
use deepmerge::vocab::{Fragment, Layout, TidiedPixels, GATE_LIMIT};
use gpu_common::{test_rng, with_gl};

/// Reference tolerance (see the module doc).
const TOLERANCE: f32 = 1e-5;
/// GPU against its twin: the same f32 operations, up to the driver's rounding of divisions.
const TWIN_TOLERANCE: f32 = 1e-6;

/// Pixels in CSR form, as the stage takes them.
#[derive(Clone, Debug, Default)]
struct Csr {
    offsets: Vec<u32>,
    keys: Vec<Fragment>,
    values: Vec<f32>,
}

impl Csr {
    fn new() -> Self {
        Csr {
            offsets: vec![0],
            ..Csr::default()
        }
    }

    /// Append a pixel of (z, zback, row) samples, already in merge order.
    fn push(&mut self, samples: &[(f32, f32, Vec<f32>)]) {
        for (z, zback, row) in samples {
            self.keys.push(Fragment {
                z: *z,
                zback: *zback,
                input: (self.keys.len() % 3) as u32,
                index: self.keys.len() as u32,
            });
            self.values.extend_from_slice(row);
        }
        self.offsets.push(self.keys.len() as u32);
    }

    fn pixels(&self) -> usize {
        self.offsets.len() - 1
    }
}

/// The walk's input from four uploaded buffers: offsets, keys, values, pixel list.
fn walk_list<'b, 'a>(
    offsets: &'b GpuBuffer<'a>,
    keys: &'b GpuBuffer<'a>,
    values: &'b GpuBuffer<'a>,
    pixels: &'b GpuBuffer<'a>,
    count: usize,
) -> WalkList<'b, 'a> {
    WalkList {
        offsets,
        keys,
        values,
        pixels,
        count,
    }
}

/// The definition, exactly as the host path of the GL merge runs it.
fn reference(csr: &Csr, pixels: &[u32], alpha_of: &[Option<usize>]) -> TidiedPixels {
    let channels = CompositeChannels::from_alpha_of(alpha_of);
    let width = alpha_of.len().max(1);
    let mut out = TidiedPixels::default();
    for &p in pixels {
        let (start, end) = (
            csr.offsets[p as usize] as usize,
            csr.offsets[p as usize + 1] as usize,
        );
        let mut pixel = PixelSamples::new(width);
        for s in start..end {
            let f = csr.keys[s];
            pixel.push(
                Sample {
                    z: f.z,
                    zback: f.zback,
                    input: f.input,
                    index: f.index as u64,
                },
                &csr.values[s * width..(s + 1) * width],
            );
        }
        if needs_tidy(&pixel.samples) {
            tidy_pixel(&mut pixel, &channels);
        }
        let flat = flatten_pixel(&pixel, &channels);
        let mut values = flat.values;
        values.resize(width, 0.0);
        out.values.extend(values);
        out.front.push(match flat.front.map(|s| pixel.samples[s]) {
            Some(s) => [s.input, s.index as u32, s.z.to_bits(), 1],
            None => [0; 4],
        });
    }
    out
}

fn close(a: f32, b: f32, tolerance: f32) -> bool {
    (a - b).abs() <= tolerance * b.abs().max(1.0) || (a.is_nan() && b.is_nan())
}

/// Largest scaled difference, and a panic naming the first pixel outside `tolerance`.
fn compare(
    got: &TidiedPixels,
    want: &TidiedPixels,
    stride: usize,
    tolerance: f32,
    what: &str,
) -> f32 {
    assert_eq!(got.values.len(), want.values.len(), "{what}");
    let mut worst = 0.0f32;
    for (i, (a, b)) in got.values.iter().zip(&want.values).enumerate() {
        assert!(
            close(*a, *b, tolerance),
            "{what}: listed pixel {} column {}: {a} vs {b} (rows {:?} vs {:?})",
            i / stride,
            i % stride,
            &got.values[i / stride * stride..(i / stride + 1) * stride],
            &want.values[i / stride * stride..(i / stride + 1) * stride],
        );
        worst = worst.max((a - b).abs() / b.abs().max(1.0));
    }
    for (k, (a, b)) in got.front.iter().zip(&want.front).enumerate() {
        assert_eq!(a, b, "{what}: front of listed pixel {k}");
    }
    worst
}

/// Run all three on every pixel of `csr`; returns the worst GPU-vs-reference difference.
fn check_all(csr: &Csr, alpha_of: &[Option<usize>], what: &str) -> f32 {
    let pixels: Vec<u32> = (0..csr.pixels() as u32).collect();
    check(csr, &pixels, alpha_of, what)
}

fn check(csr: &Csr, pixels: &[u32], alpha_of: &[Option<usize>], what: &str) -> f32 {
    let stride = alpha_of.len().max(1);
    let want = reference(csr, pixels, alpha_of);
    let twin = cpu_tidy(&csr.offsets, &csr.keys, &csr.values, pixels, alpha_of);
    compare(
        &twin,
        &want,
        stride,
        TOLERANCE,
        &format!("{what} (CPU twin)"),
    );
    let (csr2, pixels2, spec) = (
        csr.clone(),
        pixels.to_vec(),
        ColumnSpec {
            alpha_of: alpha_of.to_vec(),
        },
    );
    let gpu = with_gl(move |ctx| {
        tidy_flatten_pixels_host(
            ctx,
            &csr2.offsets,
            &csr2.keys,
            &csr2.values,
            &pixels2,
            &spec,
        )
        .expect("GPU tidy runs")
    });
    compare(
        &gpu,
        &twin,
        stride,
        TWIN_TOLERANCE,
        &format!("{what} (GPU vs twin)"),
    );
    compare(&gpu, &want, stride, TOLERANCE, &format!("{what} (GPU)"))
}

/// Columns A, R (R attenuated by A).
const AR: [Option<usize>; 2] = [None, Some(0)];
/// Columns A, B, BA, G, GA, R, RA: each colour has its own alpha; A stands alone.
const PER_CHANNEL: [Option<usize>; 7] = [None, Some(2), None, Some(4), None, Some(6), None];

fn ar(a: f32, r: f32) -> Vec<f32> {
    vec![a, r]
}

#[test]
fn hand_built_pixels_match_the_reference() {
    let worst = check_all(&hand_built_csr(), &AR, "hand-built A,R");
    eprintln!("hand-built: worst difference {worst:e}");
    // A worked answer, independent of the reference: a volume [0, 10) of alpha 0.9 with a point
    // at 2.5 behind a quarter of it: 1 - 0.1^0.25 = 0.43766 in front, then the point.
    let one = with_gl(|ctx| {
        let mut csr = Csr::new();
        csr.push(&[(0.0, 10.0, ar(0.9, 0.0)), (2.5, 2.5, ar(1.0, 1.0))]);
        tidy_flatten_pixels_host(
            ctx,
            &csr.offsets,
            &csr.keys,
            &csr.values,
            &[0],
            &ColumnSpec {
                alpha_of: AR.to_vec(),
            },
        )
        .unwrap()
    });
    let front = 1.0 - 0.1f64.powf(0.25);
    assert!(
        (one.values[1] as f64 - (1.0 - front)).abs() < 1e-6,
        "{:?}",
        one.values
    );
    assert_eq!(one.values[0], 1.0);
}

/// Pixels with known hard cases, columns A, R.
fn hand_built_csr() -> Csr {
    let mut csr = Csr::new();
    // Two overlapping volumes.
    csr.push(&[(0.0, 2.0, ar(0.6, 0.3)), (1.0, 3.0, ar(0.5, 0.4))]);
    // A volume containing a point.
    csr.push(&[(0.0, 10.0, ar(0.9, 0.6)), (2.5, 2.5, ar(0.5, 0.5))]);
    // Identical intervals (merge by optical depth), then a point at their back end.
    csr.push(&[
        (1.0, 2.0, ar(0.6, 0.5)),
        (1.0, 2.0, ar(0.3, 0.05)),
        (2.0, 2.0, ar(0.2, 0.1)),
    ]);
    // Alpha 0 with colour: pure emission spreads with the fraction.
    csr.push(&[(0.0, 4.0, ar(0.0, 0.8)), (1.0, 2.0, ar(0.0, 0.2))]);
    // An opaque volume split by another; nothing behind it counts.
    csr.push(&[
        (0.0, 4.0, ar(1.0, 0.7)),
        (2.0, 3.0, ar(0.5, 0.4)),
        (5.0, 5.0, ar(0.5, 0.5)),
    ]);
    // Two opaque volumes over one interval: their colours average.
    csr.push(&[(0.0, 1.0, ar(1.0, 0.2)), (0.0, 1.0, ar(1.0, 0.6))]);
    // Coincident points before a volume starting there, inside a volume that started earlier:
    // flattening composites them in order, the deep tidy merges them.
    csr.push(&[
        (0.5, 2.0, ar(0.3, 0.3)),
        (1.0, 1.0, ar(0.5, 0.1)),
        (1.0, 1.0, ar(0.5, 0.9)),
        (1.0, 3.0, ar(0.4, 0.2)),
    ]);
    // Points stored with ZBack < Z (they sort before a point at the same Z) inside a volume:
    // coincident with that point (the same depth once ZBack < Z reads as a point).
    csr.push(&[
        (0.0, 2.0, ar(0.5, 0.25)),
        (1.0, 0.5, ar(0.5, 0.4)),
        (1.0, 1.0, ar(0.5, 0.1)),
    ]);
    // Only points, and an empty pixel.
    csr.push(&[(1.0, 1.0, ar(0.25, 0.2)), (2.0, 2.0, ar(0.5, 0.25))]);
    // Only points, three of them coincident (-0.0 and 0.0 are one depth), then one behind.
    csr.push(&[
        (-0.0, -0.0, ar(0.25, 0.2)),
        (0.0, 0.0, ar(0.5, 0.25)),
        (0.0, 0.0, ar(1.0, 0.5)),
        (2.0, 2.0, ar(0.5, 0.25)),
    ]);
    csr.push(&[]);
    // An infinitely deep volume behind a finite one inside it.
    csr.push(&[(1.0, f32::INFINITY, ar(0.5, 0.5)), (2.0, 3.0, ar(0.5, 0.5))]);
    // Tiny alphas and a thin slice: where naive pow loses all precision.
    csr.push(&[(0.0, 1.0, ar(1e-7, 2e-8)), (0.999, 1.0, ar(1e-6, 1e-6))]);
    csr
}

#[test]
fn per_channel_alpha_matches_the_reference() {
    let row = |a: f32, rgb: [f32; 3], rgba: [f32; 3]| {
        vec![a, rgb[2], rgba[2], rgb[1], rgba[1], rgb[0], rgba[0]]
    };
    let mut csr = Csr::new();
    csr.push(&[
        (0.0, 2.0, row(0.5, [0.4, 0.2, 0.1], [0.8, 0.3, 0.0])),
        (1.0, 3.0, row(0.5, [0.2, 0.2, 0.2], [0.2, 1.0, 0.5])),
        (1.5, 1.5, row(0.25, [0.1, 0.1, 0.1], [0.25, 0.25, 0.25])),
        (1.5, 3.0, row(0.7, [0.3, 0.0, 0.6], [0.6, 0.1, 1.0])),
    ]);
    // Stop at alpha 1 needs every alpha opaque: here only RA reaches 1 early.
    csr.push(&[
        (0.0, 1.0, row(0.5, [0.9, 0.1, 0.1], [1.0, 0.2, 0.2])),
        (0.5, 1.0, row(0.5, [0.9, 0.1, 0.1], [1.0, 0.2, 0.2])),
        (2.0, 2.0, row(1.0, [0.1, 0.5, 0.5], [1.0, 1.0, 1.0])),
        (3.0, 3.0, row(1.0, [0.7, 0.7, 0.7], [1.0, 1.0, 1.0])),
    ]);
    let worst = check_all(&csr, &PER_CHANNEL, "per-channel alpha");
    eprintln!("per-channel: worst difference {worst:e}");
}

/// Random pixels in merge order: depths from `levels` values (so boundaries coincide), a third
/// volumes, alphas 0, 1 and anything between, colours up to 2 (premultiplied or not: the stage
/// must not care).
fn random_csr(
    pixels: usize,
    max_len: u32,
    levels: u32,
    columns: &[Option<usize>],
    seed: u64,
) -> Csr {
    let mut rng = test_rng(seed);
    let mut csr = Csr::new();
    for _ in 0..pixels {
        let n = rng.below(max_len as usize + 1);
        let mut samples: Vec<(f32, f32, Vec<f32>)> = (0..n)
            .map(|_| {
                let z = rng.below(levels as usize) as f32 * 0.5;
                let zback = match rng.below(3) {
                    0 => z + (1 + rng.below(levels as usize / 2 + 1)) as f32 * 0.5,
                    1 => z + rng.below(1000) as f32 / 997.0,
                    _ => z,
                };
                let row = columns
                    .iter()
                    .map(|alpha| {
                        let kind = rng.below(8);
                        let v = match kind {
                            0 => 0.0,
                            1 if alpha.is_none() => 1.0,
                            _ => rng.below(10_000) as f32 / 10_000.0,
                        };
                        if alpha.is_some() {
                            v * 2.0
                        } else {
                            v
                        }
                    })
                    .collect();
                (z, zback, row)
            })
            .collect();
        // Stable by (Z, ZBack): merge order.
        samples.sort_by(|a, b| {
            a.0.partial_cmp(&b.0)
                .unwrap()
                .then(a.1.partial_cmp(&b.1).unwrap())
        });
        csr.push(&samples);
    }
    csr
}

#[test]
fn random_pixels_match_the_reference() {
    let csr = random_csr(2000, 12, 8, &AR, 1);
    let worst_ar = check_all(&csr, &AR, "random A,R");
    let csr = random_csr(1000, 10, 6, &PER_CHANNEL, 2);
    let worst_pc = check_all(&csr, &PER_CHANNEL, "random per-channel");
    // A subset, in a shuffled order, with repeats: the list decides what is written where.
    let pixels: Vec<u32> = (0..300u32).map(|i| (i * 7919) % 1000).collect();
    check(&csr, &pixels, &PER_CHANNEL, "random per-channel subset");
    eprintln!("random: worst difference A,R {worst_ar:e}, per-channel {worst_pc:e}");
}

#[test]
fn long_lists_match_the_reference() {
    // Hundreds of samples per pixel: with few depth levels deep overlaps, with many levels
    // hundreds of boundaries, enough that the GPU must yield and resume (llvmpipe caps the loop
    // iterations of one invocation). Small alphas keep the composite from going opaque early.
    let mut worst = 0.0f32;
    for (levels, seed) in [(8u32, 3u64), (120, 4), (1000, 5)] {
        let mut csr = random_csr(6, 400, levels, &AR, seed);
        for (k, v) in csr.values.iter_mut().enumerate() {
            if k % 2 == 0 {
                *v *= 0.02;
            }
        }
        worst = worst.max(check_all(
            &csr,
            &AR,
            &format!("long lists, {levels} levels"),
        ));
        if levels == 1000 {
            let passes = with_gl(move |ctx| {
                let buffers = [
                    GpuBuffer::from_slice(ctx, &csr.offsets).unwrap(),
                    GpuBuffer::from_slice(ctx, &csr.keys).unwrap(),
                    GpuBuffer::from_slice(ctx, &csr.values).unwrap(),
                    GpuBuffer::from_slice(ctx, &(0..6u32).collect::<Vec<_>>()).unwrap(),
                ];
                let spec = ColumnSpec {
                    alpha_of: AR.to_vec(),
                };
                let [o, k, v, p] = &buffers;
                let out = tidy_flatten_pixels(ctx, walk_list(o, k, v, p, 6), &spec).unwrap();
                assert_eq!(out.too_long, 0);
                out.passes
            });
            assert!(passes > 1, "the long lists should need several passes");
            eprintln!("long lists, {levels} levels: {passes} passes");
        }
    }
    eprintln!("long lists: worst difference {worst:e}");
}

/// One pixel with 5000 volumes alive at one boundary (plus a point inside them), in merge order:
/// its walk's single step costs more than one pass's budget.
fn too_long_for_one_pass() -> Vec<(f32, f32, Vec<f32>)> {
    let mut long: Vec<(f32, f32, Vec<f32>)> = (0..5000)
        .map(|i| (0.0, 1.0 + (i % 7) as f32, ar(0.001, 0.0005)))
        .collect();
    long.push((0.5, 0.5, ar(0.1, 0.05)));
    long.sort_by(|a, b| {
        a.0.partial_cmp(&b.0)
            .unwrap()
            .then(a.1.partial_cmp(&b.1).unwrap())
    });
    long
}

#[test]
fn pixels_too_long_for_one_pass_are_finished_on_the_host() {
    // 5000 volumes alive at one boundary (plus a point inside them): more than one pass's budget
    // for a single step, so the GPU reports the pixel and the host finishes it with the reference. The
    // other pixel is short and stays on the GPU.
    let mut csr = Csr::new();
    csr.push(&too_long_for_one_pass());
    csr.push(&[(0.0, 2.0, ar(0.6, 0.3)), (1.0, 3.0, ar(0.5, 0.4))]);
    check_all(&csr, &AR, "too long for one pass");
    let too_long = with_gl(move |ctx| {
        let buffers = [
            GpuBuffer::from_slice(ctx, &csr.offsets).unwrap(),
            GpuBuffer::from_slice(ctx, &csr.keys).unwrap(),
            GpuBuffer::from_slice(ctx, &csr.values).unwrap(),
            GpuBuffer::from_slice(ctx, &[0u32, 1]).unwrap(),
        ];
        let spec = ColumnSpec {
            alpha_of: AR.to_vec(),
        };
        let [o, k, v, p] = &buffers;
        let out = tidy_flatten_pixels(ctx, walk_list(o, k, v, p, 2), &spec).unwrap();
        out.too_long_pixels()
    });
    assert_eq!(too_long, vec![0]);
}

/// Every pixel of the merge of `inputs` as CSR in merge order, and the pixels that need a tidy.
fn merged_csr(inputs: &[&DeepImage]) -> (Csr, Vec<u32>, Vec<Option<usize>>) {
    let plan = MergePlan::new(inputs).unwrap();
    let alpha_of = plan.composite.alpha_of();
    let width = plan.composite.len().max(1);
    let mut csr = Csr::new();
    let mut flagged = Vec::new();
    let mut samples = Vec::new();
    let mut pixel = PixelSamples::new(plan.composite.len());
    for i in 0..plan.window.area() {
        let (x, y) = plan.window.coords_of(i);
        plan.ordered_samples(x, y, &mut samples);
        pixel.gather(&samples, &plan.inputs, &plan.sources);
        if needs_tidy(&samples) {
            flagged.push(i as u32);
        }
        for (s, sample) in samples.iter().enumerate() {
            csr.keys.push(Fragment {
                z: sample.z,
                zback: sample.zback,
                input: sample.input,
                index: sample.index as u32,
            });
            let mut row = pixel.row(s).to_vec();
            row.resize(width, 0.0);
            csr.values.extend(row);
        }
        csr.offsets.push(csr.keys.len() as u32);
    }
    (csr, flagged, alpha_of)
}

#[test]
fn volumetric_corpus_matches_the_reference() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/oiio");
    let input = read_deep(&dir.join("input-crop.deep.exr"), &ReadOptions::default()).unwrap();
    let hold = read_deep(&dir.join("holdout-crop.deep.exr"), &ReadOptions::default()).unwrap();
    // input + holdout: volumes and points that never overlap (no pixel is flagged), so every
    // pixel goes through the stage; then merges where volumes do overlap: the crop with itself
    // (identical intervals), with a copy shifted by half its thinnest volume (volumes cut by
    // volumes) and with that copy as points (volumes containing points), flagged pixels only.
    let shift = interleaving_shift(&input);
    let moved = shifted(&input, shift);
    let points = shifted_points(&input, shift);
    let (csr, flagged, alpha_of) = merged_csr(&[&input, &hold]);
    assert!(flagged.is_empty(), "the corpus pair does not overlap");
    let volumes = csr.keys.iter().filter(|f| f.zback > f.z).count();
    assert!(volumes > 1000);
    let worst = check_all(&csr, &alpha_of, "input + holdout, every pixel");
    eprintln!(
        "corpus input + holdout: {} pixels, {} samples ({volumes} volumes), worst {worst:e}",
        csr.pixels(),
        csr.keys.len()
    );
    for (label, other) in [
        ("input + input", &input),
        ("input + shifted input", &moved),
        ("input + shifted points", &points),
    ] {
        let (csr, flagged, alpha_of) = merged_csr(&[&input, other]);
        assert!(flagged.len() > 100, "{label}: {} flagged", flagged.len());
        let worst = check(&csr, &flagged, &alpha_of, label);
        eprintln!(
            "corpus {label}: {} flagged of {} pixels, worst difference {worst:e}",
            flagged.len(),
            csr.pixels()
        );
        if label == "input + shifted input" {
            // For the record only (llvmpipe on shared cores): the stage's cost on a real case.
            let start = std::time::Instant::now();
            reference(&csr, &flagged, &alpha_of);
            let host = start.elapsed().as_secs_f64();
            let start = std::time::Instant::now();
            cpu_tidy(&csr.offsets, &csr.keys, &csr.values, &flagged, &alpha_of);
            let twin = start.elapsed().as_secs_f64();
            let spec = ColumnSpec { alpha_of };
            let gpu = with_gl(move |ctx| {
                let start = std::time::Instant::now();
                tidy_flatten_pixels_host(
                    ctx,
                    &csr.offsets,
                    &csr.keys,
                    &csr.values,
                    &flagged,
                    &spec,
                )
                .unwrap();
                start.elapsed().as_secs_f64()
            });
            eprintln!(
                "corpus {label}: reference {:.1} ms, twin {:.1} ms, GPU (upload, run, read) {:.1} ms",
                host * 1e3,
                twin * 1e3,
                gpu * 1e3
            );
        }
    }
}

// ---- Deep output: the tidied lists themselves (count → scan → emit), against the twin
// (`cpu::tidy::tidy_deep`) and the definition (`composite::tidy_deep_pixel` per pixel that needs
// it: coincident points merge too, as OpenEXR's tidy state asks).

/// The definition: every pixel that needs a tidy (or is longer than the gate reads) tidied by
/// `composite::tidy_deep_pixel`, every other one unchanged.
fn deep_reference(csr: &Csr, alpha_of: &[Option<usize>]) -> TidiedDeep {
    let channels = CompositeChannels::from_alpha_of(alpha_of);
    let width = alpha_of.len().max(1);
    let mut out = TidiedDeep {
        offsets: vec![0],
        ..TidiedDeep::default()
    };
    for p in 0..csr.pixels() {
        let (start, end) = (csr.offsets[p] as usize, csr.offsets[p + 1] as usize);
        let mut pixel = PixelSamples::new(width);
        for s in start..end {
            let f = csr.keys[s];
            let sample = Sample {
                z: f.z,
                zback: f.zback,
                input: f.input,
                index: f.index as u64,
            };
            pixel.push(sample, &csr.values[s * width..(s + 1) * width]);
        }
        let needs = needs_deep_tidy(&pixel.samples);
        let mark = needs || end - start > GATE_LIMIT as usize;
        if needs {
            tidy_deep_pixel(&mut pixel, &channels);
        }
        out.marks.push(u32::from(mark));
        for (s, sample) in pixel.samples.iter().enumerate() {
            out.keys.push(Fragment {
                z: sample.z,
                zback: sample.zback,
                input: sample.input,
                index: sample.index as u32,
            });
            out.values.extend_from_slice(pixel.row(s));
        }
        out.offsets.push(out.keys.len() as u32);
    }
    out
}

/// Same counts, marks and keys (depths, sources) exactly; values within `tolerance`.
fn compare_deep(got: &TidiedDeep, want: &TidiedDeep, stride: usize, tolerance: f32, what: &str) {
    assert_eq!(got.marks, want.marks, "{what}: marks");
    if got.offsets != want.offsets {
        let p = got
            .offsets
            .iter()
            .zip(&want.offsets)
            .position(|(a, b)| a != b)
            .unwrap();
        panic!(
            "{what}: counts differ from pixel {}: {:?} vs {:?}",
            p - 1,
            &got.offsets[p - 1..(p + 2).min(got.offsets.len())],
            &want.offsets[p - 1..(p + 2).min(want.offsets.len())]
        );
    }
    for (s, (a, b)) in got.keys.iter().zip(&want.keys).enumerate() {
        assert_eq!(a, b, "{what}: key of slot {s}");
    }
    for (i, (a, b)) in got.values.iter().zip(&want.values).enumerate() {
        assert!(
            close(*a, *b, tolerance),
            "{what}: slot {} column {}: {a} vs {b}",
            i / stride,
            i % stride
        );
    }
}

/// The GPU stage on `csr` uploaded as a linearised image; also the count stage on the pixels
/// the gate marked, which must agree with the twin's counts.
fn gpu_tidy_deep(csr: &Csr, alpha_of: &[Option<usize>]) -> (TidiedDeep, usize) {
    let (csr, spec) = (
        csr.clone(),
        ColumnSpec {
            alpha_of: alpha_of.to_vec(),
        },
    );
    with_gl(move |ctx| {
        let stride = spec.stride();
        let counts: Vec<u32> = csr.offsets.windows(2).map(|w| w[1] - w[0]).collect();
        let image = build_image(
            ctx,
            Layout::Linearised,
            1,
            true,
            &counts,
            &csr.keys,
            &csr.values,
            stride,
            false,
        )
        .unwrap();
        let tidied = tidy_deep(ctx, image, &spec).expect("GPU deep tidy runs");
        let built = tidied.image.read_back(true).expect("the image reads back");
        let out = TidiedDeep {
            offsets: built.offsets,
            keys: built.slots,
            values: built.values,
            marks: tidied.marks.read(counts.len()),
        };
        (out, tidied.host_pixels)
    })
}

/// Definition, twin and GPU on every pixel of `csr`; returns the pixels the GPU left to the host.
fn check_deep(csr: &Csr, alpha_of: &[Option<usize>], what: &str) -> usize {
    check_deep_within(csr, alpha_of, TOLERANCE, what)
}

/// As `check_deep`, with the tolerance against the definition given.
fn check_deep_within(csr: &Csr, alpha_of: &[Option<usize>], tolerance: f32, what: &str) -> usize {
    let stride = alpha_of.len().max(1);
    let want = deep_reference(csr, alpha_of);
    let twin = tidy_deep_twin(&csr.offsets, &csr.keys, &csr.values, alpha_of);
    compare_deep(&twin, &want, stride, tolerance, &format!("{what} (twin)"));
    let listed: Vec<u32> = (0..csr.pixels() as u32)
        .filter(|&p| twin.marks[p as usize] != 0)
        .collect();
    let twin_counts = tidy_count_twin(&csr.offsets, &csr.keys, &csr.values, &listed, alpha_of);
    let (csr2, spec, listed2) = (
        csr.clone(),
        ColumnSpec {
            alpha_of: alpha_of.to_vec(),
        },
        listed.clone(),
    );
    let gpu_counts = with_gl(move |ctx| {
        let buffers = [
            GpuBuffer::from_slice(ctx, &csr2.offsets).unwrap(),
            GpuBuffer::from_slice(ctx, &csr2.keys).unwrap(),
            GpuBuffer::from_slice(ctx, &csr2.values).unwrap(),
            GpuBuffer::from_slice(ctx, &listed2).unwrap(),
        ];
        let [o, k, v, p] = &buffers;
        let list = walk_list(o, k, v, p, listed2.len());
        let (counts, too_long) = tidy_count_pixels(ctx, list, &spec).unwrap();
        let mut counts: Vec<u32> = counts.read(listed2.len());
        for k in too_long {
            counts[k] = u32::MAX; // not valid: the host finishes these
        }
        counts
    });
    for (k, (g, t)) in gpu_counts.iter().zip(&twin_counts).enumerate() {
        assert!(
            *g == u32::MAX || g == t,
            "{what}: count of listed pixel {k}: {g} vs {t}"
        );
    }
    let (gpu, host_pixels) = gpu_tidy_deep(csr, alpha_of);
    // The property itself, independent of any oracle: every pixel comes out tidy.
    for p in 0..csr.pixels() {
        let samples: Vec<Sample> = gpu.keys[gpu.offsets[p] as usize..gpu.offsets[p + 1] as usize]
            .iter()
            .map(|f| Sample {
                z: f.z,
                zback: f.zback,
                input: f.input,
                index: f.index as u64,
            })
            .collect();
        assert!(
            is_tidy(&samples),
            "{what}: GPU output of pixel {p} is not tidy"
        );
    }
    // Pixels too long for one walk pass are finished by the host reference (f64), not by the
    // f32 walk: where there are any, GPU and twin agree only as closely as each agrees with the
    // definition.
    let twin_tolerance = if host_pixels == 0 {
        TWIN_TOLERANCE
    } else {
        tolerance
    };
    compare_deep(
        &gpu,
        &twin,
        stride,
        twin_tolerance,
        &format!("{what} (GPU vs twin)"),
    );
    compare_deep(&gpu, &want, stride, tolerance, &format!("{what} (GPU)"));
    host_pixels
}

#[test]
fn deep_tidy_of_hand_built_pixels() {
    let csr = hand_built_csr();
    assert_eq!(check_deep(&csr, &AR, "deep hand-built A,R"), 0);
    // A worked answer: a volume [0, 10) of alpha 0.9 cut by a point at 2.5 gives pieces
    // [0, 2.5) of 1 - 0.1^0.25, the point, [2.5, 10) of 1 - 0.1^0.75, colour in proportion.
    let mut one = Csr::new();
    one.push(&[(0.0, 10.0, ar(0.9, 0.45)), (2.5, 2.5, ar(1.0, 1.0))]);
    let (gpu, _) = gpu_tidy_deep(&one, &AR);
    let depths: Vec<(f32, f32)> = gpu.keys.iter().map(|f| (f.z, f.zback)).collect();
    assert_eq!(depths, vec![(0.0, 2.5), (2.5, 2.5), (2.5, 10.0)]);
    let (front, back) = (1.0 - 0.1f64.powf(0.25), 1.0 - 0.1f64.powf(0.75));
    for (got, want) in [
        (gpu.values[0], front),
        (gpu.values[1], 0.45 * front / 0.9),
        (gpu.values[4], back),
        (gpu.values[5], 0.45 * back / 0.9),
    ] {
        assert!((got as f64 - want).abs() < 1e-6, "{got} vs {want}");
    }
    assert_eq!(gpu.marks, vec![1]);
}

#[test]
fn deep_tidy_of_per_channel_alpha_and_random_pixels() {
    let csr = random_csr(1500, 12, 8, &AR, 11);
    check_deep(&csr, &AR, "deep random A,R");
    let csr = random_csr(700, 10, 6, &PER_CHANNEL, 12);
    check_deep(&csr, &PER_CHANNEL, "deep random per-channel");
}

#[test]
fn deep_tidy_of_long_lists_and_of_pixels_too_long_for_one_pass() {
    // Hundreds of samples with hundreds of boundaries: the walk yields and resumes in both its
    // count and emit modes.
    for (levels, seed) in [(8u32, 13u64), (1000, 14)] {
        let csr = random_csr(5, 400, levels, &AR, seed);
        assert_eq!(
            check_deep(&csr, &AR, &format!("deep long, {levels} levels")),
            0
        );
    }
    // 5000 volumes alive at one boundary: one step is more than a pass's budget, so the GPU
    // leaves the pixel to the host reference (count and lists patched into the GPU buffers);
    // the short pixels around it stay on the GPU.
    let mut csr = Csr::new();
    csr.push(&[(0.0, 2.0, ar(0.6, 0.3)), (1.0, 3.0, ar(0.5, 0.4))]);
    csr.push(&too_long_for_one_pass());
    csr.push(&[(0.0, 2.0, ar(0.6, 0.3)), (1.0, 3.0, ar(0.5, 0.4))]);
    // The twin and the definition differ by more than 1e-5 here: 5000 coincident pieces merge by
    // summing their optical depths, in f32 against f64 (about n·2^-24 apart at worst).
    assert_eq!(
        check_deep_within(&csr, &AR, 1e-4, "deep too long for one pass"),
        1
    );
}

#[test]
fn deep_tidy_of_the_volumetric_corpus() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/oiio");
    let input = read_deep(&dir.join("input-crop.deep.exr"), &ReadOptions::default()).unwrap();
    let moved = shifted(&input, interleaving_shift(&input));
    let (csr, flagged, alpha_of) = merged_csr(&[&input, &moved]);
    assert!(flagged.len() > 100);
    assert_eq!(
        check_deep(&csr, &alpha_of, "deep corpus input + shifted input"),
        0
    );
}
