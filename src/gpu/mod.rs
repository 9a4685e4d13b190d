//! The OpenGL compute engine: a headless context ([`GlContext`]), stages in `glsl/` loaded with
//! `#define`s ([`program`]), the GPU scan ([`scan`]), layout builds and pairwise merges
//! ([`engine`]) and the whole-image merge in row bands ([`merge_images_gl`], [`GpuMerger`]).
//!
//! Every stage has a CPU twin in [`crate::cpu`] with the same name; the tests compare them.

mod buffer;
mod context;
pub mod engine;
mod merge;
pub mod program;
pub mod scan;
pub mod sort;
mod stats;

pub use buffer::GpuBuffer;
pub use context::{GlContext, GlInfo};
pub use merge::{merge_images_gl, GpuMerger};
pub use stats::{BufferBytes, GpuStats};

pub use crate::cpu::{Layout, MergeMethod, PixelOrder};

/// How the GL engine lays out and merges images.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GlOptions {
    /// Layout of every image on the GPU (inputs, intermediates, deep output).
    pub layout: Layout,
    /// Stepwise or register block merging.
    pub method: MergeMethod,
    /// Register block size for RBM and BIA, 1..=32.
    pub block_size: u32,
    /// Which pixel each layout index stands for.
    pub pixel_order: PixelOrder,
    /// Most bytes one merged buffer of a band may take (0: the GL limit
    /// GL_MAX_SHADER_STORAGE_BLOCK_SIZE). Smaller budgets force more bands.
    pub band_budget_bytes: u64,
}

impl Default for GlOptions {
    fn default() -> Self {
        GlOptions {
            layout: Layout::BlockedInterleaved,
            method: MergeMethod::RegisterBlock,
            block_size: 8,
            pixel_order: PixelOrder::RowMajor,
            band_budget_bytes: 0,
        }
    }
}
