//! The software rasteriser's loop cap: Mesa's llvmpipe (gallivm) silently ends every loop of an
//! invocation once the invocation has run 65535 loop iterations in all
//! (`LP_MAX_TGSI_LOOP_ITERATIONS`, a guard against hangs). The gather (`gather.comp`) and the
//! merge kernels give each pixel to one invocation, which loops over every sample of the pixel,
//! so on llvmpipe a longer pixel is merged short, with no error: the gather leaves the samples
//! past the cap unwritten, so deep output gets wrong depths and a flat composite reads whatever
//! the buffer held (found on 2026-11-28: a pixel of 65,000 samples merged right, flat and deep,
//! one input or two; one of 66,000 did not; strict mode's poison hid it in flat output, where
//! the unwritten samples, NaN there, sorted behind an opaque front). A GPU has no such cap. The
//! sort and the tidy already spread or resume their loops (`sort.comp`, `tidy.comp`); the
//! gather and the merges do not, so on such a rasteriser a band that may hold a pixel of more
//! than [`SOFTWARE_LONGEST_PIXEL`] samples is merged on the host by the CPU engine instead,
//! which gives the bytes the GL engine gives everywhere else (`--stats` counts those bands).

use super::{GlContext, GlOptions, GpuStats};
use crate::deep::DeepImage;

/// The most samples a pixel of a band may hold, summed over the inputs, for the band to be
/// merged by llvmpipe: a quarter of its cap, since a kernel may loop over a pixel's samples more
/// than once (the default layout and merge, flat and deep, measured right up to the cap itself,
/// 65,535 samples).
pub const SOFTWARE_LONGEST_PIXEL: u64 = 16_384;

/// Whether `ctx` would merge `inputs` short: its loops are capped
/// ([`super::GlInfo::loops_capped`]) and a pixel may hold more than [`SOFTWARE_LONGEST_PIXEL`]
/// samples.
pub fn merges_short(ctx: &GlContext, inputs: &[&DeepImage]) -> bool {
    ctx.info().loops_capped && may_pass_software_loop_cap(inputs)
}

/// The GL engine's statistics of one band that the CPU engine merged in its stead
/// ([`merges_short`]; the caller merges with `composite::merge_checked_images_over`).
pub fn host_band_stats(ctx: &GlContext, gl_options: &GlOptions) -> GpuStats {
    let mut stats = GpuStats::new(&ctx.info().renderer, gl_options);
    stats.bands = 1;
    stats.host_bands = 1;
    stats
}

/// Whether a pixel merged from `inputs` may hold more than [`SOFTWARE_LONGEST_PIXEL`] samples
/// ([`longest_lists_pass`] of their offsets).
pub fn may_pass_software_loop_cap(inputs: &[&DeepImage]) -> bool {
    longest_lists_pass(inputs.iter().map(|image| &image.offsets[..]))
}

/// Whether the sum of each input's longest list, given by its sample `offsets`, passes
/// [`SOFTWARE_LONGEST_PIXEL`]: an upper bound of any one pixel's merged list, in one pass over
/// the counts (windows that do not meet only make it larger than it need be).
fn longest_lists_pass<'a>(offsets: impl Iterator<Item = &'a [u64]>) -> bool {
    let longest: u64 = offsets
        .map(|offsets| {
            offsets
                .windows(2)
                .map(|pair| pair[1] - pair[0])
                .max()
                .unwrap_or(0)
        })
        .sum();
    longest > SOFTWARE_LONGEST_PIXEL
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
        let short = offsets_of(&[3, SOFTWARE_LONGEST_PIXEL / 2, 0]);
        let long = offsets_of(&[SOFTWARE_LONGEST_PIXEL + 1]);
        let pass = |inputs: &[&Vec<u64>]| longest_lists_pass(inputs.iter().map(|o| &o[..]));
        assert!(!pass(&[&short]));
        assert!(!pass(&[&short, &short]));
        assert!(pass(&[&short, &short, &short]));
        assert!(pass(&[&long]));
        assert!(!pass(&[]));
    }
}
