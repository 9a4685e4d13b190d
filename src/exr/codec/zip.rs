//! ZIPS and ZIP (compression ids 2 and 3): zlib after OpenEXR's byte preprocessing
//! ([`super::layout`]). The two differ only in scanlines per chunk (1 and 16), which the table
//! in `super` states, so they share this file.
//!
//! Deflate itself is `libdeflater` (libdeflate) both ways: its inflate took 15% less CPU than
//! `zune-inflate`'s on the 1080p powerplant pair, and its level 1 deflate was chosen by
//! measurement ([`DEFLATE_LEVEL`]).

use super::layout::{
    interleave_and_predict, keep_scratch_small, unpredicted, unpredicted_into, BlockLayout, Segment,
};
use crate::error::{Error, Result};

/// Most bytes one packed byte of deflate unpacks to: a length/distance pair can cost as little
/// as two bits (one-bit Huffman codes) and copies at most 258 bytes, 258 x 4 = 1032.
pub(super) const MAX_RATIO: usize = 1032;

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

    /// One decompressor per thread, and the scratch it inflates into.
    static INFLATE: std::cell::RefCell<(libdeflater::Decompressor, Vec<u8>)> =
        std::cell::RefCell::new((libdeflater::Decompressor::new(), Vec::new()));
}

/// `raw` preprocessed and deflated (at [`DEFLATE_LEVEL`]: the codec states no level).
pub(super) fn pack(raw: &[u8], _layout: &BlockLayout, _level: Option<i32>) -> Option<Vec<u8>> {
    Some(deflate_zlib(&interleave_and_predict(raw)))
}

/// The `expected` bytes of the block `packed` holds. `what` names the block in errors.
pub(super) fn unpack(
    packed: &[u8],
    expected: usize,
    _layout: &BlockLayout,
    what: &str,
) -> Result<Vec<u8>> {
    // Inflated into this thread's scratch, which the unpredicted block is copied out of: one
    // fresh allocation (and its page faults) per block rather than two.
    inflated(packed, expected, what, |bytes| {
        unpredicted(bytes, expected, what)
    })
}

/// [`unpack`] straight into `segments` of the block ([`super::decompress_into`]).
pub(super) fn unpack_into(
    packed: &[u8],
    expected: usize,
    what: &str,
    segments: &mut [Segment],
) -> Result<()> {
    inflated(packed, expected, what, |bytes| {
        unpredicted_into(bytes, expected, what, segments)
    })
}

/// `then` of the bytes `packed` inflates to (at most `expected`), in this thread's scratch.
fn inflated<T>(
    packed: &[u8],
    expected: usize,
    what: &str,
    then: impl FnOnce(&mut [u8]) -> Result<T>,
) -> Result<T> {
    INFLATE.with(|state| {
        let (decompressor, scratch) = &mut *state.borrow_mut();
        scratch.resize(expected, 0);
        let block = match decompressor.zlib_decompress(packed, scratch) {
            Ok(n) => then(&mut scratch[..n]),
            Err(libdeflater::DecompressionError::InsufficientSpace) => Err(Error::format(format!(
                "{what}: zlib data is corrupt (it unpacks to more than the {expected} bytes \
                 expected)"
            ))),
            Err(libdeflater::DecompressionError::BadData) => Err(Error::format(format!(
                "{what}: zlib data is corrupt ({})",
                what_is_wrong(decompressor, packed, scratch)
            ))),
        };
        keep_scratch_small(scratch);
        block
    })
}

/// Which part of a zlib stream libdeflate refused (it says only "bad data"): the two-byte
/// header, the deflate data, or the Adler-32 checksum after it. Only on the error path.
fn what_is_wrong(
    decompressor: &mut libdeflater::Decompressor,
    packed: &[u8],
    scratch: &mut [u8],
) -> &'static str {
    // Two header bytes, at least one of deflate data, four of checksum.
    if packed.len() < 7 {
        return "too short for a zlib stream";
    }
    // Deflate (8), a window of at most 32 KiB (CINFO <= 7), the check bits, no preset dictionary.
    let header_ok = packed[0] & 0x0f == 8
        && packed[0] >> 4 <= 7
        && (u16::from(packed[0]) << 8 | u16::from(packed[1])) % 31 == 0
        && packed[1] & 0x20 == 0;
    if !header_ok {
        return "bad zlib header";
    }
    match decompressor.deflate_decompress(&packed[2..packed.len() - 4], scratch) {
        Ok(_) => "Adler-32 checksum mismatch",
        Err(_) => "bad deflate data",
    }
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
