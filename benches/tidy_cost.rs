//! What the tidy gate costs inputs that hold only points (issue 4).
//!
//! The merge's gate has two steps: gathering a pixel notes whether any of its samples is a volume
//! (`MergePlan::ordered_samples_into` returns it), and only pixels with one run `needs_tidy`, a
//! pass looking for an overlap; only pixels with an overlap go on to `tidy_pixel`. This bench
//! flattens two points-only images (which do carry ZBack = Z) pixel by pixel on one thread in
//! four ways that differ only in that step:
//!
//! - `no_gate`: the volume-free baseline, gather then flatten;
//! - `gate`: the merge's path, gather, volume flag, flatten;
//! - `pass_gate`: gather, `needs_tidy` on every pixel, flatten (the gate without the flag);
//! - `always_tidy`: what the gate saves, gather, `tidy_pixel` on every pixel, flatten;
//!
//! plus `needs_tidy` alone on one in-cache pixel of 16 points (ns per pixel) and `merge_images`
//! itself (parallel) for scale. Before criterion runs, `no_gate`, `gate`, `pass_gate` and
//! `no_gate` again are timed alternately and each one's minimum printed, with the A/A difference
//! as the noise floor: the most robust comparison on a busy machine.
//!
//! Run: `cargo bench --bench tidy_cost` (or add `--profile test` to reuse the test build).
//! Load-independent instruction counts of one path, `setup` being the shared part:
//! `TIDY_COST_ONLY=gate valgrind --tool=callgrind --callgrind-out-file=/dev/null
//! target/<profile>/deps/tidy_cost-<hash> --bench` (paths: `no_gate`, `gate`, `pass_gate`,
//! `always_tidy`, `setup`).
//!
//! Measured on the 2-core shared development box (test profile, 256x256, 2x8 points a pixel):
//! callgrind instructions beyond `setup`: no_gate 466.19 M, gate 466.32 M (+0.03%, two
//! instructions a pixel), pass_gate 477.53 M (+2.4%), always_tidy 1279.89 M (2.7x). Wall-clock
//! minima of interleaved runs put gate within the A/A noise floor (which reached ±30% there).

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use deepmerge::composite::{
    flatten_pixel, merge_images, needs_tidy, tidy_pixel, MergeOptions, MergePlan, PixelSamples,
};
use deepmerge::deep::{Bounds, Channel, DeepImage, DeepState, Plane, SampleType};

const SIDE: usize = 256;
const PER_PIXEL: usize = 8;

/// A points-only image: `PER_PIXEL` samples per pixel at pseudo-random sorted depths, channels
/// A,B,G,R,Z,ZBack with ZBack = Z: the gather reads ZBack as it would for a volumetric file, and
/// finds only points.
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
    PassGate,
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
            let any_volume = plan.ordered_samples_into(x, y, &mut samples, &mut scratch);
            pixel.gather(&samples, &plan.inputs, &plan.sources);
            match step {
                Step::NoGate => {}
                Step::Gate => {
                    if any_volume && needs_tidy(&pixel.samples) {
                        tidy_pixel(&mut pixel, &plan.composite);
                    }
                }
                Step::PassGate => {
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
    const ROUNDS: usize = 40;
    // no_gate runs twice per round: the difference between its two minima is the noise floor
    // the gate's cost has to be read against (an A/A control).
    let steps = [Step::NoGate, Step::Gate, Step::PassGate, Step::NoGate];
    let mut best = [f64::INFINITY; 4];
    for round in 0..ROUNDS {
        for k in 0..steps.len() {
            // Rotate the order so no path always runs first (warm caches, frequency steps).
            let k = (k + round) % steps.len();
            let t = std::time::Instant::now();
            black_box(flatten_all(plan, steps[k]));
            best[k] = best[k].min(t.elapsed().as_secs_f64());
        }
    }
    let reference = best[0].min(best[3]);
    let relative = |t: f64| (t / reference - 1.0) * 100.0;
    println!(
        "interleaved minimum of {ROUNDS}: no_gate {:.2} ms, gate {:.2} ms ({:+.2}%), \
         pass_gate {:.2} ms ({:+.2}%), A/A noise floor {:+.2}%",
        reference * 1e3,
        best[1] * 1e3,
        relative(best[1]),
        best[2] * 1e3,
        relative(best[2]),
        (best[3] / best[0] - 1.0) * 100.0
    );
}

fn bench(c: &mut Criterion) {
    let (a, b) = (points_image(1), points_image(2));
    let plan = MergePlan::new(&[&a, &b]).unwrap();
    // Instruction counts do not depend on the machine's load: with TIDY_COST_ONLY set, run one
    // path once and exit, for `valgrind --tool=callgrind` (or any instruction counter) to count;
    // `setup` runs none, so its count is what the others share.
    if let Ok(only) = std::env::var("TIDY_COST_ONLY") {
        let step = match only.as_str() {
            "setup" => None,
            "no_gate" => Some(Step::NoGate),
            "gate" => Some(Step::Gate),
            "pass_gate" => Some(Step::PassGate),
            "always_tidy" => Some(Step::AlwaysTidy),
            other => panic!("TIDY_COST_ONLY={other}: not a path"),
        };
        if let Some(step) = step {
            black_box(flatten_all(&plan, step));
        }
        std::process::exit(0);
    }
    // The four paths must agree on points-only input (the gate never fires).
    let base = flatten_all(&plan, Step::NoGate);
    assert_eq!(base, flatten_all(&plan, Step::Gate));
    assert_eq!(base, flatten_all(&plan, Step::PassGate));
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
    group.bench_function("pass_gate", |bch| {
        bch.iter(|| black_box(flatten_all(&plan, Step::PassGate)))
    });
    group.bench_function("always_tidy", |bch| {
        bch.iter(|| black_box(flatten_all(&plan, Step::AlwaysTidy)))
    });
    group.finish();
    // The gate on one pixel whose samples are in cache, as in the merge: ns per pixel.
    let mut one = Vec::new();
    plan.ordered_samples(0, 0, &mut one);
    c.bench_function("needs_tidy_one_pixel_of_16_points_in_cache", |bch| {
        bch.iter(|| black_box(needs_tidy(black_box(&one))))
    });
    c.bench_function("merge_images_points_only_parallel", |bch| {
        bch.iter(|| black_box(merge_images(&[&a, &b], &MergeOptions::default()).unwrap()))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
