//! Relaying a merged deep image out (`relayout.comp`, twin `cpu::relayout::relayout`): a merge
//! writes each pixel's list from its own invocation, so into a linearised or blocked
//! interleaved image (past each group's interleaved minimum) neighbouring invocations write far
//! apart. With [`DeepWrites::Relayout`](super::DeepWrites::Relayout) the merge writes an interleaved
//! image instead, where they write side by side, and one more pass copies it into the layout
//! asked for, slot by slot of that layout, so that its writes coalesce too. It is one of the
//! ways `deep_writes.rs` keeps for the hardware to choose between.

use super::{allocate, base_defines, keys_only, layout_defines, ColumnSpec, GpuImage};
use crate::error::Result;
use crate::gpu::GlContext;
use crate::vocab::{Layout, GROUP_SIZE};

/// `image` rewritten in `layout` (the same pixels, counts and offsets; its offsets move into
/// the result), with BIA blocks of `block_size` samples. Only an interleaved image into a
/// linearised or blocked interleaved one is compiled: the pairs [`DeepWrites::Relayout`](super::DeepWrites::Relayout) uses.
/// Anything else is returned as it is.
pub fn relayout<'a>(
    ctx: &'a GlContext,
    image: GpuImage<'a>,
    layout: Layout,
    block_size: u32,
    columns: &ColumnSpec,
) -> Result<GpuImage<'a>> {
    if image.layout != Layout::Interleaved
        || !matches!(layout, Layout::Linearised | Layout::BlockedInterleaved)
    {
        return Ok(image);
    }
    let GpuImage {
        pixels,
        samples,
        stride,
        keys,
        values,
        offsets,
        aux1,
        aux2,
        with_values,
        ..
    } = image;
    // The output's per-group minimums (BIA: in whole blocks) are made from the offsets here.
    let block = layout.block(block_size);
    let out = allocate(
        ctx,
        layout,
        block,
        true,
        pixels,
        samples,
        stride,
        offsets,
        with_values,
    )?;
    // BLOCK_SIZE is the output's block: the interleaved input's addressing does not read it.
    let defines = layout_defines(
        layout_defines(
            base_defines(block),
            "IN",
            Layout::Interleaved,
            0,
            "readonly",
        ),
        "OUT",
        layout,
        10,
        "",
    );
    let defines = keys_only(defines, with_values);
    let program = ctx.use_stage("relayout.comp", &columns.defines(defines))?;
    ctx.uniform_u32(program, "u_pixels", pixels as u32);
    ctx.uniform_u32(program, "u_samples", samples as u32);
    keys.bind(0);
    values.bind(1);
    out.offsets.bind(2);
    aux1.bind(3);
    aux2.bind(4);
    out.bind(10);
    ctx.set_dispatch_bytes(2 * (keys.bytes + values.bytes) as u64);
    ctx.dispatch(samples, GROUP_SIZE as usize)?;
    Ok(out)
}
