//! What a merge is allowed to build, checked before it builds anything.
//!
//! The reader's memory check covers each input; what the merge makes is a different size: the
//! union of the data windows can be enormous even when every input is 4 x 4 (one at the origin,
//! one at y = 2^28), and a flat output costs per pixel of that window, not per sample.
//! [`check_merge`] is the one place the command line asks, for both engines, whether a merge
//! fits `--max-memory`, and whether its inputs fit together at all, so that every refusal comes
//! before the engine starts and names the inputs.
//!
//! The command line merges through `crate::stream`, which holds bands, not images: it asks
//! [`check_compatible`] here and sizes its bands from the budget itself (`stream::plan`), so a
//! whole image over the budget streams instead of being refused. [`check_merge`] remains the
//! check for callers that merge whole images in memory.
//!
//! The library entry points (`merge_images`, `gpu::merge_images_gl`) do not take a budget:
//! a caller that reads untrusted files calls [`check_merge`] first, as the CLI does. That keeps
//! `MergeOptions` unchanged for every existing caller.

use std::path::Path;

use super::merge::{channel_conflict, MergeOptions, MergePlan, OutputKind};
use super::tidy::TIDY_BYTES_PER_SAMPLE;
use crate::deep::{ChannelRole, DeepImage};
use crate::error::{Error, Result};

/// Copies of a flat output pixel alive at once at the peak: the merged rows, the image's
/// per-channel planes made from them, and the writer's converted samples.
pub const FLAT_COPIES: u64 = 3;

/// Host bytes per output pixel the GL engine adds for flat output: the read-back front-sample
/// record (16) and the pixel-order permutation of a band (4); its composited values are
/// counted with the stride.
pub const GL_FLAT_PIXEL_BYTES: u64 = 20;

/// Bytes per output pixel of deep output: counts gathered per row and again for the image (4 +
/// 4) and the image's offsets (8).
pub const DEEP_PIXEL_BYTES: u64 = 16;

/// Bytes per merged sample of deep output besides its channel values: on the CPU, a tidied
/// sample's record (24) and its values' slot (24), the most a sample takes (one copied from its
/// input takes its share of a run's 16 bytes: `composite::source_runs`); the GL engine's
/// read-back fragment (16) and sample record (24) stay below that.
pub const DEEP_SAMPLE_BYTES: u64 = 48;

/// The inputs' names for messages: "a.exr, b.exr" (as [`Error::in_merge`] writes them).
pub fn input_names(paths: &[&Path]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// An upper estimate of the bytes a merge of `inputs` with `options` builds at its peak, with
/// either engine (the inputs themselves not counted: the reader checked them). Saturates
/// instead of overflowing, so an absurd window is simply over any budget.
pub fn output_bytes(plan: &MergePlan, options: &MergeOptions) -> u64 {
    let tidies = matches!(options.output, OutputKind::Flat { .. }) || options.tidy;
    let tidy = if tidies { tidy_bytes(plan) } else { 0 };
    image_bytes(plan, options).saturating_add(tidy)
}

/// What the tidy holds at once (`tidy_pixel`, and the GL engine's host tidy of long pixels):
/// every worker thread tidying a pixel as long as the longest one the merge can gather (the
/// sum over inputs of their longest pixel), but never more samples than all inputs hold (the
/// threads tidy different pixels), [`TIDY_BYTES_PER_SAMPLE`] plus 12 bytes per composited
/// column for each. It is linear in the pixels' lengths, so a pixel of 2^20 overlapping volumes
/// costs a few hundred MB here, not the n^2 pieces of cutting each volume at every boundary.
fn tidy_bytes(plan: &MergePlan) -> u64 {
    let longest = plan.inputs.iter().fold(0u64, |sum, image| {
        let longest = image
            .offsets
            .windows(2)
            .map(|w| w[1].saturating_sub(w[0]))
            .max()
            .unwrap_or(0);
        sum.saturating_add(longest)
    });
    let per_sample = TIDY_BYTES_PER_SAMPLE + 12 * plan.composite.len() as u64;
    let threads = rayon::current_num_threads() as u64;
    let all = plan
        .inputs
        .iter()
        .fold(0u64, |sum, i| sum.saturating_add(i.sample_count() as u64));
    longest
        .saturating_mul(threads)
        .min(all)
        .saturating_mul(per_sample)
}

/// The output's own bytes at the peak, for [`output_bytes`].
fn image_bytes(plan: &MergePlan, options: &MergeOptions) -> u64 {
    let pixels = plan.window.area() as u64;
    match options.output {
        OutputKind::Flat { .. } => {
            let ids = plan
                .deep_channels
                .iter()
                .filter(|c| c.role == ChannelRole::Id)
                .count() as u64;
            let columns = plan.composite.len() as u64;
            // Composited values, ids and the front-most Z per pixel, 4 bytes each.
            let flat = 4 * (columns + ids + 1);
            let gl = 4 * columns.max(1) + GL_FLAT_PIXEL_BYTES;
            pixels.saturating_mul(FLAT_COPIES * flat + gl)
        }
        OutputKind::Deep => {
            let samples = plan
                .inputs
                .iter()
                .fold(0u64, |sum, i| sum.saturating_add(i.sample_count() as u64));
            // Tidying splits volumes: a pixel of n samples has at most 2n boundaries.
            let samples = if options.tidy {
                samples.saturating_mul(2)
            } else {
                samples
            };
            let values: u64 = plan
                .deep_channels
                .iter()
                .map(|c| c.sample_type.size() as u64)
                .sum();
            // The planes and the writer's packed copy of them (never larger than raw).
            let per_sample = DEEP_SAMPLE_BYTES + 2 * values;
            pixels
                .saturating_mul(DEEP_PIXEL_BYTES)
                .saturating_add(samples.saturating_mul(per_sample))
        }
    }
}

/// Check that `inputs` (read from `paths`, in the same order) can be merged with `options`
/// within `max_memory` bytes: their channels fit together, flat output has something to
/// composite, and the output fits the budget. Every refusal names the inputs.
pub fn check_merge(
    inputs: &[&DeepImage],
    paths: &[&Path],
    options: &MergeOptions,
    max_memory: u64,
) -> Result<()> {
    let plan = check_compatible(inputs, paths, options)?;
    let needed = output_bytes(&plan, options);
    if needed > max_memory {
        let w = plan.window;
        return Err(Error::over_budget(
            format_args!(
                "{}: the merged data window ({}, {})-({}, {}), {} x {} pixels, for {} output,",
                input_names(paths),
                w.x0,
                w.y0,
                w.x1,
                w.y1,
                w.width(),
                w.height(),
                match options.output {
                    OutputKind::Flat { .. } => "flat",
                    OutputKind::Deep => "deep",
                },
            ),
            needed,
            max_memory,
        ));
    }
    Ok(())
}

/// Check that `inputs` (read from `paths`, in the same order) fit together: their channels can
/// be joined and flat output has something to composite. The streamed merge asks this of the
/// inputs' channel lists alone (images without samples); [`check_merge`] adds the budget.
pub fn check_compatible<'a>(
    inputs: &[&'a DeepImage],
    paths: &[&Path],
    options: &MergeOptions,
) -> Result<MergePlan<'a>> {
    assert_eq!(inputs.len(), paths.len(), "one path per input");
    if let Some((name, int_input, float_input)) = channel_conflict(inputs) {
        return Err(Error::Usage(format!(
            "channel {name} is an integer channel in {} and a float channel in {}; \
             they cannot be merged into one channel",
            paths[int_input].display(),
            paths[float_input].display()
        )));
    }
    let plan = MergePlan::new(inputs)?;
    if matches!(options.output, OutputKind::Flat { .. }) && plan.composite.is_empty() {
        return Err(Error::Usage(format!(
            "{}: the inputs hold no colour or alpha channel, only depth or ids, so a flat \
             composite has nothing to show; merge them as deep output",
            input_names(paths)
        )));
    }
    Ok(plan)
}
