//! The cooperative schedule of a pairwise merge (`glsl/merge_coop.comp`,
//! [`crate::gpu::LongLists::Cooperative`]): `merge.comp` merges the pixels whose two lists are
//! short, one invocation each, and lists the long ones; a workgroup per listed pixel then ranks
//! every fragment of the pixel in parallel (a binary search of the other list) and writes it at
//! the position `merge.comp` would, so the output is the same bit for bit in every layout, for
//! both methods and both directions; flat output is composited front to back by one invocation
//! after the group's merge, so the order-dependent "over" sums stay as they were.
//!
//! It is only another schedule of the same merge, so its CPU twin is `merge.comp`'s:
//! `cpu::merge` (the tests compare all three).

use crate::error::{Error, Result};
use crate::gpu::resident::{
    keys_only, layout_defines, merge_deep_listing, merge_flat_listing, ColumnSpec, DeepWrites,
    GpuFlat, GpuImage, Listing, MergeSpec,
};
use crate::gpu::{GlContext, GpuBuffer, Layout, LongLists};

/// Invocations that merge one long pixel together.
const COOP_GROUP: u32 = 64;

/// Most workgroups one cooperative dispatch starts; each takes the listed pixels in turn, so the
/// host never reads back how many were listed.
const MAX_GROUPS: usize = 1024;

/// The buffer `merge.comp` lists the long pixels in and `merge_coop.comp` works in (binding 15):
/// the count, the pixels, then the LL walks' slots and flat output's merged order.
pub(crate) struct LongPixels<'a> {
    /// Pixels of more fragments than this are listed.
    pub threshold: u32,
    /// The list and the scratch.
    pub buffer: GpuBuffer<'a>,
    /// Where the LL walks start (A's slots, then B's after `a.samples`).
    walk_base: usize,
    /// Where flat output's merged order starts.
    order_base: usize,
}

impl<'a> LongPixels<'a> {
    /// The list and scratch for merging `a` with `b` under `long_lists` into flat output
    /// (`flat`) or a deep image; `None` when every pixel is merged per pixel.
    pub(crate) fn new(
        ctx: &'a GlContext,
        a: &GpuImage,
        b: &GpuImage,
        long_lists: LongLists,
        flat: bool,
    ) -> Result<Option<Self>> {
        let LongLists::Cooperative { threshold } = long_lists else {
            return Ok(None);
        };
        let samples = a.samples + b.samples;
        let walks = a.layout == Layout::LinkedList || b.layout == Layout::LinkedList;
        let walk_base = 1 + a.pixels;
        let order_base = walk_base + if walks { samples } else { 0 };
        let words = order_base + if flat { samples } else { 0 };
        if words > u32::MAX as usize {
            // A memory error: the band is cut smaller and merged again.
            return Err(Error::GlMemory(format!(
                "the cooperative merge's scratch of {words} words is past u32 indexing"
            )));
        }
        ctx.check_fits(words * 4, "the cooperative merge's scratch")?;
        // Only the count needs a value: the rest is written before it is read.
        let buffer = GpuBuffer::uninit(ctx, words * 4)?;
        buffer.write(&[0u32]);
        Ok(Some(LongPixels {
            threshold,
            buffer,
            walk_base,
            order_base,
        }))
    }

    /// Merge the pixels `merge.comp` listed (it ran with [`Self::bind_for_listing`]): `a` with
    /// `b` by `spec` into `out` (bound at 10, deep in `deep_layout`, its values written when
    /// `out_values`) or, with `None`, into the flat composite bound at 10 to 12.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn merge_listed(
        &self,
        ctx: &GlContext,
        a: &GpuImage,
        b: &GpuImage,
        spec: MergeSpec,
        columns: &ColumnSpec,
        deep_layout: Option<Layout>,
        out_values: bool,
    ) -> Result<()> {
        let defines = columns
            .defines(layout_defines(
                spec.defines(a, b, deep_layout)?,
                "OUT",
                deep_layout.unwrap_or(Layout::Linearised),
                10,
                "",
            ))
            .set("OUTPUT_DEEP", u32::from(deep_layout.is_some()))
            .set("COOP_GROUP", COOP_GROUP);
        let program = ctx.use_stage("merge_coop.comp", &keys_only(defines, out_values))?;
        ctx.uniform_u32(program, "u_pixels", a.pixels as u32);
        ctx.uniform_u32(program, "u_walk_base", self.walk_base as u32);
        ctx.uniform_u32(program, "u_a_samples", a.samples as u32);
        ctx.uniform_u32(program, "u_order_base", self.order_base as u32);
        self.buffer.bind(15);
        // merge.comp bound the inputs at 0 and 5 and the caller the output at 10: still bound.
        let groups = a.pixels.clamp(1, MAX_GROUPS);
        // At least: the inputs and the scratch are read (the output's share is not known here).
        ctx.set_dispatch_bytes(a.bytes().total() + b.bytes().total() + self.buffer.bytes as u64);
        ctx.dispatch(groups * COOP_GROUP as usize, COOP_GROUP as usize)
    }

    /// Where `merge.comp` lists the long pixels (the list's buffer and threshold).
    fn listing(&self) -> Listing<'_> {
        Listing {
            buffer: &self.buffer,
            threshold: self.threshold,
        }
    }
}

/// [`merge_deep`](crate::gpu::resident::merge_deep) with long lists merged as `long_lists`
/// says (same output): `merge.comp` lists the long pixels and merges the rest, then
/// `merge_coop.comp` merges the listed ones. With `with_values` false only the keys are
/// written (`GpuImage::with_values`); `merge.comp` writes as `writes` says (a group holding a
/// listed pixel writes directly).
#[allow(clippy::too_many_arguments)]
pub fn merge_deep_scheduled<'a>(
    ctx: &'a GlContext,
    a: &GpuImage<'a>,
    b: &GpuImage<'a>,
    layout: Layout,
    spec: MergeSpec,
    columns: &ColumnSpec,
    long_lists: LongLists,
    with_values: bool,
    writes: DeepWrites,
) -> Result<GpuImage<'a>> {
    let long = LongPixels::new(ctx, a, b, long_lists, false)?;
    let listing = long.as_ref().map(LongPixels::listing);
    let out = merge_deep_listing(
        ctx,
        a,
        b,
        layout,
        spec,
        columns,
        with_values,
        listing.as_ref(),
        writes,
    )?;
    if let Some(long) = &long {
        long.merge_listed(ctx, a, b, spec, columns, Some(layout), with_values)?;
    }
    Ok(out)
}

/// [`merge_flat`](crate::gpu::resident::merge_flat) with long lists merged as `long_lists`
/// says (same output), as [`merge_deep_scheduled`] does.
pub fn merge_flat_scheduled<'a>(
    ctx: &'a GlContext,
    a: &GpuImage<'a>,
    b: &GpuImage<'a>,
    spec: MergeSpec,
    columns: &ColumnSpec,
    long_lists: LongLists,
) -> Result<GpuFlat<'a>> {
    let long = LongPixels::new(ctx, a, b, long_lists, true)?;
    let listing = long.as_ref().map(LongPixels::listing);
    let out = merge_flat_listing(ctx, a, b, spec, columns, listing.as_ref())?;
    if let Some(long) = &long {
        long.merge_listed(ctx, a, b, spec, columns, None, true)?;
    }
    Ok(out)
}

/// Refuse a cooperative merge where the k-way kernel would run: it has no cooperative path.
pub(crate) fn refuse_kway(long_lists: LongLists) -> Result<()> {
    match long_lists {
        LongLists::PerPixel => Ok(()),
        // `MergeRequest::check` refuses this first, in the front end's words.
        LongLists::Cooperative { .. } => Err(Error::Usage(
            "the cooperative long-list merge is pairwise only: merge with the chain strategy \
             (the k-way kernel has no cooperative path yet)"
                .into(),
        )),
    }
}
