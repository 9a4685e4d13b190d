//! The codecs of EXR chunks: NONE, RLE, ZIPS, ZIP and ZSTD, and the names of every compression
//! id a file can state.
//!
//! RLE and ZIP(S) share OpenEXR's preprocessing: the bytes are split into even and odd halves and
//! delta-coded ("predictor") before the run-length or zlib stage. ZSTD has a preprocessing of its
//! own that needs to know the rows of values a block holds ([`BlockLayout`], see `super::zstd`). Deflate itself is `zune-inflate` to
//! read and `libdeflater` (libdeflate) to write, chosen by measurement ([`DEFLATE_LEVEL`]).
//! OpenEXR stores a block raw whenever compressing would not make it smaller, so a packed size
//! equal to the unpacked size means "stored raw" for every codec.
//!
//! The unpacked size always comes from the file, so it is checked against what the packed bytes
//! can possibly produce ([`check_plausible`]) before any buffer is reserved, and buffers are
//! reserved no larger than that bound: a few bytes claiming gigabytes are refused, not allocated.

use crate::error::{Error, Result};

/// A compression method deepmerge reads and writes (deep and flat).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    /// Stored raw.
    None,
    /// Run-length encoding, one scanline per chunk.
    Rle,
    /// zlib, one scanline per chunk.
    Zips,
    /// zlib, sixteen scanlines per chunk. OpenEXR refuses it for deep parts (it is read, and
    /// written only for tests of multi-line chunks).
    Zip,
    /// zstd with OpenEXR 3.5's preprocessing, one scanline per chunk, packed at `level` (1 to
    /// 22; the level is not stored in the file, so a file read says [`ZSTD_DEFAULT_LEVEL`]).
    Zstd {
        /// zstd level.
        level: i32,
    },
}

impl std::str::FromStr for Codec {
    type Err = Error;

    /// `none`, `rle`, `zips`, `zip` or `zstd` (at [`ZSTD_DEFAULT_LEVEL`]): the codecs written.
    fn from_str(s: &str) -> Result<Self> {
        crate::error::parse_name(
            "the compression",
            s,
            [
                ("none", Codec::None),
                ("rle", Codec::Rle),
                ("zips", Codec::Zips),
                ("zip", Codec::Zip),
                (
                    "zstd",
                    Codec::Zstd {
                        level: ZSTD_DEFAULT_LEVEL,
                    },
                ),
            ],
        )
    }
}

/// OpenEXR's default zstd level.
pub const ZSTD_DEFAULT_LEVEL: i32 = super::zstd::DEFAULT_LEVEL;

/// The zstd levels OpenEXR accepts.
pub const ZSTD_LEVELS: std::ops::RangeInclusive<i32> = super::zstd::LEVELS;

/// The compression id of OpenEXR's `compression` attribute for ZSTD.
const ZSTD_ID: u8 = 13;

/// OpenEXR's names of the compression ids, in id order (OpenEXRCore `exr_compression_name`).
const COMPRESSION_NAMES: [&str; 14] = [
    "none", "rle", "zips", "zip", "piz", "pxr24", "b44", "b44a", "dwaa", "dwab", "htj2k256",
    "htj2k32", "lj2k", "zstd",
];

/// The name of compression id `id` in upper case ("HTJ2K256"), or "unknown (id N)".
pub fn compression_name(id: u8) -> String {
    match COMPRESSION_NAMES.get(id as usize) {
        Some(name) => name.to_uppercase(),
        None => format!("unknown (id {id})"),
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

impl Codec {
    /// Scanlines per chunk in a scanline file.
    pub fn lines_per_chunk(self) -> usize {
        match self {
            Codec::Zip => 16,
            _ => 1,
        }
    }

    /// Name as the CLI and `info` spell it.
    pub fn name(self) -> &'static str {
        match self {
            Codec::None => "none",
            Codec::Rle => "rle",
            Codec::Zips => "zips",
            Codec::Zip => "zip",
            Codec::Zstd { .. } => "zstd",
        }
    }

    /// The id the `compression` attribute stores.
    pub fn id(self) -> u8 {
        match self {
            Codec::None => 0,
            Codec::Rle => 1,
            Codec::Zips => 2,
            Codec::Zip => 3,
            Codec::Zstd { .. } => ZSTD_ID,
        }
    }

    /// The codec of a deep part whose `compression` attribute is `id`; other methods cannot
    /// hold deep data (OpenEXR allows NONE, RLE, ZIPS and ZSTD; ZIP is read as well).
    pub fn for_deep_part(id: u8) -> Result<Self> {
        Ok(match id {
            0 => Codec::None,
            1 => Codec::Rle,
            2 => Codec::Zips,
            3 => Codec::Zip,
            ZSTD_ID => Codec::Zstd {
                level: ZSTD_DEFAULT_LEVEL,
            },
            other if (other as usize) < COMPRESSION_NAMES.len() => {
                return Err(Error::unsupported(format!(
                    "{} compression is not supported for deep parts \
                     (deep data is stored in NONE, RLE, ZIPS or ZSTD)",
                    compression_name(other)
                )))
            }
            other => {
                return Err(Error::unsupported(format!(
                    "unknown compression id {other} (OpenEXR 3.5 defines ids 0 to {})",
                    COMPRESSION_NAMES.len() - 1
                )))
            }
        })
    }

    /// Copies of a block's unpacked size held at once while unpacking it: the codec's output
    /// and the de-interleaved result (ZSTD: the zstd output, the sorted copy and the result).
    pub fn unpack_copies(self) -> u64 {
        match self {
            Codec::Zstd { .. } => 3,
            _ => 2,
        }
    }

    /// Whether OpenEXR reads deep parts in this codec (all but ZIP).
    pub fn valid_for_deep(self) -> bool {
        self != Codec::Zip
    }
}

/// Refuse writing a deep part in a codec OpenEXR cannot read (ZIP), in one line.
pub fn check_deep_output(codec: Codec) -> Result<()> {
    if codec.valid_for_deep() {
        return Ok(());
    }
    Err(Error::Usage(format!(
        "{} compression is not valid for deep output: OpenEXR accepts none, rle, zips and zstd \
         for deep parts (zip is for flat output)",
        codec.name()
    )))
}

/// Most bytes one packed byte of RLE unpacks to: a run is two bytes (count, value) and
/// repeats its value at most 128 times.
const RLE_MAX_RATIO: usize = 64;

/// Most bytes one packed byte of deflate unpacks to: a length/distance pair can cost as little
/// as two bits (one-bit Huffman codes) and copies at most 258 bytes, 258 x 4 = 1032.
const DEFLATE_MAX_RATIO: usize = 1032;

/// The most bytes `packed_len` bytes of `codec` data can unpack to (a block stored raw is as
/// large as its unpacked data, which every codec allows).
pub fn max_unpacked(codec: Codec, packed_len: usize) -> usize {
    match codec {
        Codec::None => packed_len,
        Codec::Rle => packed_len.saturating_mul(RLE_MAX_RATIO),
        Codec::Zips | Codec::Zip => packed_len.saturating_mul(DEFLATE_MAX_RATIO),
        Codec::Zstd { .. } => packed_len.saturating_mul(super::zstd::MAX_RATIO),
    }
}

/// Refuse a block whose claimed unpacked size its packed bytes cannot produce.
pub fn check_plausible(codec: Codec, packed_len: usize, unpacked: usize, what: &str) -> Result<()> {
    if unpacked != packed_len && unpacked > max_unpacked(codec, packed_len) {
        return Err(Error::format(format!(
            "{what}: {packed_len} packed bytes of {} cannot unpack to the {unpacked} bytes claimed",
            codec.name()
        )));
    }
    Ok(())
}

/// Unpack `packed`, a block laid out as `layout` says, into exactly `expected` bytes. `what`
/// names the block in errors.
pub fn decompress(
    codec: Codec,
    packed: &[u8],
    expected: usize,
    layout: &BlockLayout,
    what: &str,
) -> Result<Vec<u8>> {
    if packed.len() == expected {
        return Ok(packed.to_vec());
    }
    check_plausible(codec, packed.len(), expected, what)?;
    let bytes = match codec {
        Codec::None => {
            return Err(Error::format(format!(
                "{what}: uncompressed block holds {} bytes, expected {expected}",
                packed.len()
            )))
        }
        Codec::Zstd { .. } => return super::zstd::decompress(packed, expected, layout, what),
        Codec::Rle => rle_decode(packed, expected, what)?,
        Codec::Zips | Codec::Zip => {
            let options = zune_inflate::DeflateOptions::default()
                .set_limit(expected)
                .set_size_hint(expected);
            zune_inflate::DeflateDecoder::new_with_options(packed, options)
                .decode_zlib()
                .map_err(|e| {
                    Error::format(format!(
                        "{what}: zlib data is corrupt ({})",
                        one_line(&format!("{:?}", e.error))
                    ))
                })?
        }
    };
    if bytes.len() != expected {
        return Err(Error::format(format!(
            "{what}: unpacks to {} bytes, expected {expected}",
            bytes.len()
        )));
    }
    Ok(unpredict_and_deinterleave(&bytes))
}

/// `text` on one line: the inflater's messages may hold newlines (and its `Debug` form dumps the
/// partly decoded data), but an error is one line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Pack `raw`, a block laid out as `layout` says, with `codec`; returns `raw` itself when
/// packing would not make it smaller.
pub fn compress(codec: Codec, raw: &[u8], layout: &BlockLayout) -> Vec<u8> {
    if codec == Codec::None || raw.is_empty() {
        return raw.to_vec();
    }
    let packed = match codec {
        Codec::Zstd { level } => super::zstd::compress(raw, layout, level),
        Codec::Rle => rle_encode(&interleave_and_predict(raw)),
        _ => deflate_zlib(&interleave_and_predict(raw)),
    };
    if packed.len() < raw.len() {
        packed
    } else {
        raw.to_vec()
    }
}

/// The deflate level of output: libdeflate's level 1 packs real deep output as tightly as
/// miniz_oxide's level 4 did (ratio 0.647 vs 0.646 on the 1920x270 powerplant merge) about 3x
/// faster; zlib-rs through flate2 was slower at every level that matched the ratio
/// (docs/benchmarks.md, "Output compression").
const DEFLATE_LEVEL: i32 = 1;

thread_local! {
    /// One compressor per thread: libdeflate's state is a few hundred KiB, made once.
    static DEFLATE: std::cell::RefCell<libdeflater::Compressor> = std::cell::RefCell::new(
        libdeflater::Compressor::new(
            libdeflater::CompressionLvl::new(DEFLATE_LEVEL).expect("a valid level"),
        ),
    );
}

/// `bytes` as a zlib stream (what OpenEXR's ZIP and ZIPS store).
fn deflate_zlib(bytes: &[u8]) -> Vec<u8> {
    DEFLATE.with(|compressor| {
        let mut compressor = compressor.borrow_mut();
        let mut out = vec![0u8; compressor.zlib_compress_bound(bytes.len())];
        let n = compressor
            .zlib_compress(bytes, &mut out)
            .expect("the output holds the compress bound");
        out.truncate(n);
        out
    })
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
fn interleave_and_predict(raw: &[u8]) -> Vec<u8> {
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

/// OpenEXR's RLE: a signed count byte; negative means that many literal bytes follow,
/// otherwise the next byte repeats count + 1 times. Never produces more than `limit` bytes, and
/// reserves no more than `packed` can produce.
fn rle_decode(packed: &[u8], limit: usize, what: &str) -> Result<Vec<u8>> {
    let corrupt = || Error::format(format!("{what}: RLE data is corrupt"));
    let mut out = Vec::with_capacity(limit.min(max_unpacked(Codec::Rle, packed.len())));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A layout for the codecs that ignore it (ZSTD's own tests are in `super::super::zstd`).
    fn any_layout() -> BlockLayout {
        BlockLayout::count_table(0, 0)
    }

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

    fn sample_bytes() -> Vec<u8> {
        let mut v: Vec<u8> = (0..1000u32).flat_map(|i| (i / 7).to_le_bytes()).collect();
        v.extend(std::iter::repeat_n(9u8, 300));
        v.extend((0..77u8).map(|i| i.wrapping_mul(37)));
        v
    }

    #[test]
    fn every_codec_round_trips() {
        let raw = sample_bytes();
        for codec in [Codec::None, Codec::Rle, Codec::Zips, Codec::Zip] {
            let packed = compress(codec, &raw, &any_layout());
            if codec != Codec::None {
                assert!(packed.len() < raw.len(), "{codec:?} did not compress");
            }
            assert_eq!(
                decompress(codec, &packed, raw.len(), &any_layout(), "t").unwrap(),
                raw
            );
        }
    }

    #[test]
    fn odd_lengths_round_trip() {
        for len in [1usize, 2, 3, 5, 128, 129, 255] {
            let raw: Vec<u8> = (0..len).map(|i| (i % 3) as u8).collect();
            for codec in [Codec::Rle, Codec::Zips] {
                let packed = compress(codec, &raw, &any_layout());
                assert_eq!(
                    decompress(codec, &packed, len, &any_layout(), "t").unwrap(),
                    raw
                );
            }
        }
    }

    #[test]
    fn corrupt_data_is_an_error_not_a_panic() {
        let raw = sample_bytes();
        let mut packed = compress(Codec::Rle, &raw, &any_layout());
        packed.truncate(packed.len() / 2);
        assert!(decompress(Codec::Rle, &packed, raw.len(), &any_layout(), "t").is_err());
        let mut z = compress(Codec::Zips, &raw, &any_layout());
        z[5] ^= 0xff;
        z.truncate(z.len() - 3);
        assert!(decompress(Codec::Zips, &z, raw.len(), &any_layout(), "t").is_err());
        // RLE that claims more output than expected is refused, not allocated.
        assert!(decompress(Codec::Rle, &[127, 1, 127, 1], 10, &any_layout(), "t").is_err());
    }

    #[test]
    fn zlib_errors_are_one_line() {
        let mut z = compress(Codec::Zips, &sample_bytes(), &any_layout());
        z[1] ^= 1; // the header's check bits
        let err =
            decompress(Codec::Zips, &z, sample_bytes().len(), &any_layout(), "t").unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("t: zlib data is corrupt ("), "{text}");
        assert_eq!(text.lines().count(), 1, "{text:?}");
        assert!(!text.ends_with('\n'), "{text:?}");
    }

    #[test]
    fn claims_beyond_what_the_packed_bytes_can_hold_are_refused_before_unpacking() {
        // A run of 128 bytes is the most two RLE bytes make; deflate tops out at 1032:1.
        assert!(decompress(Codec::Rle, &[127, 7], 128, &any_layout(), "t").is_ok());
        let err = decompress(Codec::Rle, &[127, 7], 129, &any_layout(), "t").unwrap_err();
        assert!(err
            .to_string()
            .contains("2 packed bytes of rle cannot unpack to the 129"));
        let zeros = vec![0u8; 1 << 20];
        let z = compress(Codec::Zip, &zeros, &any_layout());
        assert!(
            max_unpacked(Codec::Zip, z.len()) >= zeros.len(),
            "real data is plausible"
        );
        assert_eq!(
            decompress(Codec::Zip, &z, zeros.len(), &any_layout(), "t").unwrap(),
            zeros
        );
        assert!(decompress(Codec::Zip, &z, usize::MAX, &any_layout(), "t").is_err());
    }
}
