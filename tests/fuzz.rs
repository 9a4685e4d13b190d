//! A deterministic mutation fuzzer over the reader and the merge, run on stable as a test.
//!
//! Seeds are the small deep files of `tests/data` and synthetic files of every codec (whose
//! chunk layout is known, so count tables and chunk headers can be edited on purpose). Each
//! mutant (bit flips, interesting values at random or at known header fields, chunk-header and
//! count-table edits, truncations) is decoded in-process with a 64 MiB budget and, when it
//! decodes, merged with a good image through `composite::check_merge` and `merge_images`, as
//! the CLI does. A mutant must not panic, must not take long, and any error must be one line.
//! An out-of-memory abort kills the test binary, which fails the run too.
//!
//! `cargo test --release --test fuzz` runs 10,000 mutants (about two seconds); a longer campaign:
//! `DEEPMERGE_FUZZ_MUTANTS=200000 DEEPMERGE_FUZZ_SEED=7 cargo test --release --test fuzz -- --nocapture`.
//! Inputs that fail are written to `$DEEPMERGE_FUZZ_OUT` (default: the system temp directory)
//! and, once understood, belong in `tests/data/hostile/` with a test in `tests/hostile.rs`.
//!
//! The same idea against the built binary, each run under `ulimit -v` and a time limit, with
//! the CLI's own option sets (flat, deep, tidy, info): `python3 tests/campaign/cli_mutants.py
//! --binary target/release/deepmerge --mutants 3000 --seed 11`.
//!
//! Coverage-guided: `fuzz/` is a cargo-fuzz (libFuzzer + ASan) target over the same reader and
//! merge, `cargo install cargo-fuzz`, then `cargo +nightly fuzz run read_merge -O --
//! -max_total_time=600 -timeout=10` (seed it with `tests/data/oiio/*.exr` copied into
//! `fuzz/corpus/read_merge/`). It needs a nightly toolchain, so it is not part of `cargo test`
//! (its own workspace); these two deterministic harnesses are.

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use deepmerge::composite::{check_merge, merge_images, MergeOptions, OutputKind};
use deepmerge::deep::{Bounds, DeepImage};
use deepmerge::exr::{decode_deep, encode_deep, Codec, ReadOptions};
use deepmerge::scene::SceneRng;

/// The budget every mutant is read and merged under: small, so a mutant that gets past the
/// checks with an absurd size shows as a refusal, not as a machine out of memory.
const BUDGET: u64 = 64 << 20;

/// A mutant slower than this is a hang (the bar is 10 s; small seeds take ~1 ms).
const SLOW: Duration = Duration::from_secs(5);

/// A seed file and, for synthetic seeds, where its chunks start.
struct Seed {
    name: String,
    bytes: Vec<u8>,
    chunks: Vec<usize>,
}

fn seeds() -> Vec<Seed> {
    let mut seeds = Vec::new();
    for rel in [
        "oiio/deep-nosamples.exr",
        "oiio/deep-onesample.exr",
        "oiio/tinydeep.exr",
        "oiio/az.exr",
        "openexr/11.deep.exr",
        "oiio/input-crop.deep.exr",
    ] {
        seeds.push(Seed {
            name: rel.into(),
            bytes: std::fs::read(data(rel)).unwrap(),
            chunks: Vec::new(),
        });
    }
    for (k, codec) in [Codec::None, Codec::Rle, Codec::Zips, Codec::Zip]
        .into_iter()
        .enumerate()
    {
        let window = Bounds::from_origin_size(-2, 3, 7, 18);
        let image = synthetic(window, k as u32, |p| (p % 5) as u32);
        let bytes = encode_deep(&image, codec).unwrap();
        let count = window.height().div_ceil(codec.lines_per_chunk());
        let table = (8..bytes.len() - 8)
            .find(|&i| {
                u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap()) == (i + 8 * count) as u64
            })
            .expect("offset table");
        let chunks = (0..count)
            .map(|c| {
                let at = table + 8 * c;
                u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize
            })
            .collect();
        seeds.push(Seed {
            name: format!("synthetic-{}", codec.name()),
            bytes,
            chunks,
        });
    }
    seeds
}

/// Values that find off-by-ones and overflows.
fn interesting(rng: &mut SceneRng) -> i64 {
    const VALUES: [i64; 14] = [
        0,
        1,
        -1,
        2,
        16,
        255,
        0x7fff,
        0x8000,
        i32::MAX as i64,
        i32::MIN as i64,
        1 << 28,
        1 << 30,
        u32::MAX as i64,
        i64::MAX,
    ];
    VALUES[rng.below(VALUES.len())]
}

fn put(bytes: &mut [u8], at: usize, value: &[u8]) {
    if at + value.len() <= bytes.len() {
        bytes[at..at + value.len()].copy_from_slice(value);
    }
}

/// Header attributes worth aiming at: their value bytes, if present.
fn header_fields(bytes: &[u8]) -> Vec<usize> {
    let mut fields = Vec::new();
    for key in [
        "dataWindow\0box2i\0",
        "displayWindow\0box2i\0",
        "tiles\0tiledesc\0",
        "chunkCount\0int\0",
        "compression\0compression\0",
        "channels\0chlist\0",
        "type\0string\0",
        "version\0int\0",
        "lineOrder\0lineOrder\0",
    ] {
        let key = key.as_bytes();
        if let Some(p) = bytes.windows(key.len()).position(|w| w == key) {
            fields.push(p + key.len() + 4);
        }
    }
    fields
}

/// One mutant of `seed`: one to four mutations.
fn mutate(seed: &Seed, rng: &mut SceneRng) -> Vec<u8> {
    let mut bytes = seed.bytes.clone();
    for _ in 0..1 + rng.below(4) {
        let len = bytes.len().max(1);
        match rng.below(8) {
            // Bit flips anywhere.
            0 => {
                for _ in 0..1 + rng.below(8) {
                    let at = rng.below(len);
                    if let Some(b) = bytes.get_mut(at) {
                        *b ^= 1 << rng.below(8);
                    }
                }
            }
            // An interesting 32- or 64-bit value anywhere.
            1 => {
                let at = rng.below(len);
                let v = interesting(rng);
                if rng.below(2) == 0 {
                    put(&mut bytes, at, &(v as i32).to_le_bytes());
                } else {
                    put(&mut bytes, at, &v.to_le_bytes());
                }
            }
            // An interesting value in a header field.
            2 => {
                let fields = header_fields(&bytes);
                if !fields.is_empty() {
                    let at = fields[rng.below(fields.len())] + 4 * rng.below(4);
                    put(&mut bytes, at, &(interesting(rng) as i32).to_le_bytes());
                }
            }
            // A chunk header field: y, packed table, packed samples, unpacked size.
            3 if !seed.chunks.is_empty() => {
                let chunk = seed.chunks[rng.below(seed.chunks.len())];
                match rng.below(4) {
                    0 => put(&mut bytes, chunk, &(interesting(rng) as i32).to_le_bytes()),
                    k => put(
                        &mut bytes,
                        chunk + 4 + 8 * (k - 1),
                        &(interesting(rng) as u64).to_le_bytes(),
                    ),
                }
            }
            // A count-table entry (raw tables of the synthetic NONE seed, bytes elsewhere),
            // kept consistent with itself: one pixel's count raised, the rest following.
            4 if !seed.chunks.is_empty() => {
                let chunk = seed.chunks[rng.below(seed.chunks.len())];
                let table = chunk + 28;
                let k = rng.below(7);
                let raise = [1i32, 1000, 1 << 20, 1 << 29][rng.below(4)];
                for j in k..7 {
                    let at = table + 4 * j;
                    if at + 4 <= bytes.len() {
                        let v = i32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
                        put(&mut bytes, at, &v.wrapping_add(raise).to_le_bytes());
                    }
                }
                if rng.below(2) == 0 {
                    // And claim the matching unpacked size (Z f32 + 4 halves: 12 bytes).
                    let claimed = raise as u64 * (7 - k) as u64 * 12;
                    let at = chunk + 20;
                    if at + 8 <= bytes.len() {
                        let old = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
                        put(&mut bytes, at, &old.wrapping_add(claimed).to_le_bytes());
                    }
                }
            }
            // Truncate.
            5 => bytes.truncate(rng.below(len)),
            // Duplicate or delete a stretch.
            6 => {
                let at = rng.below(len);
                let n = (1 + rng.below(64)).min(bytes.len().saturating_sub(at));
                if rng.below(2) == 0 {
                    bytes.drain(at..at + n);
                } else {
                    let stretch: Vec<u8> = bytes[at..at + n].to_vec();
                    bytes.splice(at..at, stretch);
                }
            }
            // A random byte.
            _ => {
                let at = rng.below(len);
                if let Some(b) = bytes.get_mut(at) {
                    *b = rng.below(256) as u8;
                }
            }
        }
    }
    bytes
}

/// Read and merge one mutant as the CLI would; the error text if it fails.
fn run_one(bytes: &[u8], good: &DeepImage, round: usize) -> Option<String> {
    let options = ReadOptions {
        max_memory: BUDGET,
        ..ReadOptions::default()
    };
    let image = match decode_deep(bytes, &options).and_then(|i| i.check_depths().map(|_| i)) {
        Ok(image) => image,
        Err(e) => return Some(e.to_string()),
    };
    let output = match round % 3 {
        0 => OutputKind::Flat { z: true },
        _ => OutputKind::Deep,
    };
    let merge = MergeOptions {
        output,
        tidy: round % 3 == 2,
        ..MergeOptions::default()
    };
    let inputs = [good, &image];
    let paths = [Path::new("good.exr"), Path::new("mutant.exr")];
    let result = check_merge(&inputs, &paths, &merge, BUDGET)
        .and_then(|_| merge_images(&inputs, &merge))
        .map_err(|e| e.in_merge(&paths));
    result.err().map(|e| e.to_string())
}

fn mutants_to_run() -> usize {
    std::env::var("DEEPMERGE_FUZZ_MUTANTS")
        .ok()
        .map(|v| v.parse().expect("DEEPMERGE_FUZZ_MUTANTS is a count"))
        .unwrap_or(10_000)
}

fn keep(bytes: &[u8], what: &str) -> PathBuf {
    let dir = std::env::var_os("DEEPMERGE_FUZZ_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let path = dir.join(format!("deepmerge-fuzz-{what}.exr"));
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn mutants_never_panic_hang_or_print_more_than_one_line() {
    let seed: u64 = std::env::var("DEEPMERGE_FUZZ_SEED")
        .ok()
        .map(|v| v.parse().expect("DEEPMERGE_FUZZ_SEED is a number"))
        .unwrap_or(1);
    let mutants = mutants_to_run();
    let seeds = seeds();
    let good = synthetic(Bounds::from_origin_size(0, 0, 8, 8), 9, |p| (p % 3) as u32);
    let mut rng = SceneRng::new(seed, "fuzz");
    // Silence the panic hook's report: panics are collected and reported below.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let (mut decoded, mut refused, mut slowest) = (0usize, 0usize, Duration::ZERO);
    let mut problems = Vec::new();
    let start = Instant::now();
    for round in 0..mutants {
        let source = &seeds[rng.below(seeds.len())];
        let bytes = mutate(source, &mut rng);
        let began = Instant::now();
        let outcome = catch_unwind(AssertUnwindSafe(|| run_one(&bytes, &good, round)));
        let took = began.elapsed();
        slowest = slowest.max(took);
        let what = format!("{seed}-{round}");
        match outcome {
            Err(_) => problems.push(format!(
                "mutant {round} of {} panicked: {}",
                source.name,
                keep(&bytes, &what).display()
            )),
            Ok(Some(text)) if text.lines().count() != 1 || text.contains('\n') => {
                problems.push(format!(
                    "mutant {round} of {}: error of several lines {text:?}: {}",
                    source.name,
                    keep(&bytes, &what).display()
                ))
            }
            Ok(Some(_)) => refused += 1,
            Ok(None) => decoded += 1,
        }
        if took > SLOW {
            problems.push(format!(
                "mutant {round} of {} took {took:?}: {}",
                source.name,
                keep(&bytes, &what).display()
            ));
        }
    }
    std::panic::set_hook(hook);
    eprintln!(
        "fuzz: {mutants} mutants (seed {seed}) in {:.1} s: {decoded} merged, {refused} refused \
         with one line, slowest {slowest:?}, {} problems",
        start.elapsed().as_secs_f64(),
        problems.len()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The mutations must reach both outcomes, or the harness tests nothing.
    assert!(
        decoded > mutants / 50 && refused > mutants / 50,
        "{decoded} merged, {refused} refused"
    );
}
