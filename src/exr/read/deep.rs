//! The deep decoder: one deep part of one input file, read chunk by chunk with positioned reads.
//!
//! Opening is the part reader's ([`super::part`]: the headers, a growing prefix of the file,
//! never the whole file; the part; the budget; the offset table), with this decoder's checks
//! ([`Deep`]); [`ChunkSource::count_rows`] then reads every chunk's head and its packed
//! sample-count table only, which is all the band planner needs (samples per row). The count
//! tables it inflates are kept (each pixel's count in the narrowest integer that holds the
//! chunk's largest, within a share of the budget), so decoding a chunk later reads and inflates
//! its sample data only. During the merge, [`ChunkSource::take_rows`] decodes the chunks of the
//! rows a band asks for in parallel into the planes of a [`DeepImage`] whose data window is the
//! part's window cut to the band. Chunks of one line (NONE, RLE, ZIPS, ZSTD scanlines) unpack
//! straight into the planes, each channel's run of the line where the count pass's samples per
//! row put it; blocks of several lines (ZIP, tiles) are inflated whole and their rows copied
//! once into the planes, and rows of a block that reach past the band stay for the next band.
//! Either way each chunk is read and unpacked exactly once, whatever the band heights; a chunk
//! without samples is never read again at all.
//!
//! Line order (INCREASING_Y, DECREASING_Y, RANDOM_Y) only changes where chunks lie in the file:
//! the blocks are found through the offset table and placed by the coordinates in their heads.
//! Files are read with positioned reads ([`ByteSource`]); reading a whole image is this reader
//! asked for every row at once ([`super::read_deep`]), so there is one chunk reader.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use exr::meta::attribute::LevelMode;
use exr::meta::header::Header;
use exr::meta::BlockDescription;
use half::f16;
use rayon::prelude::*;

use super::bytes::ByteSource;
use super::chunk::{chunk_counts, read_chunk_head, ChunkHead, MAX_CHUNK_HEAD_BYTES};
use super::header::{chunk_slot, select_part, PartInfo, PartSelector};
use super::part::{PartKind, PartReader};
use crate::deep::{Bounds, Channel, DeepImage, DeepState, Plane};
use crate::error::{Error, Result};
use crate::exr::codec::{
    as_uninit, check_plausible, decompress, decompress_into, BlockLayout, Codec, Segment,
};

/// Bands a streamed reader serves at once: one being read, one merged, one written. The
/// reader's per-row tables and the band planner both count on it.
pub const BANDS_IN_FLIGHT: u64 = 3;

/// Bytes per row of a part's window that the reader holds for the whole merge: the offset
/// table (at most one chunk per row, 8) and the row's sample total (8).
const ROW_TABLE_BYTES: u64 = 16;

/// Bytes per column of a part's window held for any band, samples aside: counts, offsets and
/// the decoded rows' counts of a row, in each of the bands alive at once.
const PIXEL_ROW_BYTES: u64 = 16 * BANDS_IN_FLIGHT;

/// The share of the memory budget one input's kept count tables may take; past it, the tables
/// of further chunks are inflated again when their chunk is decoded (as a huge, nearly empty
/// window would need), which costs time, never memory.
const KEPT_COUNTS_SHARE: u64 = 16;

/// One chunk's per-pixel sample counts kept from the count pass, in the narrowest integer
/// that holds its largest count (most pixels of real renders hold fewer than 256 samples).
#[derive(Clone, Debug)]
enum KeptCounts {
    /// Every pixel is empty.
    Empty,
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
}

impl KeptCounts {
    fn new(counts: Vec<u32>) -> KeptCounts {
        match counts.iter().copied().max().unwrap_or(0) {
            0 => KeptCounts::Empty,
            m if m <= u8::MAX as u32 => KeptCounts::U8(counts.iter().map(|&c| c as u8).collect()),
            m if m <= u16::MAX as u32 => {
                KeptCounts::U16(counts.iter().map(|&c| c as u16).collect())
            }
            _ => KeptCounts::U32(counts),
        }
    }

    /// Bytes held.
    fn bytes(&self) -> u64 {
        match self {
            KeptCounts::Empty => 0,
            KeptCounts::U8(v) => v.len() as u64,
            KeptCounts::U16(v) => 2 * v.len() as u64,
            KeptCounts::U32(v) => 4 * v.len() as u64,
        }
    }

    /// The counts of a chunk of `pixels` pixels.
    fn to_u32(&self, pixels: usize) -> Vec<u32> {
        match self {
            KeptCounts::Empty => vec![0; pixels],
            KeptCounts::U8(v) => v.iter().map(|&c| c as u32).collect(),
            KeptCounts::U16(v) => v.iter().map(|&c| c as u32).collect(),
            KeptCounts::U32(v) => v.clone(),
        }
    }
}

/// One chunk as the count pass found it: where its sample data lies and what its head says.
#[derive(Clone, Debug)]
struct ChunkEntry {
    /// File offset of the chunk.
    at: u64,
    /// The chunk's head, checked to fit in the file.
    head: ChunkHead,
    /// Bytes of the head (the count table follows it).
    head_len: usize,
    /// Samples in the chunk.
    samples: u64,
    /// Its counts, unless the budget's share for them was spent (then read again).
    counts: Option<KeptCounts>,
}

/// A chunk as the count pass found it, with the samples of each of its rows.
type CountedChunk = (ChunkEntry, Vec<u64>);

/// A run of rows stored together: one scanline chunk, or every tile of one tile row.
#[derive(Clone, Debug, Default)]
struct BlockRow {
    /// Its chunks, in no particular order.
    chunks: Vec<ChunkEntry>,
}

/// One chunk, inflated: per-pixel counts and the sample data as stored (for each line, each
/// channel's samples of the whole line in turn, little-endian).
struct DecodedChunk {
    region: Bounds,
    counts: Vec<u32>,
    data: Vec<u8>,
    /// Samples in each line of the chunk.
    line_samples: Vec<usize>,
    /// Byte offset of each line in `data`.
    line_at: Vec<usize>,
}

/// A decoded block row: its chunks side by side, left to right; none when the block row holds
/// no sample (its pixels are all empty, and nothing was decoded).
struct DecodedBlock {
    /// Absolute y of its first and last rows.
    y0: i32,
    y1: i32,
    pieces: Vec<DecodedChunk>,
}

/// One deep part of an input file, read a band of rows at a time.
pub struct ChunkSource {
    /// The file's path for messages (empty for bytes in memory).
    path: PathBuf,
    bytes: ByteSource,
    file_len: u64,
    header: Header,
    multipart: bool,
    part: usize,
    codec: Codec,
    /// The part's data window.
    pub window: Bounds,
    /// The part's display window.
    pub display_window: Bounds,
    /// What the file says about sample order.
    pub state: DeepState,
    /// Every channel of the part, in file order.
    pub all_channels: Vec<Channel>,
    /// Every attribute of the part's header, as stored.
    pub attributes: Vec<crate::exr::RawAttribute>,
    /// Whether each channel of the part is kept (see [`super::ChannelSelection`]).
    keep: Vec<bool>,
    /// Rows per block row (the scanline block height or the tile height).
    block_height: usize,
    /// The offset table, until [`Self::count_rows`] sorts the chunks into `blocks`.
    offsets: Vec<u64>,
    /// Block rows, top to bottom, once [`Self::count_rows`] has found them.
    blocks: Vec<BlockRow>,
    /// Samples per row of the window, from the count tables.
    pub row_samples: Vec<u64>,
    /// Bytes of count tables kept from the count pass.
    kept_bytes: u64,
    /// Decoded block rows not yet handed out entirely, top to bottom.
    pending: VecDeque<DecodedBlock>,
    /// Absolute y of the next row to hand out (rows above it are gone).
    next_row: i32,
    /// The next block row to decode.
    next_block: usize,
    /// Whether bands of one-line chunks are unpacked straight into their planes
    /// ([`Self::take_rows_unpacked_into_planes`]); off only in the tests that compare the two
    /// ways.
    straight_into_planes: bool,
}

/// Deep parts on the part reader: the first deep part by default, a codec that deep parts
/// may use, single-level tiles, at least one channel, and per-row tables plus a few rows of
/// pixels within the budget.
pub(super) struct Deep;

impl PartKind for Deep {
    type Codec = Codec;

    fn select(infos: &[PartInfo], selector: &PartSelector) -> Result<usize> {
        select_part(infos, selector)
    }

    fn check(header: &Header, info: &PartInfo) -> Result<Codec> {
        let codec = Codec::for_deep_part(info.compression_id)?;
        if let BlockDescription::Tiles(t) = header.blocks {
            if t.level_mode != LevelMode::Singular {
                return Err(Error::unsupported(
                    "deep tiled file has mip or rip levels; only single-level deep tiles are supported",
                ));
            }
        }
        if info.channels.is_empty() {
            return Err(Error::format(
                "the deep part has no channels (a deep sample needs at least Z)",
            ));
        }
        Ok(codec)
    }

    fn held_bytes(info: &PartInfo, _block_height: usize) -> u64 {
        let window = info.data_window;
        (window.height() as u64)
            .saturating_mul(ROW_TABLE_BYTES)
            .saturating_add((window.width() as u64).saturating_mul(PIXEL_ROW_BYTES))
    }

    const LEVELS_AFTER_LEVEL0: bool = false;
}

impl ChunkSource {
    /// Open `path` and read the header and offset table of the part `selector` picks.
    /// Refuses a window whose per-row tables (`budget`) cannot hold, before reserving them.
    pub fn open(path: &Path, selector: &PartSelector, budget: u64) -> Result<ChunkSource> {
        let bytes = ByteSource::open(path)?;
        Self::open_source(path, bytes, selector, budget).map_err(|e| e.in_file(path))
    }

    /// [`Self::open`] on the bytes of a whole file held in memory.
    pub fn from_bytes(bytes: Vec<u8>, selector: &PartSelector, budget: u64) -> Result<ChunkSource> {
        Self::open_source(
            Path::new(""),
            ByteSource::from_bytes(bytes),
            selector,
            budget,
        )
    }

    fn open_source(
        path: &Path,
        bytes: ByteSource,
        selector: &PartSelector,
        budget: u64,
    ) -> Result<ChunkSource> {
        let (part, codec) = PartReader::open::<Deep>(path, bytes, selector, budget)?;
        let PartReader {
            path,
            bytes,
            mut meta,
            part: index,
            info,
            multipart,
            block_height,
            offsets,
            ..
        } = part;
        let window = info.data_window;
        let file_len = bytes.len();
        Ok(ChunkSource {
            path,
            file_len,
            bytes,
            multipart,
            part: index,
            codec,
            window,
            display_window: info.display_window,
            state: info.state,
            keep: vec![true; info.channels.len()],
            all_channels: info.channels,
            attributes: info.attributes,
            block_height,
            offsets,
            blocks: vec![BlockRow::default(); window.height().div_ceil(block_height)],
            row_samples: Vec::new(),
            kept_bytes: 0,
            pending: VecDeque::new(),
            next_row: window.y0,
            next_block: 0,
            straight_into_planes: true,
            header: meta.headers.swap_remove(index),
        })
    }

    /// Rows per block of the file: the scanline block height or the tile height.
    pub fn block_height(&self) -> usize {
        self.block_height
    }

    /// The path this source reads.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Keep only the channels for which `keep` is true (called before any rows are taken).
    pub fn keep_channels(&mut self, keep: impl Fn(&Channel) -> bool) {
        self.keep = self.all_channels.iter().map(keep).collect();
    }

    /// The channels the band images carry.
    pub fn channels(&self) -> Vec<Channel> {
        self.all_channels
            .iter()
            .zip(&self.keep)
            .filter(|(_, &k)| k)
            .map(|(c, _)| c.clone())
            .collect()
    }

    /// Bytes of one sample of the kept channels.
    pub fn sample_bytes(&self) -> u64 {
        self.channels()
            .iter()
            .map(|c| c.sample_type.size() as u64)
            .sum()
    }

    /// Bytes of the count tables kept from [`Self::count_rows`] for decoding (held until their
    /// chunk is decoded, so the band planner takes them off the budget).
    pub fn kept_bytes(&self) -> u64 {
        self.kept_bytes
    }

    /// Read every chunk's head and sample-count table (nothing else) and count the samples of
    /// each row into [`Self::row_samples`]; also sorts the chunks into block rows and keeps
    /// the inflated count tables, within a sixteenth of `budget`, for [`Self::take_rows`].
    pub fn count_rows(&mut self, budget: u64) -> Result<()> {
        let offsets = std::mem::take(&mut self.offsets);
        let window = self.window;
        let keep_left = AtomicU64::new(budget / KEPT_COUNTS_SHARE);
        // Chunks are read in runs of neighbours in the file, one read per run, and each run's
        // chunks in turn: a window of a million nearly empty one-line chunks then costs a few
        // hundred reads, not two million.
        let runs = runs_of_neighbours(&offsets, self.file_len);
        let found: Vec<Vec<(usize, Result<CountedChunk>)>> = runs
            .par_iter()
            .map(|run| {
                let ahead = self.read_ahead(&offsets, run);
                let mut memo = CountsMemo::default();
                run.iter()
                    .map(|&i| {
                        let entry = self.chunk_entry(offsets[i], &ahead, &mut memo, &keep_left);
                        (i, entry)
                    })
                    .collect()
            })
            .collect();
        let mut by_index: Vec<Option<Result<CountedChunk>>> =
            (0..offsets.len()).map(|_| None).collect();
        for (i, entry) in found.into_iter().flatten() {
            by_index[i] = Some(entry);
        }
        // The first bad chunk in table order is the one reported.
        let mut heads = Vec::with_capacity(offsets.len());
        for (i, entry) in by_index.into_iter().enumerate() {
            let entry = entry.expect("every chunk is in one run");
            heads.push(entry.map_err(|e| self.locate(e.context(format_args!("chunk {i}"))))?);
        }
        let mut seen = vec![false; offsets.len()];
        let mut rows = vec![0u64; window.height()];
        for (entry, per_row) in heads {
            let region = entry.head.region;
            let slot = chunk_slot(&self.header, window, &region);
            if std::mem::replace(&mut seen[slot], true) {
                return Err(self.locate(Error::format(format!(
                    "two chunks hold the same block {region}"
                ))));
            }
            for (line, &n) in per_row.iter().enumerate() {
                rows[(region.y0 - window.y0) as usize + line] += n;
            }
            self.kept_bytes += entry.counts.as_ref().map_or(0, KeptCounts::bytes);
            let block = (region.y0 - window.y0) as usize / self.block_height;
            self.blocks[block].chunks.push(entry);
        }
        self.row_samples = rows;
        Ok(())
    }

    /// The bytes from the first chunk of `run` (indices into `offsets`, in file order) to a
    /// little past its last chunk's start, read at once; nothing when that read fails (each
    /// chunk is then read alone, and reports its own error).
    fn read_ahead(&self, offsets: &[u64], run: &[usize]) -> ReadAhead {
        let (Some(&first), Some(&last)) = (run.first(), run.last()) else {
            return ReadAhead::default();
        };
        let at = offsets[first];
        let end = offsets[last]
            .saturating_add(READ_AHEAD_TAIL)
            .min(self.file_len);
        if at >= end {
            return ReadAhead::default();
        }
        match self.read_exact_at(at, (end - at) as usize) {
            Ok(bytes) => ReadAhead { at, bytes },
            Err(_) => ReadAhead::default(),
        }
    }

    /// The head of the chunk at `at` and its length in bytes, checked to lie inside the file.
    fn chunk_head(&self, at: u64, ahead: &ReadAhead) -> Result<(ChunkHead, usize)> {
        let head_bytes = self.read_head_bytes(at, ahead)?;
        let (head, head_len) = read_chunk_head(
            &head_bytes,
            self.multipart,
            self.part,
            &self.header,
            self.window,
        )?;
        self.check_chunk_fits(at, head_len, &head)?;
        Ok((head, head_len))
    }

    /// The chunk at `at` from its head and count table, with its samples per row; its counts
    /// are kept while `keep_left` bytes of the share for them remain.
    fn chunk_entry(
        &self,
        at: u64,
        ahead: &ReadAhead,
        memo: &mut CountsMemo,
        keep_left: &AtomicU64,
    ) -> Result<CountedChunk> {
        let (head, head_len) = self.chunk_head(at, ahead)?;
        check_plausible(
            self.codec,
            head.packed_sample_size,
            head.unpacked_size,
            "sample data",
        )
        .map_err(|e| e.context(format_args!("block {}", head.region)))?;
        let table_at = at + head_len as u64;
        let table = self.read_cow_at(table_at, head.packed_table_size, ahead)?;
        let counts = match memo.get(&table, &head) {
            Some(counts) => counts.to_vec(),
            None => {
                let counts = chunk_counts(&head, &table, &self.header, self.codec)?;
                memo.set(&table, &head, &counts);
                counts
            }
        };
        let per_row: Vec<u64> = counts
            .chunks(head.region.width().max(1))
            .map(|row| row.iter().map(|&c| c as u64).sum())
            .collect();
        let samples = per_row.iter().sum();
        let kept = KeptCounts::new(counts);
        let cost = kept.bytes();
        let granted = keep_left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                left.checked_sub(cost)
            })
            .is_ok();
        let entry = ChunkEntry {
            at,
            head,
            head_len,
            samples,
            counts: granted.then_some(kept),
        };
        Ok((entry, per_row))
    }

    /// Read and inflate the count table of the chunk at `at`.
    fn read_counts(&self, at: u64, head: &ChunkHead, head_len: usize) -> Result<Vec<u32>> {
        let table = self.read_exact_at(at + head_len as u64, head.packed_table_size)?;
        chunk_counts(head, &table, &self.header, self.codec)
    }

    fn read_head_bytes<'a>(&self, at: u64, ahead: &'a ReadAhead) -> Result<Cow<'a, [u8]>> {
        if at >= self.file_len {
            return Err(Error::format(
                "file is truncated: a chunk offset points past the end",
            ));
        }
        let len = (self.file_len - at).min(MAX_CHUNK_HEAD_BYTES as u64) as usize;
        self.read_cow_at(at, len, ahead)
    }

    /// `len` bytes at `at`: from `ahead` when it holds them, else read from the file.
    fn read_cow_at<'a>(&self, at: u64, len: usize, ahead: &'a ReadAhead) -> Result<Cow<'a, [u8]>> {
        match ahead.get(at, len) {
            Some(bytes) => Ok(Cow::Borrowed(bytes)),
            None => self.read_exact_at(at, len).map(Cow::Owned),
        }
    }

    /// Refuse a chunk whose stated sizes reach past the end of the file, before reading it.
    fn check_chunk_fits(&self, at: u64, head_len: usize, head: &ChunkHead) -> Result<()> {
        let end = at
            .saturating_add(head_len as u64)
            .saturating_add(head.packed_table_size as u64)
            .saturating_add(head.packed_sample_size as u64);
        if end > self.file_len {
            return Err(Error::format(format!(
                "file is truncated inside block {}",
                head.region
            )));
        }
        Ok(())
    }

    fn read_exact_at(&self, at: u64, len: usize) -> Result<Vec<u8>> {
        self.bytes.read_exact_at(at, len)
    }

    /// `error` naming this source's file (bytes in memory have no name to give).
    fn locate(&self, error: Error) -> Error {
        match self.bytes.path() {
            Some(path) => error.in_file(path),
            None => error,
        }
    }

    /// The per-pixel counts of chunk `entry`: kept from the count pass, or read again.
    fn entry_counts(&self, entry: &ChunkEntry) -> Result<Vec<u32>> {
        match &entry.counts {
            Some(kept) => Ok(kept.to_u32(entry.head.region.area())),
            None => self.read_counts(entry.at, &entry.head, entry.head_len),
        }
    }

    /// The packed sample data of chunk `entry`, read.
    fn packed_samples(&self, entry: &ChunkEntry) -> Result<Vec<u8>> {
        let head = &entry.head;
        let at = entry.at + (entry.head_len + head.packed_table_size) as u64;
        self.read_exact_at(at, head.packed_sample_size)
    }

    /// Bytes of one sample of every channel of the part, as its chunks store them.
    fn all_sample_bytes(&self) -> usize {
        self.all_channels.iter().map(|c| c.sample_type.size()).sum()
    }

    /// Read and inflate one chunk: its counts (kept, or read again) and its sample data. A
    /// chunk without samples is not read at all.
    fn decode_chunk(&self, entry: &ChunkEntry) -> Result<DecodedChunk> {
        let head = &entry.head;
        let region = head.region;
        let w = region.width();
        if entry.samples == 0 {
            return Ok(DecodedChunk {
                region,
                counts: vec![0; region.area()],
                data: Vec::new(),
                line_samples: vec![0; region.height()],
                line_at: vec![0; region.height()],
            });
        }
        let counts = self.entry_counts(entry)?;
        let packed = self.packed_samples(entry)?;
        let all_sample_bytes = self.all_sample_bytes();
        let mut line_samples = Vec::with_capacity(region.height());
        let mut line_at = Vec::with_capacity(region.height());
        let mut at = 0;
        for line in counts.chunks(w.max(1)).take(region.height()) {
            let n: usize = line.iter().map(|&c| c as usize).sum();
            line_samples.push(n);
            line_at.push(at);
            at += n * all_sample_bytes;
        }
        let layout = BlockLayout::deep_samples(&self.all_channels, line_samples.clone());
        let data = decompress(
            self.codec,
            &packed,
            head.unpacked_size,
            &layout,
            "sample data",
        )
        .map_err(|e| e.context(format_args!("block {region}")))?;
        Ok(DecodedChunk {
            region,
            counts,
            data,
            line_samples,
            line_at,
        })
    }

    /// Decode block rows `blocks` (in parallel, chunk by chunk) into [`Self::pending`].
    fn decode_blocks(&mut self, blocks: std::ops::Range<usize>) -> Result<()> {
        // Each block row is decoded once: its entries (and their kept counts) go with it. A
        // block row without samples is not decoded at all: it becomes a block without pieces,
        // so that a sparse window costs per chunk, not per pixel, until its rows are copied.
        let mut chunks: Vec<(usize, ChunkEntry)> = Vec::new();
        for b in blocks.clone() {
            let entries = std::mem::take(&mut self.blocks[b].chunks);
            if entries.iter().any(|c| c.samples > 0) {
                chunks.extend(entries.into_iter().map(|c| (b, c)));
            }
        }
        let decoded: Vec<(usize, DecodedChunk)> = chunks
            .par_iter()
            .map(|(b, entry)| {
                let b = *b;
                self.decode_chunk(entry)
                    .map(|chunk| (b, chunk))
                    .map_err(|e| self.locate(e))
            })
            .collect::<Result<_>>()?;
        let mut by_block: Vec<Vec<DecodedChunk>> = (0..blocks.len()).map(|_| Vec::new()).collect();
        for (b, chunk) in decoded {
            by_block[b - blocks.start].push(chunk);
        }
        for (k, mut pieces) in by_block.into_iter().enumerate() {
            // Tiles of one block row side by side, left to right, make its rows.
            pieces.sort_by_key(|c| c.region.x0);
            let y0 = self.window.y0 + ((blocks.start + k) * self.block_height) as i32;
            // The last row of a block row, as its chunks' regions end (the count pass found
            // one chunk for every block, so the block row is whole).
            let y1 = (y0 as i64 + self.block_height as i64 - 1).min(self.window.y1 as i64) as i32;
            self.pending.push_back(DecodedBlock { y0, y1, pieces });
        }
        self.next_block = blocks.end;
        Ok(())
    }

    /// Decode the block rows that rows up to `y1` (absolute) reach into, all at once so they
    /// unpack in parallel.
    fn decode_through(&mut self, y1: i32) -> Result<()> {
        let last_block = (y1 - self.window.y0) as usize / self.block_height;
        if last_block >= self.next_block {
            self.decode_blocks(self.next_block..last_block + 1)?;
        }
        Ok(())
    }

    /// Forget decoded block rows that lie wholly above [`Self::next_row`].
    fn drop_passed_blocks(&mut self) {
        while self.pending.front().is_some_and(|b| b.y1 < self.next_row) {
            self.pending.pop_front();
        }
    }

    /// Samples in the rows `band` (absolute, inclusive) of this part.
    pub fn samples_in(&self, band: &std::ops::RangeInclusive<i32>) -> u64 {
        let (y0, y1) = (
            (*band.start()).max(self.window.y0),
            (*band.end()).min(self.window.y1),
        );
        if y0 > y1 {
            return 0;
        }
        let at = |y: i32| (y - self.window.y0) as usize;
        self.row_samples[at(y0)..=at(y1)].iter().sum()
    }

    /// The rows `band` (absolute, inclusive) of this part as a deep image whose data window is
    /// the part's window cut to those rows (an empty window when they do not meet). Bands must
    /// come top to bottom without overlapping.
    pub fn take_rows(&mut self, band: std::ops::RangeInclusive<i32>) -> Result<DeepImage> {
        let (y0, y1) = (
            (*band.start()).max(self.window.y0),
            (*band.end()).min(self.window.y1),
        );
        if y0 > y1 {
            return Ok(self.no_rows(*band.start()));
        }
        let channels = self.channels();
        assert!(y0 >= self.next_row, "bands come top to bottom");
        if self.unpacks_straight_into_planes(y0, y1) {
            return self.take_rows_unpacked_into_planes(y0, y1, channels);
        }
        self.decode_through(y1)?;
        // Bands are consecutive, so rows are skipped here only for a caller that skips bands.
        self.next_row = y0;
        self.drop_passed_blocks();
        let window = Bounds {
            x0: self.window.x0,
            y0,
            x1: self.window.x1,
            y1,
        };
        // Each row of the band: the block holding it and its line there. The pending blocks are
        // top to bottom and the rows too, so one cursor walks both: searching the blocks for
        // each row would cost rows x blocks, hours for a tall window of one-line chunks.
        let mut cursor = self.pending.iter().peekable();
        let rows: Vec<(&DecodedBlock, usize)> = (y0..=y1)
            .map(|y| {
                while cursor.peek().is_some_and(|b| b.y1 < y) {
                    cursor.next();
                }
                let block = *cursor
                    .peek()
                    .filter(|b| b.y0 <= y)
                    .expect("the band's rows are decoded");
                (block, (y - block.y0) as usize)
            })
            .collect();
        let mut counts = Vec::with_capacity(window.area());
        for &(block, line) in &rows {
            if block.pieces.is_empty() {
                counts.resize(counts.len() + window.width(), 0);
            }
            for piece in &block.pieces {
                let w = piece.region.width();
                counts.extend_from_slice(&piece.counts[line * w..(line + 1) * w]);
            }
        }
        let total: usize = counts.iter().map(|&c| c as usize).sum();
        let _span = crate::timeline::span(|| format!("assemble rows {y0}..={y1}"));
        let planes = assemble_planes(&self.all_channels, &self.keep, &rows, total);
        drop(rows);
        self.next_row = y1 + 1;
        self.drop_passed_blocks();
        self.band_image(window, channels, &counts, planes)
    }

    /// The band over `window` (the part's window cut to its rows) from its pixels' `counts`
    /// and its kept `channels`' `planes`, its depths checked.
    fn band_image(
        &self,
        window: Bounds,
        channels: Vec<Channel>,
        counts: &[u32],
        planes: Vec<Plane>,
    ) -> Result<DeepImage> {
        let image = DeepImage::from_counts(
            self.display_window,
            window,
            channels,
            counts,
            planes,
            self.state,
        )?;
        image.check_depths().map_err(|e| self.locate(e))?;
        Ok(image)
    }

    /// Whether the rows `y0..=y1` (inside the window, none decoded yet) can be unpacked
    /// straight into a band's planes ([`Self::take_rows_unpacked_into_planes`]): scanline
    /// chunks of one line each (NONE, RLE, ZIPS, ZSTD), which no band shares with another.
    fn unpacks_straight_into_planes(&self, y0: i32, y1: i32) -> bool {
        let first = (y0 - self.window.y0) as usize;
        let last = (y1 - self.window.y0) as usize;
        self.straight_into_planes
            && self.block_height == 1
            && self.pending.is_empty()
            && first >= self.next_block
            && self.blocks[first..=last].iter().all(|block| {
                matches!(&block.chunks[..], [c] if c.head.region.height() == 1
                    && c.head.region.x0 == self.window.x0
                    && c.head.region.width() == self.window.width())
            })
    }

    /// [`Self::take_rows`] of rows `y0..=y1` of one-line chunks: each chunk unpacked in
    /// parallel straight into the band's planes, every kept channel's run of the line where it
    /// goes ([`decompress_into`]), with no decoded copy of the rows to copy again (a memory copy
    /// of every sample, 4% of a flat merge's CPU time, and the band's samples held twice).
    /// The planes are sized from the count pass's samples per row before any chunk is read.
    fn take_rows_unpacked_into_planes(
        &mut self,
        y0: i32,
        y1: i32,
        channels: Vec<Channel>,
    ) -> Result<DeepImage> {
        let first = (y0 - self.window.y0) as usize;
        let rows = (y1 - y0 + 1) as usize;
        let entries: Vec<ChunkEntry> = (first..first + rows)
            .map(|b| {
                std::mem::take(&mut self.blocks[b].chunks)
                    .pop()
                    .expect("one chunk a row")
            })
            .collect();
        self.next_block = first + rows;
        self.next_row = y1 + 1;
        let width = self.window.width();
        let row_samples: Vec<usize> = self.row_samples[first..first + rows]
            .iter()
            .map(|&n| n as usize)
            .collect();
        let total: usize = row_samples.iter().sum();
        let kept: Vec<(usize, &Channel)> = self
            .all_channels
            .iter()
            .enumerate()
            .filter(|&(c, _)| self.keep[c])
            .collect();
        // Where each kept channel starts in a line: after the earlier channels' samples.
        let before: Vec<usize> = kept
            .iter()
            .map(|&(c, _)| {
                self.all_channels[..c]
                    .iter()
                    .map(|c| c.sample_type.size())
                    .sum()
            })
            .collect();
        let mut planes: Vec<Plane> = kept
            .iter()
            .map(|(_, channel)| Plane::with_capacity(channel.sample_type, total))
            .collect();
        // Each row's part of every plane, to be written by its chunk.
        let mut row_outs: Vec<Vec<&mut [MaybeUninit<u8>]>> =
            (0..rows).map(|_| Vec::with_capacity(kept.len())).collect();
        for (plane, (_, channel)) in planes.iter_mut().zip(&kept) {
            let size = channel.sample_type.size();
            let mut bytes = spare_bytes(plane, total);
            for (outs, &n) in row_outs.iter_mut().zip(&row_samples) {
                let (here, rest) = bytes.split_at_mut(n * size);
                bytes = rest;
                outs.push(here);
            }
        }
        let mut counts = vec![0u32; rows * width];
        // One chunk, one row of runs, one row of counts and one sample count a row: the SAFETY
        // argument below rests on the zip taking every row.
        assert!(
            entries.len() == rows && row_outs.len() == rows && row_samples.len() == rows,
            "a chunk and its runs a row"
        );
        {
            let _span = crate::timeline::span(|| format!("unpack rows {y0}..={y1}"));
            let this = &*self;
            entries
                .par_iter()
                .zip(row_outs)
                .zip(counts.par_chunks_mut(width.max(1)))
                .zip(&row_samples)
                .try_for_each(|(((entry, outs), counts), &n)| {
                    this.unpack_chunk_into(entry, n, counts, outs, &before)
                        .map_err(|e| this.locate(e))
                })?;
        }
        // SAFETY: every chunk succeeded, so each wrote all of its rows' runs (decompress_into
        // writes a segment whole; a row without samples has empty runs), and the rows' runs,
        // split at the count pass's samples per row, cover the first `total` values of each
        // plane.
        unsafe { finish_planes(&mut planes, total) };
        let window = Bounds {
            x0: self.window.x0,
            y0,
            x1: self.window.x1,
            y1,
        };
        self.band_image(window, channels, &counts, planes)
    }

    /// Unpack the one-line chunk `entry`, of `samples` samples as the count pass found, into
    /// its pixels' `counts` and `outs` (each kept channel's run of the line, whose byte offsets
    /// in a line are `before`), every byte of them written.
    fn unpack_chunk_into(
        &self,
        entry: &ChunkEntry,
        samples: usize,
        counts: &mut [u32],
        outs: Vec<&mut [MaybeUninit<u8>]>,
        before: &[usize],
    ) -> Result<()> {
        let head = &entry.head;
        let region = head.region;
        if entry.samples == 0 && samples == 0 {
            // Nothing to read: the counts stay 0 and the runs are empty.
            return Ok(());
        }
        let read = self.entry_counts(entry)?;
        let found: usize = read.iter().map(|&c| c as usize).sum();
        if found != samples || head.unpacked_size != samples * self.all_sample_bytes() {
            return Err(Error::format(format!(
                "block {region} holds {found} samples in {} bytes where {samples} were counted \
                 (did the file change while it was read?)",
                head.unpacked_size
            )));
        }
        counts.copy_from_slice(&read);
        let packed = self.packed_samples(entry)?;
        let layout = BlockLayout::deep_samples(&self.all_channels, vec![samples]);
        let mut segments: Vec<Segment> = outs
            .into_iter()
            .zip(before)
            .map(|(out, &before)| Segment {
                at: samples * before,
                out,
            })
            .collect();
        decompress_into(
            self.codec,
            &packed,
            head.unpacked_size,
            &layout,
            "sample data",
            &mut segments,
        )
        .map_err(|e| e.context(format_args!("block {region}")))
    }

    /// Pass over the rows `band` (absolute, inclusive) without handing them out, decoding
    /// nothing that only they need: for a band in which no input holds a sample.
    pub fn skip_rows(&mut self, band: std::ops::RangeInclusive<i32>) {
        let y1 = (*band.end()).min(self.window.y1);
        if y1 >= self.next_row {
            self.next_row = y1 + 1;
            self.drop_passed_blocks();
            // Block rows wholly inside the skipped rows will never be needed.
            let first_needed = (self.next_row - self.window.y0) as usize / self.block_height;
            self.next_block = self.next_block.max(first_needed);
        }
    }

    /// Read and inflate the chunks of the rows `band` reaches, as [`Self::take_rows`] does,
    /// and hand nothing out: the decode floor a merge cannot go below (`--decode-only`).
    pub fn decode_rows(&mut self, band: std::ops::RangeInclusive<i32>) -> Result<()> {
        let y1 = (*band.end()).min(self.window.y1);
        if y1 < self.next_row.max(self.window.y0) {
            return Ok(());
        }
        self.decode_through(y1)?;
        self.next_row = y1 + 1;
        self.drop_passed_blocks();
        Ok(())
    }

    /// An image of this part with its kept channels and no rows (its window is empty, at `y`):
    /// what the part contributes to a band it does not reach, and to the check that the
    /// inputs' channels fit together.
    pub fn no_rows(&self, y: i32) -> DeepImage {
        let empty = Bounds {
            x0: self.window.x0,
            y0: y,
            x1: self.window.x1,
            y1: y - 1,
        };
        let mut image = DeepImage::empty(self.display_window, empty, self.channels());
        image.state = self.state;
        image
    }
}

/// Chunks whose starts lie at most this far apart are read with one read in the count pass.
/// The sample data between them is read too, which the count pass does not need: the gap is
/// small enough that reading it costs about what a read of its own would, so chunks of real
/// renders (tens of kilobytes a row) are still read head and table only, and empty or tiny
/// chunks together.
const READ_AHEAD_GAP: u64 = 8 << 10;

/// Most bytes one read of the count pass spans, from its first chunk's start to its last's
/// (one such buffer per worker thread is held at a time).
const READ_AHEAD_SPAN: u64 = 256 << 10;

/// Bytes read past a run's last chunk start: its head and, usually, its count table.
const READ_AHEAD_TAIL: u64 = 4 << 10;

/// The chunks of `offsets` (their indices) in runs of neighbours: sorted by position in the
/// file, a run ends where the next chunk starts more than [`READ_AHEAD_GAP`] after the one
/// before it or [`READ_AHEAD_SPAN`] after the run's first. A chunk said to start at or past the
/// end of the file is a run of its own (its read reports the error).
fn runs_of_neighbours(offsets: &[u64], file_len: u64) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..offsets.len()).collect();
    // Stable, and linear on a table already in file order (the usual case).
    order.sort_by_key(|&i| offsets[i]);
    let mut runs: Vec<Vec<usize>> = Vec::new();
    let mut run_start = 0u64;
    let mut previous = 0u64;
    for i in order {
        let at = offsets[i];
        let joins = !runs.is_empty()
            && at < file_len
            && at - previous <= READ_AHEAD_GAP
            && at - run_start <= READ_AHEAD_SPAN;
        if joins {
            runs.last_mut().expect("a run").push(i);
        } else {
            runs.push(vec![i]);
            run_start = at;
        }
        previous = at;
    }
    runs
}

/// Bytes of the file read at once for a run of neighbouring chunks (empty: none).
#[derive(Default)]
struct ReadAhead {
    at: u64,
    bytes: Vec<u8>,
}

impl ReadAhead {
    /// `len` bytes at `at`, when they lie inside.
    fn get(&self, at: u64, len: usize) -> Option<&[u8]> {
        let start = usize::try_from(at.checked_sub(self.at)?).ok()?;
        self.bytes.get(start..start.checked_add(len)?)
    }
}

/// The count table inflated last in a run of chunks, and what its counts depend on besides the
/// part (the packed bytes, the block's size and its unpacked data size): the empty chunks of a
/// sparse window have identical tables, and inflating each again costs more than reading it.
#[derive(Default)]
struct CountsMemo {
    packed: Vec<u8>,
    size: (usize, usize, usize),
    counts: Option<Vec<u32>>,
}

impl CountsMemo {
    /// Tables larger than this are not kept (they are rarely repeated, and costly to compare).
    const MAX_PACKED: usize = 4 << 10;

    fn key(head: &ChunkHead) -> (usize, usize, usize) {
        (
            head.region.width(),
            head.region.height(),
            head.unpacked_size,
        )
    }

    /// The counts of a table of `packed` bytes in a chunk like `head`, when it is the last one.
    fn get(&self, packed: &[u8], head: &ChunkHead) -> Option<&[u32]> {
        let counts = self.counts.as_deref()?;
        (self.size == Self::key(head) && self.packed == packed).then_some(counts)
    }

    fn set(&mut self, packed: &[u8], head: &ChunkHead, counts: &[u32]) {
        if packed.len() > Self::MAX_PACKED {
            return;
        }
        self.packed.clear();
        self.packed.extend_from_slice(packed);
        self.size = Self::key(head);
        self.counts = Some(counts.to_vec());
    }
}

/// The kept channels' planes of a band of `total` samples whose rows are `rows` (the decoded
/// block holding each row, and its line there), each value written once, copied from the
/// chunks' little-endian bytes into memory not written before (no zeroing first). The copies
/// run in parallel over channels and runs of rows both: a file has a handful of channels, far
/// fewer than a many-core host's threads.
fn assemble_planes(
    all_channels: &[Channel],
    keep: &[bool],
    rows: &[(&DecodedBlock, usize)],
    total: usize,
) -> Vec<Plane> {
    // Samples before each row of the band, and runs of rows of about an equal share of them.
    let mut row_at = Vec::with_capacity(rows.len() + 1);
    row_at.push(0usize);
    for (block, line) in rows {
        let n: usize = block.pieces.iter().map(|p| p.line_samples[*line]).sum();
        row_at.push(row_at.last().unwrap() + n);
    }
    assert_eq!(
        row_at[rows.len()],
        total,
        "the rows hold the band's samples"
    );
    let share = (total / (4 * rayon::current_num_threads())).max(1 << 16);
    let mut runs = vec![0usize];
    for r in 1..rows.len() {
        if row_at[r] - row_at[*runs.last().unwrap()] >= share {
            runs.push(r);
        }
    }
    runs.push(rows.len());
    let kept: Vec<(usize, &Channel)> = all_channels
        .iter()
        .enumerate()
        .filter(|&(c, _)| keep[c])
        .collect();
    let mut planes: Vec<Plane> = kept
        .iter()
        .map(|(_, channel)| Plane::with_capacity(channel.sample_type, total))
        .collect();
    // One task per (channel, run of rows), each with the bytes of its plane it fills.
    let mut tasks = Vec::new();
    for (plane, &(c, channel)) in planes.iter_mut().zip(&kept) {
        // Where the channel starts in a line: after the earlier channels' samples.
        let before: usize = all_channels[..c].iter().map(|c| c.sample_type.size()).sum();
        let size = channel.sample_type.size();
        let mut bytes = spare_bytes(plane, total);
        for run in runs.windows(2) {
            let (here, rest) = bytes.split_at_mut((row_at[run[1]] - row_at[run[0]]) * size);
            bytes = rest;
            tasks.push((run[0]..run[1], before, size, here));
        }
    }
    tasks.into_par_iter().for_each(|(run, before, size, out)| {
        let mut at = 0;
        for &(block, line) in &rows[run] {
            for piece in &block.pieces {
                let n = piece.line_samples[line];
                let start = piece.line_at[line] + n * before;
                let from: &[MaybeUninit<u8>] = as_uninit(&piece.data[start..start + n * size]);
                out[at..at + n * size].copy_from_slice(from);
                at += n * size;
            }
        }
        // Written to its end: the runs split the plane at the rows' sample counts.
        assert_eq!(at, out.len(), "a run of rows fills its bytes");
    });
    // SAFETY: every byte of the first `total` values was written above (each run of each plane
    // checked its end, and the runs cover the plane).
    unsafe { finish_planes(&mut planes, total) };
    planes
}

/// Planes whose first `total` values' bytes were all written (little-endian) into their spare
/// capacity, made whole: their length set, and their values in this machine's byte order.
///
/// # Safety
/// Every byte of the first `total` values of every plane's spare capacity must be written.
unsafe fn finish_planes(planes: &mut [Plane], total: usize) {
    for plane in planes {
        // SAFETY: the caller wrote every byte of the first `total` values, and every bit
        // pattern is a value of these types.
        unsafe {
            match plane {
                Plane::U32(v) => v.set_len(total),
                Plane::F16(v) => v.set_len(total),
                Plane::F32(v) => v.set_len(total),
            }
        }
        if cfg!(target_endian = "big") {
            match plane {
                Plane::U32(v) => v.iter_mut().for_each(|x| *x = u32::from_le(*x)),
                Plane::F16(v) => v
                    .iter_mut()
                    .for_each(|x| *x = f16::from_bits(u16::from_le(x.to_bits()))),
                Plane::F32(v) => v
                    .iter_mut()
                    .for_each(|x| *x = f32::from_bits(u32::from_le(x.to_bits()))),
            }
        }
    }
}

/// The bytes of the first `len` values of an empty plane's spare capacity, to be written.
fn spare_bytes(plane: &mut Plane, len: usize) -> &mut [MaybeUninit<u8>] {
    fn bytes_of<T>(v: &mut Vec<T>, len: usize) -> &mut [MaybeUninit<u8>] {
        let spare = &mut v.spare_capacity_mut()[..len];
        // SAFETY: the same memory as `len` possibly uninitialised values of T, seen as bytes
        // (MaybeUninit<u8> has no validity requirement and alignment 1); borrowed from `v`.
        unsafe {
            std::slice::from_raw_parts_mut(spare.as_mut_ptr().cast(), std::mem::size_of_val(spare))
        }
    }
    match plane {
        Plane::U32(v) => bytes_of(v, len),
        Plane::F16(v) => bytes_of(v, len),
        Plane::F32(v) => bytes_of(v, len),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exr::PartSelector;

    /// An image of mixed channel types (half, float, uint, in file order around the kept ones)
    /// over a window away from the origin, with empty rows and rows of long lists.
    fn image() -> DeepImage {
        let window = Bounds::from_origin_size(-3, 5, 11, 9);
        let counts: Vec<u32> = (0..window.area())
            .map(|p| match (p / 11, p % 11) {
                (2, _) | (6, _) => 0,
                (4, x) => 40 + x as u32,
                (_, x) => ((p * 7 + x) % 5) as u32,
            })
            .collect();
        let n: usize = counts.iter().map(|&c| c as usize).sum();
        let channels = vec![
            Channel::new("A", crate::deep::SampleType::F16),
            Channel::new("B", crate::deep::SampleType::F32),
            Channel::new("id", crate::deep::SampleType::U32),
            Channel::new("Z", crate::deep::SampleType::F32),
        ];
        let planes = vec![
            Plane::F16((0..n).map(|i| f16::from_f32(i as f32 / 7.0)).collect()),
            Plane::F32((0..n).map(|i| i as f32 * 0.25 - 3.0).collect()),
            Plane::U32(
                (0..n)
                    .map(|i| (i as u32).wrapping_mul(2654435761))
                    .collect(),
            ),
            Plane::F32((0..n).map(|i| (i % 13) as f32).collect()),
        ];
        DeepImage::from_counts(window, window, channels, &counts, planes, DeepState::Messy).unwrap()
    }

    /// Bands unpacked straight into their planes are the bands the decoded blocks give, for
    /// every codec of one-line chunks, every band height, all channels or some, and with the
    /// count tables kept or read again; ZIP's blocks of 16 lines still take the blocks' way.
    #[test]
    fn bands_unpacked_into_planes_equal_the_decoded_blocks() {
        let image = image();
        let window = image.data_window;
        for codec in [
            Codec::None,
            Codec::Rle,
            Codec::Zips,
            Codec::Zstd { level: 3 },
            Codec::Zip,
        ] {
            let bytes = crate::exr::encode_deep(&image, codec).unwrap();
            for keep_some in [false, true] {
                for budget in [1u64 << 30, 1] {
                    for rows in [1, 3, 4, window.height()] {
                        let bands = |straight: bool| {
                            let selector = PartSelector::FirstDeep;
                            let mut source =
                                ChunkSource::from_bytes(bytes.clone(), &selector, 1 << 30).unwrap();
                            source.count_rows(budget).unwrap();
                            source.straight_into_planes = straight;
                            if keep_some {
                                source.keep_channels(|c| c.name != "B" && c.name != "id");
                            }
                            let mut y = window.y0;
                            let mut bands = Vec::new();
                            while y <= window.y1 {
                                let y1 = (y + rows as i32 - 1).min(window.y1);
                                let unpacked = source.unpacks_straight_into_planes(y, y1);
                                assert_eq!(unpacked, straight && codec != Codec::Zip);
                                bands.push(source.take_rows(y..=y1).unwrap());
                                y = y1 + 1;
                            }
                            bands
                        };
                        let straight = bands(true);
                        assert!(
                            straight == bands(false),
                            "{codec:?}, {rows} rows, some channels {keep_some}, budget {budget}"
                        );
                        if !keep_some && rows == window.height() {
                            assert!(straight[0].planes == image.planes, "{codec:?}");
                        }
                    }
                }
            }
        }
    }

    /// A tiled part whose tiles are one line high and at least as wide as the data window holds
    /// one chunk a row as one-line scanline chunks do, and is unpacked straight into the
    /// planes too: the same bands as through the decoded blocks (PyPI OpenEXR wrote the file).
    #[test]
    fn tiles_one_line_high_unpack_straight_into_planes() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/variants/Balls_deeptile800x1_zips.exr");
        for rows in [1, 7, 406] {
            let bands = |straight: bool| {
                let mut source =
                    ChunkSource::open(&path, &PartSelector::FirstDeep, 1 << 30).unwrap();
                source.count_rows(1 << 30).unwrap();
                source.straight_into_planes = straight;
                let window = source.window;
                let mut y = window.y0;
                let mut bands = Vec::new();
                while y <= window.y1 {
                    let y1 = (y + rows - 1).min(window.y1);
                    assert_eq!(source.unpacks_straight_into_planes(y, y1), straight);
                    bands.push(source.take_rows(y..=y1).unwrap());
                    y = y1 + 1;
                }
                bands
            };
            let straight = bands(true);
            assert_eq!(
                straight.iter().map(|b| b.sample_count()).sum::<usize>(),
                162_877
            );
            assert!(straight == bands(false), "{rows} rows a band");
        }
    }

    /// A chunk that holds other counts than the count pass found (a file changed between the
    /// two passes, here the pass's figure itself) is refused naming its block, before anything
    /// is written into the planes.
    #[test]
    fn a_chunk_disagreeing_with_the_count_pass_is_an_error_naming_its_block() {
        let image = image();
        let bytes = crate::exr::encode_deep(&image, Codec::Zips).unwrap();
        let window = image.data_window;
        for budget in [1u64 << 30, 1] {
            let mut source =
                ChunkSource::from_bytes(bytes.clone(), &PartSelector::FirstDeep, 1 << 30).unwrap();
            source.count_rows(budget).unwrap();
            source.row_samples[4] += 1;
            assert!(source.unpacks_straight_into_planes(window.y0, window.y1));
            let err = source.take_rows(window.y0..=window.y1).unwrap_err();
            let message = err.to_string();
            assert!(
                message.contains("block") && message.contains("were counted"),
                "{message}"
            );
        }
    }

    /// A chunk whose sample data is damaged is refused naming its block, as the blocks' way
    /// refuses it, and nothing panics.
    #[test]
    fn a_damaged_chunk_unpacked_into_planes_is_an_error_naming_its_block() {
        let image = image();
        let mut bytes = crate::exr::encode_deep(&image, Codec::Zips).unwrap();
        // The last bytes of the file: the last chunk's packed samples.
        let len = bytes.len();
        for b in &mut bytes[len - 12..len - 4] {
            *b ^= 0x5a;
        }
        let window = image.data_window;
        for straight in [true, false] {
            let mut source =
                ChunkSource::from_bytes(bytes.clone(), &PartSelector::FirstDeep, 1 << 30).unwrap();
            source.count_rows(1 << 30).unwrap();
            source.straight_into_planes = straight;
            let err = source.take_rows(window.y0..=window.y1).unwrap_err();
            assert!(err.to_string().contains("block"), "{err}");
        }
    }
}
