//! GPU stream compaction of flagged pixels (twin: `cpu::compact`): `compact.comp` marks
//! the pixels a [`FlagField`] selects, the GPU scan ranks them, and the scatter writes each
//! marked pixel at its rank, so the list is in pixel order. One u32 (the count) is read back, to
//! size the list and the dispatches that use it.

use super::buffer::GpuBuffer;
use super::program::Defines;
use super::scan::exclusive_scan_buffer;
use super::GlContext;
use crate::error::Result;
use crate::vocab::{FlagField, GROUP_SIZE};

/// The marked pixels, resident.
pub struct GpuCompacted<'a> {
    /// 1 per marked pixel, 0 otherwise.
    pub marks: GpuBuffer<'a>,
    /// Exclusive scan of `marks` (`pixels + 1`): a marked pixel's position in `list`.
    pub rank: GpuBuffer<'a>,
    /// The marked pixels in increasing order (`count` of them; at least 16 bytes).
    pub list: GpuBuffer<'a>,
    /// How many are marked.
    pub count: usize,
}

/// Run stage `stage` of `compact.comp` (0: mark, 1: scatter) over `pixels`, with `buffers`
/// bound to bindings 0, 1, ... in order.
fn run_stage(
    ctx: &GlContext,
    stage: u32,
    field: FlagField,
    pixels: usize,
    buffers: &[&GpuBuffer],
) -> Result<()> {
    let program = ctx.use_stage(
        "compact.comp",
        &Defines::default()
            .set("GROUP_SIZE", GROUP_SIZE)
            .set("STAGE", stage)
            .set("FLAG_STRIDE", field.stride)
            .set("FLAG_COMPONENT", field.component)
            .set("FLAG_MASK", format!("{:#x}u", field.mask)),
    )?;
    let bindings: Vec<(u32, &GpuBuffer)> = (0..).zip(buffers.iter().copied()).collect();
    ctx.run_per_pixel(program, pixels, &bindings)
}

/// Mark, rank and list the first `pixels` pixels of `flags` that `field` selects.
pub fn compact_flagged<'a>(
    ctx: &'a GlContext,
    flags: &GpuBuffer,
    pixels: usize,
    field: FlagField,
) -> Result<GpuCompacted<'a>> {
    let marks = ctx.scratch((pixels * 4).max(16))?;
    if pixels > 0 {
        run_stage(ctx, 0, field, pixels, &[flags, &marks])?;
    }
    let rank = exclusive_scan_buffer(ctx, &marks, pixels)?;
    let count = rank.read_range::<u32>(pixels, 1)[0] as usize;
    let list = ctx.scratch((count * 4).max(16))?;
    if count > 0 {
        run_stage(ctx, 1, field, pixels, &[flags, &marks, &rank, &list])?;
    }
    Ok(GpuCompacted {
        marks,
        rank,
        list,
        count,
    })
}
