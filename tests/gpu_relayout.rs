//! The relayout of a merged deep image (`glsl/relayout.comp`, `GlOptions::deep_writes`): on the
//! GPU against its CPU twin element by element, into LA and into BIA of several blocks, the twin
//! against a direct build of the target layout, and merges that write interleaved and relay out
//! into LA and BIA against the reference merge, k-way and chained, in strict mode.

// MergeOptions is built with `..Default::default()` even where every field is named today.
#![allow(clippy::needless_update)]

mod gpu_common;

use deepmerge::composite::MergeStrategy;
use deepmerge::cpu::build::build;
use deepmerge::cpu::relayout::relayout as relayout_twin;
use deepmerge::deep::Bounds;
use deepmerge::gpu::resident::{build_image, relayout, ColumnSpec, DeepWrites};
use deepmerge::gpu::GlOptions;
use deepmerge::vocab::{Fragment, Layout};
use gpu_common::{assert_deep_merges_match_reference, sorted_lists, test_rng, with_gl, Synth};

const STRIDE: usize = 3;

/// Per-pixel counts in `min..=max` and a sorted stream (with `min` 0, a fifth of the pixels
/// empty; with more, every group's minimum count interleaves that many samples).
fn stream(pixels: usize, min: u32, max: u32, seed: u64) -> (Vec<u32>, Vec<Fragment>, Vec<f32>) {
    let mut rng = test_rng(seed);
    let lists = sorted_lists(pixels, min, max, 50, &mut rng);
    let counts = lists.iter().map(|zs| zs.len() as u32).collect();
    let (mut keys, mut values) = (Vec::new(), Vec::new());
    for &z in lists.iter().flatten() {
        let index = keys.len() as u32;
        keys.push(Fragment {
            z,
            zback: z,
            input: 0,
            index,
        });
        values.extend([index as f32, z, rng.below(100) as f32]);
    }
    (counts, keys, values)
}

#[test]
fn the_gpu_relayout_matches_its_twin_and_a_direct_build() {
    with_gl(|ctx| {
        let columns = ColumnSpec {
            alpha_of: vec![None, Some(0), Some(0)],
        };
        let cases = [
            (0, 0, 3),
            (1, 0, 4),
            (63, 0, 2),
            (65, 0, 30),
            (64 * 4 + 9, 0, 11),
            (64 * 3 + 5, 2, 9),
            (40, 5, 5),
        ];
        for (pixels, min, max) in cases {
            let (counts, keys, values) = stream(pixels, min, max, pixels as u64 + 7);
            let what = format!("{pixels} pixels, {min} to {max}");
            // The relayout takes the interleaved image (its offsets move into the result), so
            // each target is relaid out from an image built again.
            let build_ia = || {
                build_image(
                    ctx,
                    Layout::Interleaved,
                    1,
                    true,
                    &counts,
                    &keys,
                    &values,
                    STRIDE,
                    false,
                )
                .unwrap()
            };
            let ia = build_ia();
            let ia_cpu = ia.read_back(true).expect("the image reads back");
            if min > 0 {
                assert!(ia_cpu.min_counts.iter().all(|&m| m >= min), "{what}");
            }
            for block in [1, 4, 8] {
                let bia =
                    relayout(ctx, build_ia(), Layout::BlockedInterleaved, block, &columns).unwrap();
                assert_eq!(bia.layout, Layout::BlockedInterleaved, "{what}");
                let gpu = bia.read_back(true).expect("the image reads back");
                let twin = relayout_twin(&ia_cpu, Layout::BlockedInterleaved, block);
                assert_eq!(
                    gpu.min_counts, twin.min_counts,
                    "{what} BIA {block}: minimums"
                );
                assert_eq!(gpu.offsets, twin.offsets, "{what} BIA {block}: offsets");
                assert_eq!(gpu.slots, twin.slots, "{what} BIA {block}: slots");
                assert_eq!(gpu.values, twin.values, "{what} BIA {block}: values");
            }
            let la = relayout(ctx, ia, Layout::Linearised, 1, &columns).unwrap();
            assert_eq!(la.layout, Layout::Linearised, "{what}");
            let gpu = la.read_back(true).expect("the image reads back");
            let twin = relayout_twin(&ia_cpu, Layout::Linearised, 1);
            assert_eq!(gpu.offsets, twin.offsets, "{what}: offsets");
            assert_eq!(gpu.slots, twin.slots, "{what}: slots");
            assert_eq!(gpu.values, twin.values, "{what}: values");
            // The twin is a build of the same lists in the target layout, element by element.
            let direct = build(Layout::Linearised, 1, &counts, &keys, &values, STRIDE, true);
            assert_eq!(twin.slots, direct.slots, "{what}: twin against a build");
            assert_eq!(twin.values, direct.values, "{what}: twin against a build");
            // The BIA twin against a direct build too.
            for block in [1, 4, 8] {
                let bia = relayout_twin(&ia_cpu, Layout::BlockedInterleaved, block);
                let built = build(
                    Layout::BlockedInterleaved,
                    block,
                    &counts,
                    &keys,
                    &values,
                    STRIDE,
                    true,
                );
                assert_eq!(bia.min_counts, built.min_counts, "{what} BIA {block}");
                assert_eq!(bia.slots, built.slots, "{what} BIA {block}");
                assert_eq!(bia.values, built.values, "{what} BIA {block}");
            }
        }
    });
}

#[test]
fn merges_that_relay_out_give_the_reference_bytes() {
    with_gl(|ctx| {
        let a = Synth::new(Bounds::from_origin_size(0, 0, 70, 9), 14, 51).build();
        let b = Synth::new(Bounds::from_origin_size(4, 2, 64, 9), 9, 52)
            .with_volumes()
            .build();
        let c = Synth::new(Bounds::from_origin_size(-2, 1, 30, 5), 6, 53).build();
        for (layout, block_size) in [
            (Layout::Linearised, 8),
            (Layout::BlockedInterleaved, 4),
            (Layout::BlockedInterleaved, 8),
        ] {
            for strategy in [MergeStrategy::KWay, MergeStrategy::Chain] {
                let gl = GlOptions {
                    layout,
                    block_size,
                    deep_writes: DeepWrites::Relayout,
                    ..Default::default()
                };
                let what = format!("{} block {block_size}", layout.name());
                assert_deep_merges_match_reference(
                    ctx,
                    &[&a, &b, &c],
                    strategy,
                    gl,
                    &what,
                    |_, _| {},
                );
            }
        }
    });
}
