//! Deep EXR input and output on top of the `exr` crate's header and attribute types.
//!
//! The `exr` crate parses headers (deep ones included) but decodes no deep pixels; the deep chunk
//! layout (sample-count table plus sample data) and its codecs are ours, and so is a walk of the
//! raw attributes (for compressions the crate does not know, and for carrying metadata).
//!
//! Reading is the folder `read/`: `read::header` reads a file's headers, `read::part`
//! (the one part reader) picks a part, checks its window against the budget and reads its
//! offset table, and the decoders sit on top: [`ChunkSource`] (`read/deep.rs`) reads a deep
//! part's chunks (framing in `read/chunk.rs`) with positioned reads ([`ByteSource`],
//! `read/bytes.rs`), a band of rows at a time or (through [`read_deep`], `read/mod.rs`) all of
//! them, and [`FlatSource`] (`read/flat.rs`) does the same for flat parts (operations that read
//! a flat image). [`ChannelSelection`] says which channels a reader keeps. Writing is
//! `write/` (whole files, atomically, in `write/mod.rs`; the band-by-band chunk writers in
//! `write/chunks.rs`); output options are `output.rs`. Part-by-part output is joined into one
//! multi-part file by [`join_parts`].

mod attributes;
mod codec;
mod id_manifest;
mod multipart;
mod output;
mod read;
mod selection;
mod write;

pub use attributes::{
    carried_attributes, software_attribute, MetadataMode, RawAttribute, REQUIRED_CARRIED,
    WRITER_OWNED,
};
pub use codec::{
    check_deep_output, check_plausible, compress, compression_help, compression_name, decompress,
    max_unpacked, zstd_with_level, BlockLayout, Codec, ZstdLevelRefusal, CODEC_NAMES,
    ZSTD_DEFAULT_LEVEL, ZSTD_LEVELS,
};
pub use id_manifest::{IdGroup, IdManifest};
pub use multipart::{join_parts, PartFile};
pub use output::OutputOptions;
pub use read::bytes::ByteSource;
pub use read::deep::{ChunkSource, BANDS_IN_FLIGHT};
pub use read::flat::{FlatRows, FlatSource};
pub(crate) use read::header::select_part;
pub use read::header::{read_parts_info, PartInfo, PartSelector};
pub use read::{decode_deep, read_deep, read_deep_channels, ReadOptions, DEFAULT_MAX_MEMORY};
pub use selection::ChannelSelection;
pub use write::{
    check_output_is_not_an_input, encode_deep, encode_deep_with, mark_run_start, write_atomically,
    write_deep, write_deep_with, write_flat, write_flat_with, AtomicFile, DeepWriteOptions,
    FlatType, FlatWriteOptions,
};
pub(crate) use write::{check_rows, span_message, WriteBehind};
pub use write::{DeepChunkWriter, FlatChunkWriter};
