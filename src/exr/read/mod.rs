//! Reading EXR parts. The layers, bottom up: [`bytes`] (positioned reads of a file or of bytes
//! in memory), [`header`] (every part's header), `part` (the one part reader: the part picked,
//! the budget, the offset table), then the decoders on it, [`deep`] (`ChunkSource`, with one
//! chunk's framing in `chunk`) and [`flat`] (`FlatSource`).
//!
//! This file reads a whole deep part into one [`DeepImage`]: the deep decoder ([`ChunkSource`])
//! asked for every row of the window at once, after the memory the image will take has been checked
//! against [`ReadOptions::max_memory`]. A merge streams instead (`crate::stream`); whole images
//! are for the in-memory API, the viewer's inspector, tests and benchmarks.
//!
//! Every size the file states (window, chunk count, packed and unpacked sizes, sample counts) is
//! hostile until checked: the reader computes sizes in u64 with saturating arithmetic (a
//! saturated size is over any budget, so overflow can only ever refuse, never wrap into a small
//! number), checks a chunk's claimed unpacked sizes against its packed bytes before unpacking
//! anything, and reserves sample memory only after the count tables are read and the total is
//! checked here.

use std::path::Path;

pub(crate) mod bytes;
mod chunk;
pub(crate) mod deep;
pub(crate) mod flat;
pub(crate) mod header;
mod part;

use super::selection::ChannelSelection;
use crate::deep::DeepImage;
use crate::error::{Error, Result};
use deep::ChunkSource;
use header::PartSelector;

/// The default ceiling on the memory one input may take once decoded: 8 GiB.
pub const DEFAULT_MAX_MEMORY: u64 = 8 << 30;

/// How to read a deep file.
#[derive(Clone, Debug)]
pub struct ReadOptions {
    /// The part to read.
    pub part: PartSelector,
    /// Refuse files whose decoded offsets and samples would take more bytes than this.
    pub max_memory: u64,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            part: PartSelector::FirstDeep,
            max_memory: DEFAULT_MAX_MEMORY,
        }
    }
}

/// Read one deep part of a file into a [`DeepImage`].
pub fn read_deep(path: &Path, options: &ReadOptions) -> Result<DeepImage> {
    read_deep_channels(path, options, None)
}

/// [`read_deep`] keeping only the channels `selection` keeps (all without one): the others
/// are unpacked with their chunks (the codec packs all channels together) but never stored.
/// A name the part does not have is refused, naming it and the channels there are.
pub fn read_deep_channels(
    path: &Path,
    options: &ReadOptions,
    selection: Option<&ChannelSelection>,
) -> Result<DeepImage> {
    let mut source = ChunkSource::open(path, &options.part, options.max_memory)?;
    if let Some(selection) = selection {
        let all = source.all_channels.clone();
        selection.check_names(&[(path, &all)])?;
        source.keep_channels(|c| selection.keeps(c, &all));
    }
    read_whole(source, options.max_memory).map_err(|e| e.in_file(path))
}

/// Decode one deep part from the bytes of a whole file.
pub fn decode_deep(bytes: &[u8], options: &ReadOptions) -> Result<DeepImage> {
    let source = ChunkSource::from_bytes(bytes.to_vec(), &options.part, options.max_memory)?;
    read_whole(source, options.max_memory)
}

/// Bytes per pixel of the window while reading: the count table (4), the offsets (8) and the
/// chunks' own count tables, held until every chunk is decoded (4).
const PIXEL_BYTES: u64 = 16;

/// Every row of `source`'s window, within `max_memory`: the per-pixel tables, the sample
/// planes and the inflated chunks they are copied from (all held at once at the peak).
fn read_whole(mut source: ChunkSource, max_memory: u64) -> Result<DeepImage> {
    let window = source.window;
    let pixel_bytes = (window.area() as u64).saturating_mul(PIXEL_BYTES);
    check_memory(
        pixel_bytes,
        max_memory,
        &format!(
            "its data window of {} x {} pixels",
            window.width(),
            window.height()
        ),
    )?;
    source.count_rows(max_memory)?;
    let total: u64 = source.row_samples.iter().sum();
    let sample_bytes = total.saturating_mul(source.sample_bytes());
    check_memory(
        pixel_bytes.saturating_add(sample_bytes.saturating_mul(2)),
        max_memory,
        &format!("its {total} samples"),
    )?;
    source.take_rows(window.y0..=window.y1)
}

fn check_memory(bytes: u64, limit: u64, what: &str) -> Result<()> {
    if bytes > limit {
        return Err(Error::over_budget(what, bytes, limit));
    }
    Ok(())
}
