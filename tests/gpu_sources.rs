//! The packed sources of a merged deep image (`glsl/sources.comp`, `GlOptions::deep_readback`):
//! on the GPU against their CPU twin word by word, for every layout (BIA in several blocks, LL
//! both ways) and every packing; the twin against the image's own lists; an inconsistent list
//! or group minimum counted alike on both; and deep merges read back by sources and by the
//! image against the reference, every layout, k-way and chained, both pixel orders, in strict
//! mode.

// MergeOptions is built with `..Default::default()` even where every field is named today.
#![allow(clippy::needless_update)]

mod gpu_common;

use deepmerge::composite::{MergeOptions, MergeStrategy, OutputKind};
use deepmerge::cpu::sources::pack_sources as pack_sources_twin;
use deepmerge::deep::Bounds;
use deepmerge::gpu::resident::{build_image, pack_sources, DeepReadback, GpuImage};
use deepmerge::gpu::{GlContext, GlOptions};
use deepmerge::vocab::{Fragment, Layout, PixelOrder, SourcePacking, GROUP_SIZE};
use gpu_common::{assert_gl_matches_reference, sorted_lists, test_rng, with_gl, Stages, Synth};

const STRIDE: usize = 2;

/// Per-pixel counts in `min..=max` (with `min` 0, a fifth of the pixels empty) and a sorted
/// stream whose samples come from `inputs` inputs, each numbered in its own sequence.
fn stream(pixels: usize, min: u32, max: u32, inputs: u32, seed: u64) -> (Vec<u32>, Vec<Fragment>) {
    let mut rng = test_rng(seed);
    let lists = sorted_lists(pixels, min, max, 40, &mut rng);
    let counts = lists.iter().map(|zs| zs.len() as u32).collect();
    let mut next_index = vec![0u32; inputs as usize];
    let mut keys = Vec::new();
    for &z in lists.iter().flatten() {
        let input = rng.below(inputs as usize) as u32;
        keys.push(Fragment {
            z,
            zback: z,
            input,
            index: next_index[input as usize],
        });
        next_index[input as usize] += 1;
    }
    (counts, keys)
}

fn build<'a>(
    ctx: &'a GlContext,
    layout: Layout,
    block: u32,
    ascending: bool,
    counts: &[u32],
    keys: &[Fragment],
) -> GpuImage<'a> {
    let values = vec![0.5f32; keys.len() * STRIDE];
    build_image(
        ctx, layout, block, ascending, counts, keys, &values, STRIDE, false,
    )
    .expect("the image builds")
}

/// The GPU's packed sources of `image` and its count of inconsistent pixels.
fn gpu_pack(ctx: &GlContext, image: &GpuImage, packing: SourcePacking) -> (Vec<u32>, u32) {
    let (sources, bad) = pack_sources(ctx, image, packing).expect("the sources pack");
    (
        sources.read(image.samples * packing.words()),
        bad.read::<u32>(1)[0],
    )
}

#[test]
fn the_gpu_packs_sources_as_its_twin_and_in_the_images_order() {
    with_gl(|ctx| {
        let cases = [
            (0, 0, 3),
            (1, 0, 4),
            (63, 0, 2),
            (65, 0, 30),
            (64 * 4 + 9, 0, 11),
            (64 * 3 + 5, 2, 9),
            (40, 5, 5),
        ];
        let packings = [
            (1, SourcePacking::OneWord { index_bits: 32 }),
            (2, SourcePacking::OneWord { index_bits: 31 }),
            (5, SourcePacking::OneWord { index_bits: 28 }),
            (3, SourcePacking::TwoWords),
        ];
        for (pixels, min, max) in cases {
            for (inputs, packing) in packings {
                let (counts, keys) = stream(pixels, min, max, inputs, pixels as u64 + 11);
                let mut images = vec![
                    (Layout::LinkedList, 1, true),
                    (Layout::LinkedList, 1, false),
                    (Layout::Linearised, 1, true),
                    (Layout::Interleaved, 1, true),
                ];
                images.extend([1, 4, 8].map(|b| (Layout::BlockedInterleaved, b, true)));
                for (layout, block, ascending) in images {
                    let what = format!(
                        "{pixels} pixels, {min} to {max}, {inputs} inputs {packing:?}, {} block {block} ascending {ascending}",
                        layout.name()
                    );
                    let image = build(ctx, layout, block, ascending, &counts, &keys);
                    let gpu = gpu_pack(ctx, &image, packing);
                    let built = image.read_back(false).expect("the image reads back");
                    let twin = pack_sources_twin(&built, packing);
                    assert_eq!(gpu, twin, "{what}: GPU against twin");
                    // The twin against the image's own lists, front to back in pixel order.
                    assert_eq!(twin.1, 0, "{what}: a consistent image");
                    let mut listed = Vec::new();
                    for p in 0..counts.len() {
                        built.extend_with_pixel(p, &mut listed);
                    }
                    let unpacked: Vec<(u32, u32)> = twin
                        .0
                        .chunks_exact(packing.words())
                        .map(|w| packing.unpack(w))
                        .collect();
                    let expected: Vec<(u32, u32)> =
                        listed.iter().map(|f| (f.input, f.index)).collect();
                    assert_eq!(unpacked, expected, "{what}: twin against the lists");
                    // And against the stream the image was built from.
                    let streamed: Vec<(u32, u32)> =
                        keys.iter().map(|f| (f.input, f.index)).collect();
                    assert_eq!(unpacked, streamed, "{what}: twin against the stream");
                }
            }
        }
    });
}

/// The inconsistencies the GPU stage and its twin count in `image` once `corrupt` has written
/// into it (after the build, as strict mode asks the host to wait for).
fn bad_after_corruption(
    ctx: &GlContext,
    image: &GpuImage,
    packing: SourcePacking,
    corrupt: impl FnOnce(&GpuImage),
) -> (u32, u32) {
    ctx.finish();
    corrupt(image);
    let corrupted = image.read_back(false).expect("the image reads back");
    let (_, gpu_bad) = gpu_pack(ctx, image, packing);
    let (_, twin_bad) = pack_sources_twin(&corrupted, packing);
    (gpu_bad, twin_bad)
}

#[test]
fn an_inconsistent_list_or_group_minimum_is_counted_on_both() {
    with_gl(|ctx| {
        let (counts, keys) = stream(64 * 2 + 3, 1, 6, 2, 5);
        let packing = SourcePacking::OneWord { index_bits: 31 };
        // A linked list cut short: the first node of a pixel with two samples or more points
        // nowhere.
        let image = build(ctx, Layout::LinkedList, 1, true, &counts, &keys);
        let built = image.read_back(false).expect("the image reads back");
        let long = counts
            .iter()
            .position(|&n| n >= 2)
            .expect("a pixel of 2 samples");
        let first = built.head[long] as usize;
        let bad = bad_after_corruption(ctx, &image, packing, |image| {
            image.aux2.write_range(first, &[0u32])
        });
        assert_eq!(bad, (1, 1), "a list cut short");
        // A group minimum past its pixels' counts.
        for layout in [Layout::Interleaved, Layout::BlockedInterleaved] {
            let image = build(ctx, layout, 4, true, &counts, &keys);
            let bad = bad_after_corruption(ctx, &image, packing, |image| {
                image.aux1.write_range(1, &[7u32])
            });
            assert_eq!(
                bad,
                (GROUP_SIZE, GROUP_SIZE),
                "{}: every pixel of group 1",
                layout.name()
            );
        }
        // A group minimum of 1 over a group with empty pixels: they alone disagree, though no
        // position lies in them.
        let (counts, keys) = stream(64 * 2 + 3, 0, 6, 2, 9);
        let group = GROUP_SIZE as usize;
        let empty = counts[group..2 * group].iter().filter(|&&n| n == 0).count() as u32;
        assert!(empty > 0, "group 1 has an empty pixel");
        for layout in [Layout::Interleaved, Layout::BlockedInterleaved] {
            let image = build(ctx, layout, 4, true, &counts, &keys);
            let bad = bad_after_corruption(ctx, &image, packing, |image| {
                image.aux1.write_range(1, &[1u32])
            });
            assert_eq!(bad, (empty, empty), "{}", layout.name());
        }
    });
}

#[test]
fn deep_merges_read_back_by_sources_or_by_image_give_the_reference_bytes() {
    with_gl(|ctx| {
        let a = Synth::new(Bounds::from_origin_size(0, 0, 70, 9), 14, 61).build();
        let b = Synth::new(Bounds::from_origin_size(4, 2, 64, 9), 9, 62)
            .with_volumes()
            .build();
        let c = Synth::new(Bounds::from_origin_size(-2, 1, 30, 5), 6, 63).build();
        let mut bytes = Vec::new();
        for layout in Layout::ALL {
            for strategy in [MergeStrategy::KWay, MergeStrategy::Chain] {
                for readback in [DeepReadback::Sources, DeepReadback::Image] {
                    // Both pixel orders, the tidy on the host (which reads the image, as it
                    // needs depths) and on the GPU (whose values come back with the image).
                    for (pixel_order, tidy, stages) in [
                        (PixelOrder::RowMajor, false, Stages::Gpu),
                        (PixelOrder::Tiled, false, Stages::Host),
                        (PixelOrder::RowMajor, true, Stages::Host),
                        (PixelOrder::Tiled, true, Stages::Gpu),
                    ] {
                        let options = MergeOptions {
                            output: OutputKind::Deep,
                            strategy,
                            tidy,
                            ..Default::default()
                        };
                        let gl = stages.on(GlOptions {
                            layout,
                            block_size: 4,
                            pixel_order,
                            deep_readback: readback,
                            ..Default::default()
                        });
                        let what = format!(
                            "{} {strategy:?} {readback:?} {pixel_order:?} tidy {tidy} {stages:?} stages",
                            layout.name()
                        );
                        let stats =
                            assert_gl_matches_reference(ctx, &[&a, &b, &c], &options, &gl, &what);
                        // Sources where the host tidies nothing; the image where it needs the
                        // depths, or the values the GPU tidy made.
                        let by_sources = readback == DeepReadback::Sources && !tidy;
                        assert_eq!(
                            stats.readback_form,
                            if by_sources {
                                "sources, 1 word a sample"
                            } else {
                                "image"
                            },
                            "{what}"
                        );
                        bytes.push((
                            (layout, strategy, readback, pixel_order, tidy),
                            stats.readback_bytes,
                        ));
                    }
                }
            }
        }
        // Three inputs, one word a sample: well under half the image's bytes come back.
        for &((layout, strategy, readback, order, tidy), sources) in &bytes {
            if readback == DeepReadback::Sources && !tidy {
                let image = bytes
                    .iter()
                    .find(|(cell, _)| *cell == (layout, strategy, DeepReadback::Image, order, tidy))
                    .expect("an image readback of the same merge")
                    .1;
                assert!(
                    sources * 2 < image,
                    "{} {strategy:?} {order:?}: {sources} bytes of sources against {image} of image",
                    layout.name()
                );
            }
        }
    });
}
