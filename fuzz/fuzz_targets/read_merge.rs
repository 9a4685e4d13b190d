//! Coverage-guided twin of `tests/fuzz.rs`: decode any bytes as a deep EXR under a small
//! budget and, when they decode, merge the image with itself (flat, deep, tidy deep) through
//! `check_merge` as the CLI does. A panic, an abort (allocation beyond the budget) or a timeout
//! is a finding; errors are expected. Seed corpus: `tests/data/oiio/*.exr`,
//! `tests/data/openexr/11.deep.exr`.

#![no_main]

use std::path::Path;

use deepmerge::composite::{check_merge, merge_images, MergeOptions, OutputKind};
use deepmerge::exr::{decode_deep, ReadOptions};
use libfuzzer_sys::fuzz_target;

/// As `tests/fuzz.rs`: small, so that an absurd size shows as a refusal.
const BUDGET: u64 = 64 << 20;

fuzz_target!(|data: &[u8]| {
    let options = ReadOptions {
        max_memory: BUDGET,
        ..ReadOptions::default()
    };
    let Ok(image) = decode_deep(data, &options) else {
        return;
    };
    if image.check_depths().is_err() {
        return;
    }
    let inputs = [&image, &image];
    let paths = [Path::new("a.exr"), Path::new("b.exr")];
    for (output, tidy) in [
        (OutputKind::Flat { z: true }, false),
        (OutputKind::Deep, false),
        (OutputKind::Deep, true),
    ] {
        let merge = MergeOptions {
            output,
            tidy,
            ..MergeOptions::default()
        };
        if check_merge(&inputs, &paths, &merge, BUDGET).is_ok() {
            let _ = merge_images(&inputs, &merge);
        }
    }
});
