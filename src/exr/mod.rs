//! Deep EXR input and output on top of the `exr` crate's header and attribute types.
//!
//! The `exr` crate parses headers (deep ones included) but decodes no deep pixels; the deep chunk
//! layout (sample-count table plus sample data) and its codecs are ours.

mod compression;
pub(crate) mod read;
mod sink;
mod write;

pub use compression::{check_plausible, compress, decompress, max_unpacked, Codec};
pub use read::{
    decode_deep, human_bytes, read_deep, read_parts_info, PartInfo, PartSelector, ReadOptions,
    DEFAULT_MAX_MEMORY,
};
pub use sink::{DeepChunkWriter, FlatChunkWriter};
pub use write::{
    encode_deep, encode_deep_with, mark_run_start, write_atomically, write_deep, write_deep_with,
    write_flat, AtomicFile, DeepWriteOptions, FlatType,
};
