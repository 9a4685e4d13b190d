//! The GL merge of whole deep images: cut the union window into row bands that fit the GL limits,
//! stage each input's band as the reader decoded it (its planes and one offset per pixel) and
//! gather it on the GPU into a pixel-ordered stream ([`gather`]), build the inputs on the GPU
//! (stacked into one image for a k-way merge, one image each for a chain), merge them all in one
//! pass (`merge_kway.comp`) or pairwise with the deep intermediate staying resident, read the
//! band back and assemble the output exactly as `composite::merge_images` would.
//!
//! Inputs that need sorting (`MergeOptions::sort`, e.g. no `deepImageState`) are sorted per
//! pixel by the GPU stage `sort.comp` between gather and build; it is stable, so the tie rule
//! holds.
//!
//! Pixels where volumes overlap (`composite::tidy::needs_tidy`) are tidied on the GPU (within
//! 1e-5 of the f64 reference), or by the host with the `composite` functions where that is
//! faster (a software rasteriser; `GlOptions::tidies_on_gpu`), bit-identical to the CPU engine:
//! - flat: the last merge flags them; they are listed on the GPU (`compact.comp`), the last pair
//!   is merged again into a linearised image (only when something is flagged) and `tidy.comp`
//!   flattens the listed pixels from it, writing into the flat composite in place;
//! - deep with `tidy`: the last merge writes a linearised image, which `tidy::tidy_deep` turns
//!   into the tidied image on the GPU (gate, list, count, scan, emit); the host only reads it
//!   back, taking the new values of the pixels it marks.

//!
//! A band the driver cannot hold (`Error::GlMemory`: `GL_OUT_OF_MEMORY`, or a buffer over the
//! storage-block limit) is not the end: the rest of the window is cut into bands of half the
//! budget and merged again, down to single rows whose limit halves too, until a row does not fit
//! (`GpuStats::band_retries` counts the retries).
//!
//! The parts, a file each: [`band`] planning, the [`gather`] from decoded planes (and the
//! [`host_gather`] of inputs the host sorts), the GL orchestration of one
//! band ([`merger`]), the cooperative schedule of long lists ([`coop`]), output [`assemble`];
//! statistics add up band by band (`GpuStats: AddAssign`).

mod assemble;
mod band;
pub(super) mod coop;
mod gather;
mod host_gather;
mod merger;

use std::time::Instant;

use self::assemble::Accumulated;
use self::band::{plan_bands, BandLimits};
pub use self::merger::{uses_kway, GpuMerger, PAIRWISE_MEAN_SAMPLES};
use self::merger::{BandReadback, ReadbackTail};
use super::resident::ColumnSpec;
use super::stats::GpuStats;
use super::{GlContext, GlOptions};
use crate::composite::{MergeOptions, MergeOutput, MergePlan, OutputKind};
use crate::deep::{Bounds, DeepImage};
use crate::error::{Error, Result};
use crate::vocab::MAX_BLOCK_SIZE;

/// Refuse inputs with NaN depths ([`DeepImage::check_depths`]): the public entry points whose
/// inputs are not known to be checked call this first; a streamed merge's reader checks every
/// band it hands out, so [`issue_gl_over`] and [`merge_checked_images_gl_over`] do not check
/// again (a second pass a band on the merging thread, which is the GL engine's critical path).
pub(super) fn check_depths(inputs: &[&DeepImage]) -> Result<()> {
    inputs.iter().try_for_each(|image| image.check_depths())
}

/// Check options, plan the merge (the inputs' depths are checked: [`check_depths`]).
pub(super) fn prepare<'i>(
    inputs: &[&'i DeepImage],
    gl_options: &GlOptions,
) -> Result<(MergePlan<'i>, ColumnSpec)> {
    if !(1..=MAX_BLOCK_SIZE).contains(&gl_options.block_size) {
        return Err(Error::Usage(format!(
            "block size {} is outside 1..={MAX_BLOCK_SIZE}",
            gl_options.block_size
        )));
    }
    for image in inputs {
        if image.sample_count() > u32::MAX as usize {
            return Err(Error::Usage(
                "an input has more than 2^32 samples; the GL engine indexes samples with u32"
                    .into(),
            ));
        }
    }
    let plan = MergePlan::new(inputs)?;
    let columns = ColumnSpec {
        alpha_of: plan.composite.alpha_of(),
    };
    Ok((plan, columns))
}

/// Merge `inputs` with the GL engine: same result as `composite::merge_images` (see the module
/// docs for what the host still does), plus statistics.
pub fn merge_images_gl(
    ctx: &GlContext,
    inputs: &[&DeepImage],
    options: &MergeOptions,
    gl_options: &GlOptions,
) -> Result<(MergeOutput, GpuStats)> {
    merge_images_gl_over(ctx, inputs, options, gl_options, None)
}

/// [`merge_images_gl`] over `window` instead of the union of the inputs' data windows, when
/// given (a band of a streamed merge; see `composite::merge_images_over`).
pub fn merge_images_gl_over(
    ctx: &GlContext,
    inputs: &[&DeepImage],
    options: &MergeOptions,
    gl_options: &GlOptions,
    window: Option<Bounds>,
) -> Result<(MergeOutput, GpuStats)> {
    check_depths(inputs)?;
    merge_checked_images_gl_over(ctx, inputs, options, gl_options, window)
}

/// [`merge_images_gl_over`] of inputs whose depths are already checked
/// ([`DeepImage::check_depths`]; the streamed merge's reader checks every band it hands out).
/// On a software rasteriser whose loops are capped, inputs with a pixel that may be longer than
/// its loops run are merged by the CPU engine instead ([`super::loop_cap`]).
pub fn merge_checked_images_gl_over(
    ctx: &GlContext,
    inputs: &[&DeepImage],
    options: &MergeOptions,
    gl_options: &GlOptions,
    window: Option<Bounds>,
) -> Result<(MergeOutput, GpuStats)> {
    if super::loop_cap::merges_short(ctx, inputs, options, gl_options) {
        let merged = crate::composite::merge_checked_images_over(inputs, options, window)?;
        let stats = super::loop_cap::host_band_stats(ctx, gl_options, inputs, &merged);
        return Ok((merged, stats));
    }
    issue_gl_over(ctx, inputs, options, gl_options, window)?.finish(inputs, options)
}

/// A GL merge whose bands are all issued, the last one's readback perhaps still on its way
/// ([`issue_gl_over`]); [`IssuedMerge::finish`] waits for it and assembles the output. Between
/// the two, a streamed merge issues its next band, so that the GPU works on one band while the
/// host waits for and assembles the other.
pub struct IssuedMerge<'a> {
    ctx: &'a GlContext,
    out: Accumulated,
    stats: GpuStats,
    window: Bounds,
    /// The last band, read back but not yet waited for (when bands overlap).
    pending: Option<(ReadbackTail<'a>, BandReadback<'a>)>,
}

/// Everything [`merge_checked_images_gl_over`] does up to its last band's readback, which is
/// left issued and unfinished when bands overlap on `ctx` ([`GlOptions::overlaps_bands`]). The
/// inputs' depths are checked already, as a streamed merge's reader checks them.
pub(crate) fn issue_gl_over<'a>(
    ctx: &'a GlContext,
    inputs: &[&DeepImage],
    options: &MergeOptions,
    gl_options: &GlOptions,
    window: Option<Bounds>,
) -> Result<IssuedMerge<'a>> {
    let planning = crate::timeline::span(|| "plan the GPU bands".into());
    let (mut plan, columns) = prepare(inputs, gl_options)?;
    if let Some(window) = window {
        plan.window = window;
    }
    plan.sort = options.sort;
    let stride = columns.stride();
    let overlap = gl_options.overlaps_bands(ctx);
    // The budget a band of one dense row may take: what the user gave, else what the device
    // has free (on a software rasteriser, host memory).
    let mut row_memory_limit = if gl_options.band_budget_bytes > 0 {
        gl_options.band_budget_bytes
    } else {
        super::memory::band_budget_of(super::memory::default_budget(ctx))
    };
    let mut memory_limit = if gl_options.band_budget_bytes == 0 && ctx.info().software {
        // A software rasteriser's buffers are host memory: bands like the CPU engine's.
        super::memory::band_budget_of(super::memory::SOFTWARE_MERGE_BUDGET).min(row_memory_limit)
    } else {
        row_memory_limit
    };
    if overlap {
        // Two bands are resident at once.
        memory_limit /= 2;
        row_memory_limit /= 2;
    }
    let max_ssbo = ctx.info().max_ssbo_bytes;
    let mut limits = BandLimits {
        band: max_ssbo.min(memory_limit),
        row: max_ssbo.min(row_memory_limit),
        row_is_storage_block: max_ssbo < row_memory_limit,
    };
    // A tidy deep output built on the GPU may hold up to twice the merged samples.
    let growth = if options.tidy && options.output == OutputKind::Deep && gl_options.tidies_on_gpu()
    {
        2
    } else {
        1
    };
    let mut bands = plan_bands(&plan, gl_options, limits, stride, growth, 0)?;
    let mut out = Accumulated::new(&plan, options, stride);
    drop(planning);
    let mut stats = GpuStats::new(&ctx.info().renderer, gl_options);
    let fences_before = ctx.fence_stats();
    let transfers_before = ctx.transfer_stats();
    // The last band whose readback is issued and not yet waited for (when bands overlap): it is
    // finished after the next band's work is issued, so the GPU works while the host stages.
    let mut pending: Option<(ReadbackTail, BandReadback)> = None;
    let finish = |pending: &mut Option<(ReadbackTail, BandReadback)>,
                  out: &mut Accumulated,
                  stats: &mut GpuStats|
     -> Result<()> {
        if let Some((mut tail, readback)) = pending.take() {
            tail.finish(readback, out)?;
            *stats += tail.stats;
        }
        Ok(())
    };
    let mut next = 0;
    while next < bands.len() {
        let band = bands[next].clone();
        // Each band re-plans cheaply (the plan is a few small vectors) and owns its merger.
        let mut band_plan = MergePlan::new(inputs)?;
        band_plan.window = plan.window;
        // Nothing reaches `out` until the band is finished: a failure leaves it as it was.
        let issued =
            GpuMerger::upload_band(ctx, band_plan, columns.clone(), band, options, gl_options)
                .and_then(|mut merger| {
                    let readback = merger.start_readback()?;
                    Ok((merger.into_tail(), readback))
                });
        match issued {
            Ok(issued) => {
                if pending.is_some() {
                    stats.overlapped_bands += 1;
                }
                finish(&mut pending, &mut out, &mut stats)?;
                pending = Some(issued);
                if !overlap {
                    finish(&mut pending, &mut out, &mut stats)?;
                }
                next += 1;
            }
            Err(Error::GlMemory(why)) => {
                // The driver could not hold this band (out of memory, or a storage-block limit
                // lower than it claims): finish the band before it, then cut the rest of the
                // window into bands of half the budget, down to single rows (whose own limit
                // halves as well), before giving up.
                finish(&mut pending, &mut out, &mut stats)?;
                // The failed band's buffers went back to the pool mid-build, some behind work
                // still on the GPU. Their fences should cover that, but an H100 reported a pool
                // hazard in this path that llvmpipe did not reproduce (docs/hardware/
                // h100-2026-11-26): a retry is rare, so it starts from an idle device.
                ctx.finish();
                let row0 = bands[next].row0;
                limits = limits.halved();
                stats.band_retries += 1;
                bands =
                    plan_bands(&plan, gl_options, limits, stride, growth, row0).map_err(|e| {
                        let e = match e {
                            Error::Gl(message) => message,
                            other => other.to_string(),
                        };
                        Error::Gl(format!("{why}; smaller bands do not help either: {e}"))
                    })?;
                next = 0;
            }
            Err(e) => return Err(e),
        }
    }
    // What this merge's transfers and fences did, counted now: a streamed merge issues its
    // next band before it finishes this one.
    let transfers = ctx.transfer_stats();
    stats.transfer = ctx.transfer_path().name();
    stats.buffers = ctx.buffer_storage().name();
    stats.staging_wait_s = transfers.staging_wait_s - transfers_before.staging_wait_s;
    stats.mapped_allocations = transfers.allocations - transfers_before.allocations;
    stats.reader_staged_bytes =
        transfers.reader_staged_bytes - transfers_before.reader_staged_bytes;
    stats.pinned_bytes = transfers.pinned_bytes - transfers_before.pinned_bytes;
    let fences = ctx.fence_stats();
    stats.release_fences = fences.fences - fences_before.fences;
    stats.reuses_waited = fences.reuses_waited - fences_before.reuses_waited;
    Ok(IssuedMerge {
        ctx,
        out,
        stats,
        window: plan.window,
        pending,
    })
}

impl IssuedMerge<'_> {
    /// Count this merge as issued before the one before it was read back (a streamed merge's
    /// overlap across its bands; `GpuStats::overlapped_bands`).
    pub fn issued_ahead(&mut self) {
        self.stats.overlapped_bands += 1;
    }

    /// Wait for the last band and assemble the output from `inputs` (the images the merge was
    /// issued with: the host reads them where it tidies a pixel itself).
    pub fn finish(
        mut self,
        inputs: &[&DeepImage],
        options: &MergeOptions,
    ) -> Result<(MergeOutput, GpuStats)> {
        if let Some((mut tail, readback)) = self.pending.take() {
            tail.finish(readback, &mut self.out)?;
            self.stats += tail.stats;
        }
        // In strict mode, whatever the last calls found and no check reported fails the merge.
        self.ctx.strict_report()?;
        let mut plan = MergePlan::new(inputs)?;
        plan.window = self.window;
        plan.sort = options.sort;
        let start = Instant::now();
        let span = crate::timeline::span(|| "assemble the output".into());
        let output = self.out.assemble(&plan, options, &mut self.stats);
        drop(span);
        let assembled = start.elapsed().as_secs_f64();
        self.stats.readback_s += assembled;
        self.stats.assemble_s += assembled;
        Ok((output, self.stats))
    }
}
