//! The software rasteriser's loop cap: Mesa's llvmpipe (gallivm) silently ends every loop of an
//! invocation once the invocation has run 65535 loop iterations in all
//! (`LP_MAX_TGSI_LOOP_ITERATIONS`, a guard against hangs). The merge kernels give each pixel's
//! lists to one invocation, which loops over every sample of the pixel, so on llvmpipe a pixel
//! of tens of thousands of samples is merged short: wrong keys in deep output, samples missing
//! from a flat composite, and no error (found on 2026-11-28 with one pixel of 70,000 samples;
//! 65,000 merged right). A GPU has no such cap. The sort and the tidy already spread or resume
//! their loops (`sort.comp`, `tidy.comp`); the merges do not, so on a software rasteriser a
//! band that may hold such a pixel is merged on the host by the CPU engine instead, which gives
//! the bytes the GL engine gives everywhere else (`--stats` counts those bands).

use crate::deep::DeepImage;

/// The most samples a pixel of a band may hold, summed over the inputs, for the band to be
/// merged by llvmpipe: a quarter of its cap, since an invocation may loop over its samples more
/// than once (the merge, then the composite or the output's writes).
pub const SOFTWARE_LONGEST_PIXEL: u64 = 16_384;

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
