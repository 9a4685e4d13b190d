//! GPU stream compaction of flagged pixels (twin: `cpu::compact`): `compact.comp` marks
//! the pixels a [`FlagField`] selects, the GPU scan ranks them, and the scatter writes each
//! marked pixel at its rank, so the list is in pixel order. One u32 (the count) is read back, to
//! size the list and the dispatches that use it.

use glow::HasContext;

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

fn program(ctx: &GlContext, stage: u32, field: FlagField) -> Result<glow::Program> {
    ctx.program(
        "compact.comp",
        &Defines::default()
            .set("GROUP_SIZE", GROUP_SIZE)
            .set("STAGE", stage)
            .set("FLAG_STRIDE", field.stride)
            .set("FLAG_COMPONENT", field.component)
            .set("FLAG_MASK", format!("{:#x}u", field.mask)),
    )
}

/// Mark, rank and list the first `pixels` pixels of `flags` that `field` selects.
pub fn compact_flagged<'a>(
    ctx: &'a GlContext,
    flags: &GpuBuffer,
    pixels: usize,
    field: FlagField,
) -> Result<GpuCompacted<'a>> {
    let gl = &ctx.gl;
    let marks = GpuBuffer::uninit(gl, (pixels * 4).max(16))?;
    if pixels > 0 {
        let mark = program(ctx, 0, field)?;
        // SAFETY: the program belongs to this context.
        unsafe { gl.use_program(Some(mark)) };
        ctx.uniform_u32(mark, "u_pixels", pixels as u32);
        flags.bind(0);
        marks.bind(1);
        ctx.dispatch(pixels, GROUP_SIZE as usize)?;
    }
    let rank = exclusive_scan_buffer(ctx, &marks, pixels)?;
    let count = rank.read_range::<u32>(pixels, 1)[0] as usize;
    let list = GpuBuffer::uninit(gl, (count * 4).max(16))?;
    if count > 0 {
        let scatter = program(ctx, 1, field)?;
        // SAFETY: the program belongs to this context.
        unsafe { gl.use_program(Some(scatter)) };
        ctx.uniform_u32(scatter, "u_pixels", pixels as u32);
        flags.bind(0);
        marks.bind(1);
        rank.bind(2);
        list.bind(3);
        ctx.dispatch(pixels, GROUP_SIZE as usize)?;
    }
    Ok(GpuCompacted {
        marks,
        rank,
        list,
        count,
    })
}
