//! GPU builds and pairwise merges against their CPU twins: every array layout's buffers element
//! by element (offsets, min counts, every slot's key and values), LL lists pixel by pixel (node
//! numbers depend on thread timing, the lists do not), and merges for every (A, B, output)
//! layout triple, both methods, both directions of LL lists; k-way merges of N = 1, 2, 3, 4 and
//! 8 stacked inputs for every (stack, output) layout pair.

mod gpu_common;

use deepmerge::cpu::build::build;
use deepmerge::cpu::merge::{merge_built, merge_kway_built};
use deepmerge::gpu::resident::{
    build_image, kway_stride, merge_deep, merge_deep_kway, ColumnSpec, DeepWrites, GpuStack,
    MergeSpec,
};
use deepmerge::gpu::RbmBlocks::{self, Indexed};
use deepmerge::vocab::{BuiltImage, Fragment, Layout, MergeMethod};
use gpu_common::{merge_stream, with_gl};

const STRIDE: usize = 2;

/// Per-pixel counts and a sorted stream with ties; `pixels` not a multiple of 32.
fn stream(pixels: usize, max: u32, seed: u64, input: u32) -> (Vec<u32>, Vec<Fragment>, Vec<f32>) {
    merge_stream(pixels, |_| max, seed, input)
}

fn assert_same_lists(gpu: &BuiltImage, cpu: &BuiltImage, what: &str) {
    assert_eq!(gpu.offsets, cpu.offsets, "{what}: offsets");
    for p in 0..cpu.pixel_count() {
        let (gs, cs) = (gpu.pixel_slots(p), cpu.pixel_slots(p));
        let gk: Vec<Fragment> = gs.iter().map(|&s| gpu.slots[s as usize]).collect();
        let ck: Vec<Fragment> = cs.iter().map(|&s| cpu.slots[s as usize]).collect();
        assert_eq!(gk, ck, "{what}: pixel {p} keys");
        for (&g, &c) in gs.iter().zip(&cs) {
            let (g, c) = (g as usize * STRIDE, c as usize * STRIDE);
            assert_eq!(
                gpu.values[g..g + STRIDE],
                cpu.values[c..c + STRIDE],
                "{what}: pixel {p} values"
            );
        }
    }
}

#[test]
fn gpu_builds_match_cpu_twins_element_by_element() {
    with_gl(|ctx| {
        for (pixels, max) in [(0, 3), (1, 5), (31, 3), (33, 40), (32 * 5 + 7, 9)] {
            let (counts, keys, values) = stream(pixels, max, pixels as u64 + 1, 0);
            for layout in Layout::ALL {
                for block in [1, 4, 8, 16] {
                    for ascending in [true, false] {
                        let what = format!(
                            "{} block {block} pixels {pixels} ascending {ascending}",
                            layout.name()
                        );
                        let gpu = build_image(
                            ctx, layout, block, ascending, &counts, &keys, &values, STRIDE, false,
                        )
                        .unwrap()
                        .read_back(true)
                        .expect("the image reads back");
                        let cpu = build(layout, block, &counts, &keys, &values, STRIDE, ascending);
                        assert_eq!(gpu.ascending, cpu.ascending, "{what}");
                        if layout == Layout::LinkedList {
                            assert_eq!(
                                gpu.next[0] as usize,
                                keys.len() + 1,
                                "{what}: node counter"
                            );
                            assert_same_lists(&gpu, &cpu, &what);
                        } else {
                            // Same formula, same buffers: every element identical.
                            assert_eq!(gpu.min_counts, cpu.min_counts, "{what}: min counts");
                            assert_eq!(gpu.offsets, cpu.offsets, "{what}: offsets");
                            assert_eq!(gpu.slots, cpu.slots, "{what}: slots");
                            assert_eq!(gpu.values, cpu.values, "{what}: values");
                        }
                    }
                }
            }
        }
    });
}

#[test]
fn gpu_pair_merges_match_cpu_twins_for_every_layout_triple() {
    with_gl(|ctx| {
        let pixels = 32 * 3 + 5;
        let (ca, ka, va) = stream(pixels, 37, 11, 0);
        let (cb, kb, vb) = stream(pixels, 12, 12, 1);
        let columns = ColumnSpec {
            alpha_of: vec![None, Some(0)],
        };
        // Every (A, B) pair with an output layout that cycles through all four, both methods,
        // both directions (RBM alternating); block sizes 1 and 32 on the diagonal. (The full triple product compiles
        // hundreds of programs, which llvmpipe takes minutes over.)
        let mut cases = Vec::new();
        for (i, la) in Layout::ALL.into_iter().enumerate() {
            for (j, lb) in Layout::ALL.into_iter().enumerate() {
                let lo = Layout::ALL[(i + j) % 4];
                for descending in [false, true] {
                    cases.push((la, lb, lo, MergeMethod::Stepwise, 4, descending, Indexed));
                }
                // Both register-block indexings, crossed with the directions.
                let blocks = RbmBlocks::ALL[j % 2];
                let descending = (i + j) % 2 == 1;
                cases.push((
                    la,
                    lb,
                    lo,
                    MergeMethod::RegisterBlock,
                    8,
                    descending,
                    blocks,
                ));
            }
            cases.push((la, la, la, MergeMethod::RegisterBlock, 1, false, Indexed));
            cases.push((la, la, la, MergeMethod::RegisterBlock, 32, true, Indexed));
            // Shifting blocks of 32 compile slowly on llvmpipe: one layout at each end.
            let shifted_block = if la == Layout::Linearised { 32 } else { 1 };
            cases.push((
                la,
                la,
                la,
                MergeMethod::RegisterBlock,
                shifted_block,
                la == Layout::Linearised,
                RbmBlocks::Shifted,
            ));
        }
        for (la, lb, lo, method, block, descending, rbm_blocks) in cases {
            {
                let what = format!(
                    "{}+{}->{} {} {block} {} desc {descending}",
                    la.name(),
                    lb.name(),
                    lo.name(),
                    method.name(),
                    rbm_blocks.name()
                );
                // LL lists must run the way the merge walks them.
                let a =
                    build_image(ctx, la, block, !descending, &ca, &ka, &va, STRIDE, false).unwrap();
                let b =
                    build_image(ctx, lb, block, !descending, &cb, &kb, &vb, STRIDE, false).unwrap();
                let spec = MergeSpec {
                    method,
                    block_size: block,
                    descending,
                    rbm_blocks,
                };
                let gpu = merge_deep(ctx, &a, &b, lo, spec, &columns)
                    .unwrap()
                    .read_back(true)
                    .expect("the image reads back");
                let cpu_a = build(la, block, &ca, &ka, &va, STRIDE, !descending);
                let cpu_b = build(lb, block, &cb, &kb, &vb, STRIDE, !descending);
                // A descending merge into LL head-inserts into an ascending list.
                let cpu = merge_built(&cpu_a, &cpu_b, lo, method, block, descending);
                assert_same_lists(&gpu, &cpu, &what);
            }
        }
    });
}

/// `merge_kway.comp` (with `count_kway.comp`) against its twin: N inputs stacked into one image
/// (each padded to whole groups), merged in one pass into every output layout; lists longer
/// than the largest block, empty pixels, a band of 101 pixels (not a multiple of 32).
#[test]
fn gpu_kway_merges_match_cpu_twins_for_every_layout_pair() {
    with_gl(|ctx| {
        let pixels = 32 * 3 + 5;
        let columns = ColumnSpec {
            alpha_of: vec![None, Some(0)],
        };
        let stride = kway_stride(pixels);
        for (i, stacked) in Layout::ALL.into_iter().enumerate() {
            for (j, out) in Layout::ALL.into_iter().enumerate() {
                let inputs = [1, 2, 3, 4, 8][(i + j) % 5];
                let block = [4, 8, 1, 32][(i + 2 * j) % 4];
                let (mut counts, mut keys, mut values) = (Vec::new(), Vec::new(), Vec::new());
                for k in 0..inputs {
                    let max = if k == 1 { 40 } else { 9 };
                    let (c, f, v) = stream(pixels, max, 20 + k as u64, k as u32);
                    counts.extend(c);
                    counts.resize(counts.len() + stride - pixels, 0);
                    keys.extend(f);
                    values.extend(v);
                }
                let what = format!(
                    "{inputs} inputs stacked in {} -> {} block {block}",
                    stacked.name(),
                    out.name()
                );
                let image = build_image(
                    ctx, stacked, block, true, &counts, &keys, &values, STRIDE, false,
                )
                .unwrap();
                let stack = GpuStack::new(image, inputs, pixels).unwrap();
                let gpu =
                    merge_deep_kway(ctx, &stack, out, block, &columns, true, DeepWrites::Direct)
                        .unwrap()
                        .read_back(true)
                        .expect("the image reads back");
                let cpu_stack = build(stacked, block, &counts, &keys, &values, STRIDE, true);
                let cpu = merge_kway_built(&cpu_stack, inputs, pixels, out, block);
                assert_same_lists(&gpu, &cpu, &what);
                if out != Layout::LinkedList {
                    assert_eq!(gpu.slots, cpu.slots, "{what}: slots");
                }
                // A final deep output is merged by its keys alone: the same keys in the same
                // slots, no values to read, and no further merge of it. (Into every layout from
                // the stack the engine builds: each variant is one more compile on llvmpipe.)
                if stacked != Layout::Linearised {
                    continue;
                }
                let keys_only =
                    merge_deep_kway(ctx, &stack, out, block, &columns, false, DeepWrites::Direct)
                        .unwrap();
                assert!(!keys_only.with_values, "{what}");
                assert!(keys_only.read_back(true).is_err(), "{what}: values read");
                let keys_only = keys_only.read_back(false).expect("the keys read back");
                assert_eq!(keys_only.offsets, gpu.offsets, "{what}: keys only");
                for p in 0..pixels {
                    assert_eq!(
                        keys_only.pixel(p),
                        gpu.pixel(p),
                        "{what}: keys only, pixel {p}"
                    );
                }
            }
        }
    });
}
