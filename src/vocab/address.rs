//! The Rust side of `glsl/include/layout.glsl` (the host walks read-back images with it, the CPU twin
//! of `build.comp` scatters with it): where sample i of pixel p lives in each array layout
//! (docs/architecture.md, "GPU layouts"), and the per-group minimum counts that IA and BIA need.
//!
//! One refinement over the paper's formulas: the last group of an image may hold fewer than
//! `G` pixels, so the interleaving stride is the group's real width `min(G, P - g·G)`; with the
//! full G its interleaved part would run past the end of the data.

use super::{Layout, GROUP_SIZE};

/// Number of pixels in group `g` of an image of `pixels` pixels.
pub fn group_width(g: usize, pixels: usize) -> usize {
    (pixels - g * GROUP_SIZE as usize).min(GROUP_SIZE as usize)
}

/// Per group of [`GROUP_SIZE`] pixels, the smallest count (IA), rounded down to a multiple of
/// `block_size` for BIA. Empty for LL and LA, which need none.
pub fn group_min_counts(layout: Layout, block_size: u32, counts: &[u32]) -> Vec<u32> {
    match layout {
        Layout::LinkedList | Layout::Linearised => Vec::new(),
        Layout::Interleaved | Layout::BlockedInterleaved => counts
            .chunks(GROUP_SIZE as usize)
            .map(|group| {
                let m = group.iter().copied().min().unwrap_or(0);
                if layout == Layout::BlockedInterleaved {
                    m - m % block_size
                } else {
                    m
                }
            })
            .collect(),
    }
}

/// LA: sample i of pixel p.
pub fn address_la(offsets: &[u32], p: usize, i: u32) -> u32 {
    offsets[p] + i
}

/// Where pixel p stands in its interleaving group: its rank `r` in the group, the group's width,
/// its min count `m` and first slot; samples past `m` live in a linear tail after the group's
/// interleaved part (`tail`).
struct GroupPlace {
    r: u32,
    width: u32,
    m: u32,
    base: u32,
    /// Slot of sample `m` of pixel p, the start of its part of the tail.
    tail: u32,
}

impl GroupPlace {
    fn of(offsets: &[u32], min_counts: &[u32], p: usize) -> GroupPlace {
        let g = p / GROUP_SIZE as usize;
        let r = (p % GROUP_SIZE as usize) as u32;
        let width = group_width(g, offsets.len() - 1) as u32;
        let m = min_counts[g];
        GroupPlace {
            r,
            width,
            m,
            base: offsets[g * GROUP_SIZE as usize],
            tail: width * m + offsets[p] - m * r,
        }
    }
}

/// IA: sample i of pixel p; `min_counts` from [`group_min_counts`].
pub fn address_ia(offsets: &[u32], min_counts: &[u32], p: usize, i: u32) -> u32 {
    let g = GroupPlace::of(offsets, min_counts, p);
    if i < g.m {
        g.base + g.r + g.width * i
    } else {
        g.tail + (i - g.m)
    }
}

/// BIA: sample i of pixel p, blocks of `block_size`; `min_counts` already rounded down to blocks.
pub fn address_bia(offsets: &[u32], min_counts: &[u32], block_size: u32, p: usize, i: u32) -> u32 {
    let g = GroupPlace::of(offsets, min_counts, p);
    if i < g.m {
        g.base + (i / block_size) * g.width * block_size + g.r * block_size + (i % block_size)
    } else {
        g.tail + (i - g.m)
    }
}

/// Sample i of pixel p in any array layout (LL has no addresses: its nodes are allocated).
pub fn address(
    layout: Layout,
    block_size: u32,
    offsets: &[u32],
    min_counts: &[u32],
    p: usize,
    i: u32,
) -> Option<u32> {
    match layout {
        Layout::LinkedList => None,
        Layout::Linearised => Some(address_la(offsets, p, i)),
        Layout::Interleaved => Some(address_ia(offsets, min_counts, p, i)),
        Layout::BlockedInterleaved => Some(address_bia(offsets, min_counts, block_size, p, i)),
    }
}
