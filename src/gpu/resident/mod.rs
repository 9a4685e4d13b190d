//! The GPU stages on resident buffers: build an image in a layout from a pixel-ordered stream
//! (upload → scan → min counts → scatter) and merge two images into a third or into a flat
//! composite, pairwise (`merge.comp`) or all inputs of a stacked image in one pass
//! (`merge_kway.comp`, [`GpuStack`]). The host-side orchestration (bands, inputs, readback)
//! lives in `merge/`.
//!
//! This file holds what every stage shares (an image on the GPU, its column table, a merge's
//! specification, the flat composite); builds are in `build.rs`, pairwise merges in
//! `pairwise.rs`, k-way merges in `kway.rs`, how a merge writes a deep output in
//! `deep_writes.rs`, the relayout of a merged image in `relayout.rs` and the packing of its
//! sources for the readback in `sources.rs`.

use glow::HasContext;

use super::buffer::GpuBuffer;
use super::mapped::PendingRead;
use super::program::Defines;
use super::scan::exclusive_scan_buffer;
use super::stats::BufferBytes;
use super::GlContext;
use crate::error::{Error, Result};
pub use crate::vocab::kway_stride;
use crate::vocab::{BuiltImage, Fragment, Layout, MergeMethod, GROUP_SIZE, MAX_KWAY_INPUTS};

/// What the flat composite needs to know about the composited columns (from
/// `composite::CompositeChannels`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnSpec {
    /// Per column, the column of its alpha, or `None` for alpha columns.
    pub alpha_of: Vec<Option<usize>>,
}

impl ColumnSpec {
    /// Values stored per fragment slot (at least 1: GLSL has no empty arrays).
    pub fn stride(&self) -> usize {
        self.alpha_of.len().max(1)
    }

    /// Add the column table to `defines` (`NUM_COLUMNS`, `ALPHA_OF_LIST`, `ALPHAS_LIST`, ...), as
    /// every stage that composites reads it.
    pub fn defines(&self, defines: Defines) -> Defines {
        let mut alpha_of: Vec<String> = self
            .alpha_of
            .iter()
            .map(|a| a.map_or("-1".to_string(), |a| a.to_string()))
            .collect();
        if alpha_of.is_empty() {
            alpha_of.push("-1".into());
        }
        let alphas: Vec<String> = self
            .alpha_of
            .iter()
            .enumerate()
            .filter(|(_, a)| a.is_none())
            .map(|(k, _)| k.to_string())
            .collect();
        let count = alphas.len();
        defines
            .set("NUM_COLUMNS", self.stride())
            .set("ALPHA_OF_LIST", alpha_of.join(","))
            .set("NUM_ALPHAS", count)
            .set("NUM_ALPHAS_ALLOC", count.max(1))
            .set(
                "ALPHAS_LIST",
                if count == 0 {
                    "0".to_string()
                } else {
                    alphas.join(",")
                },
            )
    }
}

/// One deep image resident on the GPU in a layout.
pub struct GpuImage<'a> {
    /// The layout.
    pub layout: Layout,
    /// BIA block size (also what RBM merges it with).
    pub block_size: u32,
    /// For LL: lists run front to back. Arrays are stored ascending.
    pub ascending: bool,
    /// Pixels.
    pub pixels: usize,
    /// Fragments.
    pub samples: usize,
    /// Values per slot.
    pub stride: usize,
    /// Fragment keys, one per slot (LL: node 0 unused).
    pub keys: GpuBuffer<'a>,
    /// `stride` values per slot, when [`Self::with_values`].
    pub values: GpuBuffer<'a>,
    /// False for a merged deep image whose merge wrote the keys alone (`values` holds nothing):
    /// a final deep output, which is read back by its keys (the host copies each sample's values
    /// from the input sample its key names, bit for bit), so values there would be half the
    /// merge's traffic for nothing. Such an image cannot be merged again.
    pub with_values: bool,
    /// Exclusive scan of the counts (`pixels + 1`).
    pub offsets: GpuBuffer<'a>,
    /// IA/BIA: per-group min counts; LL: heads.
    pub aux1: GpuBuffer<'a>,
    /// LL: next pointers, with the node counter in entry 0.
    pub aux2: GpuBuffer<'a>,
}

impl<'a> GpuImage<'a> {
    /// Bytes of each buffer, as `--stats` reports them.
    pub fn bytes(&self) -> BufferBytes {
        BufferBytes {
            keys: self.keys.bytes as u64,
            // A keys-only image's values buffer is a placeholder, not values.
            values: if self.with_values {
                self.values.bytes as u64
            } else {
                0
            },
            offsets: self.offsets.bytes as u64,
            min_counts_or_heads: if self.layout.links_lists() || self.layout.groups_min_counts() {
                self.aux1.bytes as u64
            } else {
                0
            },
            next: if self.layout.links_lists() {
                self.aux2.bytes as u64
            } else {
                0
            },
        }
    }

    fn bind(&self, first: u32) {
        self.keys.bind(first);
        self.values.bind(first + 1);
        self.offsets.bind(first + 2);
        self.aux1.bind(first + 3);
        self.aux2.bind(first + 4);
    }

    /// Read the whole image back into its CPU twin's form (values only when `with_values`),
    /// waiting for it.
    pub fn read_back(&self, with_values: bool) -> Result<BuiltImage> {
        self.read_ahead(with_values)?.finish(self.keys.context())
    }

    /// Start reading the image back ([`Self::read_back`]): the copies are issued now, and
    /// [`PendingImage::finish`] waits for them, so the host can do other work meanwhile.
    pub(crate) fn read_ahead(&self, with_values: bool) -> Result<PendingImage> {
        let ctx = self.keys.context();
        if with_values && !self.with_values {
            return Err(Error::internal(
                "the values of a deep image merged by its keys alone were asked for",
            ));
        }
        let slots = self.samples + usize::from(self.layout.links_lists());
        let groups = self.pixels.div_ceil(GROUP_SIZE as usize);
        let read = |buffer: &GpuBuffer, words: usize| ctx.read_ahead(buffer, 0, words * 4);
        let linked = self.layout.links_lists();
        Ok(PendingImage {
            layout: self.layout,
            block_size: self.block_size,
            columns: self.stride,
            ascending: self.ascending,
            offsets: read(&self.offsets, self.pixels + 1)?,
            min_counts: self
                .layout
                .groups_min_counts()
                .then(|| read(&self.aux1, groups))
                .transpose()?,
            head: linked.then(|| read(&self.aux1, self.pixels)).transpose()?,
            next: linked.then(|| read(&self.aux2, slots)).transpose()?,
            slots: ctx.read_ahead(&self.keys, 0, slots * std::mem::size_of::<Fragment>())?,
            values: with_values
                .then(|| read(&self.values, slots * self.stride))
                .transpose()?,
        })
    }
}

/// An image on its way back to the host ([`GpuImage::read_ahead`]).
pub(crate) struct PendingImage {
    layout: Layout,
    block_size: u32,
    columns: usize,
    ascending: bool,
    offsets: PendingRead,
    min_counts: Option<PendingRead>,
    head: Option<PendingRead>,
    next: Option<PendingRead>,
    slots: PendingRead,
    values: Option<PendingRead>,
}

impl PendingImage {
    /// Wait for the copies and return the image in its CPU twin's form.
    pub(crate) fn finish(self, ctx: &GlContext) -> Result<BuiltImage> {
        let words = |p: Option<PendingRead>| -> Result<Vec<u32>> {
            p.map_or(Ok(Vec::new()), |p| ctx.finish_read(p))
        };
        Ok(BuiltImage {
            layout: self.layout,
            block_size: self.block_size,
            columns: self.columns,
            offsets: ctx.finish_read(self.offsets)?,
            min_counts: words(self.min_counts)?,
            head: words(self.head)?,
            next: words(self.next)?,
            slots: ctx.finish_read(self.slots)?,
            values: self.values.map_or(Ok(Vec::new()), |p| ctx.finish_read(p))?,
            ascending: self.ascending,
        })
    }
}

pub(crate) fn layout_defines(
    defines: Defines,
    name: &str,
    layout: Layout,
    binding: u32,
    access: &str,
) -> Defines {
    let mut defines = defines
        .set(&format!("{name}_LAYOUT"), layout.glsl_id())
        .set(&format!("{name}_ACCESS"), access);
    for k in 0..5 {
        defines = defines.set(&format!("{name}_BINDING_{k}"), binding + k);
    }
    defines
}

/// `defines` for an output image whose values are not written (`OUT_VALUES` 0, see
/// [`GpuImage::with_values`]); unchanged when they are, so those programs stay as they were.
pub(crate) fn keys_only(defines: Defines, with_values: bool) -> Defines {
    if with_values {
        defines
    } else {
        defines.set("OUT_VALUES", 0)
    }
}

/// Refuse a merge that would read the values of an input whose values were never written
/// ([`GpuImage::with_values`]): only a deep output written by its keys alone (`out_values`
/// false) reads none.
fn check_input_values(
    inputs: &[&GpuImage],
    deep_layout: Option<Layout>,
    out_values: bool,
) -> Result<()> {
    let reads_values = deep_layout.is_none() || out_values;
    if reads_values && inputs.iter().any(|image| !image.with_values) {
        return Err(Error::internal(
            "a deep image merged by its keys alone was merged again",
        ));
    }
    Ok(())
}

fn base_defines(block_size: u32) -> Defines {
    Defines::default()
        .set("GROUP_SIZE", GROUP_SIZE)
        .set("BLOCK_SIZE", block_size)
}

/// Allocate the buffers of an image with `offsets` already computed (`samples` in all).
#[allow(clippy::too_many_arguments)]
fn allocate<'a>(
    ctx: &'a GlContext,
    layout: Layout,
    block_size: u32,
    ascending: bool,
    pixels: usize,
    samples: usize,
    stride: usize,
    offsets: GpuBuffer<'a>,
    with_values: bool,
) -> Result<GpuImage<'a>> {
    let slots = samples + usize::from(layout.links_lists());
    // Every slot a reader reaches is written by the build or merge that fills the image (reads
    // stop at each pixel's count), so the slots start unset: poisoned in strict mode, which
    // fails any read of one.
    let keys = ctx.scratch((slots * std::mem::size_of::<Fragment>()).max(16))?;
    let values = ctx.scratch(if with_values { slots * stride * 4 } else { 0 }.max(16))?;
    let (aux1, aux2) = if layout.links_lists() {
        let next = ctx.zeroed(slots * 4)?;
        // The node counter starts at 1 (node 0 is the null node): set on the GPU.
        ctx.set_u32_one(&next, 0)?;
        (ctx.zeroed(pixels * 4)?, next)
    } else if !layout.groups_min_counts() {
        (ctx.zeroed(4)?, ctx.zeroed(4)?)
    } else {
        let groups = pixels.div_ceil(GROUP_SIZE as usize);
        let min_counts = ctx.zeroed(groups * 4)?;
        let program = ctx.use_stage(
            "min_counts.comp",
            &base_defines(layout.block(block_size)).set("LAYOUT", layout.glsl_id()),
        )?;
        ctx.uniform_u32(program, "u_pixels", pixels as u32);
        offsets.bind(0);
        min_counts.bind(1);
        ctx.set_dispatch_bytes((offsets.bytes + min_counts.bytes) as u64);
        ctx.dispatch(groups, 64)?;
        (min_counts, ctx.zeroed(4)?)
    };
    Ok(GpuImage {
        layout,
        block_size,
        ascending: !layout.links_lists() || ascending,
        pixels,
        samples,
        stride,
        keys,
        values,
        offsets,
        aux1,
        aux2,
        with_values,
    })
}

mod build;
mod deep_writes;
mod kway;
mod pairwise;
mod relayout;
mod sources;

pub use build::{build_from_stream, build_image, upload_stream, Stream};
pub use deep_writes::DeepWrites;
pub use kway::{merge_deep_kway, merge_flat_kway, GpuStack};
pub use pairwise::{merge_deep, merge_deep_written, merge_flat, merge_program_binary};
pub(crate) use pairwise::{merge_deep_listing, merge_flat_listing, Listing};
pub use relayout::relayout;
pub use sources::{pack_sources, source_runs, DeepReadback, GpuSourceRuns};

/// How one merge runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MergeSpec {
    /// Stepwise or register blocks.
    pub method: MergeMethod,
    /// Register block size (and BIA block).
    pub block_size: u32,
    /// Walk the lists back to front (see `glsl/merge.comp`).
    pub descending: bool,
    /// How RBM indexes its blocks (ignored by stepwise).
    pub rbm_blocks: super::RbmBlocks,
}

impl MergeSpec {
    pub(crate) fn defines(
        &self,
        a: &GpuImage,
        b: &GpuImage,
        out: Option<Layout>,
    ) -> Result<Defines> {
        for (name, image) in [("A", a), ("B", b)] {
            if image.layout.links_lists() && image.ascending == self.descending {
                return Err(Error::internal(format!(
                    "list {name} runs the other way from the merge"
                )));
            }
        }
        // A stepwise merge touching no BIA image does not depend on the block size.
        let uses_block = self.method == MergeMethod::RegisterBlock
            || [Some(a.layout), Some(b.layout), out]
                .into_iter()
                .flatten()
                .any(|layout| layout.block(self.block_size) != 1);
        let d = base_defines(if uses_block { self.block_size } else { 1 })
            .set(
                "MERGE_METHOD",
                u32::from(self.method == MergeMethod::RegisterBlock),
            )
            .set("MERGE_DESC", u32::from(self.descending))
            .set(
                "RBM_SHIFT",
                u32::from(
                    self.method == MergeMethod::RegisterBlock
                        && self.rbm_blocks == super::RbmBlocks::Shifted,
                ),
            );
        let d = layout_defines(d, "A", a.layout, 0, "readonly");
        Ok(layout_defines(d, "B", b.layout, 5, "readonly"))
    }
}

/// A flat composite resident on the GPU.
pub struct GpuFlat<'a> {
    /// `stride` values per pixel.
    pub values: GpuBuffer<'a>,
    /// Per pixel (input, index, Z bits, flags): 1 = has a front sample, 2 = needs tidying.
    pub front: GpuBuffer<'a>,
    /// Pixels.
    pub pixels: usize,
    /// One u32: how many pixels are flagged 2 (needs tidying).
    pub flagged: GpuBuffer<'a>,
}

impl GpuFlat<'_> {
    /// Bytes of the composite's values and front records.
    pub fn bytes(&self) -> u64 {
        (self.values.bytes + self.front.bytes) as u64
    }
}
