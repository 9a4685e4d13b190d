//! The packed sources of a merged deep image (`glsl/sources.comp`, `GlOptions::deep_readback`):
//! on the GPU against their CPU twin word by word, for every layout (BIA in several blocks, LL
//! both ways) and every packing; the twin against the image's own lists; an inconsistent list
//! or group minimum counted alike on both; their runs (`glsl/source_runs.comp`) on the GPU
//! against their twin, and the twin against the host's own runs; and deep merges read back by
//! sources, by runs and by the image against the reference, every layout, k-way and chained,
//! both pixel orders, both transfer paths (runs more than the readback's room included), in
//! strict mode.

// MergeOptions is built with `..Default::default()` even where every field is named today.
#![allow(clippy::needless_update)]

mod gpu_common;

use deepmerge::composite::source_runs::{push_source_runs, SourceRun};
use deepmerge::composite::{MergeOptions, MergeStrategy, OutputKind};
use deepmerge::cpu::sources::{pack_sources as pack_sources_twin, source_runs as source_runs_twin};
use deepmerge::deep::{Bounds, Channel, DeepImage, DeepState, Plane, SampleType};
use deepmerge::gpu::resident::{build_image, pack_sources, source_runs, DeepReadback, GpuImage};
use deepmerge::gpu::{GlContext, GlOptions, TransferPath};
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
                for readback in [
                    DeepReadback::Sources,
                    DeepReadback::Runs,
                    DeepReadback::Image,
                ] {
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
                            deep_readback: Some(readback),
                            ..Default::default()
                        });
                        let what = format!(
                            "{} {strategy:?} {readback:?} {pixel_order:?} tidy {tidy} {stages:?} stages",
                            layout.name()
                        );
                        let stats =
                            assert_gl_matches_reference(ctx, &[&a, &b, &c], &options, &gl, &what);
                        // Sources or their runs where the host tidies nothing (runs only in the
                        // window's pixel order); the image where it needs the depths, or the
                        // values the GPU tidy made.
                        let form = match readback {
                            _ if tidy => "image",
                            DeepReadback::Runs if pixel_order == PixelOrder::RowMajor => {
                                "runs, 2 words a run"
                            }
                            DeepReadback::Runs | DeepReadback::Sources => {
                                "sources, 1 word a sample"
                            }
                            DeepReadback::Image => "image",
                        };
                        assert_eq!(stats.readback_form, form, "{what}");
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

/// Packed sources of `positions` (input, index), and their packing.
fn packed(positions: &[(u32, u32)], packing: SourcePacking) -> Vec<u32> {
    let mut words = vec![0u32; positions.len() * packing.words()];
    for (k, &(input, index)) in positions.iter().enumerate() {
        let fragment = Fragment {
            z: 0.0,
            zback: 0.0,
            input,
            index,
        };
        packing.pack(
            &fragment,
            &mut words[k * packing.words()..(k + 1) * packing.words()],
        );
    }
    words
}

/// The GPU's run records of `sources` (`samples` positions) and the count its scan gave.
fn gpu_runs(
    ctx: &GlContext,
    sources: &[u32],
    samples: usize,
    packing: SourcePacking,
) -> (Vec<u32>, u32) {
    let uploaded = ctx.upload(sources).expect("the sources upload");
    let runs = source_runs(ctx, &uploaded, samples, packing).expect("the runs are found");
    let count = runs.rank.read_range::<u32>(samples, 1)[0];
    (
        runs.records.read(count as usize * packing.run_words()),
        count,
    )
}

#[test]
fn the_gpu_finds_the_runs_of_the_sources_as_its_twin_and_the_host_find_them() {
    with_gl(|ctx| {
        let packings = [
            (1, SourcePacking::OneWord { index_bits: 32 }),
            (2, SourcePacking::OneWord { index_bits: 31 }),
            (5, SourcePacking::OneWord { index_bits: 28 }),
            (3, SourcePacking::TwoWords),
        ];
        for (inputs, packing) in packings {
            let mut rng = gpu_common::test_rng(inputs as u64 + 40);
            let mut cases: Vec<(&str, Vec<(u32, u32)>)> = vec![("empty", Vec::new())];
            // Random inputs sample by sample: short runs, one a sample at times.
            let (_, keys) = stream(300, 0, 9, inputs, 7);
            cases.push((
                "interleaved",
                keys.iter().map(|f| (f.input, f.index)).collect(),
            ));
            // Long stretches of each input, with steps back and jumps inside an input, an
            // input repeated after a break, and runs across many GPU groups.
            let mut long = Vec::new();
            let mut next = vec![0u32; inputs as usize];
            for stretch in 0..40 {
                let input = rng.below(inputs as usize) as u32;
                let n = 1 + rng.below(if stretch % 7 == 0 { 700 } else { 30 }) as u32;
                let at = &mut next[input as usize];
                if stretch % 5 == 3 && *at > 4 {
                    *at -= 3; // a step back
                } else if stretch % 5 == 4 {
                    *at += 2; // a jump
                }
                long.extend((0..n).map(|k| (input, *at + k)));
                *at += n;
            }
            cases.push(("long", long));
            // The last index of a word has no next one: 0 after it starts a run.
            if packing.index_bits() == 32 {
                cases.push((
                    "the last index",
                    vec![(0, u32::MAX - 1), (0, u32::MAX), (0, 0), (0, 1)],
                ));
            }
            for (name, positions) in cases {
                let what = format!("{name}, {inputs} inputs {packing:?}");
                let sources = packed(&positions, packing);
                let twin = source_runs_twin(&sources, packing);
                let (gpu, count) = gpu_runs(ctx, &sources, positions.len(), packing);
                assert_eq!(gpu, twin, "{what}: GPU against twin");
                assert_eq!(
                    count as usize * packing.run_words(),
                    twin.len(),
                    "{what}: the count"
                );
                // The twin's records are the host's runs (each ends where the next begins).
                let words = packing.run_words();
                let firsts: Vec<usize> = twin.chunks_exact(words).map(|r| r[0] as usize).collect();
                let from_records: Vec<SourceRun> = twin
                    .chunks_exact(words)
                    .enumerate()
                    .map(|(r, record)| {
                        let (input, index) = packing.unpack(&record[1..]);
                        let end = firsts.get(r + 1).copied().unwrap_or(positions.len());
                        SourceRun {
                            start: index as u64,
                            input,
                            len: (end - firsts[r]) as u32,
                        }
                    })
                    .collect();
                let mut by_host = Vec::new();
                push_source_runs(
                    &mut by_host,
                    positions
                        .iter()
                        .map(|&(input, index)| (input, index as u64)),
                );
                assert_eq!(
                    from_records, by_host,
                    "{what}: twin against the host's runs"
                );
                if name == "long" {
                    assert!(by_host.len() * 10 < positions.len(), "{what}: long runs");
                }
            }
        }
    });
}

/// `width` x `height` pixels of `n` samples each, whose depths are `z(k)` for sample k of a
/// pixel: A, R and Z.
fn image_of(width: usize, height: usize, n: usize, z: impl Fn(usize) -> f32) -> DeepImage {
    let window = Bounds::from_origin_size(0, 0, width, height);
    let samples = width * height * n;
    let zs: Vec<f32> = (0..samples).map(|s| z(s % n)).collect();
    let planes = vec![
        Plane::F16(
            (0..samples)
                .map(|s| half::f16::from_f32(0.1 + (s % 7) as f32 / 20.0))
                .collect(),
        ),
        Plane::F32((0..samples).map(|s| s as f32 * 0.25).collect()),
        Plane::F32(zs),
    ];
    let channels = vec![
        Channel::new("A", SampleType::F16),
        Channel::new("R", SampleType::F32),
        Channel::new("Z", SampleType::F32),
    ];
    let counts = vec![n as u32; width * height];
    DeepImage::from_counts(window, window, channels, &counts, planes, DeepState::Sorted)
        .expect("the image builds")
}

/// Puts the context's transfer path back when dropped, so that a failed assertion leaves the
/// next test on this binary's shared context with its default.
struct TransferPathBack<'a>(&'a GlContext, TransferPath);

impl Drop for TransferPathBack<'_> {
    fn drop(&mut self) {
        let _ = self.0.set_transfer_path(self.1);
    }
}

#[test]
fn runs_read_back_through_mapped_memory_give_the_reference_even_past_their_room() {
    with_gl(|ctx| {
        let _back = TransferPathBack(ctx, ctx.transfer_path());
        ctx.set_transfer_path(TransferPath::Mapped)
            .expect("llvmpipe has buffer storage (GL 4.5)");
        let a = image_of(61, 9, 6, |k| 2.0 * k as f32);
        // Depths between a's: every merged sample changes input, a run a sample, more than
        // the readback's room of half the samples.
        let alternating = image_of(61, 9, 6, |k| 2.0 * k as f32 + 1.0);
        // Depths behind a's: two runs a pixel.
        let behind = image_of(61, 9, 6, |k| 100.0 + k as f32);
        for (b, past_room) in [(&alternating, true), (&behind, false)] {
            for layout in Layout::ALL {
                // One band, and bands of a row or two overlapped as on a GPU: a band's runs
                // (and, past its room, their buffer) wait while the next band is issued.
                for (overlap, budget) in [(false, 0), (true, 24 << 10)] {
                    let options = MergeOptions {
                        output: OutputKind::Deep,
                        ..Default::default()
                    };
                    let gl = GlOptions {
                        layout,
                        deep_readback: Some(DeepReadback::Runs),
                        overlap_bands: Some(overlap),
                        band_budget_bytes: budget,
                        ..Default::default()
                    };
                    let what = format!(
                        "{} past the room {past_room}, overlapped {overlap}",
                        layout.name()
                    );
                    let stats = assert_gl_matches_reference(ctx, &[&a, b], &options, &gl, &what);
                    assert_eq!(stats.readback_form, "runs, 2 words a run", "{what}");
                    if overlap {
                        assert!(stats.bands > 2, "{what}: {} bands", stats.bands);
                        assert!(stats.overlapped_bands > 0, "{what}: none overlapped");
                        if past_room {
                            assert_eq!(stats.runs_read_whole_bands, stats.bands as u64, "{what}");
                        }
                    }
                    assert_eq!(stats.runs_read_whole_bands > 0, past_room, "{what}");
                }
            }
        }
    });
}
