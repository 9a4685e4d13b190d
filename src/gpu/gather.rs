//! The GPU gather (`gather_count.comp`, `gather.comp`; twin `cpu::gather`): an input's band is
//! staged as the reader decoded it ([`StagedInput`]: its planes, half or float, and one offset
//! per pixel), and the GPU makes from it what a build scatters: the per-pixel counts in layout
//! order, then, at the scanned offsets, the fragment keys and composited values. The host's only
//! per-sample work is the decode; staging copies whole plane runs.

use std::time::Instant;

use super::buffer::GpuBuffer;
use super::mapped::Piece;
use super::program::Defines;
use super::GlContext;
use crate::error::{Error, Result};
use crate::vocab::{SlotSource, StagedInput, GROUP_SIZE};

/// One input's band on the GPU: the staged offsets, planes and slot descriptors.
pub struct StagedBuffers<'a> {
    offsets: GpuBuffer<'a>,
    planes: GpuBuffer<'a>,
    slots: GpuBuffer<'a>,
    input: u32,
    index_base: u32,
    width: usize,
    rows: usize,
    origin: (i64, i64),
    /// Samples the gather takes ([`StagedInput::gathered_samples`]).
    pub samples: usize,
    /// Bytes copied from the host.
    pub bytes: u64,
    /// Host seconds the staging took (copies into GL included).
    pub seconds: f64,
}

/// Copy `input` to the GPU for a band `band_width` wide: its offsets, and each distinct plane
/// run once (columns that read the same channel share it).
pub fn stage<'a>(
    ctx: &'a GlContext,
    input: &StagedInput,
    band_width: usize,
) -> Result<StagedBuffers<'a>> {
    let start = Instant::now();
    // Each distinct plane run, and per slot (first word, type).
    let mut runs: Vec<(&[u8], usize)> = Vec::new();
    let mut words = 0usize;
    let mut descriptors: Vec<[u32; 2]> = Vec::with_capacity(input.slots.len());
    for slot in &input.slots {
        let bytes = slot.bytes();
        let first = match runs
            .iter()
            .find(|(b, _)| !bytes.is_empty() && std::ptr::eq(b.as_ptr(), bytes.as_ptr()))
        {
            Some(&(_, first)) => first,
            None if matches!(slot, SlotSource::Absent) => 0,
            None => {
                runs.push((bytes, words));
                let first = words;
                words += slot.words();
                first
            }
        };
        if words > u32::MAX as usize {
            return Err(Error::Gl(
                "a band's staged planes pass 2^32 words; smaller bands are needed".into(),
            ));
        }
        descriptors.push([first as u32, slot.glsl_type()]);
    }
    ctx.check_fits(words * 4, "an input's staged planes")?;
    let offsets = ctx.scratch((input.offsets.len() * 4).max(16))?;
    let planes = ctx.scratch((words * 4).max(16))?;
    let slots = ctx.scratch((descriptors.len() * 8).max(16))?;
    // One transfer of everything: on the mapped path the host copies it in parallel into
    // staging memory and the GPU copies it on (`mapped.rs`).
    let mut pieces = vec![
        Piece {
            dst: &offsets,
            to: 0,
            bytes: bytemuck::cast_slice(&input.offsets),
        },
        Piece {
            dst: &slots,
            to: 0,
            bytes: bytemuck::cast_slice(&descriptors),
        },
    ];
    // As bytes: a run of halves may start at an odd sample, off a word's alignment; an odd
    // count leaves the last word's high half unwritten, and nothing reads it.
    pieces.extend(runs.iter().map(|(run, first)| Piece {
        dst: &planes,
        to: first * 4,
        bytes: run,
    }));
    let bytes: u64 = pieces.iter().map(|p| p.bytes.len() as u64).sum();
    ctx.timed("upload", bytes, || {
        ctx.write_pieces(&pieces, "staged planes")
    })?;
    drop(pieces);
    Ok(StagedBuffers {
        offsets,
        planes,
        slots,
        input: input.input,
        index_base: input.index_base,
        width: input.width,
        rows: input.rows,
        origin: input.origin,
        samples: input.gathered_samples(band_width),
        bytes,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// The band a gather runs over: its layout pixels, its width, and (for a pixel order other
/// than row-major) each layout pixel's row-major index.
pub struct GatherBand<'b, 'a> {
    /// Layout pixels.
    pub pixels: usize,
    /// The band's width.
    pub width: usize,
    /// `order[p]`: layout pixel p's row-major index (`None`: the identity).
    pub order: Option<&'b GpuBuffer<'a>>,
}

fn defines(band: &GatherBand, columns: usize) -> Defines {
    Defines::default()
        .set("GROUP_SIZE", GROUP_SIZE)
        .set("NUM_COLUMNS", columns.max(1))
        .set("PERMUTED", u32::from(band.order.is_some()))
}

fn set_source(ctx: &GlContext, program: glow::Program, staged: &StagedBuffers, band: &GatherBand) {
    ctx.uniform_u32(program, "u_band_width", band.width as u32);
    ctx.uniform_i32(program, "u_origin_x", staged.origin.0 as i32);
    ctx.uniform_i32(program, "u_origin_y", staged.origin.1 as i32);
    ctx.uniform_u32(program, "u_input_width", staged.width as u32);
    ctx.uniform_u32(program, "u_input_rows", staged.rows as u32);
    staged.offsets.bind(1);
    staged.planes.bind(2);
    staged.slots.bind(3);
    if let Some(order) = band.order {
        order.bind(4);
    }
}

/// Write, per layout pixel p, how many samples `staged` holds there into `counts[base + p]`.
pub fn gather_counts(
    ctx: &GlContext,
    staged: &StagedBuffers,
    band: &GatherBand,
    counts: &GpuBuffer,
    base: usize,
) -> Result<()> {
    let program = ctx.use_stage("gather_count.comp", &defines(band, 1))?;
    set_source(ctx, program, staged, band);
    ctx.uniform_u32(program, "u_count_base", base as u32);
    ctx.set_dispatch_bytes((band.pixels * 12) as u64);
    ctx.run_per_pixel(program, band.pixels, &[(0, counts)])
}

/// Write `staged`'s samples as fragment keys and `columns` values each at the scanned
/// `offsets[base + p]` of each layout pixel p; the keys alone when `with_values` is false (the
/// staged input then holds its depth planes alone).
#[allow(clippy::too_many_arguments)]
pub fn gather(
    ctx: &GlContext,
    staged: &StagedBuffers,
    band: &GatherBand,
    offsets: &GpuBuffer,
    base: usize,
    keys: &GpuBuffer,
    values: &GpuBuffer,
    columns: usize,
    with_values: bool,
) -> Result<()> {
    let defines = defines(band, columns);
    let defines = if with_values {
        defines
    } else {
        defines.set("WITH_VALUES", 0)
    };
    let program = ctx.use_stage("gather.comp", &defines)?;
    set_source(ctx, program, staged, band);
    ctx.uniform_u32(program, "u_count_base", base as u32);
    ctx.uniform_u32(program, "u_input", staged.input);
    ctx.uniform_u32(program, "u_index_base", staged.index_base);
    let value_bytes = if with_values { 4 * columns.max(1) } else { 0 };
    ctx.set_dispatch_bytes(
        staged.planes.bytes as u64 + (staged.samples * (16 + value_bytes)) as u64,
    );
    ctx.run_per_pixel(
        program,
        band.pixels,
        &[(0, offsets), (10, keys), (11, values)],
    )
}
