//! RLE (compression id 1): OpenEXR's run-length encoding after its byte preprocessing
//! ([`super::layout`]), one scanline per chunk.

use super::layout::{interleave_and_predict, unpredicted, unpredicted_into, BlockLayout, Segment};
use crate::error::{Error, Result};

/// Most bytes one packed byte of RLE unpacks to: a run is two bytes (count, value) and
/// repeats its value at most 128 times.
pub(super) const MAX_RATIO: usize = 64;

/// `raw` preprocessed and run-length encoded (RLE has no level).
pub(super) fn pack(raw: &[u8], _layout: &BlockLayout, _level: Option<i32>) -> Option<Vec<u8>> {
    Some(rle_encode(&interleave_and_predict(raw)))
}

/// The `expected` bytes of the block `packed` holds. `what` names the block in errors.
pub(super) fn unpack(
    packed: &[u8],
    expected: usize,
    _layout: &BlockLayout,
    what: &str,
) -> Result<Vec<u8>> {
    unpredicted(&mut rle_decode(packed, expected, what)?, expected, what)
}

/// [`unpack`] straight into `segments` of the block ([`super::decompress_into`]).
pub(super) fn unpack_into(
    packed: &[u8],
    expected: usize,
    what: &str,
    segments: &mut [Segment],
) -> Result<()> {
    unpredicted_into(
        &mut rle_decode(packed, expected, what)?,
        expected,
        what,
        segments,
    )
}

/// OpenEXR's RLE: a signed count byte; negative means that many literal bytes follow,
/// otherwise the next byte repeats count + 1 times. Never produces more than `limit` bytes, and
/// reserves no more than `packed` can produce.
fn rle_decode(packed: &[u8], limit: usize, what: &str) -> Result<Vec<u8>> {
    let corrupt = || Error::format(format!("{what}: RLE data is corrupt"));
    let mut out = Vec::with_capacity(limit.min(packed.len().saturating_mul(MAX_RATIO)));
    let mut i = 0;
    while i < packed.len() {
        let n = packed[i] as i8;
        i += 1;
        if n < 0 {
            let len = (-(n as i32)) as usize;
            let run = packed.get(i..i + len).ok_or_else(corrupt)?;
            if out.len() + len > limit {
                return Err(corrupt());
            }
            out.extend_from_slice(run);
            i += len;
        } else {
            let len = n as usize + 1;
            let value = *packed.get(i).ok_or_else(corrupt)?;
            if out.len() + len > limit {
                return Err(corrupt());
            }
            out.extend(std::iter::repeat_n(value, len));
            i += 1;
        }
    }
    Ok(out)
}

/// OpenEXR's RLE encoder: runs of three or more equal bytes become (count - 1, byte), the rest
/// literal stretches of at most 127 bytes.
fn rle_encode(bytes: &[u8]) -> Vec<u8> {
    const MIN_RUN: usize = 3;
    const MAX_RUN: usize = 127;
    let mut out = Vec::with_capacity(bytes.len() / 2);
    let mut start = 0;
    while start < bytes.len() {
        let mut end = start + 1;
        while end < bytes.len() && bytes[end] == bytes[start] && end - start < MAX_RUN + 1 {
            end += 1;
        }
        if end - start >= MIN_RUN {
            out.push((end - start - 1) as u8);
            out.push(bytes[start]);
            start = end;
        } else {
            // A literal stretch runs until the next run of MIN_RUN equal bytes begins.
            let mut lit_end = start;
            while lit_end < bytes.len()
                && lit_end - start < MAX_RUN
                && !(lit_end + 2 < bytes.len()
                    && bytes[lit_end] == bytes[lit_end + 1]
                    && bytes[lit_end] == bytes[lit_end + 2])
            {
                lit_end += 1;
            }
            out.push((-((lit_end - start) as i32)) as i8 as u8);
            out.extend_from_slice(&bytes[start..lit_end]);
            start = lit_end;
        }
    }
    out
}
