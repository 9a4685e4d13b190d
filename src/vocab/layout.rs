//! The GPU layouts (docs/architecture.md, "GPU layouts"), everything a layout is in one place:
//! its name and the id the shaders are specialised with ([`glsl_defines`], so the shaders and
//! Rust cannot disagree on them), what it holds beside its samples ([`Layout::links_lists`],
//! [`Layout::groups_min_counts`], [`Layout::block`]), its size, and where sample i of pixel p
//! lives ([`address`], the twin of `glsl/include/layout.glsl`). The names parse from the CLI
//! (`FromStr`, case-insensitive), for the CLI, Python and the viewer alike.

use std::str::FromStr;

use crate::error::{parse_name, Error, Result};

/// Pixels per interleaving group (`G` in docs/architecture.md, "GPU layouts"); also the local size
/// of per-pixel kernels.
pub const GROUP_SIZE: u32 = 32;

/// How one deep image's fragments are arranged in GPU memory (docs/architecture.md, "GPU layouts").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Per-pixel linked lists: `head[p]`, `next[]`, nodes from an atomic counter starting at 1.
    LinkedList,
    /// Linearised arrays: pixel p spans `[off[p], off[p + 1])`.
    Linearised,
    /// Interleaved arrays: the first `min` samples of a 32-pixel group interleave sample by sample.
    Interleaved,
    /// Blocked interleaved arrays: as interleaved, but in blocks of `BLOCK_SIZE` samples.
    BlockedInterleaved,
}

impl Layout {
    /// All layouts, in the paper's order.
    pub const ALL: [Layout; 4] = [
        Layout::LinkedList,
        Layout::Linearised,
        Layout::Interleaved,
        Layout::BlockedInterleaved,
    ];

    /// The CLI's spellings of the layouts, in the order of [`Self::ALL`] (`--layout`'s
    /// possible values; any case of [`Self::name`] parses).
    pub const CLI_NAMES: [&'static str; 4] = ["ll", "la", "ia", "bia"];

    /// Short name as the paper and the CLI write it.
    pub fn name(self) -> &'static str {
        match self {
            Layout::LinkedList => "LL",
            Layout::Linearised => "LA",
            Layout::Interleaved => "IA",
            Layout::BlockedInterleaved => "BIA",
        }
    }

    /// The `LAYOUT_*` value the shaders are specialised with (see [`glsl_defines`]).
    pub fn glsl_id(self) -> u32 {
        match self {
            Layout::LinkedList => 0,
            Layout::Linearised => 1,
            Layout::Interleaved => 2,
            Layout::BlockedInterleaved => 3,
        }
    }

    /// The GLSL name of [`Self::glsl_id`]: `LAYOUT_LL`, `LAYOUT_LA`, `LAYOUT_IA`, `LAYOUT_BIA`.
    pub fn glsl_name(self) -> String {
        format!("LAYOUT_{}", self.name())
    }

    /// Parse a short name (case-insensitive).
    pub fn from_name(name: &str) -> Option<Layout> {
        name.parse().ok()
    }

    /// True for a layout of linked lists: a head per pixel and a next link per node, nodes
    /// allocated from a counter that starts at 1 (node 0 is the null node), so its slots have no
    /// addresses. Every other layout is an array layout: sample i of pixel p has an [`address`].
    pub fn links_lists(self) -> bool {
        self == Layout::LinkedList
    }

    /// True for a layout that interleaves each group's first samples, so it keeps the smallest
    /// count of each group of [`GROUP_SIZE`] pixels ([`group_min_counts`]).
    pub fn groups_min_counts(self) -> bool {
        matches!(self, Layout::Interleaved | Layout::BlockedInterleaved)
    }

    /// The block its interleaving runs in when a merge asks for blocks of `block_size`: only
    /// BIA's depends on it (the others run in single samples, so stages on them share one
    /// program whatever the block size).
    pub fn block(self, block_size: u32) -> u32 {
        if self == Layout::BlockedInterleaved {
            block_size
        } else {
            1
        }
    }

    /// Bytes an image of `pixels` pixels and `samples` samples of `sample_bytes` each takes in
    /// this layout, indices 4 bytes: the offsets (or heads), the links of a linked list, the
    /// group minimums. IA and BIA store no padding, so they differ from LA only by the minimums.
    pub fn model_bytes(self, pixels: u64, samples: u64, sample_bytes: u64) -> u64 {
        const INDEX: u64 = 4;
        let data = samples * sample_bytes;
        if self.links_lists() {
            return pixels * INDEX + samples * INDEX + data;
        }
        let minimums = if self.groups_min_counts() {
            pixels.div_ceil(u64::from(GROUP_SIZE)) * INDEX
        } else {
            0
        };
        (pixels + 1) * INDEX + minimums + data
    }
}

impl FromStr for Layout {
    type Err = Error;

    /// `ll`, `la`, `ia` or `bia` (any case).
    fn from_str(s: &str) -> Result<Self> {
        parse_name("the layout", s, Layout::ALL.map(|l| (l.name(), l)))
    }
}

/// The vocabulary's `#define`s every GLSL stage starts with (the program loader emits them):
/// the layout ids, so `glsl/` compares against exactly the values Rust uses.
pub fn glsl_defines() -> Vec<(String, u32)> {
    Layout::ALL
        .into_iter()
        .map(|layout| (layout.glsl_name(), layout.glsl_id()))
        .collect()
}

// Addressing: where sample i of pixel p lives in each array layout, the Rust side of
// `glsl/include/layout.glsl` (the host walks read-back images with it, the CPU twin of
// `build.comp` scatters with it). One refinement over the paper's formulas: the last group of
// an image may hold fewer than `G` pixels, so the interleaving stride is the group's real width
// `min(G, P - g·G)`; with the full G its interleaved part would run past the end of the data.

/// Number of pixels in group `g` of an image of `pixels` pixels.
pub fn group_width(g: usize, pixels: usize) -> usize {
    (pixels - g * GROUP_SIZE as usize).min(GROUP_SIZE as usize)
}

/// Per group of [`GROUP_SIZE`] pixels, the smallest count (IA), rounded down to a multiple of
/// `block_size` for BIA. Empty for LL and LA, which need none.
pub fn group_min_counts(layout: Layout, block_size: u32, counts: &[u32]) -> Vec<u32> {
    if !layout.groups_min_counts() {
        return Vec::new();
    }
    let block = layout.block(block_size);
    counts
        .chunks(GROUP_SIZE as usize)
        .map(|group| {
            let m = group.iter().copied().min().unwrap_or(0);
            m - m % block
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_layout_has_its_cli_name_and_parses_from_it() {
        assert_eq!(Layout::CLI_NAMES.len(), Layout::ALL.len());
        for (name, layout) in Layout::CLI_NAMES.iter().zip(Layout::ALL) {
            assert_eq!(name.parse::<Layout>().ok(), Some(layout));
            assert_eq!(*name, layout.name().to_lowercase());
        }
    }

    #[test]
    fn properties_and_sizes_follow_the_definitions() {
        // LL: heads and links; IA/BIA: group minimums; only BIA runs in blocks.
        for layout in Layout::ALL {
            assert_eq!(layout.links_lists(), layout == Layout::LinkedList);
            assert_eq!(
                layout.groups_min_counts(),
                matches!(layout, Layout::Interleaved | Layout::BlockedInterleaved)
            );
            let blocked = layout == Layout::BlockedInterleaved;
            assert_eq!(layout.block(8), if blocked { 8 } else { 1 });
        }
        // 33 pixels (two groups), 10 samples of 8 bytes.
        let sizes = Layout::ALL.map(|l| l.model_bytes(33, 10, 8));
        assert_eq!(
            sizes,
            [
                33 * 4 + 10 * 4 + 80,
                34 * 4 + 80,
                34 * 4 + 8 + 80,
                34 * 4 + 8 + 80
            ]
        );
        // Minimums round down to whole blocks for BIA only.
        let counts = [5, 7, 9];
        assert_eq!(group_min_counts(Layout::Interleaved, 4, &counts), vec![5]);
        assert_eq!(
            group_min_counts(Layout::BlockedInterleaved, 4, &counts),
            vec![4]
        );
        assert!(group_min_counts(Layout::Linearised, 4, &counts).is_empty());
    }

    /// The Python stub is a static file, so it is held to the table here: every `layout:`
    /// `Literal[...]` in it lists exactly [`Layout::CLI_NAMES`].
    #[test]
    fn the_python_stub_names_every_layout() {
        let stub = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/python/deepmerge/_deepmerge.pyi"
        ));
        let expected: Vec<String> = Layout::CLI_NAMES
            .iter()
            .map(|n| format!("\"{n}\""))
            .collect();
        let expected = format!("layout: Optional[Literal[{}]]", expected.join(", "));
        let declared: Vec<&str> = stub
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with("layout:"))
            .collect();
        assert!(!declared.is_empty(), "the stub takes a layout");
        for line in declared {
            assert!(line.starts_with(&expected), "{line}");
        }
    }
}
