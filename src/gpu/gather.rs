//! The GPU gather (`gather_count.comp`, `gather.comp`; twin `cpu::gather`): an input's band is
//! staged as the reader decoded it ([`StagedInput`]: its planes, half or float, and one offset
//! per pixel), and the GPU makes from it what a build scatters: the per-pixel counts in layout
//! order, then, at the scanned offsets, the fragment keys and composited values. The host's only
//! per-sample work is the decode; staging copies whole plane runs, and on Mesa llvmpipe, whose
//! buffers are host memory, not even that: the gather reads the runs where the reader decoded
//! them (`GL_AMD_pinned_memory`, [`GlContext::pinned_planes`]).

use std::marker::PhantomData;
use std::time::Instant;

use glow::HasContext;

use super::buffer::GpuBuffer;
use super::mapped::Piece;
use super::program::Defines;
use super::GlContext;
use crate::error::{Error, Result};
use crate::vocab::{SlotSource, StagedInput, GROUP_SIZE};

/// The storage bindings of the planes a gather reads in place, slot k's at entry k
/// (`gather.glsl`: `SourcePlanes`, then `SourcePlane1` to `SourcePlane7`).
pub(crate) const PINNED_PLANE_BINDINGS: [u32; 8] = [2, 5, 6, 7, 8, 9, 12, 13];

/// `GL_EXTERNAL_VIRTUAL_MEMORY_BUFFER_AMD` (`GL_AMD_pinned_memory`): `glBufferData` on this
/// target makes the buffer's storage the host memory given, not a copy of it.
const EXTERNAL_VIRTUAL_MEMORY_BUFFER_AMD: u32 = 0x9160;

/// One input's band on the GPU: the staged offsets, planes and slot descriptors.
///
/// The planes are one buffer the band's plane runs were copied into, or (read in place, on
/// llvmpipe) one buffer over each run's own host memory. Those last must not outlive the planes
/// they stand on: a `StagedBuffers` borrows the [`StagedInput`] it was made from (`'i`), and
/// waits for the GL's work before its buffers go (`Drop`).
pub struct StagedBuffers<'a, 'i> {
    ctx: &'a GlContext,
    offsets: GpuBuffer<'a>,
    /// The copied planes' one buffer, or one buffer a distinct run read in place.
    planes: Vec<GpuBuffer<'a>>,
    /// Read in place: per slot, the entry of `planes` it binds (`PINNED_PLANES` in
    /// `gather.glsl`); empty where the planes were copied.
    slot_planes: Vec<Option<usize>>,
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
    /// The planes read in place are the staged input's: it outlives these buffers.
    _planes: PhantomData<&'i [u8]>,
}

impl Drop for StagedBuffers<'_, '_> {
    /// Planes read in place are the host's memory again once their buffers go: wait for the
    /// work that reads them (on llvmpipe done already, inside the calls that issued it; with
    /// Mesa's GL thread, queued), so that nothing reads them after their owner frees them.
    fn drop(&mut self) {
        if !self.slot_planes.is_empty() {
            self.ctx.finish();
        }
    }
}

/// A buffer whose storage is `run`'s own memory, from the word that holds its first byte to the
/// word that holds its last (`GL_AMD_pinned_memory`), and the halves it starts into that first
/// word (0 or 1). The run is a slice of a decoded plane, a `Vec` from the global allocator
/// (glibc's malloc: 16-byte aligned, usable sizes whole multiples of 8 bytes), so the two bytes
/// before an odd start are the plane's previous value and the two after an odd end lie inside
/// its allocation; the shader reads neither. `run` is not empty.
fn pinned_buffer<'a>(ctx: &'a GlContext, run: &[u8]) -> Result<(GpuBuffer<'a>, u32)> {
    debug_assert!(!run.is_empty());
    let start = run.as_ptr() as usize;
    let base = start & !3;
    let end = (start + run.len()).next_multiple_of(4);
    ctx.check_fits(end - base, "a decoded plane read in place")?;
    let Some(buffer_data) = ctx.buffer_data_raw else {
        return Err(Error::Gl("glBufferData was not loaded".into()));
    };
    // SAFETY: a buffer object of this context.
    let buffer = unsafe { ctx.gl.create_buffer() }
        .map_err(|e| Error::Gl(format!("cannot create a buffer: {e}")))?;
    // SAFETY: [base, end) lies in the run's plane allocation (see above), which outlives the
    // buffer (`StagedBuffers`); GL only reads it. Passed as a pointer, not a slice: its ends
    // may lie outside the run.
    let error = unsafe {
        ctx.gl
            .bind_buffer(EXTERNAL_VIRTUAL_MEMORY_BUFFER_AMD, Some(buffer));
        buffer_data(
            EXTERNAL_VIRTUAL_MEMORY_BUFFER_AMD,
            (end - base) as isize,
            base as *const std::ffi::c_void,
            glow::STATIC_DRAW,
        );
        ctx.gl.bind_buffer(EXTERNAL_VIRTUAL_MEMORY_BUFFER_AMD, None);
        ctx.gl.get_error()
    };
    ctx.with_checker(|c| c.allocated(super::buffer::id(buffer)));
    let buffer = GpuBuffer::owned(ctx, buffer, end - base);
    if error != glow::NO_ERROR {
        return Err(Error::Gl(format!(
            "a buffer over a decoded plane failed with GL error 0x{error:04x}"
        )));
    }
    Ok((buffer, ((start - base) / 2) as u32))
}

/// Copy `input` to the GPU for a band `band_width` wide: its offsets, and each distinct plane
/// run once (columns that read the same channel share it); or, where the context reads planes in
/// place ([`GlContext::pinned_planes`]) and the runs fit its bindings, make a buffer over each
/// run instead of copying it.
pub fn stage<'a, 'i>(
    ctx: &'a GlContext,
    input: &StagedInput<'i>,
    band_width: usize,
) -> Result<StagedBuffers<'a, 'i>> {
    let start = Instant::now();
    // Each distinct plane run, and per slot the run it reads (or none, absent).
    let mut runs: Vec<(&[u8], usize)> = Vec::new();
    let mut slot_runs: Vec<Option<usize>> = Vec::with_capacity(input.slots.len());
    for slot in &input.slots {
        let bytes = slot.bytes();
        let run = match runs
            .iter()
            .position(|(b, _)| !bytes.is_empty() && std::ptr::eq(b.as_ptr(), bytes.as_ptr()))
        {
            Some(k) => Some(k),
            None if matches!(slot, SlotSource::Absent) => None,
            None => {
                runs.push((bytes, slot.words()));
                Some(runs.len() - 1)
            }
        };
        slot_runs.push(run);
    }
    // In place where every slot has a binding and every run a sample (a band the input does
    // not reach has empty runs, perhaps one past its planes' ends: copied, they cost nothing).
    let in_place = ctx.pinned_planes()
        && input.slots.len() <= PINNED_PLANE_BINDINGS.len()
        && !runs.is_empty()
        && runs.iter().all(|(run, _)| !run.is_empty());
    let mut planes = Vec::new();
    // Per run: its first word in its buffer and the halves it starts into that word.
    let mut placed: Vec<(usize, u32)> = Vec::with_capacity(runs.len());
    if in_place {
        for (run, _) in &runs {
            let (buffer, shift) = pinned_buffer(ctx, run)?;
            planes.push(buffer);
            placed.push((0, shift));
        }
    } else {
        let mut words = 0usize;
        for (_, run_words) in &runs {
            placed.push((words, 0));
            words += run_words;
        }
        if words > u32::MAX as usize {
            return Err(Error::Gl(
                "a band's staged planes pass 2^32 words; smaller bands are needed".into(),
            ));
        }
        ctx.check_fits(words * 4, "an input's staged planes")?;
        planes.push(ctx.scratch((words * 4).max(16))?);
    }
    let descriptors: Vec<[u32; 2]> = input
        .slots
        .iter()
        .zip(&slot_runs)
        .map(|(slot, run)| match run {
            Some(k) => {
                let (first, shift) = placed[*k];
                [first as u32, slot.glsl_type() | shift << 8]
            }
            None => [0, slot.glsl_type()],
        })
        .collect();
    let offsets = ctx.scratch((input.offsets.len() * 4).max(16))?;
    let slots = ctx.scratch((descriptors.len() * 8).max(16))?;
    // One transfer of everything copied: on the mapped path the host copies it in parallel
    // into staging memory and the GPU copies it on (`mapped.rs`).
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
    if in_place {
        let pinned: u64 = runs.iter().map(|(run, _)| run.len() as u64).sum();
        ctx.count_transfer(|s| s.pinned_bytes += pinned);
    } else {
        // As bytes: a run of halves may start at an odd sample, off a word's alignment; an odd
        // count leaves the last word's high half unwritten, and nothing reads it.
        pieces.extend(
            runs.iter()
                .zip(&placed)
                .map(|((run, _), &(first, _))| Piece {
                    dst: &planes[0],
                    to: first * 4,
                    bytes: run,
                }),
        );
    }
    let bytes: u64 = pieces.iter().map(|p| p.bytes.len() as u64).sum();
    ctx.timed("upload", bytes, || {
        ctx.write_pieces(&pieces, "staged planes")
    })?;
    drop(pieces);
    Ok(StagedBuffers {
        ctx,
        offsets,
        planes,
        slot_planes: if in_place { slot_runs } else { Vec::new() },
        slots,
        input: input.input,
        index_base: input.index_base,
        width: input.width,
        rows: input.rows,
        origin: input.origin,
        samples: input.gathered_samples(band_width),
        bytes,
        seconds: start.elapsed().as_secs_f64(),
        _planes: PhantomData,
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

fn defines(band: &GatherBand, staged: &StagedBuffers, columns: usize) -> Defines {
    Defines::default()
        .set("GROUP_SIZE", GROUP_SIZE)
        .set("NUM_COLUMNS", columns.max(1))
        .set("PERMUTED", u32::from(band.order.is_some()))
        .set("PINNED_PLANES", u32::from(!staged.slot_planes.is_empty()))
}

fn set_source(ctx: &GlContext, program: glow::Program, staged: &StagedBuffers, band: &GatherBand) {
    ctx.uniform_u32(program, "u_band_width", band.width as u32);
    ctx.uniform_i32(program, "u_origin_x", staged.origin.0 as i32);
    ctx.uniform_i32(program, "u_origin_y", staged.origin.1 as i32);
    ctx.uniform_u32(program, "u_input_width", staged.width as u32);
    ctx.uniform_u32(program, "u_input_rows", staged.rows as u32);
    staged.offsets.bind(1);
    if staged.slot_planes.is_empty() {
        staged.planes[0].bind(2);
    } else {
        // Every plane binding, an absent slot's to a buffer of this input it never reads, so
        // that none names a buffer of an earlier dispatch.
        for (k, binding) in PINNED_PLANE_BINDINGS.into_iter().enumerate() {
            let plane = staged.slot_planes.get(k).copied().flatten().unwrap_or(0);
            staged.planes[plane].bind(binding);
        }
    }
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
    let program = ctx.use_stage("gather_count.comp", &defines(band, staged, 1))?;
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
    let defines = defines(band, staged, columns);
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
    let plane_bytes: usize = staged.planes.iter().map(|p| p.bytes).sum();
    ctx.set_dispatch_bytes(plane_bytes as u64 + (staged.samples * (16 + value_bytes)) as u64);
    ctx.run_per_pixel(
        program,
        band.pixels,
        &[(0, offsets), (10, keys), (11, values)],
    )
}
