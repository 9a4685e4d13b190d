//! How the GPU merges, beside the layout it merges in ([`super::layout`]): the two merge
//! methods, the k-way and chained strategies, the pixel orders, and the register-block and
//! long-list choices of the pairwise merge. Each parses its CLI name (`FromStr`), for the CLI,
//! Python and the viewer alike.

use std::str::FromStr;

use super::GROUP_SIZE;
use crate::error::{parse_name, Error, Result};

/// Largest register block the merge supports (the blocks live in registers, so keep it small).
pub const MAX_BLOCK_SIZE: u32 = 32;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MergeMethod {
    /// Read one fragment, compare, emit, read the next (the paper's "S").
    Stepwise,
    /// Register block merging: read `BLOCK_SIZE` fragments of each list at once (the paper's RBM).
    RegisterBlock,
}

impl MergeMethod {
    /// Short name as the paper writes it.
    pub fn name(self) -> &'static str {
        match self {
            MergeMethod::Stepwise => "S",
            MergeMethod::RegisterBlock => "RBM",
        }
    }
}

impl FromStr for MergeMethod {
    type Err = Error;

    /// `rbm` or `stepwise` (also the paper's `s`).
    fn from_str(s: &str) -> Result<Self> {
        parse_name(
            "the merge method",
            s,
            [
                ("rbm", MergeMethod::RegisterBlock),
                ("stepwise", MergeMethod::Stepwise),
                ("s", MergeMethod::Stepwise),
            ],
        )
    }
}

/// How N inputs are merged: one pass over all of them per pixel, or a chain of pairwise merges.
/// Both give the same order (and so the same output bits); the chain is kept for the paper's
/// tables and for comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum MergeStrategy {
    /// One pass per pixel over every input's sorted run: a heap over the run heads on the CPU,
    /// `merge_kway.comp` on the GL engine (up to [`MAX_KWAY_INPUTS`] inputs; a GL merge of more
    /// runs the pairwise chain instead, `gpu::uses_kway`).
    #[default]
    KWay,
    /// Input 0 merged with input 1, the result with input 2, and so on (the paper's "iterated
    /// pairwise" merging).
    Chain,
}

impl MergeStrategy {
    /// Both, k-way first.
    pub const ALL: [MergeStrategy; 2] = [MergeStrategy::KWay, MergeStrategy::Chain];

    /// Name as the CLI and the bench tables write it.
    pub fn name(self) -> &'static str {
        match self {
            MergeStrategy::KWay => "kway",
            MergeStrategy::Chain => "chain",
        }
    }

    /// Parse [`Self::name`] (case-insensitive).
    pub fn from_name(name: &str) -> Option<MergeStrategy> {
        name.parse().ok()
    }
}

impl FromStr for MergeStrategy {
    type Err = Error;

    /// `kway` or `chain`.
    fn from_str(s: &str) -> Result<Self> {
        parse_name(
            "the merge strategy",
            s,
            MergeStrategy::ALL.map(|m| (m.name(), m)),
        )
    }
}

/// Most inputs one dispatch of `merge_kway.comp` reads (its per-input state is sized by it at
/// compile time); a GL merge of more inputs runs the pairwise chain instead.
pub const MAX_KWAY_INPUTS: usize = 8;

/// Pixels each input takes in the stacked image a k-way merge reads (`merge_kway.comp`): the
/// band's `pixels` rounded up to whole groups, so every input's interleaving groups line up
/// with the threads' groups. Input k's pixel p is the stacked image's pixel `k * stride + p`.
pub fn kway_stride(pixels: usize) -> usize {
    pixels.div_ceil(GROUP_SIZE as usize) * GROUP_SIZE as usize
}

/// Which (x, y) pixel the layout's pixel index p stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum PixelOrder {
    /// p runs along rows.
    #[default]
    RowMajor,
    /// p runs through 8x4 tiles (one group of 32 each), tiles row by row: the raster pattern.
    Tiled,
}

impl FromStr for PixelOrder {
    type Err = Error;

    /// `row` or `tiled`.
    fn from_str(s: &str) -> Result<Self> {
        parse_name(
            "the pixel order",
            s,
            [("row", PixelOrder::RowMajor), ("tiled", PixelOrder::Tiled)],
        )
    }
}

/// Tile width and height of [`PixelOrder::Tiled`]; their product is [`GROUP_SIZE`].
pub const TILE: (usize, usize) = (8, 4);

impl PixelOrder {
    /// For a `width` x `height` rectangle, the row-major index of each layout pixel p.
    pub fn permutation(self, width: usize, height: usize) -> Vec<u32> {
        match self {
            PixelOrder::RowMajor => (0..(width * height) as u32).collect(),
            PixelOrder::Tiled => {
                let mut order = Vec::with_capacity(width * height);
                for ty in (0..height).step_by(TILE.1) {
                    for tx in (0..width).step_by(TILE.0) {
                        for y in ty..(ty + TILE.1).min(height) {
                            for x in tx..(tx + TILE.0).min(width) {
                                order.push((y * width + x) as u32);
                            }
                        }
                    }
                }
                order
            }
        }
    }
}

/// How a register-block merge indexes its blocks: both give the same output bit for bit; which
/// is faster depends on the compiler (see docs/benchmarks.md for the hardware measurement).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RbmBlocks {
    /// `block[pos]` with a moving position: a dynamic index (about 2x faster than shifting on
    /// llvmpipe; up to 1.6x slower on an H100).
    Indexed,
    /// The head is always `block[0]` and the block shifts down after every emit: constant
    /// indices only, so a GPU compiler can keep the blocks in registers.
    Shifted,
}

impl RbmBlocks {
    /// Both, in the order benches print them.
    pub const ALL: [RbmBlocks; 2] = [RbmBlocks::Indexed, RbmBlocks::Shifted];

    /// The CLI's name.
    pub fn name(self) -> &'static str {
        match self {
            RbmBlocks::Indexed => "indexed",
            RbmBlocks::Shifted => "shifted",
        }
    }
}

impl FromStr for RbmBlocks {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        parse_name(
            "register-block indexing",
            s,
            RbmBlocks::ALL.map(|b| (b.name(), b)),
        )
    }
}

/// Who merges a pixel's lists in a pairwise merge: both give the same output bit for bit; which
/// is faster depends on the device and on how long the lists are (docs/benchmarks.md names the
/// hardware measurement that decides the default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LongLists {
    /// One invocation per pixel, whatever its length (`merge.comp` alone).
    PerPixel,
    /// Pixels whose two lists hold more than `threshold` fragments together are merged by a
    /// workgroup each (`merge_coop.comp`), the others by their own invocation; 0 sends every
    /// pixel with a fragment to the workgroups.
    Cooperative {
        /// Most fragments a pixel may hold and still be merged by one invocation.
        threshold: u32,
    },
}

impl LongLists {
    /// The threshold `cooperative` alone stands for: eight register blocks of the default size.
    pub const DEFAULT_THRESHOLD: u32 = 64;

    /// The CLI's spelling: `per-pixel` or `cooperative=N`.
    pub fn name(self) -> String {
        match self {
            LongLists::PerPixel => "per-pixel".into(),
            LongLists::Cooperative { threshold } => format!("cooperative={threshold}"),
        }
    }
}

impl std::str::FromStr for LongLists {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let threshold = match s.split_once('=') {
            None if s == "per-pixel" => return Ok(LongLists::PerPixel),
            None if s == "cooperative" => LongLists::DEFAULT_THRESHOLD,
            Some(("cooperative", n)) => n.parse::<u32>().map_err(|_| {
                format!(
                    "'{n}' is not a fragment count (cooperative=N, N from 0 to {})",
                    u32::MAX
                )
            })?,
            _ => {
                return Err(format!(
                    "unknown long-list merging '{s}' (per-pixel, cooperative or cooperative=N)"
                ))
            }
        };
        Ok(LongLists::Cooperative { threshold })
    }
}
