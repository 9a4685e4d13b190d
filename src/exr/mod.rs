//! Deep EXR input and output on top of the `exr` crate's header and attribute types.
//!
//! The `exr` crate parses headers (deep ones included) but decodes no deep pixels; the deep chunk
//! layout (sample-count table plus sample data) and its codecs are ours, and so is a walk of the
//! raw attributes (for compressions the crate does not know, and for carrying metadata).
//!
//! Reading has one path: [`header`] reads a file's headers, [`chunk`] parses one chunk's
//! framing, and [`ChunkSource`] reads a part's chunks with positioned reads ([`ByteSource`]),
//! a band of rows at a time or (through [`read_deep`]) all of them. [`ChannelSelection`] says
//! which channels it keeps. [`FlatSource`] is its twin for flat parts (operations that
//! read a flat image). Part-by-part output is joined into one multi-part file by
//! [`join_parts`].

mod attributes;
mod chunk;
mod chunks;
mod codec;
mod flat_chunks;
mod header;
mod id_manifest;
mod multipart;
mod output;
mod read;
mod selection;
mod sink;
mod source;
mod write;

pub use attributes::{
    carried_attributes, software_attribute, MetadataMode, RawAttribute, REQUIRED_CARRIED,
    WRITER_OWNED,
};
pub use chunks::{ChunkSource, BANDS_IN_FLIGHT};
pub use codec::{
    check_deep_output, check_plausible, compress, compression_help, compression_name, decompress,
    max_unpacked, BlockLayout, Codec, CODEC_NAMES, ZSTD_DEFAULT_LEVEL, ZSTD_LEVELS,
};
pub use flat_chunks::{FlatRows, FlatSource};
pub(crate) use header::select_part;
pub use header::{read_parts_info, PartInfo, PartSelector};
pub use id_manifest::{IdGroup, IdManifest};
pub use multipart::{join_parts, PartFile};
pub use output::OutputOptions;
pub use read::{decode_deep, read_deep, read_deep_channels, ReadOptions, DEFAULT_MAX_MEMORY};
pub use selection::ChannelSelection;
pub(crate) use sink::{check_rows, span_message};
pub use sink::{DeepChunkWriter, FlatChunkWriter};
pub use source::ByteSource;
pub use write::{
    check_output_is_not_an_input, encode_deep, encode_deep_with, mark_run_start, write_atomically,
    write_deep, write_deep_with, write_flat, write_flat_with, AtomicFile, DeepWriteOptions,
    FlatType, FlatWriteOptions,
};
