//! NONE (compression id 0): every block stored raw.

use super::layout::BlockLayout;
use crate::error::{Error, Result};

/// Most bytes one stored byte stands for: itself.
pub(super) const MAX_RATIO: usize = 1;

/// Never packs: `None` asks the caller to store the block raw (which it does without a copy
/// here and another there).
pub(super) fn pack(_raw: &[u8], _layout: &BlockLayout, _level: Option<i32>) -> Option<Vec<u8>> {
    None
}

/// A raw block is as large as its data; the caller has taken every block that is, so whatever
/// reaches here is the wrong size.
pub(super) fn unpack(
    packed: &[u8],
    expected: usize,
    _layout: &BlockLayout,
    what: &str,
) -> Result<Vec<u8>> {
    Err(Error::format(format!(
        "{what}: uncompressed block holds {} bytes, expected {expected}",
        packed.len()
    )))
}
