//! The flat reader: one flat (non-deep) part of a file, read a band of rows at a time, for the
//! operations that take a flat image (`deepen`, `recolor`).
//!
//! It is the flat twin of [`super::deep::ChunkSource`], on the same part reader
//! ([`super::part`]: headers, part, budget, offset table) with this decoder's checks
//! ([`Flat`]); [`FlatSource::take_rows`] reads with positioned reads
//! only the chunks the rows reach (scanline blocks, or a row of tiles of level 0), unpacks them
//! in parallel and copies those rows into one plane per channel. The last block row decoded is
//! kept, so bands that cut a block in two unpack it once.
//!
//! Codecs: NONE, RLE, ZIPS, ZIP and ZSTD are the crate's own (as for deep parts); PIZ, PXR24,
//! B44, B44A, DWAA and DWAB, which only flat parts use, are the `exr` crate's. Sub-sampled
//! channels (luminance-chroma files) are refused. Every size the file states is checked before
//! anything is reserved: the window against the budget, a chunk's packed size against the file,
//! and a block's unpacked size is what the window and channels make, never what a chunk says.

use std::path::{Path, PathBuf};

use exr::block::chunk::TileCoordinates;
use exr::block::chunk::{Chunk, CompressedBlock, CompressedScanLineBlock, CompressedTileBlock};
use exr::block::UncompressedBlock;
use exr::math::Vec2;
use exr::meta::attribute::LevelMode;
use exr::meta::header::Header;
use exr::meta::BlockDescription;
use exr::meta::MetaData;
use half::f16;
use rayon::prelude::*;

use super::bytes::ByteSource;
use super::header::{PartInfo, PartSelector};
use super::part::{PartKind, PartReader};
use crate::deep::{Bounds, Channel, Plane};
use crate::error::{Error, ErrorKind, Result};
use crate::exr::codec::{compression_name, decompress, BlockLayout, Codec};

/// Bytes per row of the window held for the whole run: the offset table (at most one chunk
/// per row, 8).
const ROW_TABLE_BYTES: u64 = 8;

/// A band of rows of a flat part: its window cut to the rows, and one plane per channel,
/// row-major over that window, in the channels' own types.
#[derive(Clone, Debug, PartialEq)]
pub struct FlatRows {
    /// The rows held: the part's window cut to the band (empty when they do not meet).
    pub window: Bounds,
    /// The values of each channel of [`FlatSource::channels`].
    pub planes: Vec<Plane>,
}

impl FlatRows {
    /// The value of channel `c` at absolute pixel (x, y), or `None` outside [`Self::window`].
    pub fn value(&self, c: usize, x: i32, y: i32) -> Option<f32> {
        self.window
            .index_of(x, y)
            .map(|p| self.planes[c].get_f32(p))
    }
}

/// One decoded block row: rows `y0..=y1` of the window, one plane per channel.
struct BlockRow {
    index: usize,
    y0: i32,
    planes: Vec<Plane>,
}

/// How a part's chunks are unpacked.
#[derive(Clone, Copy, Debug)]
enum Unpacker {
    /// The crate's own codecs (little-endian bytes out).
    Own(Codec),
    /// The `exr` crate's (native-endian bytes out).
    Exr,
}

/// One flat part of a file, read a band of rows at a time (see the module docs).
pub struct FlatSource {
    path: PathBuf,
    bytes: ByteSource,
    file_len: u64,
    meta: MetaData,
    part: usize,
    multipart: bool,
    unpacker: Unpacker,
    /// The part's data window.
    pub window: Bounds,
    /// The part's display window.
    pub display_window: Bounds,
    /// The part's channels, in file order.
    pub channels: Vec<Channel>,
    /// Every attribute of the part's header, as stored.
    pub attributes: Vec<crate::exr::RawAttribute>,
    /// Rows per block row (the scanline block height or the tile height).
    block_height: usize,
    /// Tile width for tiled parts.
    tile_width: Option<usize>,
    offsets: Vec<u64>,
    /// The block row decoded last.
    last: Option<BlockRow>,
}

/// Flat parts on the part reader: the first flat part by default, the crate's codecs or the
/// `exr` crate's, full-resolution channels, single-level or mip-mapped tiles (level 0 read),
/// and the offset table plus one block row of pixels (unpacked and copied) within the budget.
struct Flat;

impl PartKind for Flat {
    type Codec = Unpacker;

    fn select(infos: &[PartInfo], selector: &PartSelector) -> Result<usize> {
        select_flat_part(infos, selector)
    }

    fn check(header: &Header, info: &PartInfo) -> Result<Unpacker> {
        // Our own codecs first (every row of the codec table), then those the `exr` crate reads.
        let unpacker = match (Codec::from_id(info.compression_id), info.compression_id) {
            (Some(codec), _) => Unpacker::Own(codec),
            (None, 4..=11) => Unpacker::Exr,
            (None, id) => {
                return Err(Error::format(format!(
                    "its flat part is compressed with {}, which deepmerge cannot read",
                    compression_name(id)
                )))
            }
        };
        if header
            .channels
            .list
            .iter()
            .any(|c| c.sampling != Vec2(1, 1))
        {
            return Err(Error::format(
                "has sub-sampled channels (a luminance-chroma image); convert it to RGB first",
            ));
        }
        if info.channels.is_empty() {
            return Err(Error::format("its flat part has no channels"));
        }
        if let BlockDescription::Tiles(t) = header.blocks {
            if t.level_mode == LevelMode::RipMap {
                return Err(Error::format(
                    "is rip-mapped; only single-level or mip-mapped flat tiles are read",
                ));
            }
        }
        Ok(unpacker)
    }

    fn held_bytes(info: &PartInfo, block_height: usize) -> u64 {
        let window = info.data_window;
        let pixel_bytes: u64 = info
            .channels
            .iter()
            .map(|c| c.sample_type.size() as u64)
            .sum();
        (window.height() as u64)
            .saturating_mul(ROW_TABLE_BYTES)
            .saturating_add(
                (window.width() as u64)
                    .saturating_mul(block_height as u64)
                    .saturating_mul(pixel_bytes)
                    .saturating_mul(2),
            )
    }

    // Level 0 comes first in the offset table of a mip-mapped part.
    const LEVELS_AFTER_LEVEL0: bool = true;
}

impl FlatSource {
    /// Open `path` and read the header and offset table of the flat part `selector` picks
    /// ([`PartSelector::FirstDeep`] picks the first flat part here). Refuses a window whose
    /// per-row tables and one row of pixels exceed `budget`.
    pub fn open(path: &Path, selector: &PartSelector, budget: u64) -> Result<FlatSource> {
        let bytes = ByteSource::open(path)?;
        Self::open_source(path, bytes, selector, budget).map_err(|e| e.in_file(path))
    }

    fn open_source(
        path: &Path,
        bytes: ByteSource,
        selector: &PartSelector,
        budget: u64,
    ) -> Result<FlatSource> {
        let (part, unpacker) = PartReader::open::<Flat>(path, bytes, selector, budget)?;
        Ok(FlatSource {
            file_len: part.bytes.len(),
            path: part.path,
            bytes: part.bytes,
            meta: part.meta,
            part: part.part,
            multipart: part.multipart,
            unpacker,
            window: part.info.data_window,
            display_window: part.info.display_window,
            channels: part.info.channels,
            attributes: part.info.attributes,
            block_height: part.block_height,
            tile_width: part.tile_width,
            offsets: part.offsets,
            last: None,
        })
    }

    /// The path this source reads.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Rows per block of the file: the scanline block height or the tile height.
    pub fn block_height(&self) -> usize {
        self.block_height
    }

    /// Bytes of one pixel's values, all channels.
    pub fn pixel_bytes(&self) -> u64 {
        self.channels
            .iter()
            .map(|c| c.sample_type.size() as u64)
            .sum()
    }

    /// The index of the channel named `name`.
    pub fn channel_index(&self, name: &str) -> Option<usize> {
        self.channels.iter().position(|c| c.name == name)
    }

    /// The rows `band` (absolute, inclusive) of the part: its window cut to them, empty when
    /// they do not meet. Bands may come in any order; a block cut by two bands is unpacked
    /// once when they come one after the other.
    pub fn take_rows(&mut self, band: std::ops::RangeInclusive<i32>) -> Result<FlatRows> {
        let (y0, y1) = (
            (*band.start()).max(self.window.y0),
            (*band.end()).min(self.window.y1),
        );
        let window = Bounds {
            x0: self.window.x0,
            y0,
            x1: self.window.x1,
            y1,
        };
        if y0 > y1 {
            return Ok(FlatRows {
                window: Bounds {
                    y1: y0 - 1,
                    ..window
                },
                planes: self
                    .channels
                    .iter()
                    .map(|c| Plane::with_capacity(c.sample_type, 0))
                    .collect(),
            });
        }
        let at = |y: i32| (y - self.window.y0) as usize / self.block_height;
        let (first, last) = (at(y0), at(y1));
        // Reuse the block row decoded last; unpack the others in parallel.
        let cached = self
            .last
            .take()
            .filter(|b| (first..=last).contains(&b.index));
        let wanted: Vec<usize> = (first..=last)
            .filter(|&i| cached.as_ref().is_none_or(|b| b.index != i))
            .collect();
        let decoded: Vec<BlockRow> = wanted
            .par_iter()
            .map(|&i| self.decode_block_row(i))
            .collect::<Result<_>>()
            .map_err(|e| e.in_file(&self.path))?;
        let mut blocks: Vec<&BlockRow> = decoded.iter().chain(cached.as_ref()).collect();
        blocks.sort_by_key(|b| b.index);
        let width = window.width();
        let planes = self
            .channels
            .iter()
            .enumerate()
            .map(|(c, channel)| {
                let mut plane = Plane::with_capacity(channel.sample_type, window.area());
                for y in y0..=y1 {
                    let block = blocks[at(y) - first];
                    let start = (y - block.y0) as usize * width;
                    plane.append_range(&block.planes[c], start..start + width);
                }
                plane
            })
            .collect();
        // Keep the band's last block row: the next band may start inside it.
        self.last = decoded.into_iter().chain(cached).find(|b| b.index == last);
        Ok(FlatRows { window, planes })
    }

    /// Read and unpack block row `index`: one scanline chunk, or every tile of that row.
    fn decode_block_row(&self, index: usize) -> Result<BlockRow> {
        let y0 = self.window.y0 + (index * self.block_height) as i32;
        let y1 = (y0 + self.block_height as i32 - 1).min(self.window.y1);
        let lines = (y1 - y0 + 1) as usize;
        let width = self.window.width();
        let mut planes: Vec<Plane> = self
            .channels
            .iter()
            .map(|c| Plane::zeros(c.sample_type, width * lines))
            .collect();
        let pieces: Vec<(usize, usize)> = match self.tile_width {
            None => vec![(index, 0)],
            Some(tw) => {
                let across = width.div_ceil(tw);
                (0..across)
                    .map(|tx| (index * across + tx, tx * tw))
                    .collect()
            }
        };
        for (chunk, x_at) in pieces {
            let piece_width = match self.tile_width {
                None => width,
                Some(tw) => tw.min(width - x_at),
            };
            let bytes = self.unpack_chunk(chunk, index, piece_width, lines)?;
            // Per line, per channel in file order: that line's values of the channel.
            let mut at = 0;
            for line in 0..lines {
                for (c, channel) in self.channels.iter().enumerate() {
                    let size = channel.sample_type.size();
                    let run = &bytes[at..at + piece_width * size];
                    at += piece_width * size;
                    write_values(
                        &mut planes[c],
                        line * width + x_at,
                        run,
                        matches!(self.unpacker, Unpacker::Exr),
                    );
                }
            }
        }
        Ok(BlockRow { index, y0, planes })
    }

    /// The unpacked bytes of chunk `chunk` (block row `row`), `width` x `lines` pixels.
    fn unpack_chunk(
        &self,
        chunk: usize,
        row: usize,
        width: usize,
        lines: usize,
    ) -> Result<Vec<u8>> {
        let what = format!("chunk {chunk}");
        let at = self.offsets[chunk];
        // The head: the part number in a multi-part file, then y (scanlines) or the tile's
        // four coordinates, then the packed size.
        let head_ints = if self.tile_width.is_some() { 5 } else { 2 };
        let head_len = 4 * head_ints + if self.multipart { 4 } else { 0 };
        let head = self.read_at(at, head_len, &what)?;
        let ints: Vec<i32> = head
            .chunks_exact(4)
            .map(|b| i32::from_le_bytes(b.try_into().expect("4 bytes")))
            .collect();
        let ints = if self.multipart {
            if ints[0] as usize != self.part {
                return Err(Error::format(format!(
                    "{what} belongs to part {}, not {}",
                    ints[0], self.part
                )));
            }
            &ints[1..]
        } else {
            &ints[..]
        };
        let packed_len = *ints.last().expect("a size");
        let expected = width * lines * self.pixel_bytes() as usize;
        let packed_len = usize::try_from(packed_len)
            .ok()
            .filter(|&n| (at + head_len as u64).saturating_add(n as u64) <= self.file_len)
            .ok_or_else(|| {
                Error::format(format!(
                    "file is truncated inside {what} (its size reaches past the end)"
                ))
            })?;
        let y = self.window.y0 + (row * self.block_height) as i32;
        let placed = match self.tile_width {
            None => ints[0] == y,
            Some(tw) => {
                let across = self.window.width().div_ceil(tw);
                ints[0] as i64 == (chunk % across) as i64
                    && ints[1] as i64 == row as i64
                    && ints[2] == 0
                    && ints[3] == 0
            }
        };
        if !placed {
            return Err(Error::format(format!(
                "{what} is not where the offset table puts it (its head says {:?})",
                &ints[..ints.len() - 1]
            )));
        }
        let packed = self.read_at(at + head_len as u64, packed_len, &what)?;
        match self.unpacker {
            Unpacker::Own(codec) => {
                let sizes = self.channels.iter().map(|c| c.sample_type.size()).collect();
                decompress(
                    codec,
                    &packed,
                    expected,
                    &BlockLayout::flat(sizes, width, lines),
                    &what,
                )
            }
            Unpacker::Exr => {
                let compressed_block = match self.tile_width {
                    None => CompressedBlock::ScanLine(CompressedScanLineBlock {
                        y_coordinate: y,
                        compressed_pixels_le: packed,
                    }),
                    Some(_) => CompressedBlock::Tile(CompressedTileBlock {
                        coordinates: TileCoordinates {
                            tile_index: Vec2(ints[0] as usize, ints[1] as usize),
                            level_index: Vec2(0, 0),
                        },
                        compressed_pixels_le: packed,
                    }),
                };
                let chunk = Chunk {
                    layer_index: self.part,
                    compressed_block,
                };
                // The codec is a dependency; a corrupt block must give an error, never a panic.
                let block = std::panic::catch_unwind(|| {
                    UncompressedBlock::decompress_chunk(chunk, &self.meta, false)
                })
                .map_err(|_| Error::format(format!("{what}: cannot unpack (corrupt data)")))?
                .map_err(|e| Error::format(format!("{what}: cannot unpack: {e}")))?;
                if block.data.len() != expected {
                    return Err(Error::format(format!(
                        "{what}: unpacks to {} bytes, expected {expected}",
                        block.data.len()
                    )));
                }
                Ok(block.data)
            }
        }
    }

    fn read_at(&self, at: u64, len: usize, what: &str) -> Result<Vec<u8>> {
        if at.saturating_add(len as u64) > self.file_len {
            return Err(Error::format(format!("file is truncated inside {what}")));
        }
        self.bytes.read_exact_at(at, len)
    }
}

/// The flat part `selector` picks: the first flat part by default, or the one named.
fn select_flat_part(infos: &[PartInfo], selector: &PartSelector) -> Result<usize> {
    let index = match selector {
        PartSelector::FirstDeep => infos
            .iter()
            .position(|p| !p.deep)
            .ok_or_else(|| Error::format("is a deep EXR; this command needs a flat image"))?,
        PartSelector::Index(i) => (*i < infos.len())
            .then_some(*i)
            .ok_or_else(|| Error::of_kind(ErrorKind::Usage, format!("has no part {i}")))?,
        PartSelector::Name(n) => infos
            .iter()
            .position(|p| p.name.as_deref() == Some(n.as_str()))
            .ok_or_else(|| Error::of_kind(ErrorKind::Usage, format!("has no part named {n:?}")))?,
    };
    if infos[index].deep {
        return Err(Error::format(format!(
            "part {index} is deep; this command needs a flat image"
        )));
    }
    Ok(index)
}

/// Write the values of `bytes` into `plane` from value `at` on (little-endian bytes, or
/// native-endian ones from the `exr` crate).
fn write_values(plane: &mut Plane, at: usize, bytes: &[u8], native: bool) {
    let word = |b: &[u8]| {
        let b = [b[0], b[1], b[2], b[3]];
        if native {
            u32::from_ne_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    };
    match plane {
        Plane::U32(v) => {
            for (d, b) in v[at..].iter_mut().zip(bytes.chunks_exact(4)) {
                *d = word(b);
            }
        }
        Plane::F32(v) => {
            for (d, b) in v[at..].iter_mut().zip(bytes.chunks_exact(4)) {
                *d = f32::from_bits(word(b));
            }
        }
        Plane::F16(v) => {
            for (d, b) in v[at..].iter_mut().zip(bytes.chunks_exact(2)) {
                let b = [b[0], b[1]];
                *d = if native {
                    f16::from_ne_bytes(b)
                } else {
                    f16::from_le_bytes(b)
                };
            }
        }
    }
}
