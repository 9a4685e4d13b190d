//! A band's inputs, from the planes the reader decoded to the stream a build scatters, on the
//! GPU: each input's rows of the band are staged as they are ([`StagedInput`]: half stays
//! half), the GPU counts each layout pixel's samples, scans the counts and gathers the keys and
//! values at the scanned offsets (`gpu::gather`). One input gives a chain's image; several are
//! stacked, each in a slice of [`kway_stride`] pixels, for a k-way merge.

use std::ops::Range;

use super::band::Band;
use crate::composite::MergePlan;
use crate::error::Result;
use crate::gpu::gather::{gather, gather_counts, stage, GatherBand};
use crate::gpu::resident::{kway_stride, Stream};
use crate::gpu::scan::exclusive_scan_buffer;
use crate::gpu::sort::{SortShape, SortSizes};
use crate::gpu::GlContext;
use crate::vocab::{Fragment, PixelOrder, StagedInput};

/// What the gather made, and what staging it cost the host.
pub(super) struct Gathered<'a> {
    /// The stream, in layout pixel order (stacked: input after input).
    pub(super) stream: Stream<'a>,
    /// Bytes staged from the host.
    pub(super) staged_bytes: u64,
    /// Host seconds spent staging.
    pub(super) staging_s: f64,
}

/// Gather inputs `inputs` of `plan` over `band` into one stream of `stride` values per key:
/// one input in the band's own pixel order, or (`stacked`) each input in its own slice of
/// [`kway_stride`] pixels, the padding empty. With `with_values` false, the keys alone: only
/// the depth planes are staged (for a merge that writes a deep output's keys alone).
#[allow(clippy::too_many_arguments)]
pub(super) fn gather_band<'a>(
    ctx: &'a GlContext,
    plan: &MergePlan,
    inputs: Range<usize>,
    band: &Band,
    order: PixelOrder,
    stride: usize,
    stacked: bool,
    with_values: bool,
) -> Result<Gathered<'a>> {
    let pixels = band.pixels();
    let _span = crate::timeline::span(|| {
        format!(
            "stage inputs {inputs:?} of {pixels} px from row {}",
            band.row0
        )
    });
    let slice = if stacked { kway_stride(pixels) } else { pixels };
    let order_buffer = match order {
        PixelOrder::RowMajor => None,
        _ => Some(ctx.upload(&band.perm)?),
    };
    let gather_band = GatherBand {
        pixels,
        width: band.width,
        order: order_buffer.as_ref(),
    };
    let mut staged = Vec::with_capacity(inputs.len());
    let (mut staged_bytes, mut staging_s) = (0u64, 0f64);
    // The lists the sort will see, one per input and band pixel, known here from the counts
    // (counted only when an input is sorted: it is a pass over every pixel).
    let sorted = inputs
        .clone()
        .any(|k| plan.sort.sorts(plan.inputs[k].state));
    let mut sort_sizes = SortSizes::default();
    let shape = SortShape::for_device(ctx);
    for k in inputs.clone() {
        let start = std::time::Instant::now();
        let sources: &[Option<usize>] = if with_values { &plan.sources[k] } else { &[] };
        let input = StagedInput::new(
            plan.inputs[k],
            k as u32,
            plan.depth[k],
            sources,
            plan.window,
            band.row0,
            band.rows,
        );
        if sorted {
            sort_sizes.add_lengths(input.gathered_counts(band.width), shape);
        }
        let buffers = stage(ctx, &input, band.width)?;
        staging_s += start.elapsed().as_secs_f64();
        staged_bytes += buffers.bytes;
        staged.push(buffers);
    }
    // To the end: what the host spends issuing the GPU's part (the staging above is timed
    // round by round, `mapped.rs`).
    let _issue_span = crate::timeline::span(|| "issue the count, scan and gather".to_string());
    let total_pixels = slice * inputs.len();
    // Stacked slices leave padding no gather writes: it must count 0.
    let counts = if slice == pixels {
        ctx.scratch((total_pixels * 4).max(16))?
    } else {
        ctx.zeroed(total_pixels * 4)?
    };
    for (j, input) in staged.iter().enumerate() {
        gather_counts(ctx, input, &gather_band, &counts, j * slice)?;
    }
    let offsets = exclusive_scan_buffer(ctx, &counts, total_pixels)?;
    drop(counts);
    let samples: usize = staged.iter().map(|s| s.samples).sum();
    ctx.check_fits(
        (samples + 1) * std::mem::size_of::<Fragment>().max(stride * 4),
        "a band's gathered samples",
    )?;
    let keys = ctx.scratch((samples * std::mem::size_of::<Fragment>()).max(16))?;
    let values = ctx.scratch(if with_values { samples * stride * 4 } else { 0 }.max(16))?;
    for (j, input) in staged.iter().enumerate() {
        gather(
            ctx,
            input,
            &gather_band,
            &offsets,
            j * slice,
            &keys,
            &values,
            stride,
            with_values,
        )?;
    }
    Ok(Gathered {
        stream: Stream {
            offsets,
            keys,
            values,
            pixels: total_pixels,
            samples,
            stride,
            sort_sizes: sorted.then_some(sort_sizes),
            with_values,
        },
        staged_bytes,
        staging_s,
    })
}
