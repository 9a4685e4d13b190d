//! A deep EXR file's headers, read without reading the file: the magic number, every part's
//! header (through the `exr` crate, with our own walk of the raw attributes for compressions
//! it does not know and for carrying metadata), where the offset tables begin, and which part
//! a [`PartSelector`] picks. Headers are read from a growing prefix of the file with positioned
//! reads, so describing a file of gigabytes reads kilobytes.

use std::path::Path;

use exr::meta::attribute::Text;
use exr::meta::header::Header;
use exr::meta::{BlockDescription, MetaData};

use super::bytes::ByteSource;
use crate::deep::{Bounds, Channel, DeepState, SampleType};
use crate::error::{Error, ErrorKind, Result};
use crate::exr::attributes::{read_headers, RawAttribute};
use crate::exr::codec::compression_name;

/// First guess at the header's size; doubled until the whole header fits.
const HEADER_PREFIX_BYTES: usize = 64 << 10;

/// Headers larger than this are refused (a hostile file could claim any size).
const MAX_HEADER_BYTES: usize = 64 << 20;

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

/// Read the headers of every part (the header only, not the file).
pub fn read_parts_info(path: &Path) -> Result<Vec<PartInfo>> {
    let source = ByteSource::open(path)?;
    read_headers_of(&source)
        .map(|headers| headers.part_infos())
        .map_err(|e| e.in_file(path))
}

/// The headers of `source` (from a growing prefix of it) and where the offset tables begin.
pub(crate) fn read_headers_of(source: &ByteSource) -> Result<ParsedHeaders> {
    let file_len = source.len();
    let mut size = HEADER_PREFIX_BYTES;
    loop {
        let len = (file_len as usize).min(size);
        let prefix = source.read_exact_at(0, len)?;
        let complete = prefix.len() >= 8 && headers_end(&prefix, prefix[5] & 0x10 != 0).is_some();
        if complete || len as u64 == file_len || size >= MAX_HEADER_BYTES {
            return parse_meta(&prefix);
        }
        size *= 2;
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

/// The index of the part `selector` picks, or why none fits.
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
                 (make it deep first with `deepmerge deepen`)",
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

/// Chunks a part of this window must have: one per scanline block or per tile.
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
