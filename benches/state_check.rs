//! What stamping the `deepImageState` the pixels satisfy costs a deep write (issue 19, item 7).
//!
//! The writers check the operation's claim on every pixel (`DeepImage::held_state`, one pass over
//! the depths) before stamping it. This bench merges the procedural 1920x1080 scenes of
//! `deepmerge scene` (two inputs each) to deep images on the CPU, then times, interleaved and
//! `REPEATS` times each, keeping each one's minimum (the most robust figure on a busy machine):
//!
//! - `check`: `held_state` alone, with the plain merge's claim (sorted) and with tidy;
//! - `encode`: the whole deep file encoded in memory (ZIPS) with the state, which runs the check;
//! - `encode_no_state`: the same without `deepImageState` (`--no-deep-state`), so no check;
//!
//! and prints the check's share of the encode. Run: `cargo bench --bench state_check`
//! (`STATE_CHECK_SIZE=WxH` for another size, `STATE_CHECK_REPEATS=N`).

use std::time::{Duration, Instant};

use deepmerge::composite::{merge_images, MergeOptions, MergeOutput, OutputKind};
use deepmerge::deep::{DeepImage, DeepState};
use deepmerge::exr::{encode_deep_with, DeepWriteOptions};
use deepmerge::scene::generate_inputs;

/// Minimum wall time of `f` over `repeats` runs.
fn min_time(repeats: usize, mut f: impl FnMut()) -> Duration {
    (0..repeats)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let size = std::env::var("STATE_CHECK_SIZE").unwrap_or_else(|_| "1920x1080".into());
    let (w, h) = size
        .split_once('x')
        .and_then(|(w, h)| Some((w.parse().ok()?, h.parse().ok()?)))
        .expect("STATE_CHECK_SIZE is WIDTHxHEIGHT");
    let repeats: usize = std::env::var("STATE_CHECK_REPEATS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5);
    // `cargo bench` passes `--bench`; nothing else is read from the command line.
    println!(
        "scene        samples   check(sorted) check(tidy)   encode  encode_no_state  check/encode"
    );
    for name in ["atrium", "powerplant", "hairball", "planes"] {
        let inputs = generate_inputs(name, w, h, 1, 2).expect("scene");
        let refs: Vec<&DeepImage> = inputs.iter().collect();
        let options = MergeOptions {
            output: OutputKind::Deep,
            ..MergeOptions::default()
        };
        let MergeOutput::Deep(mut merged) = merge_images(&refs, &options).expect("merge") else {
            unreachable!("deep output asked for")
        };
        let with_state = DeepWriteOptions::default();
        let without_state = DeepWriteOptions {
            write_state: false,
            ..DeepWriteOptions::default()
        };
        merged.state = DeepState::Sorted;
        let mut tidy = merged.clone();
        tidy.state = DeepState::Tidy;
        let mut times = [Duration::MAX; 4];
        for _ in 0..repeats {
            let t = [
                min_time(1, || {
                    std::hint::black_box(merged.held_state());
                }),
                min_time(1, || {
                    std::hint::black_box(tidy.held_state());
                }),
                min_time(1, || {
                    std::hint::black_box(encode_deep_with(&merged, &with_state).unwrap());
                }),
                min_time(1, || {
                    std::hint::black_box(encode_deep_with(&merged, &without_state).unwrap());
                }),
            ];
            for (best, t) in times.iter_mut().zip(t) {
                *best = (*best).min(t);
            }
        }
        println!(
            "{name:<11} {:>9} {:>12.2}ms {:>10.2}ms {:>7.1}ms {:>14.1}ms {:>12.2}%",
            merged.sample_count(),
            ms(times[0]),
            ms(times[1]),
            ms(times[2]),
            ms(times[3]),
            100.0 * times[0].as_secs_f64() / times[2].as_secs_f64(),
        );
    }
}
