//! The software rasteriser's loop cap: Mesa's llvmpipe (gallivm) silently ends every loop of an
//! invocation once the invocation has run 65535 loop iterations in all
//! (`LP_MAX_TGSI_LOOP_ITERATIONS`, a guard against hangs). The gather (`gather.comp`) and the
//! merge kernels give each pixel to one invocation, which loops over every sample of the pixel,
//! so on llvmpipe a longer pixel is merged short, with no error: the gather leaves the samples
//! past the cap unwritten, so deep output gets wrong depths and a flat composite reads whatever
//! the buffer held; a pairwise merge stops part way. Found on 2026-11-28 (two copies of one
//! input, or eight, one long pixel; llvmpipe 15, the CLI):
//! - the k-way merge (the default up to eight inputs) and the gather: a pixel of 65,000 samples
//!   merged right, flat and deep, one of 66,000 did not: one iteration a sample;
//! - the pairwise merge (`--merge-strategy chain`, and more than eight inputs): 6,000 right,
//!   7,000 not, stepwise or with indexed register blocks; with shifted register blocks, about
//!   the block size a sample (block 16: 3,000 right, 4,000 not; block 32: 1,800 and 2,000).
//!
//! Strict mode's poison hid the k-way case in flat output (the unwritten samples, NaN there,
//! sorted behind an opaque front). A GPU has no such cap. The sort and the tidy already spread
//! or resume their loops (`sort.comp`, `tidy.comp`); the gather and the merges do not, so on
//! such a rasteriser a band in which a pixel may cost more than a quarter of the cap is merged
//! on the host by the CPU engine instead, which gives the bytes the GL engine gives everywhere
//! else (`--stats` counts those bands).

use super::merge::uses_kway;
use super::{GlContext, GlOptions, GpuStats};
use crate::composite::{MergeOptions, MergeOutput};
use crate::deep::DeepImage;
use crate::vocab::MergeMethod;

/// The loop iterations a band's longest pixel may cost for llvmpipe to merge it: a quarter of
/// its cap, for what was not measured (other layouts, tidies, the viewer's kernels).
pub const SOFTWARE_LOOP_BUDGET: u64 = 65_535 / 4;

/// Loop iterations the merge of `inputs` inputs may spend on each sample of a pixel, as
/// measured (module docs): one for the k-way kernel (and the gather); for the pairwise merge
/// ten, or the block size plus one with shifted register blocks. Where the pairwise merge may
/// be chosen for long lists (`GlOptions::pairs_long_lists_pairwise`), its cost is assumed.
pub fn iterations_per_sample(
    ctx: &GlContext,
    options: &MergeOptions,
    gl: &GlOptions,
    inputs: usize,
) -> u64 {
    let kway =
        uses_kway(options.strategy, inputs) && !(inputs == 2 && gl.pairs_long_lists_pairwise(ctx));
    if kway {
        1
    } else if gl.method == MergeMethod::RegisterBlock {
        10u64.max(u64::from(gl.block_size) + 1)
    } else {
        10
    }
}

/// Whether `ctx` would merge `inputs` short: its loops are capped
/// ([`super::GlInfo::loops_capped`]) and a pixel may cost more than [`SOFTWARE_LOOP_BUDGET`]
/// iterations ([`iterations_per_sample`] times its samples).
pub fn merges_short(
    ctx: &GlContext,
    inputs: &[&DeepImage],
    options: &MergeOptions,
    gl: &GlOptions,
) -> bool {
    ctx.info().loops_capped
        && longest_pixel_bound(inputs.iter().map(|image| &image.offsets[..]))
            * iterations_per_sample(ctx, options, gl, inputs.len())
            > SOFTWARE_LOOP_BUDGET
}

/// The GL engine's statistics of one band of `inputs` that the CPU engine merged in its stead
/// ([`merges_short`]; the caller merges with `composite::merge_checked_images_over`) into
/// `merged`: its pixels and samples, and no GPU work.
pub fn host_band_stats(
    ctx: &GlContext,
    gl_options: &GlOptions,
    inputs: &[&DeepImage],
    merged: &MergeOutput,
) -> GpuStats {
    let mut stats = GpuStats::new(&ctx.info().renderer, gl_options);
    stats.bands = 1;
    stats.host_bands = 1;
    stats.input_samples = inputs.iter().map(|i| i.sample_count() as u64).sum();
    // As the GL merge counts them: the output window's pixels, and the merged samples (the
    // inputs' for a flat composite, a tidied deep output's own).
    let (window, output_samples) = match merged {
        MergeOutput::Flat(flat) => (flat.data_window, stats.input_samples),
        MergeOutput::Deep(deep) => (deep.data_window, deep.sample_count() as u64),
    };
    stats.pixels = window.area() as u64;
    stats.output_samples = output_samples;
    stats
}

/// The sum of each input's longest list, given by its sample `offsets`: an upper bound of any
/// one pixel's merged list, in one pass over the counts (windows that do not meet only make it
/// larger than it need be).
pub fn longest_pixel_bound<'a>(offsets: impl Iterator<Item = &'a [u64]>) -> u64 {
    offsets
        .map(|offsets| {
            offsets
                .windows(2)
                .map(|pair| pair[1] - pair[0])
                .max()
                .unwrap_or(0)
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets_of(counts: &[u64]) -> Vec<u64> {
        std::iter::once(0)
            .chain(counts.iter().scan(0, |total, &n| {
                *total += n;
                Some(*total)
            }))
            .collect()
    }

    #[test]
    fn sums_the_inputs_longest_lists() {
        let a = offsets_of(&[3, 700, 0]);
        let b = offsets_of(&[1000]);
        let bound = |inputs: &[&Vec<u64>]| longest_pixel_bound(inputs.iter().map(|o| &o[..]));
        assert_eq!(bound(&[&a]), 700);
        assert_eq!(bound(&[&a, &b, &a]), 2400);
        assert_eq!(bound(&[&offsets_of(&[])]), 0);
        assert_eq!(bound(&[]), 0);
    }
}
