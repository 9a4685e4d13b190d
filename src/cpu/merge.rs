//! Twin of `glsl/merge.comp`: merge two sorted per-pixel lists, stepwise (S) or with register
//! blocks (RBM), and whole built images into a new layout; and of `glsl/merge_kway.comp` (with
//! `count_kway.comp`): merge N lists in one pass, from N images stacked into one.
//!
//! Tie rule (as `composite::sort_samples`): on equal (Z, ZBack) the first list (`a`, the earlier
//! inputs) goes first, and each list keeps its own order.

use super::build::build;
use crate::vocab::{kway_stride, BuiltImage, Fragment, Layout, MergeMethod};

/// Which list a merged fragment came from, and its position there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pick {
    /// Position in list `a`.
    A(usize),
    /// Position in list `b`.
    B(usize),
}

/// Stepwise merge: compare the two current fragments, emit one, read the next.
pub fn merge_stepwise(a: &[Fragment], b: &[Fragment]) -> Vec<Pick> {
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::with_capacity(a.len() + b.len());
    while i < a.len() && j < b.len() {
        if b[j].depth_less(&a[i]) {
            out.push(Pick::B(j));
            j += 1;
        } else {
            out.push(Pick::A(i));
            i += 1;
        }
    }
    out.extend((i..a.len()).map(Pick::A));
    out.extend((j..b.len()).map(Pick::B));
    out
}

/// Register block merge: hold up to `block_size` fragments of each list, refill a block when it
/// runs empty, merge block against block. Same result as [`merge_stepwise`], different reads.
pub fn merge_rbm(a: &[Fragment], b: &[Fragment], block_size: usize) -> Vec<Pick> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    // Block state: first list position held, number held, position consumed within the block.
    let (mut a_base, mut a_held, mut a_pos) = (0usize, 0usize, 0usize);
    let (mut b_base, mut b_held, mut b_pos) = (0usize, 0usize, 0usize);
    loop {
        if a_pos == a_held {
            a_base += a_held;
            a_held = block_size.min(a.len() - a_base);
            a_pos = 0;
        }
        if b_pos == b_held {
            b_base += b_held;
            b_held = block_size.min(b.len() - b_base);
            b_pos = 0;
        }
        if a_held == 0 && b_held == 0 {
            break;
        }
        while a_pos < a_held && b_pos < b_held {
            if b[b_base + b_pos].depth_less(&a[a_base + a_pos]) {
                out.push(Pick::B(b_base + b_pos));
                b_pos += 1;
            } else {
                out.push(Pick::A(a_base + a_pos));
                a_pos += 1;
            }
        }
        // One list is exhausted for good only when its refill finds nothing; drain the other.
        if a_held == 0 {
            out.extend((b_base + b_pos..b_base + b_held).map(Pick::B));
            b_pos = b_held;
        } else if b_held == 0 {
            out.extend((a_base + a_pos..a_base + a_held).map(Pick::A));
            a_pos = a_held;
        }
    }
    out
}

/// Merge two built images pixel by pixel into `layout` (lists ascending, LL built per
/// `ascending`).
pub fn merge_built(
    a: &BuiltImage,
    b: &BuiltImage,
    layout: Layout,
    method: MergeMethod,
    block_size: u32,
    ascending: bool,
) -> BuiltImage {
    assert_eq!(a.pixel_count(), b.pixel_count());
    assert_eq!(a.columns, b.columns);
    let columns = a.columns;
    let mut counts = Vec::with_capacity(a.pixel_count());
    let mut stream = Vec::new();
    let mut values = Vec::new();
    for p in 0..a.pixel_count() {
        let (sa, sb) = (a.pixel_slots(p), b.pixel_slots(p));
        let fa: Vec<Fragment> = sa.iter().map(|&s| a.slots[s as usize]).collect();
        let fb: Vec<Fragment> = sb.iter().map(|&s| b.slots[s as usize]).collect();
        let picks = match method {
            MergeMethod::Stepwise => merge_stepwise(&fa, &fb),
            MergeMethod::RegisterBlock => merge_rbm(&fa, &fb, block_size as usize),
        };
        counts.push(picks.len() as u32);
        for pick in picks {
            let (image, slot) = match pick {
                Pick::A(i) => (a, sa[i] as usize),
                Pick::B(j) => (b, sb[j] as usize),
            };
            stream.push(image.slots[slot]);
            values.extend_from_slice(&image.values[slot * columns..(slot + 1) * columns]);
        }
    }
    build(
        layout, block_size, &counts, &stream, &values, columns, ascending,
    )
}

/// K-way merge as `merge_kway.comp` runs it: every list keeps its current fragment in hand; at
/// each step the smallest key leaves, a strict comparison over the lists in order keeping the
/// lowest list on ties. Returns (list, position) per merged fragment: the order of the chain
/// [`merge_stepwise`]`(merge_stepwise(l0, l1), l2)...`.
pub fn merge_kway(lists: &[&[Fragment]]) -> Vec<(usize, usize)> {
    let mut next = vec![0usize; lists.len()];
    let mut out = Vec::with_capacity(lists.iter().map(|l| l.len()).sum());
    loop {
        let mut best: Option<usize> = None;
        for (k, list) in lists.iter().enumerate() {
            if next[k] < list.len()
                && best.is_none_or(|b| list[next[k]].depth_less(&lists[b][next[b]]))
            {
                best = Some(k);
            }
        }
        let Some(k) = best else {
            return out;
        };
        out.push((k, next[k]));
        next[k] += 1;
    }
}

/// Merge the `inputs` images stacked in `stack` (input k's pixel p at stacked pixel
/// `k * kway_stride(pixels) + p`, lists ascending) for the `pixels` pixels of the band, in one
/// pass, into `layout` (LL built descending, as the ascending merge's head insertion leaves it).
pub fn merge_kway_built(
    stack: &BuiltImage,
    inputs: usize,
    pixels: usize,
    layout: Layout,
    block_size: u32,
) -> BuiltImage {
    assert_eq!(stack.pixel_count(), inputs * kway_stride(pixels));
    let columns = stack.columns;
    let stride = kway_stride(pixels);
    let mut counts = Vec::with_capacity(pixels);
    let mut stream = Vec::new();
    let mut values = Vec::new();
    for p in 0..pixels {
        let slots: Vec<Vec<u32>> = (0..inputs)
            .map(|k| stack.pixel_slots(k * stride + p))
            .collect();
        let lists: Vec<Vec<Fragment>> = slots
            .iter()
            .map(|s| s.iter().map(|&s| stack.slots[s as usize]).collect())
            .collect();
        let refs: Vec<&[Fragment]> = lists.iter().map(Vec::as_slice).collect();
        let picks = merge_kway(&refs);
        counts.push(picks.len() as u32);
        for (k, i) in picks {
            let slot = slots[k][i] as usize;
            stream.push(stack.slots[slot]);
            values.extend_from_slice(&stack.values[slot * columns..(slot + 1) * columns]);
        }
    }
    build(
        layout, block_size, &counts, &stream, &values, columns, false,
    )
}
