//! Merge-kernel timing per layout × method on the GL engine, as ratios to LL-stepwise in the
//! same run, for the real Balls+Leaves pair and a large synthetic pair, beside the copy
//! bandwidth floor.
//!
//! `cargo run --release --example gl_merge_timing [WIDTH HEIGHT SAMPLES_PER_PIXEL REPEATS]`
//!
//! With `--banded WIDTH HEIGHT SAMPLES_PER_PIXEL` it instead merges one large synthetic pair
//! once through `merge_images_gl` (row bands, flat output) and prints the statistics: the
//! 1920x1080 at ~100 samples/pixel check is `--banded 1920 1080 50` (50 per input, 100 merged).
//!
//! With `--tidy-gate [REPEATS]` it measures what the GPU tidy path costs inputs made only of
//! points (issue 4): the flat merge of Balls+Leaves and of a synthetic points pair with the tidy
//! stages on the GPU (the flagged pixels are listed by a mark + scan pass and one count is read
//! back, finding none) against the host choice (no extra pass), runs interleaved, minima, with a
//! second host run as the A/A noise floor.

use std::path::Path;
use std::time::Instant;

use deepmerge::bench::gl_copy_bandwidth;
use deepmerge::composite::{MergeOptions, OutputKind};
use deepmerge::deep::{Bounds, Channel, DeepImage, DeepState, Plane, SampleType};
use deepmerge::exr::{read_deep, ReadOptions};
use deepmerge::gpu::{merge_images_gl, GlContext, GlOptions, GpuMerger, Layout, MergeMethod};

fn synthetic(width: usize, height: usize, per_pixel: u32, seed: u64) -> DeepImage {
    let mut state = seed;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as u32
    };
    let pixels = width * height;
    let mut counts = Vec::with_capacity(pixels);
    let (mut a, mut z) = (Vec::new(), Vec::new());
    for _ in 0..pixels {
        let n = per_pixel / 2 + next() % (per_pixel + 1);
        counts.push(n);
        let mut depths: Vec<f32> = (0..n).map(|_| (next() % 100_000) as f32 * 0.01).collect();
        depths.sort_by(f32::total_cmp);
        for d in depths {
            z.push(d);
            a.push(0.02 + (next() % 10) as f32 * 0.001);
        }
    }
    let window = Bounds::from_origin_size(0, 0, width, height);
    let planes = vec![
        Plane::F32(a.clone()),
        Plane::F32(a.iter().map(|v| v * 0.5).collect()),
        Plane::F32(a.iter().map(|v| v * 0.7).collect()),
        Plane::F32(a.iter().map(|v| v * 0.9).collect()),
        Plane::F32(z),
    ];
    let channels = ["A", "B", "G", "R", "Z"]
        .map(|n| Channel::new(n, SampleType::F32))
        .to_vec();
    DeepImage::from_counts(window, window, channels, &counts, planes, DeepState::Sorted).unwrap()
}

fn table(ctx: &GlContext, name: &str, inputs: &[&DeepImage], repeats: usize) {
    let options = MergeOptions {
        output: OutputKind::Flat { z: false },
        ..Default::default()
    };
    let samples: usize = inputs.iter().map(|i| i.sample_count()).sum();
    println!("\n{name}: {samples} samples, flat output, best of {repeats} merge_resident runs");
    println!("| layout | method | merge ms | ratio to LL-S | input MiB |");
    println!("|---|---|---|---|---|");
    let mut baseline = None;
    for layout in Layout::ALL {
        for (method, block_size) in [(MergeMethod::Stepwise, 8), (MergeMethod::RegisterBlock, 8)] {
            let gl = GlOptions {
                layout,
                method,
                block_size,
                ..Default::default()
            };
            let mut merger = GpuMerger::upload(ctx, inputs, &options, &gl).expect("upload");
            merger.merge_resident().expect("warm-up merge (compiles)");
            let best = (0..repeats)
                .map(|_| merger.merge_resident().expect("merge"))
                .fold(f64::INFINITY, f64::min);
            let (_, stats) = merger.finish().expect("finish");
            let base = *baseline.get_or_insert(best);
            println!(
                "| {} | {} | {:.2} | {:.2} | {:.1} |",
                layout.name(),
                method.name(),
                best * 1e3,
                best / base,
                stats.input_bytes.total() as f64 / (1 << 20) as f64
            );
        }
    }
}

/// Minimum `merge_resident` seconds with the tidy stages on the GPU and on the host, runs
/// interleaved (so load changes hit both), after a warm-up each.
fn tidy_gate_cost(ctx: &GlContext, name: &str, inputs: &[&DeepImage], repeats: usize) {
    let options = MergeOptions {
        output: OutputKind::Flat { z: false },
        ..Default::default()
    };
    let merger = |on_gpu| {
        let gl = GlOptions {
            tidy_on_gpu: Some(on_gpu),
            ..Default::default()
        };
        let mut m = GpuMerger::upload(ctx, inputs, &options, &gl).expect("upload");
        m.merge_resident().expect("warm-up merge (compiles)");
        m
    };
    let (mut gpu, mut host, mut again) = (merger(true), merger(false), merger(false));
    let (mut best_gpu, mut best_host, mut best_again) =
        (f64::INFINITY, f64::INFINITY, f64::INFINITY);
    for _ in 0..repeats {
        best_gpu = best_gpu.min(gpu.merge_resident().expect("merge"));
        best_host = best_host.min(host.merge_resident().expect("merge"));
        best_again = best_again.min(again.merge_resident().expect("merge"));
    }
    let (_, stats) = gpu.finish().expect("finish");
    assert_eq!(
        stats.gpu_tidied_pixels + stats.host_tidied_pixels,
        0,
        "points only"
    );
    println!(
        "{name}: merge (BIA RBM 8, flat) min of {repeats}: tidy on GPU {:.2} ms, on host {:.2} ms, ratio {:.3} (A/A noise: host again {:.3})",
        best_gpu * 1e3,
        best_host * 1e3,
        best_gpu / best_host,
        best_again / best_host
    );
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "--tidy-gate") {
        let repeats = args.get(1).map_or(15, |r| r.parse().expect("repeats"));
        let ctx = GlContext::new().expect("GL context");
        print!("{}", ctx.info());
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/openexr-images");
        let balls = read_deep(&dir.join("Balls.exr"), &ReadOptions::default()).expect("Balls");
        let leaves = read_deep(&dir.join("Leaves.exr"), &ReadOptions::default()).expect("Leaves");
        tidy_gate_cost(&ctx, "Balls+Leaves", &[&balls, &leaves], repeats);
        let a = synthetic(512, 512, 12, 1);
        let b = synthetic(512, 512, 12, 2);
        tidy_gate_cost(&ctx, "synthetic 512x512 points", &[&a, &b], repeats);
        return;
    }
    let banded = args.first().is_some_and(|a| a == "--banded");
    if banded {
        args.remove(0);
    }
    let numbers: Vec<usize> = args.iter().map(|a| a.parse().expect("numbers")).collect();
    let width = numbers.first().copied().unwrap_or(512);
    let height = numbers.get(1).copied().unwrap_or(512);
    let per_pixel = numbers.get(2).copied().unwrap_or(12) as u32;
    let repeats = numbers.get(3).copied().unwrap_or(3);
    let ctx = GlContext::new().expect("GL context");
    print!("{}", ctx.info());
    if banded {
        let start = Instant::now();
        let a = synthetic(width, height, per_pixel, 1);
        let b = synthetic(width, height, per_pixel, 2);
        println!(
            "synthetic pair {width}x{height}: {} + {} samples, made in {:.1}s",
            a.sample_count(),
            b.sample_count(),
            start.elapsed().as_secs_f64()
        );
        let options = MergeOptions {
            output: OutputKind::Flat { z: false },
            ..Default::default()
        };
        for (layout, method) in [
            (Layout::LinkedList, MergeMethod::Stepwise),
            (Layout::BlockedInterleaved, MergeMethod::RegisterBlock),
        ] {
            let gl = GlOptions {
                layout,
                method,
                block_size: 8,
                ..Default::default()
            };
            let start = Instant::now();
            let (_, stats) = merge_images_gl(&ctx, &[&a, &b], &options, &gl).expect("banded merge");
            print!("{stats}");
            println!("wall {:.1}s", start.elapsed().as_secs_f64());
        }
        return;
    }
    let (kernel, copy) = gl_copy_bandwidth(&ctx, 64 << 20, 5).expect("copy bandwidth");
    println!(
        "copy bandwidth (read + write): kernel {:.2} GB/s, glCopyBufferSubData {:.2} GB/s",
        kernel / 1e9,
        copy / 1e9
    );
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/openexr-images");
    let balls = read_deep(&dir.join("Balls.exr"), &ReadOptions::default()).expect("Balls");
    let leaves = read_deep(&dir.join("Leaves.exr"), &ReadOptions::default()).expect("Leaves");
    table(&ctx, "Balls+Leaves", &[&balls, &leaves], repeats);
    let a = synthetic(width, height, per_pixel, 1);
    let b = synthetic(width, height, per_pixel, 2);
    table(
        &ctx,
        &format!("synthetic {width}x{height}, ~{per_pixel} samples/pixel each"),
        &[&a, &b],
        repeats,
    );
}
