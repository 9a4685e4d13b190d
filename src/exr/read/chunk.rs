//! One deep chunk's framing, as OpenEXR lays it out: the head (part number in multi-part
//! files, the block's coordinates, three sizes) and the packed sample-count table, turned into
//! per-pixel counts with every stated size checked against the window and the data.

use exr::meta::header::Header;
use exr::meta::BlockDescription;

use crate::deep::Bounds;
use crate::error::{Error, Result};
use crate::exr::codec::{decompress, BlockLayout, Codec};

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

/// Parse a chunk's head from the start of `bytes` (the reader reads heads alone); returns it
/// with the position just after it.
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
