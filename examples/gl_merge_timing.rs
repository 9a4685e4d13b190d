//! Merge-kernel timing per layout × method on the GL engine, as ratios to LL-stepwise in the
//! same run, for the real Balls+Leaves pair and a large synthetic pair, beside the copy
//! bandwidth floor.
//!
//! `cargo run --release --example gl_merge_timing [pixels_per_side samples_per_pixel repeats]`

use std::path::Path;
use std::time::Instant;

use deepmerge::composite::{MergeOptions, OutputKind};
use deepmerge::deep::{Bounds, Channel, DeepImage, DeepState, Plane, SampleType};
use deepmerge::exr::{read_deep, ReadOptions};
use deepmerge::gpu::engine::copy_bandwidth;
use deepmerge::gpu::{GlContext, GlOptions, GpuMerger, Layout, MergeMethod};

fn synthetic(side: usize, per_pixel: u32, seed: u64) -> DeepImage {
    let mut state = seed;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as u32
    };
    let pixels = side * side;
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
    let window = Bounds::from_origin_size(0, 0, side, side);
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

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("numbers"))
        .collect();
    let side = args.first().copied().unwrap_or(512);
    let per_pixel = args.get(1).copied().unwrap_or(16) as u32;
    let repeats = args.get(2).copied().unwrap_or(3);
    let ctx = GlContext::new().expect("GL context");
    print!("{}", ctx.info());
    let (kernel, copy) = copy_bandwidth(&ctx, 64 << 20, 5).expect("copy bandwidth");
    println!(
        "copy bandwidth (read + write): kernel {:.2} GB/s, glCopyBufferSubData {:.2} GB/s",
        kernel / 1e9,
        copy / 1e9
    );
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/openexr-images");
    let balls = read_deep(&dir.join("Balls.exr"), &ReadOptions::default()).expect("Balls");
    let leaves = read_deep(&dir.join("Leaves.exr"), &ReadOptions::default()).expect("Leaves");
    table(&ctx, "Balls+Leaves", &[&balls, &leaves], repeats);
    let start = Instant::now();
    let a = synthetic(side, per_pixel, 1);
    let b = synthetic(side, per_pixel, 2);
    eprintln!(
        "synthetic pair made in {:.1}s",
        start.elapsed().as_secs_f64()
    );
    table(
        &ctx,
        &format!("synthetic {side}x{side}, ~{per_pixel} samples/pixel each"),
        &[&a, &b],
        repeats,
    );
}
