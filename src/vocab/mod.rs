//! The vocabulary both engines share (after vello's `vello_encoding`): the names, records and
//! rules that the GPU engine ([`crate::gpu`]), its CPU twins ([`crate::cpu`]) and the reference
//! ([`crate::composite`]) all speak, so that none of them imports another to get them.
//!
//! - [`layout`]: the GPU layouts, each in one place: names, the ids the GLSL stages are given as
//!   `#define`s, what each holds, its size, and where sample i of pixel p lives
//!   (docs/architecture.md, "GPU layouts"; the Rust side of `glsl/include/layout.glsl`);
//! - [`merge_choices`]: merge methods and strategies, pixel orders, block sizes, and the
//!   register-block and long-list choices;
//! - [`sample`]: [`Sample`] and [`Fragment`], the one conversion between them, how a merged
//!   sample's source is packed for the readback ([`SourcePacking`]), the key rule
//!   ([`depth_key`]) and the order ([`depth_less`], [`depth_cmp`]);
//! - [`built`]: an image in a layout as the host sees it ([`BuiltImage`]);
//! - [`stages`]: constants and records the sort, tidy and compaction stages exchange;
//! - [`staged`]: one input's band as it is staged for the GPU gather ([`StagedInput`]).

mod built;
pub mod layout;
pub mod merge_choices;
pub mod sample;
mod staged;
mod stages;

pub use built::{check_offsets, BuiltImage};
pub use layout::{glsl_defines, Layout, GROUP_SIZE};
pub use merge_choices::{
    kway_stride, LongLists, MergeMethod, MergeStrategy, PixelOrder, RbmBlocks, MAX_BLOCK_SIZE,
    MAX_KWAY_INPUTS, TILE,
};
pub use sample::{depth_cmp, depth_key, depth_less, Fragment, Sample, SourcePacking};
pub use staged::{SlotSource, StagedInput};
pub use stages::{
    FlagField, TidiedPixels, GATE_LIMIT, LOCAL_GROUP_SIZE, LOCAL_SORT_SIZE, REG_SORT_SIZE,
    VALUE_ROUND,
};
