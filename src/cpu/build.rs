//! Twin of `glsl/build.comp`: scatter a pixel-ordered stream of fragments (one pixel after the
//! other, each pixel's samples ascending) into a layout.
//!
//! LL lists are built as the paper builds them, by head insertion; inserting the stream forward
//! gives a descending list, inserting it backward an ascending one. The caller picks the
//! direction the merge that reads the list needs ([`BuiltImage::ascending`]).

use super::layout::{address, group_min_counts};
use super::scan::exclusive_scan;
use super::{Fragment, Layout};

/// One deep image in a layout, as the GPU holds it (host copy).
#[derive(Clone, Debug, PartialEq)]
pub struct BuiltImage {
    /// The layout.
    pub layout: Layout,
    /// Block size BIA was built with (1 for the others).
    pub block_size: u32,
    /// Composited values per fragment slot.
    pub columns: usize,
    /// Exclusive scan of the counts (`P + 1` entries); for LL unused but kept for readback.
    pub offsets: Vec<u32>,
    /// IA/BIA per-group minimum counts.
    pub min_counts: Vec<u32>,
    /// LL head per pixel (0 = empty).
    pub head: Vec<u32>,
    /// LL next per node; node 0 is the null node (on the GPU it holds the allocation counter).
    pub next: Vec<u32>,
    /// Fragment slots (for LL, node 0 is unused).
    pub slots: Vec<Fragment>,
    /// `columns` values per slot.
    pub values: Vec<f32>,
    /// For LL: whether lists run front to back. Arrays are always stored ascending.
    pub ascending: bool,
}

impl BuiltImage {
    /// Number of pixels.
    pub fn pixel_count(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Samples in pixel p.
    pub fn count(&self, p: usize) -> u32 {
        self.offsets[p + 1] - self.offsets[p]
    }

    /// Slots of pixel p's samples, front to back.
    pub fn pixel_slots(&self, p: usize) -> Vec<u32> {
        match self.layout {
            Layout::LinkedList => {
                let mut slots = Vec::new();
                let mut node = self.head[p];
                while node != 0 {
                    slots.push(node);
                    node = self.next[node as usize];
                }
                if !self.ascending {
                    slots.reverse();
                }
                slots
            }
            layout => (0..self.count(p))
                .map(|i| {
                    address(
                        layout,
                        self.block_size,
                        &self.offsets,
                        &self.min_counts,
                        p,
                        i,
                    )
                    .expect("array layout")
                })
                .collect(),
        }
    }

    /// Pixel p's fragments, front to back.
    pub fn pixel(&self, p: usize) -> Vec<Fragment> {
        self.pixel_slots(p)
            .into_iter()
            .map(|s| self.slots[s as usize])
            .collect()
    }
}

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
        block_size: if layout == Layout::BlockedInterleaved {
            block_size
        } else {
            1
        },
        columns,
        offsets,
        min_counts,
        head: Vec::new(),
        next: Vec::new(),
        slots: Vec::new(),
        values: Vec::new(),
        ascending: layout != Layout::LinkedList || ascending,
    };
    let zero = Fragment {
        z: 0.0,
        zback: 0.0,
        input: 0,
        index: 0,
    };
    if layout == Layout::LinkedList {
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

impl BuiltImage {
    fn pixel_address(&self, p: usize, i: u32) -> u32 {
        address(
            self.layout,
            self.block_size,
            &self.offsets,
            &self.min_counts,
            p,
            i,
        )
        .expect("array layout")
    }
}
