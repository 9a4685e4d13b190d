//! deepmerge: merge and composite OpenEXR deep images on the GPU (OpenGL compute) and the CPU.
//!
//! The pipeline, in a few lines (docs/architecture.md has it in full):
//!
//! 1. [`exr::ChunkSource`] reads a deep EXR part chunk by chunk: headers, offset and sample-count
//!    tables first, then the rows a band asks for; [`exr::read_deep`] is the same reader over
//!    the whole window, into a host [`deep::DeepImage`] (per-pixel offsets plus one plane per
//!    channel).
//! 2. [`stream::plan_bands`] cuts the output into bands of rows that fit a memory budget.
//! 3. [`composite::merge_images`] is the reference merge: every input's samples at a pixel, in
//!    (Z, ZBack, input, sample) order, tidied where volumes overlap, then flattened front to back
//!    or kept as a merged deep image. The GL engine (`gpu`, feature `gl`) builds each input into
//!    one of four layouts (LL, LA, IA, BIA) with a count pass and a prefix sum, then merges all
//!    inputs at once or pairs stepwise or with register blocks; every GPU stage has a CPU twin
//!    (`cpu`, feature `twins`) with the same names, and both are tested against the reference.
//!    The names all three share (layouts, fragments, the depth order) live in [`vocab`].
//! 4. [`exr::DeepChunkWriter`] and [`exr::FlatChunkWriter`] write band by band through a
//!    temporary file renamed into place; [`exr::write_deep`] and [`exr::write_flat`] are those
//!    writers fed one band.
//!
//! [`stream::merge_files`] is steps 1 to 4, file to file, on the engine the caller chooses
//! ([`stream::MergeEngine`]); [`ops`] runs the deep operations (slice, crop, transform, idselect,
//! deepen from a flat image, recolor by a flat image, and holdout of one file by another) on
//! the same streaming pipeline. The options of a merge, as a user gives them, are one
//! [`request::MergeRequest`]: it refuses what does not fit together and gives every stage its
//! options; the CLI, the viewer and the Python module fill one from their arguments.
//!
//! ```
//! use deepmerge::request::{FieldNames, MergeRequest};
//! use deepmerge::stream::{merge_files, MergeEngine};
//!
//! # fn main() -> deepmerge::Result<()> {
//! let dir = tempfile::tempdir().unwrap();
//! // Two procedural deep inputs, as two renders of one shot would be.
//! let inputs = deepmerge::scene::write_scene("planes", 64, 32, 7, 2, &dir.path().join("in"))?;
//! let request = MergeRequest {
//!     deep: true,
//!     tidy: true,
//!     memory_budget: 64 << 20,
//!     ..MergeRequest::default()
//! };
//! request.check(inputs.len(), &FieldNames)?;
//! let output = dir.path().join("merged.exr");
//! merge_files(&inputs, &output, &request.stream_options()?, MergeEngine::Cpu, None)?;
//!
//! let merged = deepmerge::exr::read_deep(&output, &Default::default())?;
//! let first = deepmerge::exr::read_deep(&inputs[0], &Default::default())?;
//! assert!(merged.sample_count() >= first.sample_count());
//!
//! // A flat-only option with deep output is refused, in the words of the caller's front end.
//! let wrong = MergeRequest { flat_z: true, ..request };
//! let refusal = wrong.check(inputs.len(), &FieldNames).unwrap_err();
//! assert_eq!(refusal.to_string(), "flat_z applies to flat output, not deep");
//! # Ok(())
//! # }
//! ```
//!
//! Cargo features: `gl` (the GL engine), `cli`, `view` and `bench` (the program's front ends)
//! and `twins` (the CPU twins the tests use). The default is all of them, which is what the
//! `deepmerge` binary needs; a Rust library user takes `default-features = false` and adds `gl`
//! for the GL engine.

#[cfg(feature = "gl")]
pub mod backend;
#[cfg(feature = "bench")]
pub mod bench;
pub mod cleanup;
pub mod comp;
pub mod composite;
#[cfg(feature = "twins")]
pub mod cpu;
pub mod deep;
pub mod env_setting;
pub mod error;
pub mod exr;
#[cfg(feature = "gl")]
pub mod gpu;
pub mod heatmap;
pub mod info;
pub mod inspect;
#[cfg(feature = "cli")]
pub mod job;
pub mod ops;
pub mod preview;
#[cfg(feature = "cli")]
pub mod progress;
pub mod request;
pub mod run_stats;
pub mod scene;
pub mod sequence;
pub mod size;
pub mod stream;
pub mod timeline;
#[cfg(feature = "gl")]
pub mod verify;
#[cfg(feature = "view")]
pub mod view;
pub mod vocab;

pub use error::{Error, Result};
