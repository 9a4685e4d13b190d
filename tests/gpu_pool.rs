//! The GL context's buffer pool: a banded merge allocates its buffers in its first bands and
//! then reuses them, band after band and merge after merge, while every band's output stays
//! what the reference merge gives (bit for bit with the host stages, within the GPU tidy's
//! tolerance with the GPU stages), for every layout and output kind, k-way and chained. Reused
//! buffers hold the previous band's data, so these runs also prove that no stage relies on
//! fresh storage being zero.
//!
//! Each test makes its own context (not the shared one of `gpu_common::with_gl`), so the pool's
//! counts are its own.

#![allow(clippy::needless_update)]

mod gpu_common;

use deepmerge::composite::{MergeOptions, MergeStrategy, OutputKind};
use deepmerge::deep::{Bounds, DeepImage};
use deepmerge::gpu::{merge_images_gl, GlContext, GlOptions, Layout, MergeMethod, PixelOrder};
use deepmerge::stream::{merge_files, MergeEngine, StreamOptions};
use gpu_common::{assert_merge_matches, crop, outputs, Reference, Stages, Synth};

/// Rows per band: the streamed pipeline hands the GL engine one band of rows at a time.
const BAND_ROWS: i32 = 6;

fn context() -> GlContext {
    GlContext::new_with(true).unwrap_or_else(|e| {
        panic!("a GL context is required (apt-get install libegl1 libgl1-mesa-dri): {e}")
    })
}

/// Three overlapping inputs with volumes, cut into bands of [`BAND_ROWS`] rows as the
/// streamed pipeline cuts them.
fn banded_inputs() -> Vec<Vec<DeepImage>> {
    let window = Bounds {
        x0: 0,
        y0: 0,
        x1: 39,
        y1: 8 * BAND_ROWS - 1,
    };
    let inputs: Vec<DeepImage> = (0..3)
        .map(|seed| Synth::new(window, 5, 40 + seed).with_volumes().build())
        .collect();
    (0..8)
        .map(|b| {
            let band = Bounds {
                y0: b * BAND_ROWS,
                y1: (b + 1) * BAND_ROWS - 1,
                ..window
            };
            inputs.iter().map(|image| crop(image, band)).collect()
        })
        .collect()
}

/// Merge every band with `gl` and compare it with the reference; returns the buffers the pool
/// allocated during the first band and during all of them.
fn merge_bands(
    ctx: &GlContext,
    bands: &[Vec<DeepImage>],
    options: &MergeOptions,
    gl: &GlOptions,
    stages: Stages,
    what: &str,
) -> (u64, u64) {
    let before = ctx.pool_stats().allocations;
    let mut first = 0;
    for (b, band) in bands.iter().enumerate() {
        let refs: Vec<&DeepImage> = band.iter().collect();
        let reference = Reference::new(&refs, options);
        let (got, _) = merge_images_gl(ctx, &refs, options, gl)
            .unwrap_or_else(|e| panic!("{what}, band {b}: {e}"));
        assert_merge_matches(&got, &reference, stages, &format!("{what}, band {b}"));
        if b == 0 {
            first = ctx.pool_stats().allocations - before;
        }
    }
    (first, ctx.pool_stats().allocations - before)
}

#[test]
fn band_after_band_and_merge_after_merge_reuse_the_pooled_buffers() {
    let ctx = context();
    let bands = banded_inputs();
    for stages in Stages::BOTH {
        for strategy in MergeStrategy::ALL {
            for options in outputs() {
                let options = MergeOptions {
                    strategy,
                    ..options
                };
                for layout in Layout::ALL {
                    let gl =
                        stages.cell(layout, MergeMethod::RegisterBlock, 4, PixelOrder::RowMajor);
                    let what = format!("{stages:?} {strategy:?} {:?} {layout:?}", options.output);
                    let (first, all) = merge_bands(&ctx, &bands, &options, &gl, stages, &what);
                    // Bands differ in samples, so a later band may need a larger size class
                    // once; most bands must allocate nothing. (A first band that found nearly
                    // everything in the pool, as a keys-only deep merge after the merges with
                    // values does, still gets two growths.)
                    assert!(
                        all <= first + (first / 2).max(2),
                        "{what}: {first} buffers allocated in the first band, {all} in {} bands",
                        bands.len()
                    );
                    // The same bands again: everything comes from the pool.
                    let reuses = ctx.pool_stats().reuses;
                    let (_, again) = merge_bands(&ctx, &bands, &options, &gl, stages, &what);
                    assert_eq!(again, 0, "{what}: buffers allocated after the warm-up");
                    assert!(
                        ctx.pool_stats().reuses > reuses,
                        "{what}: nothing was reused"
                    );
                }
            }
        }
    }
    let stats = ctx.pool_stats();
    // The free buffers stay bounded by what the largest band needed.
    assert!(
        stats.free_bytes <= 2 * stats.peak_taken_bytes,
        "pool holds {} free bytes for a peak of {}",
        stats.free_bytes,
        stats.peak_taken_bytes
    );
    assert_eq!(stats.taken_bytes, 0, "every buffer came back");
    ctx.release_pooled();
    assert_eq!(ctx.pool_stats().free_bytes, 0);
}

#[test]
fn a_streamed_gl_merge_allocates_nothing_once_warm_and_writes_the_cpu_engines_bytes() {
    let ctx = context();
    let dir = tempfile::tempdir().unwrap();
    let window = Bounds {
        x0: 0,
        y0: 0,
        x1: 47,
        y1: 59,
    };
    let inputs: Vec<std::path::PathBuf> = (0..2)
        .map(|k| {
            let path = dir.path().join(format!("in{k}.exr"));
            let image = Synth::new(window, 4, 70 + k).build();
            deepmerge::exr::write_deep(&path, &image, deepmerge::exr::Codec::Zip).unwrap();
            path
        })
        .collect();
    for output in [OutputKind::Flat { z: true }, OutputKind::Deep] {
        let options = StreamOptions {
            band_rows: Some(5),
            merge: MergeOptions {
                output,
                ..Default::default()
            },
            ..Default::default()
        };
        let cpu = dir.path().join("cpu.exr");
        merge_files(&inputs, &cpu, &options, MergeEngine::Cpu, None).unwrap();
        let gl = Stages::Host.on(GlOptions::default());
        let out = dir.path().join("gl.exr");
        let mut allocated = Vec::new();
        for _ in 0..2 {
            let before = ctx.pool_stats().allocations;
            let report = merge_files(&inputs, &out, &options, MergeEngine::Gl(&ctx, gl), None)
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(report.bands >= 10, "{} bands", report.bands);
            allocated.push(ctx.pool_stats().allocations - before);
            assert!(
                std::fs::read(&out).unwrap() == std::fs::read(&cpu).unwrap(),
                "{output:?}: the GL streamed output differs from the CPU engine's"
            );
        }
        assert_eq!(
            allocated[1], 0,
            "{output:?}: the second run allocated buffers"
        );
        let stats = ctx.pool_stats();
        println!(
            "{output:?}: buffers allocated {} then {}; requests served from the pool so far {}",
            allocated[0], allocated[1], stats.reuses
        );
    }
}

#[test]
fn a_merge_keeps_its_buffers_within_the_devices_default_budget() {
    // 2 x 600 x 400 pixels of up to 12 samples: about 2.9 M samples, whose GPU buffers (keys,
    // values, staged planes, counts) take well over 64 MiB in one band.
    let ctx = context();
    let window = Bounds::from_origin_size(0, 0, 600, 400);
    let a = Synth::new(window, 12, 71).build();
    let b = Synth::new(window, 12, 72).build();
    let options = MergeOptions::default();
    let (output, stats) = merge_images_gl(&ctx, &[&a, &b], &options, &GlOptions::default())
        .unwrap_or_else(|e| panic!("GL merge failed: {e}"));
    let reference = Reference::new(&[&a, &b], &options);
    assert_merge_matches(&output, &reference, Stages::Host, "a large pair");
    let budget = if ctx.info().software {
        // Host memory: bands like the CPU engine's, not the host's whole budget.
        assert!(
            stats.bands > 1,
            "one band of {} samples",
            stats.input_samples
        );
        deepmerge::gpu::memory::SOFTWARE_MERGE_BUDGET
    } else {
        deepmerge::gpu::memory::default_budget(&ctx)
    };
    let peak = ctx.pool_stats().peak_taken_bytes;
    assert!(
        peak <= budget,
        "{} bands took {peak} bytes at once, over the {budget}-byte default budget",
        stats.bands
    );
}
