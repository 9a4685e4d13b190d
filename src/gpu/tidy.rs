//! GPU tidy-and-flatten of chosen pixels (twin: [`crate::cpu::tidy`]): `glsl/tidy.comp` walks
//! each listed pixel of a merged, sorted, linearised (CSR) fragment list front to back, splitting
//! and merging overlapping volumes on the fly, and writes the flattened row and front sample the
//! reference gets from `composite::tidy_pixel` + `composite::flatten_pixel` (DESIGN §4).
//!
//! One invocation per listed pixel, O(1) memory each; the list may hold any number of samples
//! (the work per pixel grows with samples × boundaries, see the shader header). It is meant for
//! the pixels `merge.comp` flags as needing a tidy: with a linearised merged image resident, the
//! whole flat merge stays on the GPU.
//!
//! Passes: llvmpipe silently stops every loop of an invocation after 65535 iterations in all, so
//! each invocation works to [`WORK_BUDGET`] loop iterations, saves its walk in a state buffer and
//! the host dispatches again (reading one counter) until no pixel is left; pixels already done
//! return at once. Lists of a few tens of samples finish in one pass; 400-sample lists with
//! hundreds of boundaries took several. A pixel with more samples alive at one boundary than
//! one pass can take (about `WORK_BUDGET / (6 · columns + 4)`: 1000 with 7 columns) is reported
//! in [`GpuTidied::too_long`] with its values left invalid; the host wrapper finishes those with
//! the CPU twin.
//!
//! Precision: f32 throughout with stable `log1p`/`expm1` replacements, against the reference's
//! f64; the tests hold every output to 1e-5 absolute (relative above magnitude 1).

use super::buffer::GpuBuffer;
use super::engine::{check_fits, ColumnSpec};
use super::program::Defines;
use super::GlContext;
pub use crate::cpu::tidy::TidiedPixels;
use crate::cpu::{Fragment, GROUP_SIZE};
use crate::error::{Error, Result};

/// Loop iterations one invocation may charge before it saves its walk and yields (the shader's
/// `WORK_BUDGET`): below llvmpipe's silent cap of 65535 loop iterations per invocation, with room
/// for the loops the charge does not count exactly.
pub const WORK_BUDGET: u32 = 49152;

/// Most dispatches one call runs: each takes every unfinished pixel at least one boundary further,
/// so this only trips on a broken driver (a pixel has at most 2 boundaries per sample).
const MAX_PASSES: usize = 1 << 20;

/// The shader's specialisation: the column table as `merge.comp` gets it (same define names).
fn defines(columns: &ColumnSpec) -> Defines {
    columns.defines(
        Defines::default()
            .set("GROUP_SIZE", GROUP_SIZE)
            .set("WORK_BUDGET", WORK_BUDGET),
    )
}

/// The result on the GPU: `columns.stride()` floats and one `uvec4` front per listed pixel, in
/// list order (the formats of `engine::GpuFlat`).
pub struct GpuTidied<'a> {
    /// Flattened values.
    pub values: GpuBuffer<'a>,
    /// (input, sample index, Z bits, 1) of the front-most sample with alpha, or zeros.
    pub front: GpuBuffer<'a>,
    /// Per listed pixel the saved walk (boundary bits, lo, hi, status); status 3 = too long.
    pub state: GpuBuffer<'a>,
    /// Listed pixels.
    pub count: usize,
    /// Dispatches it took.
    pub passes: usize,
    /// Listed pixels the GPU could not finish (status 3 in `state`): more samples alive at one
    /// boundary than one pass's budget allows. Their values are not valid.
    pub too_long: usize,
}

impl GpuTidied<'_> {
    /// Read both buffers back.
    pub fn read(&self, stride: usize) -> TidiedPixels {
        TidiedPixels {
            values: self.values.read(self.count * stride),
            front: self.front.read(self.count),
        }
    }

    /// Positions in the pixel list of the pixels left to the host (`too_long`).
    pub fn too_long_pixels(&self) -> Vec<usize> {
        if self.too_long == 0 {
            return Vec::new();
        }
        let state: Vec<[u32; 4]> = self.state.read(self.count);
        (0..self.count).filter(|&k| state[k][3] == 3).collect()
    }
}

/// Tidy and flatten the `count` pixels whose indices are in `pixels` (u32 each) of the CSR list
/// `offsets` (u32, one past the largest listed pixel at least), `keys` (`Fragment`, in merge
/// order per pixel) and `values` (`columns.stride()` floats per slot). A merged image in
/// `Layout::Linearised` has exactly these buffers (`GpuImage::offsets`, `keys`, `values`).
pub fn tidy_flatten_pixels<'a>(
    ctx: &'a GlContext,
    offsets: &GpuBuffer,
    keys: &GpuBuffer,
    values: &GpuBuffer,
    pixels: &GpuBuffer,
    count: usize,
    columns: &ColumnSpec,
) -> Result<GpuTidied<'a>> {
    let stride = columns.stride();
    if pixels.bytes < count * 4 {
        return Err(Error::Gl(format!(
            "tidy: pixel list buffer too small for {count} pixels"
        )));
    }
    check_fits(ctx, count * stride * 4, "the tidied values")?;
    let mut out = GpuTidied {
        values: GpuBuffer::zeroed(&ctx.gl, count * stride * 4)?,
        front: GpuBuffer::zeroed(&ctx.gl, count * 16)?,
        state: GpuBuffer::zeroed(&ctx.gl, count * 16)?,
        count,
        passes: 0,
        too_long: 0,
    };
    if count == 0 {
        return Ok(out);
    }
    let counters = GpuBuffer::zeroed(&ctx.gl, 16)?;
    let program = ctx.program("tidy.comp", &defines(columns))?;
    // SAFETY: the program belongs to this context.
    unsafe { glow::HasContext::use_program(&ctx.gl, Some(program)) };
    ctx.uniform_u32(program, "u_count", count as u32);
    keys.bind(0);
    values.bind(1);
    offsets.bind(2);
    pixels.bind(3);
    out.values.bind(4);
    out.front.bind(5);
    out.state.bind(6);
    counters.bind(7);
    // Pass after pass until no pixel yielded; pixels already finished return at once.
    loop {
        counters.write(&[0u32, 0, 0, 0]);
        ctx.dispatch(count, GROUP_SIZE as usize)?;
        out.passes += 1;
        let [running, too_long, _, _] = {
            let c: Vec<u32> = counters.read(4);
            [c[0], c[1], c[2], c[3]]
        };
        out.too_long += too_long as usize;
        if running == 0 {
            return Ok(out);
        }
        if out.passes >= MAX_PASSES {
            return Err(Error::Gl(format!(
                "tidy: {running} pixels still unfinished after {MAX_PASSES} passes"
            )));
        }
    }
}

/// Upload a CSR list, tidy and flatten `pixels` on the GPU, read the result back (for tests and
/// for callers whose merged lists are on the host).
pub fn tidy_flatten_pixels_host(
    ctx: &GlContext,
    offsets: &[u32],
    keys: &[Fragment],
    values: &[f32],
    pixels: &[u32],
    columns: &ColumnSpec,
) -> Result<TidiedPixels> {
    let stride = columns.stride();
    let total = offsets.last().copied().unwrap_or(0) as usize;
    if offsets.is_empty()
        || offsets.windows(2).any(|w| w[0] > w[1])
        || total > keys.len()
        || values.len() < total * stride
        || pixels.iter().any(|&p| p as usize + 1 >= offsets.len())
    {
        return Err(Error::Gl(format!(
            "tidy: inconsistent CSR input ({} offsets, {} keys, {} values, stride {stride})",
            offsets.len(),
            keys.len(),
            values.len()
        )));
    }
    let gl = &ctx.gl;
    let offset_buffer = GpuBuffer::from_slice(gl, offsets)?;
    let key_buffer = GpuBuffer::from_slice(gl, keys)?;
    let value_buffer = GpuBuffer::from_slice(gl, values)?;
    let pixel_buffer = GpuBuffer::from_slice(gl, pixels)?;
    let out = tidy_flatten_pixels(
        ctx,
        &offset_buffer,
        &key_buffer,
        &value_buffer,
        &pixel_buffer,
        pixels.len(),
        columns,
    )?;
    let mut result = out.read(stride);
    // The rare pixels too long for the GPU's per-pass budget: the CPU twin, same arithmetic.
    for k in out.too_long_pixels() {
        let one = crate::cpu::tidy::tidy_flatten_pixels(
            offsets,
            keys,
            values,
            &pixels[k..k + 1],
            &columns.alpha_of,
        );
        result.values[k * stride..(k + 1) * stride].copy_from_slice(&one.values);
        result.front[k] = one.front[0];
    }
    Ok(result)
}
