//! What the codecs share about the bytes of a block: its layout in rows of values
//! ([`BlockLayout`], which ZSTD's preprocessing needs) and OpenEXR's byte preprocessing of RLE
//! and ZIP(S) (split into even and odd halves, then delta-coded: the "predictor").
//!
//! It sits apart from the codec files so that they need only this one and never each other:
//! the table in `super` is the only place that knows every codec.

use crate::error::{Error, Result};

/// The rows of values a block of a chunk holds: for each line of the block, for each channel in
/// file order, that line's values of the channel. ZSTD's preprocessing sorts and shuffles by
/// it; the other codecs treat every byte alike and ignore it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockLayout {
    /// Bytes of one value of each channel, in file order (2 or 4).
    pub value_sizes: Vec<usize>,
    /// Values of each channel on each line of the block.
    pub line_values: Vec<usize>,
    /// Flat pixels (ZSTD delta-codes them) rather than deep samples or a count table.
    pub flat: bool,
}

impl BlockLayout {
    /// A deep chunk's sample-count table: one 4-byte value per pixel of each line.
    pub fn count_table(width: usize, lines: usize) -> Self {
        BlockLayout {
            value_sizes: vec![4],
            line_values: vec![width; lines],
            flat: false,
        }
    }

    /// A deep chunk's sample data: every channel holds each line's samples.
    pub fn deep_samples(channels: &[crate::deep::Channel], line_samples: Vec<usize>) -> Self {
        BlockLayout {
            value_sizes: channels.iter().map(|c| c.sample_type.size()).collect(),
            line_values: line_samples,
            flat: false,
        }
    }

    /// A flat chunk: `lines` lines of `width` pixels of channels of `value_sizes` bytes.
    pub fn flat(value_sizes: Vec<usize>, width: usize, lines: usize) -> Self {
        BlockLayout {
            value_sizes,
            line_values: vec![width; lines],
            flat: true,
        }
    }
}

/// Even-indexed bytes first, then odd-indexed ones.
#[cfg(test)]
fn interleave(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    out.extend(raw.chunks(2).map(|pair| pair[0]));
    out.extend(raw.chunks_exact(2).map(|pair| pair[1]));
    out
}

/// [`interleave`] then [`apply_predictor`], in one pass over the bytes.
pub(super) fn interleave_and_predict(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    // The byte before the first counts as 128, so the first byte is stored as it is.
    let mut previous = 128u8;
    let mut predict = |b: u8| {
        let delta = b.wrapping_sub(previous).wrapping_add(128);
        previous = b;
        delta
    };
    out.extend(raw.chunks(2).map(|pair| predict(pair[0])));
    out.extend(raw.chunks_exact(2).map(|pair| predict(pair[1])));
    out
}

/// Inverse of [`interleave_and_predict`]: [`undo_predictor`] then [`deinterleave`] in one pass
/// straight into the output (the two passes and their copy were a sixth of a merge's time).
fn unpredict_and_deinterleave(split: &[u8]) -> Vec<u8> {
    let half = split.len().div_ceil(2);
    let (even, odd) = split.split_at(half);
    let mut out = vec![0u8; split.len()];
    let mut value = 128u8;
    for (pair, &delta) in out.chunks_mut(2).zip(even) {
        value = value.wrapping_add(delta).wrapping_sub(128);
        pair[0] = value;
    }
    for (pair, &delta) in out.chunks_exact_mut(2).zip(odd) {
        value = value.wrapping_add(delta).wrapping_sub(128);
        pair[1] = value;
    }
    out
}

/// The block from the `bytes` a predictor codec's stage (RLE, zlib) unpacked: refused unless
/// they are the `expected` size, else [`unpredict_and_deinterleave`]d. `what` names the block
/// in errors.
pub(super) fn unpredicted(bytes: &[u8], expected: usize, what: &str) -> Result<Vec<u8>> {
    if bytes.len() != expected {
        return Err(Error::format(format!(
            "{what}: unpacks to {} bytes, expected {expected}",
            bytes.len()
        )));
    }
    Ok(unpredict_and_deinterleave(bytes))
}

/// Inverse of [`interleave`].
#[cfg(test)]
fn deinterleave(split: &[u8]) -> Vec<u8> {
    let half = split.len().div_ceil(2);
    let (even, odd) = split.split_at(half);
    let mut out = Vec::with_capacity(split.len());
    for i in 0..half {
        out.push(even[i]);
        if i < odd.len() {
            out.push(odd[i]);
        }
    }
    out
}

#[cfg(test)]
fn apply_predictor(bytes: &mut [u8]) {
    for i in (1..bytes.len()).rev() {
        bytes[i] = bytes[i].wrapping_sub(bytes[i - 1]).wrapping_add(128);
    }
}

#[cfg(test)]
fn undo_predictor(bytes: &mut [u8]) {
    for i in 1..bytes.len() {
        bytes[i] = bytes[i - 1].wrapping_add(bytes[i]).wrapping_sub(128);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fused_passes_equal_the_two_step_reference() {
        for len in [0usize, 1, 2, 3, 10, 1001] {
            let raw: Vec<u8> = (0..len).map(|i| (i * 37 % 251) as u8).collect();
            let mut reference = interleave(&raw);
            apply_predictor(&mut reference);
            assert_eq!(interleave_and_predict(&raw), reference, "len {len}");
            let mut back = reference.clone();
            undo_predictor(&mut back);
            assert_eq!(deinterleave(&back), raw);
            assert_eq!(unpredict_and_deinterleave(&reference), raw, "len {len}");
        }
    }
}
