//! GPU per-pixel sort (twin: [`crate::cpu::sort`]): `glsl/sort.comp` sorts every pixel of a
//! linearised (CSR) fragment buffer into merge order (DESIGN §4) in place, stably, optionally
//! permuting a parallel value buffer (`columns` floats per slot, the engine's layout) with it.
//!
//! One invocation per pixel, [`GROUP_SIZE`] per work group, any pixel count (the dispatch is
//! split into rows of at most 65535 groups). Short lists (up to [`REG_SORT_SIZE`]) are sorted
//! entirely in registers by a sorting network; longer ones merge their register-sorted chunks
//! through a scratch buffer this module allocates (the same size as the fragments). See the
//! shader's header for the algorithm.
//!
//! Where it belongs in the pipeline: after a stream (counts → offsets, keys, values) of an input
//! that is not known to be sorted is uploaded, and before it is scattered into its layout. The
//! stream is linearised, so `engine::build_image`'s scanned offsets and its uploaded stream key
//! and value buffers are exactly this stage's inputs; the other layouts (LL, IA, BIA) are not
//! sorted in place, they are built from the sorted stream.
//!
//! Cost: a scratch buffer as large as the fragments (plus 8 bytes per slot with values), one
//! read pass for pixels already in order, and for longer lists `ceil(log2(n / REG_SORT_SIZE))`
//! merge passes. On llvmpipe it is several times slower than the CPU twin (about 2.3 s for 4 M
//! samples in lists of 0-8 on two shared cores, against 0.2 s); it is meant for real GPUs.

use glow::HasContext;

use super::buffer::GpuBuffer;
use super::engine::check_fits;
use super::program::Defines;
use super::GlContext;
pub use crate::cpu::sort::REG_SORT_SIZE;
use crate::cpu::{Fragment, GROUP_SIZE};
use crate::error::{Error, Result};

/// A value buffer to permute along with the fragments: `columns` floats per fragment slot.
#[derive(Clone, Copy)]
pub struct SortValues<'b, 'a> {
    /// The values, slot after slot.
    pub values: &'b GpuBuffer<'a>,
    /// Floats per slot (at least 1).
    pub columns: usize,
}

/// Sort each of `pixel_count` pixels of `fragments` (slots `offsets[p]..offsets[p + 1]`,
/// `sample_count` slots in all) in place, and `values` with them when given.
pub fn sort_pixels(
    ctx: &GlContext,
    offsets: &GpuBuffer,
    fragments: &GpuBuffer,
    pixel_count: usize,
    sample_count: usize,
    values: Option<SortValues>,
) -> Result<()> {
    let fragment_bytes = std::mem::size_of::<Fragment>();
    if offsets.bytes < (pixel_count + 1) * 4 || fragments.bytes < sample_count * fragment_bytes {
        return Err(Error::Gl(format!(
            "sort: buffers too small for {pixel_count} pixels and {sample_count} samples"
        )));
    }
    if let Some(v) = values {
        if v.columns == 0 || v.values.bytes < sample_count * v.columns * 4 {
            return Err(Error::Gl(format!(
                "sort: value buffer too small for {sample_count} samples of {} columns",
                v.columns
            )));
        }
    }
    if pixel_count == 0 || sample_count < 2 {
        return Ok(());
    }
    let scratch_bytes = sample_count * fragment_bytes;
    check_fits(ctx, scratch_bytes, "the sort's scratch buffer")?;
    let scratch = GpuBuffer::uninit(&ctx.gl, scratch_bytes.max(16))?;
    // Positions: one u32 per slot for the fragments and one for the scratch.
    let positions = match values {
        Some(_) => Some(GpuBuffer::uninit(&ctx.gl, (sample_count * 8).max(16))?),
        None => None,
    };
    let defines = Defines::default()
        .set("GROUP_SIZE", GROUP_SIZE)
        .set("REG_SORT_SIZE", REG_SORT_SIZE)
        .set("WITH_VALUES", u32::from(values.is_some()))
        .set("NUM_COLUMNS", values.map_or(1, |v| v.columns));
    let program = ctx.program("sort.comp", &defines)?;
    // SAFETY: the program belongs to this context.
    unsafe { ctx.gl.use_program(Some(program)) };
    scratch.bind(2);
    if let Some(positions) = &positions {
        positions.bind(4);
    }
    ctx.uniform_u32(program, "u_pixels", pixel_count as u32);
    ctx.uniform_u32(program, "u_samples", sample_count as u32);
    offsets.bind(0);
    fragments.bind(1);
    if let Some(v) = values {
        v.values.bind(3);
    }
    ctx.dispatch(pixel_count, GROUP_SIZE as usize)
}

/// Upload `offsets` and `fragments`, sort on the GPU and read the fragments back.
pub fn sort_pixels_host(
    ctx: &GlContext,
    offsets: &[u32],
    fragments: &[Fragment],
) -> Result<Vec<Fragment>> {
    let pixel_count = check_offsets(offsets, fragments.len())?;
    let offset_buffer = GpuBuffer::from_slice(&ctx.gl, offsets)?;
    let fragment_buffer = GpuBuffer::from_slice(&ctx.gl, fragments)?;
    sort_pixels(
        ctx,
        &offset_buffer,
        &fragment_buffer,
        pixel_count,
        fragments.len(),
        None,
    )?;
    Ok(fragment_buffer.read(fragments.len()))
}

/// As [`sort_pixels_host`], permuting `values` (`columns` floats per slot) too.
pub fn sort_pixels_host_with_values(
    ctx: &GlContext,
    offsets: &[u32],
    fragments: &[Fragment],
    values: &[f32],
    columns: usize,
) -> Result<(Vec<Fragment>, Vec<f32>)> {
    let pixel_count = check_offsets(offsets, fragments.len())?;
    if columns == 0 || values.len() != fragments.len() * columns {
        return Err(Error::Gl(format!(
            "sort: {} values for {} fragments of {columns} columns",
            values.len(),
            fragments.len()
        )));
    }
    let offset_buffer = GpuBuffer::from_slice(&ctx.gl, offsets)?;
    let fragment_buffer = GpuBuffer::from_slice(&ctx.gl, fragments)?;
    let value_buffer = GpuBuffer::from_slice(&ctx.gl, values)?;
    sort_pixels(
        ctx,
        &offset_buffer,
        &fragment_buffer,
        pixel_count,
        fragments.len(),
        Some(SortValues {
            values: &value_buffer,
            columns,
        }),
    )?;
    Ok((
        fragment_buffer.read(fragments.len()),
        value_buffer.read(values.len()),
    ))
}

/// The pixel count of valid CSR `offsets` over `samples` slots; the shader trusts them.
fn check_offsets(offsets: &[u32], samples: usize) -> Result<usize> {
    let bad = |why: &str| Err(Error::Gl(format!("sort: offsets {why}")));
    if offsets.is_empty() {
        return if samples == 0 {
            Ok(0)
        } else {
            bad("are empty")
        };
    }
    if offsets[0] != 0 || offsets[offsets.len() - 1] as usize != samples {
        return bad("do not span the fragments");
    }
    if offsets.windows(2).any(|w| w[0] > w[1]) {
        return bad("decrease");
    }
    Ok(offsets.len() - 1)
}
