//! What the codecs share about the bytes of a block: its layout in rows of values
//! ([`BlockLayout`], which ZSTD's preprocessing needs) and OpenEXR's byte preprocessing of RLE
//! and ZIP(S) (split into even and odd halves, then delta-coded: the "predictor").
//!
//! It sits apart from the codec files so that they need only this one and never each other:
//! the table in `super` is the only place that knows every codec.

use std::mem::MaybeUninit;

use crate::error::{Error, Result};

/// The largest scratch buffer a codec's thread keeps between blocks (a rare larger block's is
/// let go): a ZIP block of 16 lines of a 1080p deep render is a few MiB, and scratch is memory
/// the budget does not count.
const MAX_SCRATCH_BYTES: usize = 16 << 20;

/// Let `scratch` go if a rare large block left it over [`MAX_SCRATCH_BYTES`], rather than the
/// thread holding it for good.
pub(super) fn keep_scratch_small(scratch: &mut Vec<u8>) {
    if scratch.capacity() > MAX_SCRATCH_BYTES {
        *scratch = Vec::new();
    }
}

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

/// [`interleave`] then [`apply_predictor`], in one pass over the bytes. Each stored byte is a
/// difference of two raw bytes two apart (the one before it in its half), so the pass has no
/// running state and compiles to vector code; the stateful form was 7% of a deep merge.
pub(super) fn interleave_and_predict(raw: &[u8]) -> Vec<u8> {
    let n = raw.len();
    let half = n.div_ceil(2);
    let mut out = vec![0u8; n];
    if n == 0 {
        return out;
    }
    let delta = |b: u8, before: u8| b.wrapping_sub(before).wrapping_add(128);
    let pairs = n / 2;
    let (even, odd) = out.split_at_mut(half);
    // The byte before the first counts as 128, so the first byte is stored as it is.
    even[0] = raw[0];
    if pairs > 0 {
        // The odd half follows the even half: its first byte's predecessor is the last even byte.
        odd[0] = delta(raw[1], raw[2 * (half - 1)]);
        let (raw, even, odd) = (&raw[..2 * pairs], &mut even[..pairs], &mut odd[..pairs]);
        let (from, to) = predict_pairs_simd(raw, even, odd);
        for k in (1..from).chain(to.max(1)..pairs) {
            even[k] = delta(raw[2 * k], raw[2 * k - 2]);
            odd[k] = delta(raw[2 * k + 1], raw[2 * k - 1]);
        }
    }
    if n % 2 == 1 && n > 1 {
        out[half - 1] = delta(raw[n - 1], raw[n - 3]);
    }
    out
}

/// The pairs `from..to` of [`interleave_and_predict`] by SSE2 (every x86-64 has it), 16 pairs a
/// step: 32 raw bytes and the 32 two bytes before them, split into even and odd bytes by
/// masks and packs, then subtracted. Returns the range it did; the caller does the rest.
#[cfg(target_arch = "x86_64")]
fn predict_pairs_simd(raw: &[u8], even: &mut [u8], odd: &mut [u8]) -> (usize, usize) {
    use std::arch::x86_64::*;
    let pairs = even.len().min(odd.len()).min(raw.len() / 2);
    // Steps of 16 pairs from pair 16 on (each reads from two bytes before its first pair).
    let steps = (pairs / 16).saturating_sub(1);
    // SAFETY: SSE2 is part of x86-64. Step j reads raw[32j - 2 .. 32j + 32] (j >= 1, and
    // 32j + 32 <= 2 * pairs) and writes even/odd[16j .. 16j + 16], inside the slices.
    unsafe {
        let low = _mm_set1_epi16(0x00ff);
        let bias = _mm_set1_epi8(-128i8);
        let split = |a: __m128i, b: __m128i| {
            (
                _mm_packus_epi16(_mm_and_si128(a, low), _mm_and_si128(b, low)),
                _mm_packus_epi16(_mm_srli_epi16::<8>(a), _mm_srli_epi16::<8>(b)),
            )
        };
        for j in 1..=steps {
            let at = raw.as_ptr().add(32 * j);
            let (e, o) = split(
                _mm_loadu_si128(at as *const __m128i),
                _mm_loadu_si128(at.add(16) as *const __m128i),
            );
            let (e_before, o_before) = split(
                _mm_loadu_si128(at.sub(2) as *const __m128i),
                _mm_loadu_si128(at.add(14) as *const __m128i),
            );
            let e = _mm_xor_si128(_mm_sub_epi8(e, e_before), bias);
            let o = _mm_xor_si128(_mm_sub_epi8(o, o_before), bias);
            _mm_storeu_si128(even.as_mut_ptr().add(16 * j) as *mut __m128i, e);
            _mm_storeu_si128(odd.as_mut_ptr().add(16 * j) as *mut __m128i, o);
        }
    }
    if steps == 0 {
        (pairs, pairs)
    } else {
        (16, 16 * (steps + 1))
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn predict_pairs_simd(raw: &[u8], even: &mut [u8], _odd: &mut [u8]) -> (usize, usize) {
    let pairs = even.len().min(raw.len() / 2);
    (pairs, pairs)
}

/// Inverse of [`interleave_and_predict`]: [`undo_predictor`] in place over `split` (a running
/// sum of bytes, 16 at a time where SSE2 is there), then [`deinterleave`] into the output. The
/// byte-serial loop these replace was a sixth of a flat merge's CPU time, most of the decode
/// outside inflating.
fn unpredict_and_deinterleave(split: &mut [u8]) -> Vec<u8> {
    undo_predictor_in_place(split);
    let n = split.len();
    let half = n.div_ceil(2);
    let (even, odd) = split.split_at(half);
    // Whole pairs: `odd` is `even` or one shorter.
    let pairs = odd.len();
    // Written byte by byte below, so not zeroed first (a memset of every decoded byte).
    let mut out = Vec::with_capacity(n);
    let spare = &mut out.spare_capacity_mut()[..n];
    interleave_planes(&[&even[..pairs], odd], &mut spare[..2 * pairs]);
    if half > pairs {
        spare[2 * pairs].write(even[pairs]);
    }
    // SAFETY: bytes 0..2 * pairs were written by `interleave_planes`, and the last one of an
    // odd length after them: all `n`.
    unsafe { out.set_len(n) };
    out
}

/// Values of `planes.len()` bytes each rebuilt from their byte planes (plane p holds byte p of
/// every value): `out[v * planes.len() + p] = planes[p][v]`. Every byte of `out`, which is
/// `planes.len()` times a plane's length, is written. Two and four planes (the predictor's
/// halves; ZSTD's half and 32-bit values) go 16 values a step by SSE2 unpacks where there is
/// SSE2; the byte loop they replace was most of what decoding did outside inflating.
pub(super) fn interleave_planes(planes: &[&[u8]], out: &mut [MaybeUninit<u8>]) {
    let n = planes.len();
    let values = planes.first().map_or(0, |p| p.len());
    assert!(
        planes.iter().all(|p| p.len() == values) && out.len() == n * values,
        "byte planes of one length, and room for their values"
    );
    let done = match planes {
        [a, b] => interleave2_simd(a, b, out),
        [a, b, c, d] => interleave4_simd([a, b, c, d], out),
        _ => 0,
    };
    for v in done..values {
        for (p, plane) in planes.iter().enumerate() {
            out[v * n + p].write(plane[v]);
        }
    }
}

/// Inverse of [`interleave_planes`]: the byte planes of `bytes` (values of `n` bytes each)
/// appended to `out`, plane 0 first. Two and four bytes a value go 16 values a step by SSE2
/// masks and packs where there is SSE2 (ZSTD's shuffle before compressing).
pub(super) fn deinterleave_planes(bytes: &[u8], n: usize, out: &mut Vec<u8>) {
    let values = bytes.len() / n.max(1);
    assert_eq!(values * n, bytes.len(), "whole values");
    let start = out.len();
    out.resize(start + bytes.len(), 0);
    let mut planes: Vec<&mut [u8]> = out[start..].chunks_mut(values.max(1)).collect();
    let done = match &mut planes[..] {
        [a, b] => deinterleave2_simd(bytes, [a, b]),
        [a, b, c, d] => deinterleave4_simd(bytes, [a, b, c, d]),
        _ => 0,
    };
    for v in done..values {
        for (p, plane) in planes.iter_mut().enumerate() {
            plane[v] = bytes[v * n + p];
        }
    }
}

/// The first values of [`deinterleave_planes`] for two bytes a value, 16 a step: even bytes by
/// a mask, odd ones by a shift, each pair of vectors packed into one. Returns how many.
#[cfg(target_arch = "x86_64")]
fn deinterleave2_simd(bytes: &[u8], planes: [&mut &mut [u8]; 2]) -> usize {
    use std::arch::x86_64::*;
    let [a, b] = planes;
    let steps = (bytes.len() / 2).min(a.len()).min(b.len()) / 16;
    // SAFETY: SSE2 is part of x86-64; step j reads bytes[32j .. 32j + 32] and writes
    // a/b[16j .. 16j + 16], inside the slices (unaligned forms). Masked or shifted words are
    // 0..=255, so the packs do not saturate.
    unsafe {
        let low = _mm_set1_epi16(0x00ff);
        for j in 0..steps {
            let at = bytes.as_ptr().add(32 * j) as *const __m128i;
            let (x, y) = (_mm_loadu_si128(at), _mm_loadu_si128(at.add(1)));
            let even = _mm_packus_epi16(_mm_and_si128(x, low), _mm_and_si128(y, low));
            let odd = _mm_packus_epi16(_mm_srli_epi16::<8>(x), _mm_srli_epi16::<8>(y));
            _mm_storeu_si128(a.as_mut_ptr().add(16 * j) as *mut __m128i, even);
            _mm_storeu_si128(b.as_mut_ptr().add(16 * j) as *mut __m128i, odd);
        }
    }
    steps * 16
}

/// The first values of [`deinterleave_planes`] for four bytes a value, 16 a step: split into
/// even and odd bytes twice. Returns how many.
#[cfg(target_arch = "x86_64")]
fn deinterleave4_simd(bytes: &[u8], mut planes: [&mut &mut [u8]; 4]) -> usize {
    use std::arch::x86_64::*;
    let shortest = planes.iter().map(|p| p.len()).min().unwrap_or(0);
    let steps = (bytes.len() / 4).min(shortest) / 16;
    // SAFETY: SSE2 is part of x86-64; step j reads bytes[64j .. 64j + 64] and writes each
    // plane's [16j .. 16j + 16], inside the slices (unaligned forms); no pack saturates.
    unsafe {
        let low = _mm_set1_epi16(0x00ff);
        let split = |x: __m128i, y: __m128i| {
            (
                _mm_packus_epi16(_mm_and_si128(x, low), _mm_and_si128(y, low)),
                _mm_packus_epi16(_mm_srli_epi16::<8>(x), _mm_srli_epi16::<8>(y)),
            )
        };
        for j in 0..steps {
            let at = bytes.as_ptr().add(64 * j) as *const __m128i;
            let (v0, v1) = (_mm_loadu_si128(at), _mm_loadu_si128(at.add(1)));
            let (v2, v3) = (_mm_loadu_si128(at.add(2)), _mm_loadu_si128(at.add(3)));
            // Bytes 0 and 2 of each value, then 1 and 3.
            let (even01, odd01) = split(v0, v1);
            let (even23, odd23) = split(v2, v3);
            let (p0, p2) = split(even01, even23);
            let (p1, p3) = split(odd01, odd23);
            for (plane, v) in planes.iter_mut().zip([p0, p1, p2, p3]) {
                _mm_storeu_si128(plane.as_mut_ptr().add(16 * j) as *mut __m128i, v);
            }
        }
    }
    steps * 16
}

#[cfg(not(target_arch = "x86_64"))]
fn deinterleave2_simd(_bytes: &[u8], _planes: [&mut &mut [u8]; 2]) -> usize {
    0
}

#[cfg(not(target_arch = "x86_64"))]
fn deinterleave4_simd(_bytes: &[u8], _planes: [&mut &mut [u8]; 4]) -> usize {
    0
}

/// The first values of [`interleave_planes`] for two planes, 16 a step. Returns how many.
#[cfg(target_arch = "x86_64")]
fn interleave2_simd(a: &[u8], b: &[u8], out: &mut [MaybeUninit<u8>]) -> usize {
    use std::arch::x86_64::*;
    let steps = a.len().min(b.len()).min(out.len() / 2) / 16;
    // SAFETY: SSE2 is part of x86-64; step j reads a/b[16j .. 16j + 16] and writes
    // out[32j .. 32j + 32], inside the slices (unaligned forms).
    unsafe {
        for j in 0..steps {
            let x = _mm_loadu_si128(a.as_ptr().add(16 * j) as *const __m128i);
            let y = _mm_loadu_si128(b.as_ptr().add(16 * j) as *const __m128i);
            let at = out.as_mut_ptr().add(32 * j) as *mut __m128i;
            _mm_storeu_si128(at, _mm_unpacklo_epi8(x, y));
            _mm_storeu_si128(at.add(1), _mm_unpackhi_epi8(x, y));
        }
    }
    steps * 16
}

/// The first values of [`interleave_planes`] for four planes, 16 a step: bytes paired by
/// 8-bit unpacks, the pairs by 16-bit ones. Returns how many.
#[cfg(target_arch = "x86_64")]
fn interleave4_simd(planes: [&[u8]; 4], out: &mut [MaybeUninit<u8>]) -> usize {
    use std::arch::x86_64::*;
    let shortest = planes.iter().map(|p| p.len()).min().unwrap_or(0);
    let steps = shortest.min(out.len() / 4) / 16;
    // SAFETY: SSE2 is part of x86-64; step j reads each plane's [16j .. 16j + 16] and writes
    // out[64j .. 64j + 64], inside the slices (unaligned forms).
    unsafe {
        for j in 0..steps {
            let load = |p: &[u8]| _mm_loadu_si128(p.as_ptr().add(16 * j) as *const __m128i);
            let [p0, p1, p2, p3] = planes.map(load);
            let (lo01, hi01) = (_mm_unpacklo_epi8(p0, p1), _mm_unpackhi_epi8(p0, p1));
            let (lo23, hi23) = (_mm_unpacklo_epi8(p2, p3), _mm_unpackhi_epi8(p2, p3));
            let at = out.as_mut_ptr().add(64 * j) as *mut __m128i;
            _mm_storeu_si128(at, _mm_unpacklo_epi16(lo01, lo23));
            _mm_storeu_si128(at.add(1), _mm_unpackhi_epi16(lo01, lo23));
            _mm_storeu_si128(at.add(2), _mm_unpacklo_epi16(hi01, hi23));
            _mm_storeu_si128(at.add(3), _mm_unpackhi_epi16(hi01, hi23));
        }
    }
    steps * 16
}

#[cfg(not(target_arch = "x86_64"))]
fn interleave2_simd(_a: &[u8], _b: &[u8], _out: &mut [MaybeUninit<u8>]) -> usize {
    0
}

#[cfg(not(target_arch = "x86_64"))]
fn interleave4_simd(_planes: [&[u8]; 4], _out: &mut [MaybeUninit<u8>]) -> usize {
    0
}

/// [`undo_predictor`] in place: `bytes[i]` becomes the running sum of `bytes[..=i]` less 128
/// each (wrapping), after a start of 128.
fn undo_predictor_in_place(bytes: &mut [u8]) {
    let done = undo_predictor_simd(bytes);
    let mut value = if done == 0 { 128u8 } else { bytes[done - 1] };
    for b in &mut bytes[done..] {
        value = value.wrapping_add(*b).wrapping_sub(128);
        *b = value;
    }
}

/// The running sum of [`undo_predictor_in_place`] over whole 16-byte blocks of `bytes`, by SSE2
/// (every x86-64 has it): each block's prefix sum in four shifted adds, plus the last byte of
/// the block before, broadcast. Returns how many bytes it did.
#[cfg(target_arch = "x86_64")]
fn undo_predictor_simd(bytes: &mut [u8]) -> usize {
    use std::arch::x86_64::*;
    let blocks = bytes.len() / 16;
    // SAFETY: SSE2 is part of x86-64; every load and store is of a whole 16-byte block inside
    // `bytes` (unaligned forms).
    unsafe {
        let bias = _mm_set1_epi8(-128i8);
        let mut carry = _mm_set1_epi8(-128i8);
        for block in 0..blocks {
            let at = bytes.as_mut_ptr().add(block * 16) as *mut __m128i;
            // delta - 128 is delta ^ 0x80 in wrapping bytes.
            let mut v = _mm_xor_si128(_mm_loadu_si128(at), bias);
            v = _mm_add_epi8(v, _mm_slli_si128::<1>(v));
            v = _mm_add_epi8(v, _mm_slli_si128::<2>(v));
            v = _mm_add_epi8(v, _mm_slli_si128::<4>(v));
            v = _mm_add_epi8(v, _mm_slli_si128::<8>(v));
            v = _mm_add_epi8(v, carry);
            _mm_storeu_si128(at, v);
            // The block's last byte in every lane: the next block's start.
            let last = _mm_srli_si128::<15>(v);
            let last = _mm_unpacklo_epi8(last, last);
            let last = _mm_unpacklo_epi16(last, last);
            carry = _mm_shuffle_epi32::<0>(last);
        }
    }
    blocks * 16
}

#[cfg(not(target_arch = "x86_64"))]
fn undo_predictor_simd(_bytes: &mut [u8]) -> usize {
    0
}

/// The block from the `bytes` a predictor codec's stage (RLE, zlib) unpacked: refused unless
/// they are the `expected` size, else [`unpredict_and_deinterleave`]d. The predictor is undone
/// in `bytes` itself, which are scratch afterwards. `what` names the block in errors.
pub(super) fn unpredicted(bytes: &mut [u8], expected: usize, what: &str) -> Result<Vec<u8>> {
    if bytes.len() != expected {
        return Err(Error::format(format!(
            "{what}: unpacks to {} bytes, expected {expected}",
            bytes.len()
        )));
    }
    Ok(unpredict_and_deinterleave(bytes))
}

/// Part of a block's bytes that goes straight to where its reader wants it (a channel's run of
/// one line in a band's plane): the block's bytes from `at` on, as many as `out` holds.
pub struct Segment<'a> {
    /// Where in the block the part starts.
    pub at: usize,
    /// Where it goes, written whole.
    pub out: &'a mut [MaybeUninit<u8>],
}

/// Copy each segment's bytes out of `block` (the whole unpacked block).
pub(super) fn copy_segments(block: &[u8], segments: &mut [Segment]) {
    for segment in segments {
        let len = segment.out.len();
        segment
            .out
            .copy_from_slice(as_uninit(&block[segment.at..segment.at + len]));
    }
}

/// Bytes as bytes that may be uninitialised (a widening every byte slice allows).
pub(crate) fn as_uninit(bytes: &[u8]) -> &[MaybeUninit<u8>] {
    // SAFETY: MaybeUninit<u8> has u8's layout, and initialised bytes are valid MaybeUninit.
    unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast(), bytes.len()) }
}

/// [`unpredicted`] straight into `segments` (inside the block, which [`super::decompress_into`]
/// checked): the predictor undone in `bytes` and each segment's bytes rebuilt from the two
/// halves where they lie, so the block is never assembled whole and copied again.
pub(super) fn unpredicted_into(
    bytes: &mut [u8],
    expected: usize,
    what: &str,
    segments: &mut [Segment],
) -> Result<()> {
    if bytes.len() != expected {
        return Err(Error::format(format!(
            "{what}: unpacks to {} bytes, expected {expected}",
            bytes.len()
        )));
    }
    undo_predictor_in_place(bytes);
    let (even, odd) = bytes.split_at(bytes.len().div_ceil(2));
    for segment in segments {
        let (at, len) = (segment.at, segment.out.len());
        if at % 2 == 0 && len % 2 == 0 {
            // Byte `at + 2k` is even[at / 2 + k], byte `at + 2k + 1` is odd[at / 2 + k].
            let pairs = at / 2..(at + len) / 2;
            interleave_planes(&[&even[pairs.clone()], &odd[pairs]], segment.out);
        } else {
            for (k, out) in segment.out.iter_mut().enumerate() {
                let i = at + k;
                out.write(if i % 2 == 0 { even[i / 2] } else { odd[i / 2] });
            }
        }
    }
    Ok(())
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

    /// Two and four planes (the SSE2 forms) and three (the byte loop), at lengths about the
    /// 16-value steps, rebuild the values the planes were cut from.
    #[test]
    fn byte_planes_interleave_back_into_their_values() {
        for n in [1usize, 2, 3, 4] {
            for values in [0usize, 1, 15, 16, 17, 31, 32, 33, 100] {
                let raw: Vec<u8> = (0..n * values).map(|i| (i * 29 % 253) as u8).collect();
                let planes: Vec<Vec<u8>> = (0..n)
                    .map(|p| raw.iter().skip(p).step_by(n).copied().collect())
                    .collect();
                let planes: Vec<&[u8]> = planes.iter().map(Vec::as_slice).collect();
                let mut out = vec![MaybeUninit::new(0xaau8); raw.len()];
                interleave_planes(&planes, &mut out);
                // SAFETY: every element was initialised (0xaa) before the call.
                let out: Vec<u8> = out.iter().map(|b| unsafe { b.assume_init() }).collect();
                assert_eq!(out, raw, "{n} planes of {values}");
                // And back: the planes appended after what `split` already held.
                let mut split = vec![7u8; 3];
                deinterleave_planes(&raw, n, &mut split);
                assert_eq!(split[..3], [7, 7, 7]);
                assert_eq!(split[3..], planes.concat(), "{n} planes of {values}");
            }
        }
    }

    #[test]
    fn the_fused_passes_equal_the_two_step_reference() {
        // Lengths about the 16-byte blocks of the SSE2 passes (32 raw bytes a step when packing),
        // and bytes of every value.
        let lens = [
            0usize, 1, 2, 3, 10, 15, 16, 17, 31, 32, 33, 47, 48, 49, 1001, 4096, 4099,
        ];
        for len in lens {
            for seed in 0..3usize {
                let raw: Vec<u8> = (0..len)
                    .map(|i| ((i * 37 + seed * 101) % 251 + seed * (i % 5)) as u8)
                    .collect();
                let mut reference = interleave(&raw);
                apply_predictor(&mut reference);
                assert_eq!(interleave_and_predict(&raw), reference, "len {len}");
                let mut back = reference.clone();
                undo_predictor(&mut back);
                assert_eq!(deinterleave(&back), raw);
                let mut packed = reference.clone();
                assert_eq!(unpredict_and_deinterleave(&mut packed), raw, "len {len}");
            }
        }
    }
}
