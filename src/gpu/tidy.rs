//! GPU tidying of chosen pixels (twin: `cpu::tidy`): `glsl/tidy.comp` walks each listed
//! pixel of a merged, sorted, linearised (CSR) fragment list front to back, splitting and merging
//! overlapping volumes on the fly (docs/architecture.md, "Tidy"). In its three modes it
//! - flattens: writes the row and front sample the reference gets from
//!   `composite::tidy_pixel` + `composite::flatten_pixel` ([`tidy_flatten_pixels`], and
//!   [`tidy_flat_in_place`] for the pixels a flat merge flagged);
//! - counts and emits: writes the tidied list itself, as `composite::tidy_pixel` makes it
//!   ([`tidy_count_pixels`], [`tidy_emit_pixels`]); [`tidy_deep`] builds a whole tidied deep
//!   image that way: `tidy_assemble.comp` gates every pixel (`needs_tidy`), `compact.comp` lists
//!   the marked ones, the walk counts them, the counts are scanned and the walk emits them while
//!   the other pixels are copied. Only two counts are read back.
//!
//! One invocation per listed pixel, O(1) memory each; the list may hold any number of samples
//! (the work per pixel grows with samples × boundaries, see the shader header).
//!
//! Passes: llvmpipe silently stops every loop of an invocation after 65535 iterations in all, so
//! each invocation works to [`WORK_BUDGET`] loop iterations, saves its walk in a state buffer and
//! the host dispatches again (reading one counter) until no pixel is left; pixels already done
//! return at once. Lists of a few tens of samples finish in one pass; 400-sample lists with
//! hundreds of boundaries took several. A pixel with more samples alive at one boundary than
//! one pass can take (about `WORK_BUDGET / (6 · columns + 4)`: 1000 with 7 columns) is reported
//! as too long; the callers here read that one pixel back and finish it on the host with the reference
//! (`composite::tidy_list`, f64: within the GPU's own tolerance of the exact result).
//!
//! Precision: f32 throughout with stable `log1p`/`expm1` replacements, against the reference's
//! f64; the tests hold every output to 1e-5 absolute (relative above magnitude 1).

use super::buffer::GpuBuffer;
use super::compact::{compact_flagged, GpuCompacted};
use super::program::Defines;
use super::resident::{ColumnSpec, GpuFlat, GpuImage};
use super::scan::exclusive_scan_buffer;
use super::GlContext;
use crate::composite::{tidy_flatten_list, tidy_list, CompositeChannels};
use crate::error::{Error, Result};
use crate::vocab::{FlagField, Fragment, Layout, TidiedPixels, GATE_LIMIT, GROUP_SIZE};

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
        too_long_positions(&self.state, self.count, self.too_long)
    }
}

/// The compiled walk in one of `tidy.comp`'s modes (`TIDY_MODE`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum WalkMode {
    Flatten = 0,
    Count = 1,
    Emit = 2,
}

/// What a walk reads: the `count` pixels whose indices are in `pixels` (u32 each) of the CSR
/// list `offsets` (u32, one past the largest listed pixel at least), `keys` (`Fragment`, in merge
/// order per pixel) and `values` (`columns.stride()` floats per slot). A merged image in
/// `Layout::Linearised` has exactly these buffers ([`WalkList::of`]).
#[derive(Clone, Copy)]
pub struct WalkList<'b, 'a> {
    /// Per-pixel offsets of the CSR list.
    pub offsets: &'b GpuBuffer<'a>,
    /// Fragment keys.
    pub keys: &'b GpuBuffer<'a>,
    /// Composited values.
    pub values: &'b GpuBuffer<'a>,
    /// The listed pixels.
    pub pixels: &'b GpuBuffer<'a>,
    /// How many are listed.
    pub count: usize,
}

impl<'b, 'a> WalkList<'b, 'a> {
    /// The `listed` pixels of a linearised `image`.
    pub fn of(image: &'b GpuImage<'a>, listed: &'b GpuCompacted<'a>) -> Self {
        WalkList {
            offsets: &image.offsets,
            keys: &image.keys,
            values: &image.values,
            pixels: &listed.list,
            count: listed.count,
        }
    }
}

/// Bind the list's `keys` (0), `values` (1), `offsets` (2), `pixels` (3), a fresh state buffer
/// (6) and the counters (7) (the mode's outputs are bound by the caller), then dispatch the walk
/// until no listed pixel is left running. Returns (state, passes, pixels too long for one pass).
fn run_walk<'a>(
    ctx: &'a GlContext,
    program: glow::Program,
    list: WalkList,
) -> Result<(GpuBuffer<'a>, usize, usize)> {
    let WalkList {
        offsets,
        keys,
        values,
        pixels,
        count,
    } = list;
    if pixels.bytes < count * 4 {
        return Err(Error::internal(format!(
            "tidy: pixel list buffer too small for {count} pixels"
        )));
    }
    let state = ctx.zeroed(count * 16)?;
    if count == 0 {
        return Ok((state, 0, 0));
    }
    let counters = ctx.zeroed(16)?;
    ctx.use_program("tidy.comp", program);
    ctx.uniform_u32(program, "u_count", count as u32);
    keys.bind(0);
    values.bind(1);
    offsets.bind(2);
    pixels.bind(3);
    state.bind(6);
    counters.bind(7);
    let (mut passes, mut too_long) = (0, 0);
    // Pass after pass until no pixel yielded; pixels already finished return at once.
    loop {
        ctx.zero_small(&counters, 16)?;
        ctx.dispatch(count, GROUP_SIZE as usize)?;
        passes += 1;
        let c: Vec<u32> = counters.read(2);
        too_long += c[1] as usize;
        if c[0] == 0 {
            return Ok((state, passes, too_long));
        }
        if passes >= MAX_PASSES {
            return Err(Error::Gl(format!(
                "tidy: {} pixels still unfinished after {MAX_PASSES} passes",
                c[0]
            )));
        }
    }
}

fn walk_program(ctx: &GlContext, columns: &ColumnSpec, mode: WalkMode) -> Result<glow::Program> {
    ctx.program("tidy.comp", &defines(columns).set("TIDY_MODE", mode as u32))
}

/// Tidy and flatten the listed pixels of `list`.
pub fn tidy_flatten_pixels<'a>(
    ctx: &'a GlContext,
    list: WalkList,
    columns: &ColumnSpec,
) -> Result<GpuTidied<'a>> {
    let stride = columns.stride();
    let count = list.count;
    ctx.check_fits(count * stride * 4, "the tidied values")?;
    let out_values = ctx.zeroed(count * stride * 4)?;
    let out_front = ctx.zeroed(count * 16)?;
    let program = walk_program(ctx, columns, WalkMode::Flatten)?;
    out_values.bind(4);
    out_front.bind(5);
    let (state, passes, too_long) = run_walk(ctx, program, list)?;
    Ok(GpuTidied {
        values: out_values,
        front: out_front,
        state,
        count,
        passes,
        too_long,
    })
}

/// Positions in a pixel list whose walk gave up (status 3 in `state`, `count` entries).
/// `too_long` of them, as `run_walk` counted: the state is only read when there are any.
fn too_long_positions(state: &GpuBuffer, count: usize, too_long: usize) -> Vec<usize> {
    if too_long == 0 {
        return Vec::new();
    }
    let state: Vec<[u32; 4]> = state.read(count);
    (0..count).filter(|&k| state[k][3] == 3).collect()
}

/// Per listed pixel, how many samples it has once tidied (twin: `cpu::tidy::tidy_count_pixels`),
/// as a resident buffer of `count` u32, with the positions in the list whose walk was too long
/// for one pass (their entries are not valid; `tidy_deep` finishes them on the host).
pub fn tidy_count_pixels<'a>(
    ctx: &'a GlContext,
    list: WalkList,
    columns: &ColumnSpec,
) -> Result<(GpuBuffer<'a>, Vec<usize>)> {
    let count = list.count;
    let emitted = ctx.zeroed(count * 4)?;
    let program = walk_program(ctx, columns, WalkMode::Count)?;
    emitted.bind(8);
    let (state, _, too_long) = run_walk(ctx, program, list)?;
    Ok((emitted, too_long_positions(&state, count, too_long)))
}

/// Write the tidied lists of the `count` listed pixels into `tidied` (linearised, offsets
/// already scanned from the counts), each at its pixel's offset. Returns the positions in the
/// list whose walk was too long for one pass (their slots are not valid).
pub fn tidy_emit_pixels(
    ctx: &GlContext,
    list: WalkList,
    columns: &ColumnSpec,
    tidied: &GpuImage,
) -> Result<Vec<usize>> {
    let count = list.count;
    let emitted = ctx.zeroed(count * 4)?;
    let program = walk_program(ctx, columns, WalkMode::Emit)?;
    tidied.keys.bind(4);
    tidied.values.bind(5);
    emitted.bind(8);
    tidied.offsets.bind(9);
    let (state, _, too_long) = run_walk(ctx, program, list)?;
    Ok(too_long_positions(&state, count, too_long))
}

fn assemble_program(ctx: &GlContext, stage: u32, columns: &ColumnSpec) -> Result<glow::Program> {
    let program = ctx.program(
        "tidy_assemble.comp",
        &Defines::default()
            .set("GROUP_SIZE", GROUP_SIZE)
            .set("STAGE", stage)
            .set("GATE_LIMIT", GATE_LIMIT)
            .set("NUM_COLUMNS", columns.stride()),
    )?;
    ctx.use_program("tidy_assemble.comp", program);
    Ok(program)
}

/// Per pixel of a linearised list, 1 where it needs a tidy (twin: `cpu::tidy::tidy_gate`).
pub fn tidy_gate<'a>(
    ctx: &'a GlContext,
    offsets: &GpuBuffer,
    keys: &GpuBuffer,
    pixels: usize,
    columns: &ColumnSpec,
) -> Result<GpuBuffer<'a>> {
    let marks = ctx.scratch((pixels * 4).max(16))?;
    if pixels > 0 {
        let program = assemble_program(ctx, 0, columns)?;
        ctx.run_per_pixel(program, pixels, &[(0, offsets), (1, keys), (2, &marks)])?;
    }
    Ok(marks)
}

/// One pixel's list of a resident linearised image, read back: (keys, values).
fn read_pixel(image: &GpuImage, p: usize) -> (Vec<Fragment>, Vec<f32>) {
    let range: Vec<u32> = image.offsets.read_range(p, 2);
    let (start, n) = (range[0] as usize, (range[1] - range[0]) as usize);
    (
        image.keys.read_range(start, n),
        image
            .values
            .read_range(start * image.stride, n * image.stride),
    )
}

/// A tidied deep image on the GPU.
pub struct GpuTidiedDeep<'a> {
    /// The tidied image, linearised and ascending (the merged image itself when nothing needed
    /// a tidy).
    pub image: GpuImage<'a>,
    /// Per pixel, 1 where the walk tidied it (its values are new), 0 where it was copied.
    pub marks: GpuBuffer<'a>,
    /// Pixels the walk tidied.
    pub tidied_pixels: usize,
    /// Of those, the ones too long for the walk's per-pass budget, finished on the host.
    pub host_pixels: usize,
}

/// Tidy a merged, sorted, linearised image on the GPU (twin: `cpu::tidy::tidy_deep`): gate →
/// compact the marked pixels → walk in count mode → counts, scan → copy the untouched pixels and
/// walk the marked ones in emit mode. Only the marked count and the tidied total are read back
/// (plus the lists of pixels too long for one walk pass, which the host reference finishes).
pub fn tidy_deep<'a>(
    ctx: &'a GlContext,
    merged: GpuImage<'a>,
    columns: &ColumnSpec,
) -> Result<GpuTidiedDeep<'a>> {
    if merged.layout != Layout::Linearised || !merged.ascending {
        return Err(Error::internal(
            "tidy_deep needs a linearised, ascending image",
        ));
    }
    let pixels = merged.pixels;
    let stride = merged.stride;
    let marks = tidy_gate(ctx, &merged.offsets, &merged.keys, pixels, columns)?;
    let listed = compact_flagged(ctx, &marks, pixels, FlagField::WORD)?;
    if listed.count == 0 {
        return Ok(GpuTidiedDeep {
            image: merged,
            marks,
            tidied_pixels: 0,
            host_pixels: 0,
        });
    }
    let (emitted, long_counted) = tidy_count_pixels(ctx, WalkList::of(&merged, &listed), columns)?;
    // Pixels too long for one walk pass: tidied by the host reference from their lists.
    let reference = CompositeChannels::from_alpha_of(&columns.alpha_of);
    let mut host_lists = Vec::new();
    for &k in &long_counted {
        let p = listed.list.read_range::<u32>(k, 1)[0] as usize;
        let (keys, values) = read_pixel(&merged, p);
        let lists = tidy_list(&keys, &values, stride, &reference);
        emitted.write_range(k, &[lists.0.len() as u32]);
        host_lists.push((p, lists));
    }
    let counts = ctx.scratch((pixels * 4).max(16))?;
    let program = assemble_program(ctx, 1, columns)?;
    ctx.uniform_u32(program, "u_pixels", pixels as u32);
    merged.offsets.bind(0);
    marks.bind(2);
    listed.rank.bind(3);
    emitted.bind(4);
    counts.bind(5);
    ctx.dispatch(pixels, GROUP_SIZE as usize)?;
    let offsets = exclusive_scan_buffer(ctx, &counts, pixels)?;
    drop(counts);
    let samples = offsets.read_range::<u32>(pixels, 1)[0] as usize;
    ctx.check_fits(samples * 16.max(stride * 4), "the tidied deep image")?;
    let tidied = GpuImage {
        layout: Layout::Linearised,
        block_size: merged.block_size,
        ascending: true,
        pixels,
        samples,
        stride,
        keys: ctx.scratch((samples * 16).max(16))?,
        values: ctx.scratch((samples * stride * 4).max(16))?,
        offsets,
        aux1: ctx.zeroed(4)?,
        aux2: ctx.zeroed(4)?,
        with_values: true,
    };
    if merged.samples > 0 {
        let program = assemble_program(ctx, 2, columns)?;
        ctx.uniform_u32(program, "u_pixels", pixels as u32);
        ctx.uniform_u32(program, "u_count", merged.samples as u32);
        merged.offsets.bind(0);
        merged.keys.bind(1);
        marks.bind(2);
        merged.values.bind(6);
        tidied.offsets.bind(7);
        tidied.keys.bind(8);
        tidied.values.bind(9);
        ctx.dispatch(merged.samples, GROUP_SIZE as usize)?;
    }
    tidy_emit_pixels(ctx, WalkList::of(&merged, &listed), columns, &tidied)?;
    for (p, lists) in &host_lists {
        let at = tidied.offsets.read_range::<u32>(*p, 1)[0] as usize;
        tidied.keys.write_range(at, &lists.0);
        tidied.values.write_range(at * stride, &lists.1);
    }
    Ok(GpuTidiedDeep {
        image: tidied,
        marks,
        tidied_pixels: listed.count,
        host_pixels: host_lists.len(),
    })
}

/// The pixels of a flat merge that it flagged as needing a tidy (bit 2 of the front's fourth
/// word), listed on the GPU; `None` when the merge counted none (the usual case for points,
/// which then cost one 4-byte read here, a wait for the GPU). `points_only`: no input has
/// volumes, so none can be flagged and nothing is read (strict mode reads and checks it).
pub fn flagged_flat_pixels<'a>(
    ctx: &'a GlContext,
    flat: &GpuFlat,
    points_only: bool,
) -> Result<Option<GpuCompacted<'a>>> {
    if points_only && !ctx.is_strict() {
        return Ok(None);
    }
    let flagged = flat.flagged.read::<u32>(1)[0];
    if points_only && flagged > 0 {
        return Err(Error::internal(format!(
            "tidy: a merge of points only flagged {flagged} pixels as needing a tidy"
        )));
    }
    if flagged == 0 {
        return Ok(None);
    }
    compact_flagged(
        ctx,
        &flat.front,
        flat.pixels,
        FlagField::NEEDS_TIDY_IN_FRONT,
    )
    .map(Some)
}

/// Tidy and flatten the `listed` pixels (`flagged_flat_pixels`) from the same merge's lists
/// resident in `merged` (linearised, ascending), and write them into `flat` in place (twin:
/// `cpu::tidy::tidy_flatten_pixels` on the list). Returns how many were finished on the host
/// because one walk pass could not take them.
pub fn tidy_flat_in_place(
    ctx: &GlContext,
    merged: &GpuImage,
    flat: &GpuFlat,
    listed: &GpuCompacted,
    columns: &ColumnSpec,
) -> Result<usize> {
    let stride = columns.stride();
    if listed.count == 0 {
        return Ok(0);
    }
    let tidied = tidy_flatten_pixels(ctx, WalkList::of(merged, listed), columns)?;
    let program = assemble_program(ctx, 3, columns)?;
    ctx.uniform_u32(program, "u_count", listed.count as u32);
    listed.list.bind(0);
    tidied.values.bind(1);
    tidied.front.bind(2);
    flat.values.bind(3);
    flat.front.bind(4);
    ctx.dispatch(listed.count, GROUP_SIZE as usize)?;
    let long = tidied.too_long_pixels();
    let reference = CompositeChannels::from_alpha_of(&columns.alpha_of);
    for &k in &long {
        let p = listed.list.read_range::<u32>(k, 1)[0] as usize;
        let (keys, values) = read_pixel(merged, p);
        let (values, front) = tidy_flatten_list(&keys, &values, stride, &reference);
        flat.values.write_range(p * stride, &values);
        flat.front.write_range(p, &[front]);
    }
    Ok(long.len())
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
        return Err(Error::internal(format!(
            "tidy: inconsistent CSR input ({} offsets, {} keys, {} values, stride {stride})",
            offsets.len(),
            keys.len(),
            values.len()
        )));
    }
    let offset_buffer = ctx.upload(offsets)?;
    let key_buffer = ctx.upload(keys)?;
    let value_buffer = ctx.upload(values)?;
    let pixel_buffer = ctx.upload(pixels)?;
    let list = WalkList {
        offsets: &offset_buffer,
        keys: &key_buffer,
        values: &value_buffer,
        pixels: &pixel_buffer,
        count: pixels.len(),
    };
    let out = tidy_flatten_pixels(ctx, list, columns)?;
    let mut result = out.read(stride);
    // The rare pixels too long for the GPU's per-pass budget: the host reference.
    let reference = CompositeChannels::from_alpha_of(&columns.alpha_of);
    for k in out.too_long_pixels() {
        let p = pixels[k] as usize;
        let (start, end) = (offsets[p] as usize, offsets[p + 1] as usize);
        let (values, front) = tidy_flatten_list(
            &keys[start..end],
            &values[start * stride..end * stride],
            stride,
            &reference,
        );
        result.values[k * stride..(k + 1) * stride].copy_from_slice(&values);
        result.front[k] = front;
    }
    Ok(result)
}
