//! OpenEXR's ZSTD compression (compression id 13, from OpenEXR 3.5): the preprocessing around
//! libzstd and the framing of a block, as OpenEXRCore's `internal_zstd.c` defines them.
//!
//! A block (a deep chunk's sample-count table or its sample data, or a flat chunk's lines) is
//! rows of values: for each line of the block, for each channel in file order, the line's
//! values of that channel ([`BlockLayout`]). Before zstd the block is
//!
//! 1. sorted: every 2-byte (half) row of the block first, in (line, channel) order, then every
//!    4-byte (float, uint) row in the same order;
//! 2. for flat pixels only, delta-coded along each row (each value minus the one before it, as
//!    a wrapping 16- or 32-bit little-endian integer); deep data is left as it is, since deltas
//!    of unrelated depths only scramble their exponent bytes;
//! 3. shuffled: the 2-byte rows and the 4-byte rows each make a segment (one when the block
//!    has only one kind), written as a u64 length and then the segment's bytes split into byte
//!    planes (every value's first byte, then every second byte, ...);
//! 4. packed by zstd at the level asked ([`DEFAULT_LEVEL`] is OpenEXR's), one frame that
//!    states its content size;
//! 5. framed: the magic `zstd-exr` ([`MAGIC`]) as a u64, the format as a u32 (1: no delta, for
//!    deep blocks; 2: with the delta flag, for flat ones), the flags as a u32 (bit 0: delta),
//!    the zstd frame's size as a u64, then the frame.
//!
//! A block that does not get smaller is stored raw, as with every OpenEXR codec; readers tell
//! it by its size (packed equal to unpacked). A sample-count table is one 4-byte channel whose
//! rows are the block's lines, so sorting leaves it as it is.

use std::cell::RefCell;
use std::mem::MaybeUninit;

use super::layout::{deinterleave_planes, interleave_planes, keep_scratch_small, BlockLayout};
use crate::error::{Error, Result};

/// The frame's magic number, the bytes `zstd-exr` read as a little-endian u64.
const MAGIC: u64 = 8_248_453_963_162_350_458;
/// Bytes of the frame header: magic, format, flags, zstd frame size.
const FRAME_HEADER_BYTES: usize = 24;
/// Format 1: sort and shuffle.
const FORMAT_SORTED: u32 = 1;
/// Format 2: sort, then the delta its flag asks for, then shuffle.
const FORMAT_SORTED_DELTA: u32 = 2;
/// Flag of format 2: rows are delta-coded after sorting.
const FLAG_DELTA: u32 = 1;

/// OpenEXR's default zstd level (OpenEXRCore `base.c`).
pub const DEFAULT_LEVEL: i32 = 5;
/// The levels OpenEXR accepts (libzstd's 1 to 22).
pub const LEVELS: std::ops::RangeInclusive<i32> = 1..=22;

/// Most bytes one packed byte can unpack to: a raw-literal-free zstd block of 128 KiB can be a
/// three-byte header and one byte repeated (an RLE block).
pub(super) const MAX_RATIO: usize = 32 << 10;

thread_local! {
    /// This thread's buffers for unpacking a block: the inner stream and the sorted block.
    static SCRATCH: RefCell<(Vec<u8>, Vec<u8>)> = const { RefCell::new((Vec::new(), Vec::new())) };

    /// One zstd context of each kind per thread, made once (as OpenEXR keeps them).
    static CONTEXTS: RefCell<(zstd::zstd_safe::CCtx<'static>, zstd::zstd_safe::DCtx<'static>)> =
        RefCell::new((zstd::zstd_safe::CCtx::create(), zstd::zstd_safe::DCtx::create()));
}

/// One row of a block: where it is in the block as stored and in the sorted order.
struct Row {
    raw: usize,
    sorted: usize,
    len: usize,
    value_size: usize,
}

/// The rows of a block and the size of its 2-byte part.
struct SortedRows {
    rows: Vec<Row>,
    split: usize,
    total: usize,
}

fn sorted_rows(layout: &BlockLayout) -> SortedRows {
    let mut rows = Vec::with_capacity(layout.line_values.len() * layout.value_sizes.len());
    let mut raw = 0usize;
    for &values in &layout.line_values {
        for &value_size in &layout.value_sizes {
            let len = values.saturating_mul(value_size);
            rows.push(Row {
                raw,
                sorted: 0,
                len,
                value_size,
            });
            raw = raw.saturating_add(len);
        }
    }
    let mut at = 0usize;
    for row in rows.iter_mut().filter(|r| r.value_size == 2) {
        row.sorted = at;
        at = at.saturating_add(row.len);
    }
    let split = at;
    for row in rows.iter_mut().filter(|r| r.value_size != 2) {
        row.sorted = at;
        at = at.saturating_add(row.len);
    }
    SortedRows {
        rows,
        split,
        total: at,
    }
}

/// The shuffled segments of a sorted block: (range, value size). Two when the block has both
/// 2-byte and 4-byte values, else one.
fn segments(split: usize, total: usize) -> Vec<(std::ops::Range<usize>, usize)> {
    if split > 0 && split < total {
        vec![(0..split, 2), (split..total, 4)]
    } else {
        vec![(0..total, if split == 0 { 4 } else { 2 })]
    }
}

/// Pack `raw`, laid out as `layout` says, into a zstd-exr frame at zstd level `level`
/// ([`DEFAULT_LEVEL`] when `None`). The caller stores the block raw instead when this is not
/// smaller.
pub(super) fn pack(raw: &[u8], layout: &BlockLayout, level: Option<i32>) -> Option<Vec<u8>> {
    Some(compress(raw, layout, level.unwrap_or(DEFAULT_LEVEL)))
}

/// [`pack`] at a stated level.
fn compress(raw: &[u8], layout: &BlockLayout, level: i32) -> Vec<u8> {
    let sorted_rows = sorted_rows(layout);
    assert_eq!(
        sorted_rows.total,
        raw.len(),
        "the layout describes the block"
    );
    let mut sorted = vec![0u8; raw.len()];
    for row in &sorted_rows.rows {
        sorted[row.sorted..row.sorted + row.len].copy_from_slice(&raw[row.raw..row.raw + row.len]);
        if layout.flat {
            delta_encode(
                &mut sorted[row.sorted..row.sorted + row.len],
                row.value_size,
            );
        }
    }
    let mut inner = Vec::with_capacity(raw.len() + 16);
    for (range, value_size) in segments(sorted_rows.split, sorted_rows.total) {
        if range.is_empty() {
            continue;
        }
        inner.extend((range.len() as u64).to_le_bytes());
        shuffle(&sorted[range], value_size, &mut inner);
    }
    let mut out =
        Vec::with_capacity(FRAME_HEADER_BYTES + zstd::zstd_safe::compress_bound(inner.len()));
    let (format, flags) = if layout.flat {
        (FORMAT_SORTED_DELTA, FLAG_DELTA)
    } else {
        (FORMAT_SORTED, 0)
    };
    out.extend(MAGIC.to_le_bytes());
    out.extend(format.to_le_bytes());
    out.extend(flags.to_le_bytes());
    out.extend(0u64.to_le_bytes());
    let mut payload = Vec::with_capacity(zstd::zstd_safe::compress_bound(inner.len()));
    CONTEXTS.with(|contexts| {
        contexts
            .borrow_mut()
            .0
            .compress(&mut payload, &inner, level)
            .expect("the output holds the compress bound")
    });
    out[16..24].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend(payload);
    out
}

/// Unpack a zstd-exr frame into the `expected` bytes of a block laid out as `layout` says.
/// `what` names the block in errors.
pub(super) fn unpack(
    packed: &[u8],
    expected: usize,
    layout: &BlockLayout,
    what: &str,
) -> Result<Vec<u8>> {
    let corrupt =
        |detail: String| Error::format(format!("{what}: ZSTD data is corrupt ({detail})"));
    let u32_at = |at: usize| u32::from_le_bytes(packed[at..at + 4].try_into().unwrap());
    let u64_at = |at: usize| u64::from_le_bytes(packed[at..at + 8].try_into().unwrap());
    if packed.len() < FRAME_HEADER_BYTES || u64_at(0) != MAGIC {
        return Err(corrupt(format!(
            "{} packed bytes for {expected} bytes and no zstd-exr frame header",
            packed.len()
        )));
    }
    let (format, flags) = (u32_at(8), u32_at(12));
    let delta = match (format, flags) {
        (FORMAT_SORTED, 0) => false,
        (FORMAT_SORTED_DELTA, f) if f & !FLAG_DELTA == 0 => f & FLAG_DELTA != 0,
        _ => {
            return Err(corrupt(format!(
                "unknown frame format {format} with flags {flags}"
            )))
        }
    };
    if u64_at(16) != (packed.len() - FRAME_HEADER_BYTES) as u64 {
        return Err(corrupt(format!(
            "the frame says {} zstd bytes, the block holds {}",
            u64_at(16),
            packed.len() - FRAME_HEADER_BYTES
        )));
    }
    let sorted_rows = sorted_rows(layout);
    if sorted_rows.total != expected {
        return Err(corrupt(format!(
            "its sample counts need {} bytes, the chunk says {expected}",
            sorted_rows.total
        )));
    }
    SCRATCH.with(|scratch| {
        let (inner, sorted) = &mut *scratch.borrow_mut();
        let out = unpack_into(
            packed,
            expected,
            &sorted_rows,
            delta,
            inner,
            sorted,
            corrupt,
        );
        keep_scratch_small(inner);
        keep_scratch_small(sorted);
        out
    })
}

/// [`unpack`] after the frame header: the zstd stream inflated into `inner`, its segments
/// unshuffled into `sorted` (both this thread's scratch), the rows copied out in block order.
fn unpack_into(
    packed: &[u8],
    expected: usize,
    sorted_rows: &SortedRows,
    delta: bool,
    inner: &mut Vec<u8>,
    sorted: &mut Vec<u8>,
    corrupt: impl Fn(String) -> Error,
) -> Result<Vec<u8>> {
    // The inner stream is the block plus at most two u64 lengths: zstd refuses a frame that
    // would unpack to more than this slice of the scratch (zeroed only where it grows).
    inner.resize(expected.saturating_add(16), 0);
    let n = CONTEXTS
        .with(|contexts| {
            contexts
                .borrow_mut()
                .1
                .decompress(&mut inner[..], &packed[FRAME_HEADER_BYTES..])
        })
        .map_err(|code| corrupt(zstd::zstd_safe::get_error_name(code).to_string()))?;
    inner.truncate(n);
    // Every byte is written by a segment below (they cover the block); zeroed only as it grows.
    sorted.resize(expected, 0);
    let mut at = 0usize;
    for (range, value_size) in segments(sorted_rows.split, sorted_rows.total) {
        let len = inner
            .get(at..at + 8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap()));
        if len != Some(range.len() as u64) {
            return Err(corrupt(format!(
                "a segment of {} bytes is stated as {len:?}",
                range.len()
            )));
        }
        at += 8;
        let bytes = inner
            .get(at..at + range.len())
            .ok_or_else(|| corrupt("the zstd frame ends inside a segment".into()))?;
        unshuffle(bytes, value_size, &mut sorted[range.clone()]);
        at += range.len();
    }
    if at != inner.len() {
        return Err(corrupt(format!(
            "{} bytes follow the last segment",
            inner.len() - at
        )));
    }
    // The rows lie end to end in block order: appended, the output needs no zeroing.
    let mut out = Vec::with_capacity(expected);
    for row in &sorted_rows.rows {
        let sorted_row = &mut sorted[row.sorted..row.sorted + row.len];
        if delta {
            delta_decode(sorted_row, row.value_size);
        }
        out.extend_from_slice(sorted_row);
    }
    debug_assert_eq!(out.len(), expected);
    Ok(out)
}

/// Append `bytes` (values of `value_size` bytes) as byte planes.
fn shuffle(bytes: &[u8], value_size: usize, out: &mut Vec<u8>) {
    if value_size > 0 && bytes.len().is_multiple_of(value_size) {
        return deinterleave_planes(bytes, value_size, out);
    }
    // Segments hold whole values; anything else is split as the byte loop always did.
    for plane in 0..value_size {
        out.extend(bytes.iter().skip(plane).step_by(value_size));
    }
}

/// Inverse of [`shuffle`]: `planes` back into values in `out` (of the same length).
fn unshuffle(planes: &[u8], value_size: usize, out: &mut [u8]) {
    let values = planes.len() / value_size;
    if values > 0 && planes.len() == values * value_size && out.len() == planes.len() {
        let planes: Vec<&[u8]> = planes.chunks_exact(values).collect();
        // SAFETY: `u8` and `MaybeUninit<u8>` have one layout, and `interleave_planes` writes
        // only initialised bytes through the view.
        let out = unsafe { &mut *(out as *mut [u8] as *mut [MaybeUninit<u8>]) };
        interleave_planes(&planes, out);
        return;
    }
    // Segments hold whole values; anything else is copied as the byte loop always did.
    for (plane, bytes) in planes.chunks_exact(values.max(1)).enumerate() {
        for (value, &b) in out[plane..].iter_mut().step_by(value_size).zip(bytes) {
            *value = b;
        }
    }
}

/// Each value minus the one before it, from the last to the second.
fn delta_encode(row: &mut [u8], value_size: usize) {
    match value_size {
        2 => {
            for k in (1..row.len() / 2).rev() {
                let a = u16::from_le_bytes([row[2 * k], row[2 * k + 1]]);
                let b = u16::from_le_bytes([row[2 * k - 2], row[2 * k - 1]]);
                row[2 * k..2 * k + 2].copy_from_slice(&a.wrapping_sub(b).to_le_bytes());
            }
        }
        _ => {
            for k in (1..row.len() / 4).rev() {
                let a = u32::from_le_bytes(row[4 * k..4 * k + 4].try_into().unwrap());
                let b = u32::from_le_bytes(row[4 * k - 4..4 * k].try_into().unwrap());
                row[4 * k..4 * k + 4].copy_from_slice(&a.wrapping_sub(b).to_le_bytes());
            }
        }
    }
}

/// Inverse of [`delta_encode`]: a running sum from the second value on.
fn delta_decode(row: &mut [u8], value_size: usize) {
    match value_size {
        2 => {
            for k in 1..row.len() / 2 {
                let a = u16::from_le_bytes([row[2 * k], row[2 * k + 1]]);
                let b = u16::from_le_bytes([row[2 * k - 2], row[2 * k - 1]]);
                row[2 * k..2 * k + 2].copy_from_slice(&a.wrapping_add(b).to_le_bytes());
            }
        }
        _ => {
            for k in 1..row.len() / 4 {
                let a = u32::from_le_bytes(row[4 * k..4 * k + 4].try_into().unwrap());
                let b = u32::from_le_bytes(row[4 * k - 4..4 * k].try_into().unwrap());
                row[4 * k..4 * k + 4].copy_from_slice(&a.wrapping_add(b).to_le_bytes());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(value_sizes: &[usize], line_values: &[usize], flat: bool) -> BlockLayout {
        BlockLayout {
            value_sizes: value_sizes.to_vec(),
            line_values: line_values.to_vec(),
            flat,
        }
    }

    /// The example of OpenEXR's comment on the sorted layout: channels A (half) and Z (float),
    /// one line of three samples; the half row comes first, then the float row.
    #[test]
    fn sorting_puts_half_rows_before_float_rows() {
        let rows = sorted_rows(&layout(&[2, 4], &[3], false));
        assert_eq!(rows.split, 6);
        assert_eq!(rows.total, 18);
        // Two lines, channels float then half: the halves of both lines lead.
        let rows = sorted_rows(&layout(&[4, 2], &[1, 2], false));
        let places: Vec<(usize, usize)> = rows.rows.iter().map(|r| (r.raw, r.sorted)).collect();
        assert_eq!(places, [(0, 6), (4, 0), (6, 10), (14, 2)]);
    }

    #[test]
    fn shuffle_splits_byte_planes() {
        let mut out = Vec::new();
        shuffle(&[1, 2, 3, 4, 5, 6, 7, 8], 4, &mut out);
        assert_eq!(out, [1, 5, 2, 6, 3, 7, 4, 8]);
        let mut back = [0u8; 8];
        unshuffle(&out, 4, &mut back);
        assert_eq!(back, [1, 2, 3, 4, 5, 6, 7, 8]);
    }

    #[test]
    fn delta_wraps_and_inverts() {
        let mut row: Vec<u8> = [5u16, 3, 65535, 0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let original = row.clone();
        delta_encode(&mut row, 2);
        let deltas: Vec<u16> = row
            .chunks(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .collect();
        assert_eq!(deltas, [5, 65534, 65532, 1]);
        delta_decode(&mut row, 2);
        assert_eq!(row, original);
    }

    #[test]
    fn blocks_round_trip_deep_and_flat() {
        for (sizes, lines, flat) in [
            (&[2usize, 2, 4][..], &[7usize, 0, 3][..], false),
            (&[4][..], &[5, 5][..], false),
            (&[2, 2][..], &[9][..], true),
            (&[2, 4, 4][..], &[4, 4, 4][..], true),
        ] {
            let layout = layout(sizes, lines, flat);
            let total = sorted_rows(&layout).total;
            let raw: Vec<u8> = (0..total).map(|i| (i * 7 % 13) as u8).collect();
            let packed = compress(&raw, &layout, DEFAULT_LEVEL);
            assert_eq!(&packed[..8], b"zstd-exr");
            assert_eq!(unpack(&packed, total, &layout, "t").unwrap(), raw);
        }
    }

    #[test]
    fn damaged_frames_are_errors() {
        let layout = layout(&[2, 4], &[50], false);
        let raw = vec![3u8; 300];
        let packed = compress(&raw, &layout, DEFAULT_LEVEL);
        let mut wrong_size = packed.clone();
        wrong_size[16] ^= 1;
        assert!(unpack(&wrong_size, 300, &layout, "t").is_err());
        let mut wrong_format = packed.clone();
        wrong_format[8] = 9;
        let err = unpack(&wrong_format, 300, &layout, "t").unwrap_err();
        assert!(err.to_string().contains("unknown frame format 9"), "{err}");
        // Counts that disagree with the chunk's size are refused before unpacking.
        let err = unpack(&packed, 299, &layout, "t").unwrap_err();
        assert!(err.to_string().contains("need 300 bytes"), "{err}");
        let mut truncated = packed.clone();
        truncated.truncate(packed.len() - 2);
        let n = truncated.len() as u64 - 24;
        truncated[16..24].copy_from_slice(&n.to_le_bytes());
        assert!(unpack(&truncated, 300, &layout, "t").is_err());
    }
}

/// Why a zstd level was refused ([`with_level`]); each front end words it in its own names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LevelRefusal {
    /// The level is outside [`LEVELS`].
    OutOfRange(i32),
    /// A level was given without zstd compression.
    NotZstd,
}

/// `codec` with the zstd level `level` (`None`: the codec as it is), which only zstd takes:
/// the one check of a zstd level, whoever asks.
pub fn with_level(
    codec: Option<super::Codec>,
    level: Option<i32>,
) -> std::result::Result<Option<super::Codec>, LevelRefusal> {
    match (codec, level) {
        (codec, None) => Ok(codec),
        (Some(super::Codec::Zstd { .. }), Some(level)) if LEVELS.contains(&level) => {
            Ok(Some(super::Codec::Zstd { level }))
        }
        (Some(super::Codec::Zstd { .. }), Some(level)) => Err(LevelRefusal::OutOfRange(level)),
        (_, Some(_)) => Err(LevelRefusal::NotZstd),
    }
}
