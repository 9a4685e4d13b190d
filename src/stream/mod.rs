//! The streamed merge: N deep files into one output, a band of rows at a time, in a memory
//! budget rather than in the size of the image (docs/architecture.md, "Data flow").
//!
//! - [`source`]: the chunk reader. Headers, offset tables and sample-count tables first, then
//!   the chunks a band needs, read with positioned reads and unpacked in parallel.
//! - [`flat_source`]: the flat twin of the chunk reader, for operations that read a flat image.
//! - [`plan`]: the band planner. Bands follow from the samples per row (the count tables) and
//!   the budget: dense rows make thin bands; a single row that does not fit is refused.
//! - [`pipeline`]: reading band k+1, merging band k (either engine, on the calling thread,
//!   which owns the GL context) and writing band k-1 overlap on three threads joined by
//!   rendezvous channels, so at most three bands are alive; each stage uses rayon inside.
//! - The chunk writers live in `crate::exr` ([`crate::exr::DeepChunkWriter`],
//!   [`crate::exr::FlatChunkWriter`]); the whole-image writers are those writers fed one band.
//!
//! A band of the output is the union of the inputs' whole data windows cut to the band's rows;
//! each input contributes its own window cut to those rows (possibly no rows, but still its
//! channels), and the merge is told the band's window explicitly
//! (`composite::merge_images_over`, `gpu::merge_images_gl_over`), so the streamed result is the
//! whole-image result row for row (`tests/stream.rs` checks deep sample for sample and flat bit
//! for bit for several band heights).
//!
//! The library entry point is [`merge_files`].

pub mod bbox;
pub mod flat_source;
pub mod pipeline;
pub mod plan;
pub mod source;

pub use bbox::OutputWindow;
pub use flat_source::{FlatRows, FlatSource};
pub use pipeline::{
    merge_files, stream_bands, BandOutput, MergeEngine, OutputFormat, StreamMerge, StreamReport,
};
pub use plan::{plan_bands, Band};
pub use source::ChunkSource;

use crate::composite::MergeOptions;
use crate::deep::{Channel, ChannelRole};
use crate::error::{Error, Result};
use crate::exr::{DeepWriteOptions, FlatWriteOptions, MetadataMode, PartSelector};
use crate::ops::Pruning;

/// The default memory budget: 1 GiB. A band is at most a third of it (three are alive at
/// once), so rows of up to ~2 M samples stream at the default (a 2K frame at ~1000 samples per
/// pixel in its densest row), and a laptop with 8 GiB keeps room for everything else.
pub const DEFAULT_MEMORY_BUDGET: u64 = 1 << 30;

/// Everything about a streamed merge but its paths and engine.
#[derive(Clone, Debug)]
pub struct StreamOptions {
    /// The part of multi-part inputs to read.
    pub part: PartSelector,
    /// What the merge produces.
    pub merge: MergeOptions,
    /// Options of flat output.
    pub flat_write: FlatWriteOptions,
    /// Options of deep output.
    pub deep_write: DeepWriteOptions,
    /// Which input attributes the output carries, after the writers' own `attributes`.
    pub metadata: MetadataMode,
    /// The memory the merge may use, in bytes (inputs' bands, merge, output being written).
    pub budget: u64,
    /// Keep only these channels (plus what they need); `None` keeps every channel.
    pub channels: Option<ChannelSelection>,
    /// Bands of exactly this many rows, whatever the budget says (for tests and measurements).
    pub band_rows: Option<usize>,
    /// Samples dropped around the merge (`--drop-transparent`, `--drop-hidden`).
    pub pruning: Pruning,
    /// The merge's output data window (`--bbox`; operations ignore it).
    pub bbox: OutputWindow,
}

impl Default for StreamOptions {
    fn default() -> Self {
        StreamOptions {
            part: PartSelector::FirstDeep,
            merge: MergeOptions::default(),
            flat_write: FlatWriteOptions::default(),
            deep_write: DeepWriteOptions::default(),
            // The library's default writes only what the writers state (the CLI and Python
            // carry the first input's attributes).
            metadata: MetadataMode::None,
            budget: DEFAULT_MEMORY_BUDGET,
            channels: None,
            band_rows: None,
            pruning: Pruning::default(),
            bbox: OutputWindow::Union,
        }
    }
}

/// The channels `--channels` asks for. Z and ZBack are always kept (they order the samples);
/// every alpha channel (A, RA, GA, BA, in any layer) is kept when a composited channel is, since
/// the colour's "over" needs it; other channels are kept only when named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelSelection {
    names: Vec<String>,
}

impl ChannelSelection {
    /// From a comma-separated list such as `R,G,B,A`.
    pub fn parse(list: &str) -> Result<Self> {
        let names: Vec<String> = list
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(String::from)
            .collect();
        if names.is_empty() {
            return Err(Error::Usage(
                "--channels needs at least one channel name".into(),
            ));
        }
        Ok(ChannelSelection { names })
    }

    /// The names asked for.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Whether `channel` of an input whose channels are `all` is kept.
    pub fn keeps(&self, channel: &Channel, all: &[Channel]) -> bool {
        let named = |c: &Channel| self.names.iter().any(|n| n == &c.name);
        let is_alpha = |c: &Channel| {
            matches!(
                c.role,
                ChannelRole::Alpha
                    | ChannelRole::RedAlpha
                    | ChannelRole::GreenAlpha
                    | ChannelRole::BlueAlpha
            )
        };
        match channel.role {
            ChannelRole::Z | ChannelRole::ZBack => true,
            _ if named(channel) => true,
            _ if is_alpha(channel) => all.iter().any(|c| {
                named(c)
                    && !matches!(
                        c.role,
                        ChannelRole::Z | ChannelRole::ZBack | ChannelRole::Id
                    )
            }),
            _ => false,
        }
    }
}
