//! The front-to-back compositing loop for the common channel set: one alpha, every other
//! column a colour of it (RGBA and the like), read straight from the inputs' planes. It is the
//! arithmetic of [`super::flatten_pixel`] in the same order, so every bit is the same; two
//! things make it fast:
//!
//! - **Two pixels in one loop.** A pixel's samples form one chain of dependent operations
//!   (each sample's `1 - alpha`, multiply and add wait on the sample before), so one pixel at a
//!   time leaves the core waiting on latency: about 12 cycles a sample whatever the width of
//!   the machine. Two pixels' chains are independent, and the core runs them side by side.
//! - **Half floats converted by the CPU** where it has the instruction (F16C on x86-64,
//!   detected once per process), in software elsewhere ([`half::f16::to_f32_const`], the same
//!   value bit for bit). `half`'s own `to_f32` picks its converter at run time with a call per
//!   value, which makes the loop spill its sums from registers.

use half::f16;

use super::views::{InputViews, Values};
use crate::vocab::Sample;

/// What one pixel's loop leaves: every column's sum (the alpha's included) and the front-most
/// sample with an alpha above 0.
type OneAlphaPixel<const N: usize> = ([f32; N], Option<Sample>);

/// A half-to-float conversion the loops are compiled with.
trait HalfToF32: Copy {
    fn to_f32(self, h: f16) -> f32;
}

/// The software conversion, on every CPU.
#[derive(Clone, Copy)]
struct SoftHalf;

impl HalfToF32 for SoftHalf {
    #[inline(always)]
    fn to_f32(self, h: f16) -> f32 {
        h.to_f32_const()
    }
}

/// The CPU's F16C conversion. A value of this type exists only where the CPU has F16C
/// ([`F16c::detected`]), which is what makes its use sound.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct F16c(());

#[cfg(target_arch = "x86_64")]
impl F16c {
    fn detected() -> Option<F16c> {
        std::arch::is_x86_feature_detected!("f16c").then_some(F16c(()))
    }
}

#[cfg(target_arch = "x86_64")]
impl HalfToF32 for F16c {
    #[inline(always)]
    fn to_f32(self, h: f16) -> f32 {
        use std::arch::x86_64::{_mm_cvtph_ps, _mm_cvtsi32_si128, _mm_cvtss_f32};
        // SAFETY: an `F16c` is only made where the CPU has F16C; the other two are SSE2,
        // which every x86-64 CPU has.
        unsafe { _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h.to_bits() as i32))) }
    }
}

/// One value of `values` as f32: [`Values::get`], with half floats converted by `half`.
#[inline(always)]
fn get<C: HalfToF32>(values: Values, i: usize, half: C) -> f32 {
    match values {
        Values::F32(v) => v[i],
        Values::F16(v) => half.to_f32(v[i]),
        Values::U32(v) => v[i] as f32,
        Values::Zero => 0.0,
    }
}

/// One pixel's loop state.
struct Chain<const N: usize> {
    sums: [f32; N],
    sum_alpha: f32,
    front: Option<Sample>,
}

impl<const N: usize> Chain<N> {
    fn new() -> Self {
        Chain {
            sums: [0.0; N],
            sum_alpha: 0.0,
            front: None,
        }
    }

    /// Whether the pixel takes another sample: not once its alpha reaches 1 (a NaN alpha goes
    /// on, as the general loop's does).
    #[inline(always)]
    fn open(&self) -> bool {
        self.sum_alpha < 1.0 || self.sum_alpha.is_nan()
    }

    /// Composite sample `s` under the ones before.
    #[inline(always)]
    fn step<C: HalfToF32>(&mut self, views: &[InputViews], s: Sample, alpha: usize, half: C) {
        let columns: &[Values; N] = views[s.input as usize].columns[..N]
            .try_into()
            .expect("N columns");
        let index = s.index as usize;
        let a = get(columns[alpha], index, half);
        if self.front.is_none() && a > 0.0 {
            self.front = Some(s);
        }
        // Colours read the alpha accumulated before this sample.
        let through = 1.0 - self.sum_alpha;
        for (k, (sum, column)) in self.sums.iter_mut().zip(columns).enumerate() {
            if k != alpha {
                *sum += through * get(*column, index, half);
            }
        }
        self.sum_alpha += through * a;
    }

    fn finish(mut self, alpha: usize) -> OneAlphaPixel<N> {
        self.sums[alpha] = self.sum_alpha;
        (self.sums, self.front)
    }
}

/// The loop over up to two pixels at once (`pixels` holds one or two, each its samples in merge
/// order). A pixel's next sample is asked for only while it is not opaque, so a walk that
/// merges as it goes ([`super::walk::PairWalk`]) never orders the samples behind.
#[inline(always)]
fn composite<const N: usize, C: HalfToF32, I: Iterator<Item = Sample>>(
    views: &[InputViews],
    pixels: &mut [I],
    alpha: usize,
    half: C,
    out: &mut [OneAlphaPixel<N>],
) {
    match pixels {
        [one] => {
            let mut chain = Chain::<N>::new();
            while chain.open() {
                let Some(s) = one.next() else { break };
                chain.step(views, s, alpha, half);
            }
            out[0] = chain.finish(alpha);
        }
        [first, second] => {
            let (mut a, mut b) = (Chain::<N>::new(), Chain::<N>::new());
            loop {
                let next_a = if a.open() { first.next() } else { None };
                let next_b = if b.open() { second.next() } else { None };
                match (next_a, next_b) {
                    (Some(s), Some(t)) => {
                        a.step(views, s, alpha, half);
                        b.step(views, t, alpha, half);
                    }
                    (Some(s), None) => a.step(views, s, alpha, half),
                    (None, Some(t)) => b.step(views, t, alpha, half),
                    (None, None) => break,
                }
            }
            out[0] = a.finish(alpha);
            out[1] = b.finish(alpha);
        }
        _ => unreachable!("one or two pixels"),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "f16c")]
fn composite_f16c<const N: usize, I: Iterator<Item = Sample>>(
    views: &[InputViews],
    pixels: &mut [I],
    alpha: usize,
    half: F16c,
    out: &mut [OneAlphaPixel<N>],
) {
    composite::<N, F16c, I>(views, pixels, alpha, half, out)
}

/// The most columns [`composite_one_alpha`] takes (RGBA and two more); wider channel sets take
/// the general loop.
pub(crate) const MAX_ONE_ALPHA_COLUMNS: usize = 6;

/// Composite one or two pixels (`pixels`, each its samples in merge order, nothing to tidy:
/// slices' iterators, or walks that merge as they go)
/// front to back over the columns of every input's `views`, of which column `alpha` is the only
/// alpha: each pixel's sums into `values` (a row of as many as the views have columns, pixel
/// after pixel) and its front-most sample with an alpha above 0 into `fronts`. `false` (and
/// nothing written) when the inputs' views differ in their number of columns or it is not 2 to
/// [`MAX_ONE_ALPHA_COLUMNS`].
pub(crate) fn composite_one_alpha<I: Iterator<Item = Sample>>(
    views: &[InputViews],
    pixels: &mut [I],
    alpha: usize,
    values: &mut [f32],
    fronts: &mut [Option<Sample>],
) -> bool {
    composite_converting(views, pixels, alpha, values, fronts, false)
}

/// [`composite_one_alpha`], with half floats converted in software whatever the CPU when
/// `soft`: what a CPU without F16C runs, which the tests compare with the conversion this one
/// uses.
pub(crate) fn composite_converting<I: Iterator<Item = Sample>>(
    views: &[InputViews],
    pixels: &mut [I],
    alpha: usize,
    values: &mut [f32],
    fronts: &mut [Option<Sample>],
    soft: bool,
) -> bool {
    let columns = views.first().map_or(0, |v| v.columns.len());
    if views.iter().any(|v| v.columns.len() != columns) {
        return false;
    }
    match columns {
        2 => composite_fixed::<2, I>(views, pixels, alpha, values, fronts, soft),
        3 => composite_fixed::<3, I>(views, pixels, alpha, values, fronts, soft),
        4 => composite_fixed::<4, I>(views, pixels, alpha, values, fronts, soft),
        5 => composite_fixed::<5, I>(views, pixels, alpha, values, fronts, soft),
        6 => composite_fixed::<6, I>(views, pixels, alpha, values, fronts, soft),
        _ => return false,
    }
    true
}

/// [`composite_converting`] for `N` columns: the loop with the converter this CPU has (unless
/// `soft`), then each pixel's sums and front copied out.
fn composite_fixed<const N: usize, I: Iterator<Item = Sample>>(
    views: &[InputViews],
    pixels: &mut [I],
    alpha: usize,
    values: &mut [f32],
    fronts: &mut [Option<Sample>],
    soft: bool,
) {
    assert!((1..=2).contains(&pixels.len()));
    assert!(values.len() == pixels.len() * N && fronts.len() == pixels.len());
    let mut out = [([0f32; N], None); 2];
    #[cfg(target_arch = "x86_64")]
    let by_f16c = match half_converter().filter(|_| !soft) {
        Some(half) => {
            // SAFETY: `half` exists, so the CPU has F16C.
            unsafe { composite_f16c::<N, I>(views, pixels, alpha, half, &mut out) };
            true
        }
        None => false,
    };
    #[cfg(not(target_arch = "x86_64"))]
    let by_f16c = false;
    if !by_f16c {
        composite::<N, SoftHalf, I>(views, pixels, alpha, SoftHalf, &mut out);
    }
    for ((sums, front), (row, slot)) in out
        .iter()
        .zip(values.chunks_exact_mut(N).zip(fronts.iter_mut()))
    {
        row.copy_from_slice(sums);
        *slot = *front;
    }
}

/// The F16C converter where the CPU has it (asked once per process).
#[cfg(target_arch = "x86_64")]
fn half_converter() -> Option<F16c> {
    static DETECTED: std::sync::OnceLock<Option<F16c>> = std::sync::OnceLock::new();
    *DETECTED.get_or_init(F16c::detected)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CPU's conversion of every half gives the software conversion's bits (NaNs: the same
    /// quieted payload). On a CPU without F16C, what is checked is that the loops convert in
    /// software there.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn f16c_converts_every_half_as_the_software_does() {
        let Some(f16c) = F16c::detected() else {
            assert!(
                half_converter().is_none(),
                "F16C chosen on a CPU without it"
            );
            return;
        };
        assert!(
            half_converter().is_some(),
            "the CPU has F16C and the loops do not use it"
        );
        for bits in 0..=u16::MAX {
            let h = f16::from_bits(bits);
            assert_eq!(
                f16c.to_f32(h).to_bits(),
                SoftHalf.to_f32(h).to_bits(),
                "half {bits:#06x}"
            );
        }
    }
}
