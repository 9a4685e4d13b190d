//! What the tidy gate costs inputs that hold only points (issue 4).
//!
//! Every pixel of a merge runs `needs_tidy` (one pass over its depths) before flattening; only
//! pixels where volumes overlap go on to `tidy_pixel`. For points-only inputs the gate is all they
//! pay, and it must not be measurable. This bench flattens two points-only images pixel by pixel on
//! one thread in three ways that differ only in that step:
//!
//! - `no_gate`: the volume-free baseline, gather then flatten;
//! - `gate`: the merge's path, gather, `needs_tidy`, flatten;
//! - `always_tidy`: what the gate saves, gather, `tidy_pixel` on every pixel, flatten;
//!
//! plus `gate_alone`, `needs_tidy` over every pixel's pre-gathered samples (an upper bound on the
//! gate's own cost: it streams 25 MB of sample lists from memory, which the merge has in cache),
//! and `merge_images` itself (parallel) for scale. Before criterion runs, `no_gate` and `gate`
//! are also timed alternately and the minimum of each printed: the most robust comparison on a
//! busy machine. Run: `cargo bench --bench tidy_cost` (or `--profile test` to reuse the test build).

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use deepmerge::composite::{
    flatten_pixel, merge_images, needs_tidy, tidy_pixel, MergeOptions, MergePlan, PixelSamples,
    Sample,
};
use deepmerge::deep::{Bounds, Channel, DeepImage, DeepState, Plane, SampleType};

const SIDE: usize = 256;
const PER_PIXEL: usize = 8;

/// A points-only image: `PER_PIXEL` samples per pixel at pseudo-random sorted depths, channels
/// A,B,G,R,Z,ZBack with ZBack = Z. ZBack is there on purpose: without it the merge knows from the
/// header that nothing can overlap and skips the gate altogether (`MergePlan::may_have_volumes`).
fn points_image(seed: u32) -> DeepImage {
    let window = Bounds::from_origin_size(0, 0, SIDE, SIDE);
    let mut state = seed.wrapping_mul(2_654_435_761) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        (state >> 8) as f32 / (1u32 << 24) as f32
    };
    let total = SIDE * SIDE * PER_PIXEL;
    let (mut a, mut c, mut z) = (
        Vec::with_capacity(total),
        Vec::with_capacity(total),
        Vec::with_capacity(total),
    );
    for _ in 0..SIDE * SIDE {
        let mut depth = 1.0;
        for _ in 0..PER_PIXEL {
            depth += next();
            let alpha = 0.05 + 0.3 * next();
            z.push(depth);
            a.push(alpha);
            c.push(alpha * next());
        }
    }
    let channels = ["A", "B", "G", "R", "Z", "ZBack"]
        .iter()
        .map(|n| Channel::new(*n, SampleType::F32))
        .collect();
    let planes = vec![
        Plane::F32(a),
        Plane::F32(c.clone()),
        Plane::F32(c.clone()),
        Plane::F32(c),
        Plane::F32(z.clone()),
        Plane::F32(z),
    ];
    let counts = vec![PER_PIXEL as u32; SIDE * SIDE];
    DeepImage::from_counts(window, window, channels, &counts, planes, DeepState::Sorted).unwrap()
}

#[derive(Clone, Copy)]
enum Step {
    NoGate,
    Gate,
    AlwaysTidy,
}

/// Flatten every pixel on one thread; returns a checksum so nothing is optimised away.
fn flatten_all(plan: &MergePlan, step: Step) -> f32 {
    let mut samples = Vec::new();
    let mut scratch = Vec::new();
    let mut pixel = PixelSamples::new(plan.composite.len());
    let mut sum = 0.0;
    for y in plan.window.y0..=plan.window.y1 {
        for x in plan.window.x0..=plan.window.x1 {
            plan.ordered_samples_into(x, y, &mut samples, &mut scratch);
            pixel.gather(&samples, &plan.inputs, &plan.sources);
            match step {
                Step::NoGate => {}
                Step::Gate => {
                    if needs_tidy(&pixel.samples) {
                        tidy_pixel(&mut pixel, &plan.composite);
                    }
                }
                Step::AlwaysTidy => tidy_pixel(&mut pixel, &plan.composite),
            }
            sum += flatten_pixel(&pixel, &plan.composite).values[0];
        }
    }
    sum
}

/// Time `no_gate` and `gate` alternately, many rounds, and keep each one's fastest run: on a
/// shared machine other work only ever adds time, so the minimum of interleaved runs compares the
/// two paths under the same conditions far better than two criterion runs taken minutes apart.
fn interleaved_minimum(plan: &MergePlan) {
    const ROUNDS: usize = 30;
    let (mut without, mut with) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..ROUNDS {
        let t = std::time::Instant::now();
        black_box(flatten_all(plan, Step::NoGate));
        without = without.min(t.elapsed().as_secs_f64());
        let t = std::time::Instant::now();
        black_box(flatten_all(plan, Step::Gate));
        with = with.min(t.elapsed().as_secs_f64());
    }
    println!(
        "interleaved minimum of {ROUNDS}: no_gate {:.2} ms, gate {:.2} ms, gate costs {:+.2}%",
        without * 1e3,
        with * 1e3,
        (with / without - 1.0) * 100.0
    );
}

fn bench(c: &mut Criterion) {
    let (a, b) = (points_image(1), points_image(2));
    let plan = MergePlan::new(&[&a, &b]).unwrap();
    assert!(
        plan.may_have_volumes,
        "the bench must exercise the per-pixel gate"
    );
    // The three paths must agree on points-only input (the gate never fires).
    let base = flatten_all(&plan, Step::NoGate);
    assert_eq!(base, flatten_all(&plan, Step::Gate));
    assert_eq!(base, flatten_all(&plan, Step::AlwaysTidy));

    interleaved_minimum(&plan);

    let mut group = c.benchmark_group(format!(
        "points_only_{SIDE}x{SIDE}_2x{PER_PIXEL}_samples_one_thread"
    ));
    group.sample_size(20);
    group.bench_function("no_gate", |bch| {
        bch.iter(|| black_box(flatten_all(&plan, Step::NoGate)))
    });
    group.bench_function("gate", |bch| {
        bch.iter(|| black_box(flatten_all(&plan, Step::Gate)))
    });
    group.bench_function("always_tidy", |bch| {
        bch.iter(|| black_box(flatten_all(&plan, Step::AlwaysTidy)))
    });
    let pixels: Vec<Vec<Sample>> = (plan.window.y0..=plan.window.y1)
        .flat_map(|y| (plan.window.x0..=plan.window.x1).map(move |x| (x, y)))
        .map(|(x, y)| {
            let mut samples = Vec::new();
            plan.ordered_samples(x, y, &mut samples);
            samples
        })
        .collect();
    group.bench_function("gate_alone", |bch| {
        bch.iter(|| black_box(pixels.iter().filter(|p| needs_tidy(black_box(p))).count()))
    });
    group.finish();
    c.bench_function("merge_images_points_only_parallel", |bch| {
        bch.iter(|| black_box(merge_images(&[&a, &b], &MergeOptions::default()).unwrap()))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
