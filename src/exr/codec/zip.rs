//! ZIPS and ZIP (compression ids 2 and 3): zlib after OpenEXR's byte preprocessing
//! ([`super::layout`]). The two differ only in scanlines per chunk (1 and 16), which the table
//! in `super` states, so they share this file.
//!
//! Deflate itself is `zune-inflate` to read and `libdeflater` (libdeflate) to write, chosen by
//! measurement ([`DEFLATE_LEVEL`]).

use super::layout::{interleave_and_predict, unpredicted, BlockLayout};
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
    let options = zune_inflate::DeflateOptions::default()
        .set_limit(expected)
        .set_size_hint(expected);
    let bytes = zune_inflate::DeflateDecoder::new_with_options(packed, options)
        .decode_zlib()
        .map_err(|e| {
            Error::format(format!(
                "{what}: zlib data is corrupt ({})",
                one_line(&format!("{:?}", e.error))
            ))
        })?;
    unpredicted(&bytes, expected, what)
}

/// `text` on one line: the inflater's messages may hold newlines (and its `Debug` form dumps the
/// partly decoded data), but an error is one line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
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
