//! Deep output written through shared memory (`DeepWrites::Staged`,
//! `glsl/include/out_staging.glsl`) against the CPU twins and the reference merge: the pairwise
//! kernel (`merge.comp`) and the k-way one (`merge_kway.comp`) into every layout, with values and
//! keys alone, ascending and descending, in images whose groups partly fit the staging memory
//! and partly do not (so both paths of one dispatch are checked), with a last group narrower
//! than 32 pixels; whole merges (k-way and chain, host and GPU tidy, cooperative long lists,
//! whose groups write directly, also where such a group would fit) against the reference bytes,
//! with `--stats` naming the way. Each test checks that the host asks for staging where it
//! should (`DeepWrites::staged_samples`). In strict mode, as every GL test.

// MergeOptions is built with `..Default::default()` even where every field is named today.
#![allow(clippy::needless_update)]

mod gpu_common;

use deepmerge::composite::{MergeOptions, MergeStrategy, OutputKind};
use deepmerge::cpu::build::build;
use deepmerge::cpu::merge::{merge_built, merge_kway_built};
use deepmerge::deep::Bounds;
use deepmerge::gpu::resident::{
    build_image, kway_stride, merge_deep_kway, merge_deep_written, ColumnSpec, DeepWrites,
    GpuStack, MergeSpec,
};
use deepmerge::gpu::{GlContext, GlOptions, LongLists, RbmBlocks};
use deepmerge::vocab::{BuiltImage, Fragment, Layout, MergeMethod, GROUP_SIZE};
use gpu_common::{
    assert_deep_merges_match_reference, assert_gl_matches_reference, merge_stream, with_gl, Stages,
    Synth,
};

const STRIDE: usize = 2;

/// Shared memory a group stages in for these tests: 256 keys alone, 170 with two values each.
const GROUP_BYTES: u32 = 4096;

/// Pixels: four whole groups and a narrower fifth.
const PIXELS: usize = GROUP_SIZE as usize * 4 + 5;

/// Per-pixel counts and a sorted stream with ties, for input `input`: the pixels of even groups
/// hold at most 4 samples (a group stages), those of odd groups up to `long` (it writes
/// directly); a sixth of the pixels is empty.
fn stream(long: u32, seed: u64, input: u32) -> (Vec<u32>, Vec<Fragment>, Vec<f32>) {
    let group = GROUP_SIZE as usize;
    merge_stream(
        PIXELS,
        |p| {
            if (p / group).is_multiple_of(2) {
                4
            } else {
                long
            }
        },
        seed,
        input,
    )
}

/// The groups of an output whose samples fit `capacity` and those whose do not: the test must
/// see both.
fn assert_both_paths(offsets: &[u32], capacity: u32, what: &str) {
    let group = GROUP_SIZE as usize;
    let sizes: Vec<u32> = (0..PIXELS.div_ceil(group))
        .map(|g| offsets[((g + 1) * group).min(PIXELS)] - offsets[g * group])
        .collect();
    assert!(
        sizes.iter().any(|&n| n <= capacity) && sizes.iter().any(|&n| n > capacity),
        "{what}: groups of {sizes:?} samples against {capacity} staged"
    );
}

/// The host asks for staging (`OUT_STAGED`) in every array layout, not in LL.
fn assert_stages(ctx: &GlContext, writes: DeepWrites, out: Layout, values: bool, what: &str) {
    assert_eq!(
        writes.staged_samples(ctx, out, STRIDE, values).is_some(),
        out != Layout::LinkedList,
        "{what}: staged"
    );
}

/// Keys, and with `values` the values, of every pixel of `gpu` and `cpu` equal, and in an array
/// layout every slot too.
fn assert_same(gpu: &BuiltImage, cpu: &BuiltImage, layout: Layout, values: bool, what: &str) {
    assert_eq!(gpu.offsets, cpu.offsets, "{what}: offsets");
    for p in 0..PIXELS {
        assert_eq!(gpu.pixel(p), cpu.pixel(p), "{what}: pixel {p} keys");
    }
    if layout != Layout::LinkedList {
        assert_eq!(gpu.min_counts, cpu.min_counts, "{what}: minimums");
        assert_eq!(gpu.slots, cpu.slots, "{what}: slots");
        if values {
            assert_eq!(gpu.values, cpu.values, "{what}: values");
        }
    }
}

/// The layouts and BIA blocks the kernel tests write.
const OUTPUTS: [(Layout, u32); 5] = [
    (Layout::Linearised, 4),
    (Layout::Interleaved, 4),
    (Layout::BlockedInterleaved, 1),
    (Layout::BlockedInterleaved, 8),
    (Layout::LinkedList, 4),
];

#[test]
fn staged_pairwise_merges_match_their_twins() {
    with_gl(|ctx| {
        let (ca, ka, va) = stream(40, 21, 0);
        let (cb, kb, vb) = stream(14, 22, 1);
        let columns = ColumnSpec {
            alpha_of: vec![None, Some(0)],
        };
        let writes = DeepWrites::Staged {
            group_bytes: GROUP_BYTES,
        };
        for (i, (out, block)) in OUTPUTS.into_iter().enumerate() {
            // Stepwise both ways, and register blocks (shifting or indexed, by turns).
            for (method, descending) in [
                (MergeMethod::Stepwise, false),
                (MergeMethod::Stepwise, true),
                (MergeMethod::RegisterBlock, i % 2 == 1),
            ] {
                let what = format!(
                    "A, B -> {} block {block} {method:?} desc {descending}",
                    out.name()
                );
                // Inputs in LA (LL lists must run the way the merge walks them: LA walks both).
                let image = |c: &[u32], k: &[Fragment], v: &[f32]| {
                    build_image(
                        ctx,
                        Layout::Linearised,
                        block,
                        !descending,
                        c,
                        k,
                        v,
                        STRIDE,
                        false,
                    )
                    .unwrap()
                };
                let (a, b) = (image(&ca, &ka, &va), image(&cb, &kb, &vb));
                let spec = MergeSpec {
                    method,
                    block_size: block,
                    descending,
                    rbm_blocks: RbmBlocks::ALL[i % 2],
                };
                // Keys alone in the register-block cases (a final output's way), values else.
                let with_values = method == MergeMethod::Stepwise;
                let what = format!("{what}, values {with_values}");
                assert_stages(ctx, writes, out, with_values, &what);
                let gpu = merge_deep_written(ctx, &a, &b, out, spec, &columns, with_values, writes)
                    .unwrap()
                    .read_back(with_values)
                    .expect("the image reads back");
                let cpu_a = build(
                    Layout::Linearised,
                    block,
                    &ca,
                    &ka,
                    &va,
                    STRIDE,
                    !descending,
                );
                let cpu_b = build(
                    Layout::Linearised,
                    block,
                    &cb,
                    &kb,
                    &vb,
                    STRIDE,
                    !descending,
                );
                let cpu = merge_built(&cpu_a, &cpu_b, out, method, block, descending);
                let per_sample = 16 + if with_values { 4 * STRIDE as u32 } else { 0 };
                assert_both_paths(&cpu.offsets, GROUP_BYTES / per_sample, &what);
                assert_same(&gpu, &cpu, out, with_values, &what);
                // The same through the direct writes: the staging changes no byte.
                let direct = merge_deep_written(
                    ctx,
                    &a,
                    &b,
                    out,
                    spec,
                    &columns,
                    with_values,
                    DeepWrites::Direct,
                )
                .unwrap()
                .read_back(with_values)
                .expect("the image reads back");
                let what = format!("{what}, against direct");
                assert_same(&gpu, &direct, out, with_values, &what);
            }
        }
    });
}

#[test]
fn staged_kway_merges_match_their_twins_with_values_and_keys_alone() {
    with_gl(|ctx| {
        let columns = ColumnSpec {
            alpha_of: vec![None, Some(0)],
        };
        let writes = DeepWrites::Staged {
            group_bytes: GROUP_BYTES,
        };
        let stride = kway_stride(PIXELS);
        for (j, (out, block)) in OUTPUTS.into_iter().enumerate() {
            let inputs = [2, 3, 4, 2, 3][j];
            let (mut counts, mut keys, mut values) = (Vec::new(), Vec::new(), Vec::new());
            for k in 0..inputs {
                let (c, f, v) = stream(30, 40 + k as u64, k as u32);
                counts.extend(c);
                counts.resize(counts.len() + stride - PIXELS, 0);
                let base = keys.len() as u32;
                keys.extend(f.into_iter().map(|f| Fragment {
                    index: f.index + base,
                    ..f
                }));
                values.extend(v);
            }
            let what = format!("{inputs} inputs -> {} block {block}", out.name());
            let image = build_image(
                ctx,
                Layout::Linearised,
                block,
                true,
                &counts,
                &keys,
                &values,
                STRIDE,
                false,
            )
            .unwrap();
            let stack = GpuStack::new(image, inputs, PIXELS).unwrap();
            let cpu_stack = build(
                Layout::Linearised,
                block,
                &counts,
                &keys,
                &values,
                STRIDE,
                true,
            );
            let cpu = merge_kway_built(&cpu_stack, inputs, PIXELS, out, block);
            for with_values in [true, false] {
                let what = format!("{what}, values {with_values}");
                let per_sample = 16 + if with_values { 4 * STRIDE as u32 } else { 0 };
                assert_both_paths(&cpu.offsets, GROUP_BYTES / per_sample, &what);
                assert_stages(ctx, writes, out, with_values, &what);
                let gpu = merge_deep_kway(ctx, &stack, out, block, &columns, with_values, writes)
                    .unwrap()
                    .read_back(with_values)
                    .expect("the image reads back");
                assert_same(&gpu, &cpu, out, with_values, &what);
            }
        }
    });
}

#[test]
fn staged_merges_give_the_reference_bytes() {
    // The options below must decide: the variable overrides them, for measurements.
    assert!(
        std::env::var_os("DEEPMERGE_GL_DEEP_WRITES").is_none(),
        "DEEPMERGE_GL_DEEP_WRITES is set: unset it for the tests"
    );
    with_gl(|ctx| {
        // Lists up to 60 samples on one input (groups over 170 samples write directly) and
        // short ones elsewhere; windows that do not line up; volumes to tidy.
        let a = Synth::new(Bounds::from_origin_size(0, 0, 70, 9), 60, 61).build();
        let b = Synth::new(Bounds::from_origin_size(4, 2, 64, 9), 3, 62)
            .with_volumes()
            .build();
        let c = Synth::new(Bounds::from_origin_size(-2, 1, 30, 5), 6, 63).build();
        let staged = DeepWrites::Staged {
            group_bytes: GROUP_BYTES,
        };
        let cases = [
            (Layout::Linearised, MergeStrategy::KWay, LongLists::PerPixel),
            (
                Layout::Linearised,
                MergeStrategy::Chain,
                LongLists::Cooperative { threshold: 20 },
            ),
            (
                Layout::BlockedInterleaved,
                MergeStrategy::KWay,
                LongLists::PerPixel,
            ),
            (
                Layout::Interleaved,
                MergeStrategy::Chain,
                LongLists::PerPixel,
            ),
        ];
        for (layout, strategy, long_lists) in cases {
            let gl = GlOptions {
                layout,
                block_size: 4,
                long_lists,
                deep_writes: staged,
                ..Default::default()
            };
            let what = format!("{} {}", layout.name(), long_lists.name());
            assert_deep_merges_match_reference(
                ctx,
                &[&a, &b, &c],
                strategy,
                gl,
                &what,
                |stats, what| assert_eq!(stats.deep_writes, Some(staged), "{what}"),
            );
        }
    });
}

#[test]
fn a_group_holding_a_cooperative_pixel_writes_directly_and_right() {
    with_gl(|ctx| {
        // 64 x 2 pixels of at most 2 samples, and one pixel of many at (5, 0): with the
        // threshold just under its count, that pixel alone goes to merge_coop.comp, in a group
        // small enough to stage.
        let short = Synth::new(Bounds::from_origin_size(0, 0, 64, 2), 2, 71).build();
        let mut long = Synth::new(Bounds::from_origin_size(5, 0, 1, 1), 60, 72);
        long.empty_percent = 0;
        let long = long.build();
        let count = long.sample_count() as u32;
        assert!(count > 3, "the long pixel holds {count} samples");
        let group_samples = short.sample_count() as u32 / 2 + count;
        let staged = DeepWrites::Staged {
            group_bytes: GROUP_BYTES,
        };
        for layout in [Layout::Linearised, Layout::Interleaved] {
            for tidy in [false, true] {
                let options = MergeOptions {
                    output: OutputKind::Deep,
                    strategy: MergeStrategy::Chain,
                    tidy,
                    ..Default::default()
                };
                let gl = Stages::Host.on(GlOptions {
                    layout,
                    long_lists: LongLists::Cooperative {
                        threshold: count - 1,
                    },
                    deep_writes: staged,
                    ..Default::default()
                });
                let what = format!("{} tidy {tidy}", layout.name());
                // The first group's samples fit, values or not (the GL engine keeps at most a
                // value a channel).
                let stride = short.channels.len();
                let capacity = staged.staged_samples(ctx, layout, stride, true).unwrap();
                assert!(group_samples <= capacity, "{what}: {group_samples} samples");
                let stats =
                    assert_gl_matches_reference(ctx, &[&short, &long], &options, &gl, &what);
                assert_eq!(stats.deep_writes, Some(staged), "{what}");
            }
        }
    });
}
