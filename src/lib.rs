//! deepmerge: merge and composite OpenEXR deep images on the GPU (OpenGL compute) and the CPU.
//!
//! The pipeline, in a few lines:
//!
//! 1. [`exr::read_deep`] decodes a deep EXR part into a host [`deep::DeepImage`] (per-pixel
//!    offsets plus one plane per channel).
//! 2. [`composite::merge_images`] is the reference merge: every input's samples at a pixel, in
//!    (Z, ZBack, input, sample) order, tidied where volumes overlap, then flattened front to back
//!    or kept as a merged deep image.
//! 3. The GPU engine (`gpu`) builds each input into one of four layouts (LL, LA, IA, BIA) with a
//!    count pass and a prefix sum, then merges pairs stepwise or with register blocks; every GPU
//!    stage has a CPU twin in `cpu` with the same names, and both are tested against step 2.
//!    The names all three share (layouts, fragments, the depth order) live in [`vocab`].
//! 4. [`exr::write_deep`] and [`exr::write_flat`] write the result through a temporary file.
//! 5. [`job::MergeJob`] is steps 1 to 4 as the CLI runs them, timed per stage
//!    ([`progress::RunStats`]), once or per frame of a sequence ([`sequence`]: frame tokens and
//!    ranges), with progress in the forms farm runners parse ([`progress::Progress`]).

pub mod backend;
pub mod bench;
pub mod cleanup;
pub mod composite;
pub mod cpu;
pub mod deep;
pub mod error;
pub mod exr;
pub mod gpu;
pub mod heatmap;
pub mod info;
pub mod inspect;
pub mod job;
pub mod ops;
pub mod preview;
pub mod progress;
pub mod run_stats;
pub mod scene;
pub mod sequence;
pub mod size;
pub mod stream;
pub mod view;
pub mod vocab;

pub use error::{Error, Result};
