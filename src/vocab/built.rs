//! [`BuiltImage`]: the host copy of one deep image in a layout, as the GPU holds it, and how to
//! walk a pixel of it. The GPU engine reads its images back into this form; the CPU twin of
//! `build.comp` builds it directly; the tests compare the two.

use super::address::address;
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

impl BuiltImage {
    /// Slot of sample `i` of pixel `p` (array layouts only).
    pub fn pixel_address(&self, p: usize, i: u32) -> u32 {
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
