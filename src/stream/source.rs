//! The chunk reader: one deep part of one input file, read chunk by chunk with positioned reads.
//!
//! Opening reads the header (a growing prefix of the file, never the whole file) and the part's
//! offset table; [`ChunkSource::count_rows`] then reads every chunk's head and its packed
//! sample-count table only, which is all the band planner needs (samples per row). During the
//! merge, [`ChunkSource::take_rows`] decodes the chunks of the rows a band asks for (scanline
//! blocks, or a row of tiles) in parallel and hands those rows out as a [`DeepImage`] whose data
//! window is the part's window cut to the band. Rows of a block that reach past the band are kept
//! for the next band, so each chunk is read and unpacked exactly once, whatever the band heights.
//!
//! Line order (INCREASING_Y, DECREASING_Y, RANDOM_Y) only changes where chunks lie in the file:
//! the blocks are found through the offset table and placed by the coordinates in their heads.
//! Files are read with `pread` (`FileExt::read_at`), not mapped: mapped pages would count in
//! the resident set the memory budget is about.

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use exr::meta::attribute::LevelMode;
use exr::meta::header::Header;
use exr::meta::BlockDescription;
use rayon::prelude::*;

use crate::deep::{Bounds, Channel, DeepImage, DeepState, Plane};
use crate::error::{Error, Result};
use crate::exr::read::{
    chunk_counts, chunk_slot, expected_chunk_count, headers_end, parse_chunk, parse_meta,
    read_chunk_head, select_part, ParsedHeaders, MAX_CHUNK_HEAD_BYTES,
};
use crate::exr::{check_plausible, decompress, human_bytes, BlockLayout, Codec, PartSelector};

/// Bytes per row of a part's window that the reader holds for the whole merge: the offset
/// table (at most one chunk per row, 8) and the row's sample total (8).
const ROW_TABLE_BYTES: u64 = 16;

/// Bytes per column of a part's window held for any band, samples aside: counts, offsets and
/// the decoded rows' counts of a row, in each of the bands alive at once.
const PIXEL_ROW_BYTES: u64 = 16 * super::plan::BANDS_IN_FLIGHT;

/// First guess at the header's size; doubled until the whole header fits.
const HEADER_PREFIX_BYTES: usize = 64 << 10;

/// Headers larger than this are refused (a hostile file could claim any size).
const MAX_HEADER_BYTES: usize = 64 << 20;

/// One decoded row of a part: per-pixel counts and, per kept channel, its samples as stored
/// (little-endian, pixel after pixel).
struct DecodedRow {
    counts: Vec<u32>,
    channels: Vec<Vec<u8>>,
}

/// A run of rows stored together: one scanline chunk, or every tile of one tile row.
#[derive(Clone, Debug, Default)]
struct BlockRow {
    /// File offsets of its chunks.
    chunks: Vec<u64>,
}

/// One deep part of an input file, read a band of rows at a time.
pub struct ChunkSource {
    path: PathBuf,
    file: File,
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
    /// Block rows, top to bottom, once [`Self::count_rows`] has found them.
    blocks: Vec<BlockRow>,
    /// Samples per row of the window, from the count tables.
    pub row_samples: Vec<u64>,
    /// Decoded rows not yet handed out, starting at `next_row`.
    pending: VecDeque<DecodedRow>,
    /// Absolute y of the first row in `pending`.
    next_row: i32,
    /// The next block row to decode.
    next_block: usize,
}

impl ChunkSource {
    /// Open `path` and read the header and offset table of the part `selector` picks.
    /// Refuses a window whose per-row tables (`budget`) cannot hold, before reserving them.
    pub fn open(path: &Path, selector: &PartSelector, budget: u64) -> Result<ChunkSource> {
        let file = File::open(path).map_err(|e| Error::read(path, e))?;
        let file_len = file.metadata().map_err(|e| Error::read(path, e))?.len();
        Self::open_file(path, file, file_len, selector, budget).map_err(|e| e.in_file(path))
    }

    fn open_file(
        path: &Path,
        file: File,
        file_len: u64,
        selector: &PartSelector,
        budget: u64,
    ) -> Result<ChunkSource> {
        let headers = read_header(path, &file, file_len)?;
        let (meta, table_start) = (&headers.meta, headers.table_start);
        let infos = headers.part_infos();
        let index = select_part(&infos, selector)?;
        let header = meta.headers[index].clone();
        let info = &infos[index];
        let codec = Codec::for_deep_part(info.compression_id)?;
        let block_height = match header.blocks {
            BlockDescription::Tiles(t) => {
                if t.level_mode != LevelMode::Singular {
                    return Err(Error::format(
                        "deep tiled file has mip or rip levels; only single-level deep tiles are supported",
                    ));
                }
                t.tile_size.y()
            }
            BlockDescription::ScanLines => header.compression.scan_lines_per_block(),
        };
        if info.channels.is_empty() {
            return Err(Error::format(
                "the deep part has no channels (a deep sample needs at least Z)",
            ));
        }
        let window = info.data_window;
        // A window is hostile until checked: what streaming it holds whatever its samples is
        // a few tables per row and a few rows of pixels, and that must fit the budget.
        let window_bytes = (window.height() as u64)
            .saturating_mul(ROW_TABLE_BYTES)
            .saturating_add((window.width() as u64).saturating_mul(PIXEL_ROW_BYTES));
        if window_bytes > budget {
            return Err(Error::format(format!(
                "its data window of {} x {} pixels would need {} to stream, over the memory \
                 budget of {} (raise it with --memory-budget)",
                window.width(),
                window.height(),
                human_bytes(window_bytes),
                human_bytes(budget)
            )));
        }
        let chunk_count = header.chunk_count;
        let expected = expected_chunk_count(&header, window);
        if chunk_count != expected {
            return Err(Error::format(format!(
                "header says {chunk_count} chunks, the data window needs {expected}"
            )));
        }
        let mut source = ChunkSource {
            path: path.to_path_buf(),
            file,
            file_len,
            multipart: meta.requirements.is_multilayer(),
            part: index,
            codec,
            window,
            display_window: info.display_window,
            state: info.state,
            keep: vec![true; info.channels.len()],
            all_channels: info.channels.clone(),
            attributes: info.attributes.clone(),
            block_height: block_height.max(1),
            blocks: Vec::new(),
            row_samples: Vec::new(),
            pending: VecDeque::new(),
            next_row: window.y0,
            next_block: 0,
            header,
        };
        // Locate this part's offset table: the tables of all parts follow the headers in order.
        let truncated = || Error::format("file is truncated inside the chunk offset table");
        let mut table_at = table_start as u64;
        for h in &meta.headers[..index] {
            table_at = table_at.saturating_add((h.chunk_count as u64).saturating_mul(8));
        }
        let table_bytes = (chunk_count as u64).saturating_mul(8);
        if table_at.saturating_add(table_bytes) > file_len {
            return Err(truncated());
        }
        let table = source.read_exact_at(table_at, table_bytes as usize)?;
        let offsets: Vec<u64> = table
            .chunks_exact(8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
            .collect();
        source.blocks = vec![BlockRow::default(); window.height().div_ceil(source.block_height)];
        // Chunk heads are read in `count_rows`; until then the offsets wait in the first block.
        source.blocks[0].chunks = offsets;
        Ok(source)
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

    /// Read every chunk's head and sample-count table (nothing else) and count the samples of
    /// each row into [`Self::row_samples`]; also sorts the chunks into block rows.
    pub fn count_rows(&mut self) -> Result<()> {
        let offsets = std::mem::take(&mut self.blocks[0].chunks);
        let window = self.window;
        let heads: Vec<(Bounds, Vec<u64>)> = offsets
            .par_iter()
            .enumerate()
            .map(|(i, &at)| {
                self.chunk_head_counts(at)
                    .map_err(|e| Error::format(format!("chunk {i}: {e}")).in_file(&self.path))
            })
            .collect::<Result<_>>()?;
        let mut seen = vec![false; offsets.len()];
        let mut rows = vec![0u64; window.height()];
        for ((region, counts), &at) in heads.iter().zip(&offsets) {
            let slot = chunk_slot(&self.header, window, region);
            if std::mem::replace(&mut seen[slot], true) {
                return Err(Error::file(
                    &self.path,
                    format!("two chunks hold the same block {region}"),
                ));
            }
            for (line, &n) in counts.iter().enumerate() {
                rows[(region.y0 - window.y0) as usize + line] += n;
            }
            let block = (region.y0 - window.y0) as usize / self.block_height;
            self.blocks[block].chunks.push(at);
        }
        self.row_samples = rows;
        Ok(())
    }

    /// The head of the chunk at `at` and its length in bytes, checked to lie inside the file.
    fn chunk_head(&self, at: u64) -> Result<(crate::exr::read::ChunkHead, usize)> {
        let head_bytes = self.read_head_bytes(at)?;
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

    /// The region and samples per row of the chunk at `at`, from its head and count table.
    fn chunk_head_counts(&self, at: u64) -> Result<(Bounds, Vec<u64>)> {
        let (head, head_len) = self.chunk_head(at)?;
        check_plausible(
            self.codec,
            head.packed_sample_size,
            head.unpacked_size,
            "sample data",
        )
        .map_err(|e| Error::format(format!("block {}: {e}", head.region)))?;
        let table = self.read_exact_at(at + head_len as u64, head.packed_table_size)?;
        let counts = chunk_counts(&head, &table, &self.header, self.codec)?;
        let per_row = counts
            .chunks(head.region.width().max(1))
            .map(|row| row.iter().map(|&c| c as u64).sum())
            .collect();
        Ok((head.region, per_row))
    }

    fn read_head_bytes(&self, at: u64) -> Result<Vec<u8>> {
        if at >= self.file_len {
            return Err(Error::format(
                "file is truncated: a chunk offset points past the end",
            ));
        }
        let len = (self.file_len - at).min(MAX_CHUNK_HEAD_BYTES as u64) as usize;
        self.read_exact_at(at, len)
    }

    /// Refuse a chunk whose stated sizes reach past the end of the file, before reading it.
    fn check_chunk_fits(
        &self,
        at: u64,
        head_len: usize,
        head: &crate::exr::read::ChunkHead,
    ) -> Result<()> {
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
        let mut buf = vec![0u8; len];
        self.file
            .read_exact_at(&mut buf, at)
            .map_err(|e| Error::read(&self.path, e))?;
        Ok(buf)
    }

    /// The whole chunk at `at`: head, count table and sample data.
    fn read_chunk(&self, at: u64) -> Result<Vec<u8>> {
        let (head, head_len) = self.chunk_head(at)?;
        self.read_exact_at(
            at,
            head_len + head.packed_table_size + head.packed_sample_size,
        )
    }

    /// Decode block rows `blocks` (in parallel, chunk by chunk) and append their rows.
    fn decode_blocks(&mut self, blocks: std::ops::Range<usize>) -> Result<()> {
        let chunks: Vec<(usize, u64)> = blocks
            .clone()
            .flat_map(|b| self.blocks[b].chunks.iter().map(move |&at| (b, at)))
            .collect();
        let decoded: Vec<(usize, Bounds, Vec<DecodedRow>)> = chunks
            .par_iter()
            .map(|&(b, at)| {
                self.decode_chunk(at)
                    .map(|(region, rows)| (b, region, rows))
                    .map_err(|e| e.in_file(&self.path))
            })
            .collect::<Result<_>>()?;
        // Tiles of one block row side by side, left to right, make its rows.
        let mut by_block: Vec<Vec<(Bounds, Vec<DecodedRow>)>> =
            (0..blocks.len()).map(|_| Vec::new()).collect();
        for (b, region, rows) in decoded {
            by_block[b - blocks.start].push((region, rows));
        }
        let keep_count = self.keep.iter().filter(|&&k| k).count();
        for mut pieces in by_block {
            pieces.sort_by_key(|(region, _)| region.x0);
            let height = pieces.first().map_or(0, |(r, _)| r.height());
            let mut iters: Vec<_> = pieces.into_iter().map(|(_, r)| r.into_iter()).collect();
            for _ in 0..height {
                let mut row = DecodedRow {
                    counts: Vec::with_capacity(self.window.width()),
                    channels: vec![Vec::new(); keep_count],
                };
                for it in &mut iters {
                    let piece = it.next().expect("tiles of a row have one height");
                    row.counts.extend_from_slice(&piece.counts);
                    for (dst, src) in row.channels.iter_mut().zip(piece.channels) {
                        if dst.is_empty() {
                            *dst = src;
                        } else {
                            dst.extend_from_slice(&src);
                        }
                    }
                }
                self.pending.push_back(row);
            }
        }
        self.next_block = blocks.end;
        Ok(())
    }

    /// Read and unpack one chunk into its rows, keeping only the kept channels.
    fn decode_chunk(&self, at: u64) -> Result<(Bounds, Vec<DecodedRow>)> {
        let bytes = self.read_chunk(at)?;
        let chunk = parse_chunk(
            &bytes,
            0,
            self.multipart,
            self.part,
            &self.header,
            self.window,
            self.codec,
        )?;
        let layout = BlockLayout::deep_samples(&self.all_channels, chunk.line_samples());
        let data = decompress(
            self.codec,
            chunk.packed_samples,
            chunk.unpacked_size,
            &layout,
            "sample data",
        )
        .map_err(|e| Error::format(format!("block {}: {e}", chunk.region)))?;
        let w = chunk.region.width();
        let mut rows = Vec::with_capacity(chunk.region.height());
        let mut at = 0;
        for line in 0..chunk.region.height() {
            let counts = chunk.counts[line * w..(line + 1) * w].to_vec();
            let line_samples: usize = counts.iter().map(|&c| c as usize).sum();
            let mut channels = Vec::new();
            for (c, channel) in self.all_channels.iter().enumerate() {
                let bytes = line_samples * channel.sample_type.size();
                if self.keep[c] {
                    channels.push(data[at..at + bytes].to_vec());
                }
                at += bytes;
            }
            rows.push(DecodedRow { counts, channels });
        }
        Ok((chunk.region, rows))
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
        // Decode the block rows this band reaches into, all at once so they unpack in parallel.
        let last_block = (y1 - self.window.y0) as usize / self.block_height;
        if last_block >= self.next_block {
            self.decode_blocks(self.next_block..last_block + 1)?;
        }
        // Bands are consecutive, so rows are skipped here only for a caller that skips bands.
        while self.next_row < y0 {
            self.pending.pop_front();
            self.next_row += 1;
        }
        let rows: Vec<DecodedRow> = self.pending.drain(..(y1 - y0 + 1) as usize).collect();
        self.next_row = y1 + 1;
        let window = Bounds {
            x0: self.window.x0,
            y0,
            x1: self.window.x1,
            y1,
        };
        let mut counts = Vec::with_capacity(rows.len() * self.window.width());
        for row in &rows {
            counts.extend_from_slice(&row.counts);
        }
        let total: usize = counts.iter().map(|&c| c as usize).sum();
        let planes: Vec<Plane> = channels
            .par_iter()
            .enumerate()
            .map(|(c, channel)| {
                let mut plane = Plane::zeros(channel.sample_type, total);
                let mut at = 0;
                for row in &rows {
                    plane.write_le_at(at, &row.channels[c]);
                    at += row.channels[c].len() / channel.sample_type.size();
                }
                plane
            })
            .collect();
        drop(rows);
        let image = DeepImage::from_counts(
            self.display_window,
            window,
            channels,
            &counts,
            planes,
            self.state,
        )?;
        image.check_depths().map_err(|e| e.in_file(&self.path))?;
        Ok(image)
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

/// The headers (from a growing prefix of the file) and where the offset tables begin.
fn read_header(path: &Path, file: &File, file_len: u64) -> Result<ParsedHeaders> {
    let mut size = HEADER_PREFIX_BYTES;
    loop {
        let len = (file_len as usize).min(size);
        let mut prefix = vec![0u8; len];
        file.read_exact_at(&mut prefix, 0)
            .map_err(|e| Error::read(path, e))?;
        let complete = prefix.len() >= 8 && headers_end(&prefix, prefix[5] & 0x10 != 0).is_some();
        if complete || len as u64 == file_len || size >= MAX_HEADER_BYTES {
            return parse_meta(&prefix);
        }
        size *= 2;
    }
}
