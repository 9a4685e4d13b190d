//! Deep EXR input and output on top of the `exr` crate's header and attribute types.
//!
//! The `exr` crate parses headers (deep ones included) but decodes no deep pixels; the deep chunk
//! layout (sample-count table plus sample data) and its codecs are ours, and so is a walk of the
//! raw attributes (for compressions the crate does not know, and for carrying metadata).

mod attributes;
mod compression;
mod output;
pub(crate) mod read;
mod sink;
mod write;
mod zstd;

pub use attributes::{
    carried_attributes, software_attribute, MetadataMode, RawAttribute, REQUIRED_CARRIED,
    WRITER_OWNED,
};
pub use compression::{
    check_deep_output, check_plausible, compress, compression_name, decompress, max_unpacked,
    BlockLayout, Codec, ZSTD_DEFAULT_LEVEL, ZSTD_LEVELS,
};
pub use output::OutputOptions;
pub use read::{
    decode_deep, human_bytes, read_deep, read_parts_info, PartInfo, PartSelector, ReadOptions,
    DEFAULT_MAX_MEMORY,
};
pub(crate) use sink::{check_rows, span_message};
pub use sink::{DeepChunkWriter, FlatChunkWriter};
pub use write::{
    encode_deep, encode_deep_with, mark_run_start, write_atomically, write_deep, write_deep_with,
    write_flat, write_flat_with, AtomicFile, DeepWriteOptions, FlatType, FlatWriteOptions,
};
