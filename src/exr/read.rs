//! Reading deep EXR files: headers through the `exr` crate, the deep chunks through our own codec.
//!
//! The whole file is read into memory, the selected part's chunks are located through the offset
//! table, and every chunk is parsed with bounds checks: its sample-count table (cumulative, per
//! pixel) must be non-decreasing and agree with the size of its sample data. Sample memory is
//! reserved only after all count tables have been read and the total checked against
//! [`ReadOptions::max_memory`]. Chunks decode in parallel in batches, so the transient memory is a
//! few chunks, not a second copy of the image.
//!
//! Every size the file states (window, chunk count, packed and unpacked sizes, sample counts) is
//! hostile until checked: sizes are computed in u64 with saturating arithmetic (a saturated
//! size is over any budget, so overflow can only ever refuse, never wrap into a small number),
//! a chunk's claimed unpacked sizes must be reachable from its packed bytes with its codec
//! ([`super::compression::check_plausible`]) before anything is unpacked, and the budget covers
//! the per-pixel tables, the sample planes and the transient unpacking buffers together.

use std::path::Path;

use exr::meta::attribute::{LevelMode, Text};
use exr::meta::header::Header;
use exr::meta::{BlockDescription, MetaData};
use rayon::prelude::*;

use super::attributes::{read_headers, RawAttribute};
use super::compression::{check_plausible, compression_name, decompress, BlockLayout, Codec};
use crate::deep::{Bounds, Channel, DeepImage, DeepState, Plane, SampleType};
use crate::error::{Error, ErrorKind, Result};

/// The default ceiling on the memory one input may take once decoded: 8 GiB.
pub const DEFAULT_MAX_MEMORY: u64 = 8 << 30;

/// Which part of a multi-part file to read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum PartSelector {
    /// The first deep part.
    #[default]
    FirstDeep,
    /// The part at this index (0-based).
    Index(usize),
    /// The part with this `name` attribute.
    Name(String),
}

impl std::str::FromStr for PartSelector {
    type Err = std::convert::Infallible;
    /// A number selects by index, anything else by name.
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        Ok(match s.parse::<usize>() {
            Ok(i) => PartSelector::Index(i),
            Err(_) => PartSelector::Name(s.to_string()),
        })
    }
}

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

/// What a part's header says, for `deepmerge info` and for the reader.
#[derive(Clone, Debug)]
pub struct PartInfo {
    /// Index in the file.
    pub index: usize,
    /// The `name` attribute, if any.
    pub name: Option<String>,
    /// True for deep parts.
    pub deep: bool,
    /// Tile size for tiled parts.
    pub tiles: Option<(usize, usize)>,
    /// Display window.
    pub display_window: Bounds,
    /// Data window.
    pub data_window: Bounds,
    /// Channels in file order.
    pub channels: Vec<Channel>,
    /// Compression method as `info` names it ("zip line compression", "zstd compression").
    pub compression: String,
    /// The `compression` attribute's id.
    pub compression_id: u8,
    /// Every attribute of the part's header, as stored.
    pub attributes: Vec<RawAttribute>,
    /// `deepImageState`, absent meaning messy.
    pub state: DeepState,
    /// Line order as the header states it.
    pub line_order: String,
}

/// Read the headers of every part.
pub fn read_parts_info(path: &Path) -> Result<Vec<PartInfo>> {
    let bytes = read_file(path)?;
    parse_meta(&bytes)
        .map(|headers| headers.part_infos())
        .map_err(|e| e.in_file(path))
}

/// Read one deep part of a file into a [`DeepImage`].
pub fn read_deep(path: &Path, options: &ReadOptions) -> Result<DeepImage> {
    let bytes = read_file(path)?;
    decode_deep(&bytes, options).map_err(|e| e.in_file(path))
}

fn read_file(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::read(path, e))
}

/// Decode one deep part from the bytes of a whole file.
pub fn decode_deep(bytes: &[u8], options: &ReadOptions) -> Result<DeepImage> {
    let headers = parse_meta(bytes)?;
    let (meta, table_start) = (&headers.meta, headers.table_start);
    let infos = headers.part_infos();
    let index = select_part(&infos, &options.part)?;
    let header = &meta.headers[index];
    let info = &infos[index];
    let codec = Codec::for_deep_part(info.compression_id)?;
    if let BlockDescription::Tiles(t) = header.blocks {
        if t.level_mode != LevelMode::Singular {
            return Err(Error::unsupported(
                "deep tiled file has mip or rip levels; only single-level deep tiles are supported",
            ));
        }
    }
    let window = info.data_window;
    let channels = info.channels.clone();
    if channels.is_empty() {
        // A sample without bytes costs nothing in the file but a full sample in every merge:
        // counts of 2^31 per pixel would be accepted and then take forever to walk.
        return Err(Error::format(
            "the deep part has no channels (a deep sample needs at least Z)",
        ));
    }
    let bytes_per_sample: u64 = channels.iter().map(|c| c.sample_type.size() as u64).sum();

    let pixel_bytes = (window.area() as u64).saturating_mul(PIXEL_BYTES);
    check_memory(
        pixel_bytes,
        options.max_memory,
        &format!(
            "its data window of {} x {} pixels",
            window.width(),
            window.height()
        ),
    )?;

    // Locate this part's chunks: the offset tables of all parts follow the headers in order.
    let truncated_table = || Error::format("file is truncated inside the chunk offset table");
    let mut table_at = table_start;
    for h in &meta.headers[..index] {
        table_at = h
            .chunk_count
            .checked_mul(8)
            .and_then(|n| table_at.checked_add(n))
            .ok_or_else(truncated_table)?;
    }
    let chunk_count = header.chunk_count;
    let expected = expected_chunk_count(header, window);
    if chunk_count != expected {
        return Err(Error::format(format!(
            "header says {chunk_count} chunks, the data window needs {expected}"
        )));
    }
    let table_end = chunk_count
        .checked_mul(8)
        .and_then(|n| table_at.checked_add(n))
        .ok_or_else(truncated_table)?;
    let table = bytes.get(table_at..table_end).ok_or_else(truncated_table)?;
    let chunk_offsets: Vec<usize> = table
        .chunks_exact(8)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap()) as usize)
        .collect();
    let multipart = meta.requirements.is_multilayer();

    // Pass 1: parse every chunk and its sample-count table.
    let chunks: Vec<RawChunk> = chunk_offsets
        .par_iter()
        .enumerate()
        .map(|(i, &at)| {
            parse_chunk(bytes, at, multipart, index, header, window, codec)
                .map_err(|e| e.context(format_args!("chunk {i}")))
        })
        .collect::<Result<_>>()?;

    let mut counts = vec![0u32; window.area()];
    let mut seen = vec![false; chunks.len()];
    let mut total: u64 = 0;
    for chunk in &chunks {
        let slot = chunk_slot(header, window, &chunk.region);
        if std::mem::replace(&mut seen[slot], true) {
            return Err(Error::format(format!(
                "two chunks hold the same block {}",
                chunk.region
            )));
        }
        for (k, &c) in chunk.counts.iter().enumerate() {
            let (x, y) = chunk.region.coords_of(k);
            counts[window.index_of(x, y).expect("region inside window")] = c;
            total = total.saturating_add(c as u64);
        }
    }
    // Pass 2 unpacks a batch of chunks at a time; each chunk holds its unpacked bytes a few
    // times at the peak (`Codec::unpack_copies`), so the largest batch counts.
    let batch = rayon::current_num_threads().max(1) * 4;
    let transient = chunks
        .chunks(batch)
        .map(|group| {
            group
                .iter()
                .fold(0u64, |sum, c| sum.saturating_add(c.unpacked_size as u64))
        })
        .max()
        .unwrap_or(0)
        .saturating_mul(codec.unpack_copies());
    check_memory(
        pixel_bytes
            .saturating_add(total.saturating_mul(bytes_per_sample))
            .saturating_add(transient),
        options.max_memory,
        &format!("its {total} samples"),
    )?;

    let offsets = crate::deep::offsets_from_counts(&counts);
    let mut planes: Vec<Plane> = channels
        .iter()
        .map(|c| Plane::zeros(c.sample_type, total as usize))
        .collect();

    // Pass 2: unpack sample data a batch of chunks at a time and place it.
    for group in chunks.chunks(batch) {
        let unpacked: Vec<Vec<u8>> = group
            .par_iter()
            .map(|c| {
                let layout = BlockLayout::deep_samples(&channels, c.line_samples());
                decompress(
                    codec,
                    c.packed_samples,
                    c.unpacked_size,
                    &layout,
                    "sample data",
                )
                .map_err(|e| e.context(format_args!("block {}", c.region)))
            })
            .collect::<Result<_>>()?;
        for (chunk, data) in group.iter().zip(&unpacked) {
            scatter_chunk(chunk, data, window, &offsets, &channels, &mut planes);
        }
    }

    let image = DeepImage {
        display_window: info.display_window,
        data_window: window,
        channels,
        offsets,
        planes,
        state: info.state,
    };
    Ok(image)
}

/// Bytes per pixel of the window while reading: the count table (4), the offsets (8) and the
/// chunks' own count tables, held until every chunk is parsed (4).
const PIXEL_BYTES: u64 = 16;

fn check_memory(bytes: u64, limit: u64, what: &str) -> Result<()> {
    if bytes > limit {
        return Err(Error::over_budget(what, bytes, limit));
    }
    Ok(())
}

/// Bytes as GiB with two decimals, or MiB below a tenth of a GiB, KiB below a MiB and bytes
/// below a KiB, so that a small size never reads "0.0". Sizes are computed with saturating
/// arithmetic, so `u64::MAX` stands for "too large to count".
pub fn human_bytes(bytes: u64) -> String {
    if bytes == u64::MAX {
        return "more than 16 EiB".into();
    }
    let gib = bytes as f64 / (1u64 << 30) as f64;
    if gib >= 0.1 {
        format!("{gib:.2} GiB")
    } else if bytes >= 1 << 20 {
        format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
    } else if bytes >= 1 << 10 {
        format!("{:.1} KiB", bytes as f64 / (1u64 << 10) as f64)
    } else {
        format!("{bytes} bytes")
    }
}

/// A file's headers: the `exr` crate's parse, where the offset tables begin, and what our own
/// walk of the attributes found.
pub(crate) struct ParsedHeaders {
    pub(crate) meta: MetaData,
    pub(crate) table_start: usize,
    /// Per part, the id its `compression` attribute states.
    pub(crate) compression_ids: Vec<u8>,
    /// Per part, every attribute as stored.
    pub(crate) attributes: Vec<Vec<RawAttribute>>,
}

/// The id the `exr` crate is shown in place of a compression id it does not know, one with the
/// same lines per chunk, so that it parses the rest of the header; the real id is kept in
/// [`ParsedHeaders::compression_ids`] and decides how the part is read.
fn stand_in_compression(id: u8) -> Option<u8> {
    match id {
        12 => Some(9),   // LJ2K, 256 lines: DWAB
        13 => Some(2),   // ZSTD, one line: ZIPS
        14.. => Some(0), // unknown: NONE (the part is refused when read)
        _ => None,
    }
}

/// Parse headers; returns them with the byte position where the offset tables begin.
pub(crate) fn parse_meta(bytes: &[u8]) -> Result<ParsedHeaders> {
    if bytes.len() < 8 {
        return Err(Error::format(
            "file is too short to be an OpenEXR file (truncated or empty)",
        ));
    }
    if bytes[..4] != [0x76, 0x2f, 0x31, 0x01] {
        return Err(Error::format("not an OpenEXR file (wrong magic number)"));
    }
    let multipart_flag = bytes[5] & 0x10 != 0;
    let walk = read_headers(bytes, multipart_flag)
        .ok_or_else(|| Error::format("file is truncated inside its header"))?;
    let table_start = walk.end;
    let mut header_bytes = std::borrow::Cow::Borrowed(&bytes[..table_start]);
    for &at in walk.compression_at.iter().flatten() {
        if let Some(stand_in) = stand_in_compression(bytes[at]) {
            header_bytes.to_mut()[at] = stand_in;
        }
    }
    // The header parser is a dependency; a malformed header must give an error, never a panic.
    let parsed =
        std::panic::catch_unwind(|| MetaData::read_from_buffered(&header_bytes[..], false))
            .map_err(|_| Error::format("cannot parse the EXR header (malformed)"))?;
    let meta = parsed.map_err(|e| Error::from_exr("cannot parse the EXR header", e))?;
    if meta.headers.len() != walk.headers.len() {
        return Err(Error::format(
            "cannot parse the EXR header (malformed part list)",
        ));
    }
    let compression_ids = walk
        .compression_at
        .iter()
        .zip(&meta.headers)
        .map(|(at, h)| at.map_or_else(|| exr_compression_id(h), |at| bytes[at]))
        .collect();
    Ok(ParsedHeaders {
        meta,
        table_start,
        compression_ids,
        attributes: walk.headers,
    })
}

/// The id of a compression the `exr` crate parsed (it only parses ids 0 to 11).
fn exr_compression_id(h: &Header) -> u8 {
    let mut byte = Vec::new();
    h.compression.write(&mut byte).expect("writing to memory");
    byte[0]
}

/// Byte position just past the header(s) (see [`read_headers`]).
pub(crate) fn headers_end(bytes: &[u8], multipart: bool) -> Option<usize> {
    read_headers(bytes, multipart).map(|walk| walk.end)
}

fn bounds_of(b: exr::meta::attribute::IntegerBounds) -> Bounds {
    Bounds::from_origin_size(b.position.x(), b.position.y(), b.size.x(), b.size.y())
}

impl ParsedHeaders {
    /// What each part's header says.
    pub(crate) fn part_infos(&self) -> Vec<PartInfo> {
        part_infos(&self.meta, &self.compression_ids, &self.attributes)
    }
}

fn part_infos(
    meta: &MetaData,
    compression_ids: &[u8],
    attributes: &[Vec<RawAttribute>],
) -> Vec<PartInfo> {
    meta.headers
        .iter()
        .enumerate()
        .map(|(index, h)| PartInfo {
            index,
            name: h.own_attributes.layer_name.as_ref().map(|t| t.to_string()),
            deep: h.deep,
            tiles: match h.blocks {
                BlockDescription::Tiles(t) => Some((t.tile_size.x(), t.tile_size.y())),
                BlockDescription::ScanLines => None,
            },
            display_window: bounds_of(h.shared_attributes.display_window),
            data_window: bounds_of(h.data_window()),
            channels: h
                .channels
                .list
                .iter()
                .map(|c| {
                    let t = match c.sample_type {
                        exr::meta::attribute::SampleType::U32 => SampleType::U32,
                        exr::meta::attribute::SampleType::F16 => SampleType::F16,
                        exr::meta::attribute::SampleType::F32 => SampleType::F32,
                    };
                    Channel::new(c.name.to_string(), t)
                })
                .collect(),
            compression: match compression_ids[index] {
                // The names the `exr` crate gives the ids it knows, as `info` always printed.
                id @ 0..=11 if id == exr_compression_id(h) => format!("{}", h.compression),
                id => format!("{} compression", compression_name(id).to_lowercase()),
            },
            compression_id: compression_ids[index],
            attributes: attributes[index].clone(),
            state: deep_state(h),
            line_order: format!("{:?}", h.line_order),
        })
        .collect()
}

/// `deepImageState` is a one-byte attribute of its own type, which the `exr` crate keeps among
/// the custom attributes.
fn deep_state(h: &Header) -> DeepState {
    let key = Text::from("deepImageState");
    match h.own_attributes.other.get(&key) {
        Some(exr::meta::attribute::AttributeValue::Custom { bytes, .. }) if !bytes.is_empty() => {
            DeepState::from_byte(bytes[0])
        }
        _ => DeepState::Messy,
    }
}

pub(crate) fn select_part(infos: &[PartInfo], selector: &PartSelector) -> Result<usize> {
    let names = || {
        infos
            .iter()
            .map(|p| format!("{}:{}", p.index, p.name.as_deref().unwrap_or("(unnamed)")))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let index = match selector {
        PartSelector::FirstDeep => infos.iter().position(|p| p.deep).ok_or_else(|| {
            Error::unsupported(
                "is a flat (non-deep) EXR; deepmerge needs deep input \
                 (make it deep first, e.g. with oiiotool --deepen)",
            )
        })?,
        PartSelector::Index(i) if *i < infos.len() => *i,
        PartSelector::Index(i) => {
            return Err(Error::of_kind(
                ErrorKind::Usage,
                format!("has no part {i}; parts are {}", names()),
            ))
        }
        PartSelector::Name(n) => infos
            .iter()
            .position(|p| p.name.as_deref() == Some(n.as_str()))
            .ok_or_else(|| {
                Error::of_kind(
                    ErrorKind::Usage,
                    format!("has no part named {n:?}; parts are {}", names()),
                )
            })?,
    };
    if !infos[index].deep {
        return Err(Error::unsupported(format!(
            "part {index} is flat (non-deep); deepmerge needs a deep part"
        )));
    }
    Ok(index)
}

pub(crate) fn expected_chunk_count(header: &Header, window: Bounds) -> usize {
    match header.blocks {
        BlockDescription::ScanLines => window
            .height()
            .div_ceil(header.compression.scan_lines_per_block()),
        BlockDescription::Tiles(t) => window
            .width()
            .div_ceil(t.tile_size.x())
            .saturating_mul(window.height().div_ceil(t.tile_size.y())),
    }
}

/// Index of the block a chunk's region stands for, to catch duplicates.
pub(crate) fn chunk_slot(header: &Header, window: Bounds, region: &Bounds) -> usize {
    match header.blocks {
        BlockDescription::ScanLines => {
            (region.y0 - window.y0) as usize / header.compression.scan_lines_per_block()
        }
        BlockDescription::Tiles(t) => {
            let tiles_x = window.width().div_ceil(t.tile_size.x());
            let tx = (region.x0 - window.x0) as usize / t.tile_size.x();
            let ty = (region.y0 - window.y0) as usize / t.tile_size.y();
            ty * tiles_x + tx
        }
    }
}

/// A chunk whose count table has been decoded and whose sample data is still packed.
pub(crate) struct RawChunk<'a> {
    pub(crate) region: Bounds,
    pub(crate) counts: Vec<u32>,
    pub(crate) packed_samples: &'a [u8],
    pub(crate) unpacked_size: usize,
}

impl RawChunk<'_> {
    /// Samples on each line of the block.
    pub(crate) fn line_samples(&self) -> Vec<usize> {
        self.counts
            .chunks(self.region.width().max(1))
            .map(|line| line.iter().map(|&c| c as usize).sum())
            .collect()
    }
}

struct ByteReader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> ByteReader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or_else(|| Error::format("file is truncated inside a chunk"))?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn i32(&mut self) -> Result<i32> {
        Ok(i32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
}

pub(crate) fn parse_chunk<'a>(
    bytes: &'a [u8],
    at: usize,
    multipart: bool,
    part: usize,
    header: &Header,
    window: Bounds,
    codec: Codec,
) -> Result<RawChunk<'a>> {
    if at >= bytes.len() {
        return Err(Error::format(
            "file is truncated: a chunk offset points past the end",
        ));
    }
    let mut r = ByteReader { bytes, at };
    let head = parse_chunk_head(&mut r, multipart, part, header, window)?;
    let packed_table = r.take(head.packed_table_size)?;
    let packed_samples = r.take(head.packed_sample_size)?;
    // The claimed unpacked size must be reachable from the packed bytes before the count table
    // is trusted to match it: else a table consistent with an absurd claim allocates planes.
    check_plausible(
        codec,
        packed_samples.len(),
        head.unpacked_size,
        "sample data",
    )
    .map_err(|e| e.context(format_args!("block {}", head.region)))?;
    let counts = chunk_counts(&head, packed_table, header, codec)?;
    Ok(RawChunk {
        region: head.region,
        counts,
        packed_samples,
        unpacked_size: head.unpacked_size,
    })
}

/// What a deep chunk says before its tables: the block it holds and the sizes that follow.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ChunkHead {
    /// The pixels of the block.
    pub(crate) region: Bounds,
    /// Bytes of the packed sample-count table.
    pub(crate) packed_table_size: usize,
    /// Bytes of the packed sample data.
    pub(crate) packed_sample_size: usize,
    /// Bytes of the sample data once unpacked.
    pub(crate) unpacked_size: usize,
}

/// Most bytes a deep chunk's head takes: part number, four tile coordinates, three sizes.
pub(crate) const MAX_CHUNK_HEAD_BYTES: usize = 4 + 16 + 24;

/// Parse a chunk's head from `bytes` at `at` (the streaming reader reads heads alone); returns
/// it with the position just after it.
pub(crate) fn read_chunk_head(
    bytes: &[u8],
    multipart: bool,
    part: usize,
    header: &Header,
    window: Bounds,
) -> Result<(ChunkHead, usize)> {
    let mut r = ByteReader { bytes, at: 0 };
    let head = parse_chunk_head(&mut r, multipart, part, header, window)?;
    Ok((head, r.at))
}

fn parse_chunk_head(
    r: &mut ByteReader,
    multipart: bool,
    part: usize,
    header: &Header,
    window: Bounds,
) -> Result<ChunkHead> {
    if multipart {
        let p = r.i32()?;
        if p != part as i32 {
            return Err(Error::format(format!(
                "offset table points at a chunk of part {p}, not {part}"
            )));
        }
    }
    let region = match header.blocks {
        BlockDescription::ScanLines => {
            let y = r.i32()?;
            let lines = header.compression.scan_lines_per_block() as i64;
            let rel = y as i64 - window.y0 as i64;
            if rel < 0 || y > window.y1 || rel % lines != 0 {
                return Err(Error::format(format!(
                    "scanline chunk at y = {y} is outside the data window or misaligned"
                )));
            }
            Bounds {
                x0: window.x0,
                y0: y,
                x1: window.x1,
                y1: (y as i64 + lines - 1).min(window.y1 as i64) as i32,
            }
        }
        BlockDescription::Tiles(t) => {
            let (tx, ty, lx, ly) = (r.i32()?, r.i32()?, r.i32()?, r.i32()?);
            let (tw, th) = (t.tile_size.x() as i64, t.tile_size.y() as i64);
            let x0 = window.x0 as i64 + tx as i64 * tw;
            let y0 = window.y0 as i64 + ty as i64 * th;
            if tx < 0
                || ty < 0
                || lx != 0
                || ly != 0
                || x0 > window.x1 as i64
                || y0 > window.y1 as i64
            {
                return Err(Error::format(format!(
                    "tile ({tx}, {ty}) level ({lx}, {ly}) is outside the data window"
                )));
            }
            Bounds {
                x0: x0 as i32,
                y0: y0 as i32,
                x1: (x0 + tw - 1).min(window.x1 as i64) as i32,
                y1: (y0 + th - 1).min(window.y1 as i64) as i32,
            }
        }
    };
    // Sizes beyond the address space cannot be in the file: saturate, and `take` refuses them.
    let as_size = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
    Ok(ChunkHead {
        region,
        packed_table_size: as_size(r.u64()?),
        packed_sample_size: as_size(r.u64()?),
        unpacked_size: as_size(r.u64()?),
    })
}

/// Per-pixel counts of a chunk from its packed sample-count table.
pub(crate) fn chunk_counts(
    head: &ChunkHead,
    packed_table: &[u8],
    header: &Header,
    codec: Codec,
) -> Result<Vec<u32>> {
    let region = head.region;
    let pixels = region.area();
    // OpenEXR writes the table of a clipped edge tile stored raw at the full tile size, with the
    // clipped pixels first: a raw table of full-tile size is accepted and its tail ignored.
    let full_tile = match header.blocks {
        BlockDescription::Tiles(t) => t.tile_size.x().saturating_mul(t.tile_size.y()),
        BlockDescription::ScanLines => pixels,
    };
    let table_size = pixels.saturating_mul(4);
    let table = if full_tile != pixels && packed_table.len() == full_tile.saturating_mul(4) {
        packed_table[..table_size].to_vec()
    } else {
        let layout = BlockLayout::count_table(region.width(), region.height());
        decompress(
            codec,
            packed_table,
            table_size,
            &layout,
            "sample-count table",
        )
        .map_err(|e| e.context(format_args!("block {region}")))?
    };
    let cumulative: Vec<i32> = table
        .chunks_exact(4)
        .map(|b| i32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let bytes_per_sample: u64 = header
        .channels
        .list
        .iter()
        .map(|c| c.sample_type.bytes_per_sample() as u64)
        .sum();
    counts_from_table(
        &cumulative,
        region,
        bytes_per_sample,
        head.unpacked_size as u64,
    )
}

/// Per-pixel counts from a chunk's cumulative table. OpenEXR accumulates within each line of a
/// block (tiles, as written by the library); a table accumulated over the whole block is accepted
/// too. The convention is the one whose total matches the chunk's unpacked data size; the table
/// must never decrease inside its running sum.
fn counts_from_table(
    cumulative: &[i32],
    region: Bounds,
    bytes_per_sample: u64,
    unpacked_size: u64,
) -> Result<Vec<u32>> {
    let w = region.width();
    let corrupt = |detail: String| {
        Error::format(format!(
            "block {region}: corrupt sample-count table ({detail})"
        ))
    };
    let decode = |per_line: bool| -> Result<(Vec<u32>, u64)> {
        let mut counts = Vec::with_capacity(cumulative.len());
        let mut previous = 0i32;
        let mut total = 0u64;
        for (k, &value) in cumulative.iter().enumerate() {
            if per_line && k % w == 0 {
                previous = 0;
            }
            if value < previous {
                let (x, y) = region.coords_of(k);
                return Err(corrupt(format!("decreases at pixel ({x}, {y})")));
            }
            counts.push((value - previous) as u32);
            total += (value - previous) as u64;
            previous = value;
        }
        Ok((counts, total))
    };
    let mut last_error = None;
    for per_line in [true, false] {
        match decode(per_line) {
            Ok((counts, total)) if total.saturating_mul(bytes_per_sample) == unpacked_size => {
                return Ok(counts)
            }
            Ok((_, total)) => {
                last_error = Some(corrupt(format!(
                    "{total} samples need {} bytes, the chunk holds {unpacked_size}",
                    total.saturating_mul(bytes_per_sample)
                )))
            }
            Err(e) => last_error = Some(e),
        }
    }
    Err(last_error.expect("tried"))
}

/// Place a chunk's unpacked samples: for each line of the block, for each channel, the samples
/// of every pixel of that line in turn.
fn scatter_chunk(
    chunk: &RawChunk,
    data: &[u8],
    window: Bounds,
    offsets: &[u64],
    channels: &[Channel],
    planes: &mut [Plane],
) {
    let w = chunk.region.width();
    let mut at = 0;
    for line in 0..chunk.region.height() {
        let row = &chunk.counts[line * w..(line + 1) * w];
        let line_samples: usize = row.iter().map(|&c| c as usize).sum();
        let y = chunk.region.y0 + line as i32;
        let first = window.index_of(chunk.region.x0, y).expect("inside");
        for (c, channel) in channels.iter().enumerate() {
            let size = channel.sample_type.size();
            let mut src = at;
            for (k, &n) in row.iter().enumerate() {
                let n = n as usize;
                let dst = offsets[first + k] as usize;
                planes[c].write_le_at(dst, &data[src..src + n * size]);
                src += n * size;
            }
            at += line_samples * size;
        }
    }
}
