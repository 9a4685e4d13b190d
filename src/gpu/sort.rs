//! GPU per-pixel sort (twin: `cpu::sort`): `glsl/sort.comp` sorts every pixel of a
//! linearised (CSR) fragment buffer into merge order (docs/architecture.md, "Depth order") in
//! place, stably, optionally permuting a parallel value buffer (`columns` floats per slot, the
//! engine's layout) with it. Pixels already in order are read, never written.
//!
//! Which path takes which length `n` (see the shader's header for the algorithm):
//! - `n <= REG_SORT_SIZE` ([`REG_SORT_SIZE`] = 16): one invocation per pixel ([`GROUP_SIZE`] a
//!   group) sorts the list in registers with a sorting network.
//! - `REG_SORT_SIZE < n <= LOCAL_SORT_SIZE` ([`LOCAL_SORT_SIZE`] = 512): one work group of
//!   [`LOCAL_GROUP_SIZE`] sorts the list in shared memory (register-sorted blocks, then parallel
//!   rank merges), after a parallel check that skips lists already in order.
//! - `n > LOCAL_SORT_SIZE`: each chunk of `LOCAL_SORT_SIZE` is sorted as above by its own group,
//!   then `ceil(log2(ceil(n / LOCAL_SORT_SIZE)))` dispatches merge the chunks pairwise through a
//!   scratch buffer, every group merging one chunk's worth of slots; any length works.
//!
//! The long lists are found without compacting them: the first stage writes each pixel's chunk
//! count, the GPU scan ([`super::scan`]) turns the counts into chunk items, and each later group
//! binary-searches the scan for its pixel. Two numbers size those dispatches (chunk items in
//! all, the most merge passes): a caller that knows the list lengths on the host gives them
//! ([`SortSizes::of_lengths`]: the streamed merge does, from the decoded counts), so the host
//! never waits for the GPU in the middle of a band; otherwise the host reads them back from the
//! first stage. In strict mode both are taken and must agree.
//!
//! Where it belongs in the pipeline: after a stream (counts → offsets, keys, values) of an input
//! that is not known to be sorted is uploaded, and before it is scattered into its layout. The
//! stream is linearised, so `engine::build_image`'s scanned offsets and its uploaded stream key
//! and value buffers are exactly this stage's inputs; the other layouts (LL, IA, BIA) are not
//! sorted in place, they are built from the sorted stream.
//!
//! Cost: short lists cost one read pass when in order, else `O(n^2)` register compare-exchanges;
//! long lists `O(n log^2 n)` work spread over `ceil(n / LOCAL_SORT_SIZE)` groups. Dispatches:
//! the short stage, the scan, the check and the local sort, one per merge pass, and two per
//! [`VALUE_ROUND`] value columns when some list is longer than `LOCAL_SORT_SIZE`; the host waits
//! for the two numbers only when it was not given them. Extra memory: 4 bytes per pixel and per
//! chunk item, and only when some list is longer than `LOCAL_SORT_SIZE`, a scratch buffer as
//! large as the fragments (plus 8 bytes per slot with values). Every loop stays far below
//! llvmpipe's silent limit of 65535 iterations per invocation, whatever the list length. On
//! llvmpipe the GPU path is several times slower than the CPU twin (`tests/gpu_sort.rs` prints
//! both times), and a whole work group per list of 17-200 samples costs more there than one
//! invocation merging alone would; it is meant for real GPUs.

use super::buffer::GpuBuffer;
use super::program::Defines;
use super::scan::exclusive_scan_buffer;
use super::GlContext;
use crate::error::{Error, Result};
use crate::vocab::{
    Fragment, GROUP_SIZE, LOCAL_GROUP_SIZE, LOCAL_SORT_SIZE, REG_SORT_SIZE, VALUE_ROUND,
};

/// A value buffer to permute along with the fragments: `columns` floats per fragment slot.
#[derive(Clone, Copy)]
pub struct SortValues<'b, 'a> {
    /// The values, slot after slot.
    pub values: &'b GpuBuffer<'a>,
    /// Floats per slot (at least 1).
    pub columns: usize,
}

/// The stages of `sort.comp`, in the order they run (the shader's `STAGE_*`).
#[derive(Clone, Copy)]
enum Stage {
    Short,
    Check,
    Local,
    Merge,
    Gather,
    Scatter,
}

impl Stage {
    fn define(self) -> &'static str {
        match self {
            Stage::Short => "STAGE_SHORT",
            Stage::Check => "STAGE_CHECK",
            Stage::Local => "STAGE_LOCAL",
            Stage::Merge => "STAGE_MERGE",
            Stage::Gather => "STAGE_GATHER",
            Stage::Scatter => "STAGE_SCATTER",
        }
    }
}

/// What the group stages need to know before they run: chunk items in all and the most merge
/// passes any list needs (the first stage's two counts, `stats[0]` and `stats[1]`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SortSizes {
    /// Chunk items of the lists the groups sort (`ceil(n / LOCAL_SORT_SIZE)` each).
    pub chunks: u32,
    /// The most global merge passes of any list.
    pub max_passes: u32,
}

impl SortSizes {
    /// The sizes of lists of `lengths` samples sorted in `shape`: the first stage's counts,
    /// made on the host (the same rule as `sort.comp`'s `STAGE_SHORT` and `merge_passes`).
    pub fn of_lengths(lengths: impl IntoIterator<Item = u32>, shape: SortShape) -> SortSizes {
        let mut sizes = SortSizes::default();
        sizes.add_lengths(lengths, shape);
        sizes
    }

    /// Count more lists of the same stream ([`Self::of_lengths`]).
    pub fn add_lengths(&mut self, lengths: impl IntoIterator<Item = u32>, shape: SortShape) {
        let longest_alone = REG_SORT_SIZE.max(shape.serial_size()) as u32;
        for n in lengths.into_iter().filter(|&n| n > longest_alone) {
            let chunks = n.div_ceil(LOCAL_SORT_SIZE as u32);
            self.chunks = self.chunks.saturating_add(chunks);
            let passes = if chunks <= 1 {
                0
            } else {
                u32::BITS - (chunks - 1).leading_zeros()
            };
            self.max_passes = self.max_passes.max(passes);
        }
    }
}

/// Longest list the serial shape sorts with one invocation ([`SortShape::Serial`]).
pub const SERIAL_SORT_SIZE: usize = 128;

/// Who sorts a list of `REG_SORT_SIZE < n <= SERIAL_SORT_SIZE` samples: a work group in shared
/// memory (the GPU shape), or the pixel's own invocation (the serial shape: on llvmpipe a work
/// group's barriers cost far more than one invocation sorting alone; measured on the 1080p
/// powerplant pair, docs/benchmarks.md "End to end against the codec floor"). Longer lists
/// always take the groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortShape {
    /// Lists above `REG_SORT_SIZE` go to work groups.
    Groups,
    /// Lists up to [`SERIAL_SORT_SIZE`] are sorted by their own invocation.
    Serial,
}

impl SortShape {
    /// The shape for this device: serial on a software rasteriser, groups on hardware (where the
    /// group shape was the one measured).
    pub fn for_device(ctx: &GlContext) -> SortShape {
        if ctx.info().software {
            SortShape::Serial
        } else {
            SortShape::Groups
        }
    }

    fn serial_size(self) -> usize {
        match self {
            SortShape::Groups => 0,
            SortShape::Serial => SERIAL_SORT_SIZE,
        }
    }
}

/// Sort each of `pixel_count` pixels of `fragments` (slots `offsets[p]..offsets[p + 1]`,
/// `sample_count` slots in all) in place, and `values` with them when given, in the shape for
/// this device ([`SortShape::for_device`]). `known`: the lists' [`SortSizes`] in that shape,
/// where the caller knows them (else the host waits for the GPU to count them).
pub fn sort_pixels(
    ctx: &GlContext,
    offsets: &GpuBuffer,
    fragments: &GpuBuffer,
    pixel_count: usize,
    sample_count: usize,
    values: Option<SortValues>,
    known: Option<SortSizes>,
) -> Result<()> {
    let shape = SortShape::for_device(ctx);
    sort_pixels_shaped(
        ctx,
        offsets,
        fragments,
        pixel_count,
        sample_count,
        values,
        shape,
        known,
    )
}

/// [`sort_pixels`] in the shape given.
#[allow(clippy::too_many_arguments)]
pub fn sort_pixels_shaped(
    ctx: &GlContext,
    offsets: &GpuBuffer,
    fragments: &GpuBuffer,
    pixel_count: usize,
    sample_count: usize,
    values: Option<SortValues>,
    shape: SortShape,
    known: Option<SortSizes>,
) -> Result<()> {
    let fragment_bytes = std::mem::size_of::<Fragment>();
    if offsets.bytes < (pixel_count + 1) * 4 || fragments.bytes < sample_count * fragment_bytes {
        return Err(Error::internal(format!(
            "sort: buffers too small for {pixel_count} pixels and {sample_count} samples"
        )));
    }
    if let Some(v) = values {
        if v.columns == 0 || v.values.bytes < sample_count * v.columns * 4 {
            return Err(Error::internal(format!(
                "sort: value buffer too small for {sample_count} samples of {} columns",
                v.columns
            )));
        }
    }
    if pixel_count == 0 || sample_count < 2 {
        return Ok(());
    }
    let columns = values.map_or(1, |v| v.columns);
    let program = |stage: Stage| {
        let defines = Defines::default()
            .set("STAGE", stage.define())
            .set("GROUP_SIZE", GROUP_SIZE)
            .set("REG_SORT_SIZE", REG_SORT_SIZE)
            .set("SERIAL_SORT_SIZE", shape.serial_size())
            .set("LOCAL_SORT_SIZE", LOCAL_SORT_SIZE)
            .set("LOCAL_GROUP_SIZE", LOCAL_GROUP_SIZE)
            .set("WITH_VALUES", u32::from(values.is_some()))
            .set("NUM_COLUMNS", columns);
        let program = ctx.program("sort.comp", &defines)?;
        ctx.use_program("sort.comp", program);
        ctx.uniform_u32(program, "u_pixels", pixel_count as u32);
        ctx.uniform_u32(program, "u_samples", sample_count as u32);
        Ok::<_, Error>(program)
    };
    offsets.bind(0);
    fragments.bind(1);
    if let Some(v) = values {
        v.values.bind(3);
    }

    // Short lists, and the chunk counts of the long ones.
    let chunk_counts = ctx.scratch((pixel_count * 4).max(16))?;
    let stats = ctx.zeroed(16)?;
    program(Stage::Short)?;
    chunk_counts.bind(5);
    stats.bind(6);
    ctx.dispatch(pixel_count, GROUP_SIZE as usize)?;
    let sizes = match known {
        // No wait for the GPU: the caller knows the lists.
        Some(known) if !ctx.is_strict() => known,
        _ => {
            let [chunks, max_passes]: [u32; 2] =
                stats.read::<u32>(2).try_into().expect("two stats");
            let counted = SortSizes { chunks, max_passes };
            if let Some(known) = known.filter(|&k| k != counted) {
                return Err(Error::internal(format!(
                    "sort: the host sized the lists as {known:?}, the GPU counted {counted:?}"
                )));
            }
            counted
        }
    };
    let SortSizes { chunks, max_passes } = sizes;
    if chunks == 0 {
        return Ok(());
    }
    let chunks = chunks as usize;
    let chunk_starts = exclusive_scan_buffer(ctx, &chunk_counts, pixel_count)?;
    drop(chunk_counts);
    let disorder = ctx.zeroed(chunks * 4)?;
    // The scratch (and the positions) only serve lists longer than one chunk.
    let scratch = if max_passes > 0 {
        let bytes = sample_count * fragment_bytes;
        ctx.check_fits(bytes, "the sort's scratch buffer")?;
        ctx.scratch(bytes)?
    } else {
        ctx.scratch(16)?
    };
    let positions = match values {
        Some(_) if max_passes > 0 => {
            ctx.check_fits(sample_count * 8, "the sort's positions")?;
            ctx.scratch(sample_count * 8)?
        }
        _ => ctx.scratch(16)?,
    };
    // The scan reused bindings 0-3: bind every buffer of the group stages again.
    offsets.bind(0);
    fragments.bind(1);
    scratch.bind(2);
    if let Some(v) = values {
        v.values.bind(3);
    }
    positions.bind(4);
    chunk_starts.bind(5);
    disorder.bind(6);
    // One work group per chunk item; `extra` is the stage's own uniform.
    let run_chunks = |stage: Stage, extra: Option<(&str, u32)>| {
        let program = program(stage)?;
        ctx.uniform_u32(program, "u_chunks", chunks as u32);
        if let Some((name, value)) = extra {
            ctx.uniform_u32(program, name, value);
        }
        ctx.dispatch(chunks * LOCAL_GROUP_SIZE, LOCAL_GROUP_SIZE)
    };
    run_chunks(Stage::Check, None)?;
    run_chunks(Stage::Local, None)?;
    for pass in 0..max_passes {
        run_chunks(Stage::Merge, Some(("u_pass", pass)))?;
    }
    if values.is_some() && max_passes > 0 {
        for column0 in (0..columns).step_by(VALUE_ROUND) {
            run_chunks(Stage::Gather, Some(("u_column0", column0 as u32)))?;
            run_chunks(Stage::Scatter, Some(("u_column0", column0 as u32)))?;
        }
    }
    Ok(())
}

/// Upload `offsets` and `fragments`, sort on the GPU in `shape` and read the fragments back.
pub fn sort_pixels_host(
    ctx: &GlContext,
    offsets: &[u32],
    fragments: &[Fragment],
    shape: SortShape,
) -> Result<Vec<Fragment>> {
    Ok(sort_uploaded(ctx, offsets, fragments, None, shape)?.0)
}

/// As [`sort_pixels_host`], permuting `values` (`columns` floats per slot) too.
pub fn sort_pixels_host_with_values(
    ctx: &GlContext,
    offsets: &[u32],
    fragments: &[Fragment],
    values: &[f32],
    columns: usize,
    shape: SortShape,
) -> Result<(Vec<Fragment>, Vec<f32>)> {
    if columns == 0 || values.len() != fragments.len() * columns {
        return Err(Error::internal(format!(
            "sort: {} values for {} fragments of {columns} columns",
            values.len(),
            fragments.len()
        )));
    }
    sort_uploaded(ctx, offsets, fragments, Some((values, columns)), shape)
}

/// Upload, sort (with `values`, `columns` floats per slot, where given) and read back.
fn sort_uploaded(
    ctx: &GlContext,
    offsets: &[u32],
    fragments: &[Fragment],
    values: Option<(&[f32], usize)>,
    shape: SortShape,
) -> Result<(Vec<Fragment>, Vec<f32>)> {
    let (values, columns) = values.unwrap_or((&[], 0));
    let pixel_count = check_offsets(offsets, fragments.len())?;
    let offset_buffer = ctx.upload(offsets)?;
    let fragment_buffer = ctx.upload(fragments)?;
    let value_buffer = ctx.upload(values)?;
    let sort_values = (columns > 0).then_some(SortValues {
        values: &value_buffer,
        columns,
    });
    sort_pixels_shaped(
        ctx,
        &offset_buffer,
        &fragment_buffer,
        pixel_count,
        fragments.len(),
        sort_values,
        shape,
        Some(SortSizes::of_lengths(
            offsets.windows(2).map(|w| w[1] - w[0]),
            shape,
        )),
    )?;
    Ok((
        fragment_buffer.read(fragments.len()),
        value_buffer.read(values.len()),
    ))
}

/// The pixel count of valid CSR `offsets` over `samples` slots; the shader trusts them.
fn check_offsets(offsets: &[u32], samples: usize) -> Result<usize> {
    let bad = |why: &str| Err(Error::internal(format!("sort: offsets {why}")));
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
