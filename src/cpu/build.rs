//! Twin of `glsl/build.comp`: scatter a pixel-ordered stream of fragments (one pixel after the
//! other, each pixel's samples ascending) into a layout.
//!
//! LL lists are built as the paper builds them, by head insertion; inserting the stream forward
//! gives a descending list, inserting it backward an ascending one. The caller picks the
//! direction the merge that reads the list needs ([`BuiltImage::ascending`]).

use super::scan::exclusive_scan;
use crate::vocab::layout::group_min_counts;
use crate::vocab::{BuiltImage, Fragment, Layout};

/// Build `layout` from per-pixel `counts` and the pixel-ordered `stream` with its `values`
/// (`columns` per fragment). `ascending` only matters for LL.
pub fn build(
    layout: Layout,
    block_size: u32,
    counts: &[u32],
    stream: &[Fragment],
    values: &[f32],
    columns: usize,
    ascending: bool,
) -> BuiltImage {
    let offsets = exclusive_scan(counts);
    let total = *offsets.last().unwrap() as usize;
    assert_eq!(stream.len(), total, "stream length disagrees with counts");
    let min_counts = group_min_counts(layout, block_size, counts);
    let mut image = BuiltImage {
        layout,
        block_size: layout.block(block_size),
        columns,
        offsets,
        min_counts,
        head: Vec::new(),
        next: Vec::new(),
        slots: Vec::new(),
        values: Vec::new(),
        ascending: !layout.links_lists() || ascending,
    };
    let zero = Fragment {
        z: 0.0,
        zback: 0.0,
        input: 0,
        index: 0,
    };
    if layout.links_lists() {
        image.head = vec![0; counts.len()];
        image.next = vec![0; total + 1];
        image.slots = vec![zero; total + 1];
        image.values = vec![0.0; (total + 1) * columns];
        let mut counter = 1u32;
        for (p, &n) in counts.iter().enumerate() {
            let start = image.offsets[p] as usize;
            let n = n as usize;
            // Head insertion reverses: insert backward for an ascending list.
            let order: Box<dyn Iterator<Item = usize>> = if ascending {
                Box::new((0..n).rev())
            } else {
                Box::new(0..n)
            };
            for i in order {
                let node = counter;
                counter += 1;
                image.next[node as usize] = image.head[p];
                image.head[p] = node;
                image.slots[node as usize] = stream[start + i];
                let v = (start + i) * columns;
                image.values[node as usize * columns..(node as usize + 1) * columns]
                    .copy_from_slice(&values[v..v + columns]);
            }
        }
    } else {
        image.slots = vec![zero; total];
        image.values = vec![0.0; total * columns];
        for (p, &n) in counts.iter().enumerate() {
            let start = image.offsets[p] as usize;
            for i in 0..n {
                let slot = image.pixel_address(p, i) as usize;
                let src = start + i as usize;
                image.slots[slot] = stream[src];
                image.values[slot * columns..(slot + 1) * columns]
                    .copy_from_slice(&values[src * columns..(src + 1) * columns]);
            }
        }
    }
    image
}
