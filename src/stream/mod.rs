//! The streamed merge: N deep files into one output, a band of rows at a time, in a memory
//! budget rather than in the size of the image (docs/architecture.md, "Data flow").
//!
//! - The chunk reader is [`crate::exr::ChunkSource`]: headers, offset tables and sample-count
//!   tables first, then the chunks a band needs, read with positioned reads and unpacked in
//!   parallel.
//! - [`plan`]: the band planner. Bands follow from the samples per row (the count tables) and
//!   the budget: dense rows make thin bands; a single row that does not fit is refused.
//! - [`parts`]: which part of each multi-part input is read, and part-by-part (stereo) merges
//!   into a multi-part output.
//! - [`pipeline`]: reading band k+1, merging band k (either engine, on the calling thread,
//!   which owns the GL context) and writing band k-1 overlap on three threads; the reader
//!   decodes ahead while fewer than the three bands planned for are alive (tokens), and each
//!   stage uses rayon inside.
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
pub mod codec_floor;
pub mod parts;
pub mod pipeline;
pub mod plan;

pub use bbox::OutputWindow;
pub use parts::{merge_parts, plan_parts, write_part_by_part, OutputPart, PartPlan, PartRequest};
pub use pipeline::{
    merge_checked, merge_files, stream_bands, BandOutput, EngineOutput, MergeEngine, OutputFormat,
    StreamMerge, StreamReport,
};
pub use plan::{plan_bands, Band};

use crate::composite::MergeOptions;
use crate::composite::Pruning;
use crate::deep::Channel;
use crate::exr::{
    carried_attributes, ChannelSelection, DeepWriteOptions, FlatType, FlatWriteOptions,
    MetadataMode, PartSelector, RawAttribute,
};

/// The default memory budget: 1 GiB. A band is at most a third of it (three are alive at
/// once), so rows of up to ~2 M samples stream at the default (a 2K frame at ~1000 samples per
/// pixel in its densest row), and a laptop with 8 GiB keeps room for everything else.
pub const DEFAULT_MEMORY_BUDGET: u64 = 1 << 30;

/// Everything about a streamed merge but its paths and engine.
#[derive(Clone, Debug)]
pub struct StreamOptions {
    /// The part of multi-part inputs to read.
    pub part: PartSelector,
    /// The part of each input, in input order, in place of `part` when not empty (`--part`
    /// once per input; see [`parts`]).
    pub input_parts: Vec<PartSelector>,
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
    /// The threads a band is decoded and encoded on, which size the bands
    /// ([`plan::band_cap`]); `None`: the current rayon pool's. Frames merged side by side
    /// (`-j`) each take their share.
    pub band_threads: Option<usize>,
    /// Samples dropped around the merge (`--drop-transparent`, `--drop-hidden`).
    pub pruning: Pruning,
    /// The merge's output data window (`--bbox`; operations ignore it).
    pub bbox: OutputWindow,
    /// Flat output stores colour as its inputs do ([`FlatType::following`]) rather than as
    /// `flat_write` says: no type was asked for.
    pub flat_type_follows_inputs: bool,
}

impl StreamOptions {
    /// The threads a band is decoded and encoded on: [`Self::band_threads`], or the current
    /// rayon pool's.
    pub fn threads_per_band(&self) -> usize {
        self.band_threads.unwrap_or_else(rayon::current_num_threads)
    }

    /// The writers' options for an output made from an input whose header holds `attributes`
    /// (the first input's, of the part read): the writers' own attributes, then the input's as
    /// [`Self::metadata`] asks. The merge and every operation keep these metadata rules.
    /// Flat output follows the types of `inputs`' channels where
    /// [`Self::flat_type_follows_inputs`].
    pub fn write_options_from(
        &self,
        attributes: &[RawAttribute],
        inputs: &[&[Channel]],
    ) -> (DeepWriteOptions, FlatWriteOptions) {
        let carried = match self.metadata {
            MetadataMode::First => carried_attributes(attributes),
            MetadataMode::None => Vec::new(),
        };
        let mut deep_write = self.deep_write.clone();
        deep_write.attributes.extend(carried.iter().cloned());
        let mut flat_write = self.flat_write.clone();
        flat_write.attributes.extend(carried);
        if self.flat_type_follows_inputs {
            flat_write.flat_type = FlatType::following(inputs.iter().flat_map(|c| c.iter()));
        }
        (deep_write, flat_write)
    }
}

impl Default for StreamOptions {
    fn default() -> Self {
        StreamOptions {
            part: PartSelector::FirstDeep,
            input_parts: Vec::new(),
            merge: MergeOptions::default(),
            flat_write: FlatWriteOptions::default(),
            deep_write: DeepWriteOptions::default(),
            // The library's default writes only what the writers state (the CLI and Python
            // carry the first input's attributes).
            metadata: MetadataMode::None,
            budget: DEFAULT_MEMORY_BUDGET,
            channels: None,
            band_rows: None,
            band_threads: None,
            pruning: Pruning::default(),
            bbox: OutputWindow::Union,
            flat_type_follows_inputs: false,
        }
    }
}
