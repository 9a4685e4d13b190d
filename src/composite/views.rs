//! Typed views of the inputs' planes, made once per merge, so the per-sample loops read a
//! value with one slice index instead of going through the image, its channel list and the
//! [`Plane`] enum each time. Values read here are exactly [`Plane::get_f32`]'s.

use half::f16;

use crate::deep::{DeepImage, Plane};

/// One channel's values, or none (a channel the input lacks reads as 0).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Values<'a> {
    F32(&'a [f32]),
    F16(&'a [f16]),
    U32(&'a [u32]),
    Zero,
}

impl<'a> Values<'a> {
    /// The values of channel `channel` of `image`, if any.
    pub(crate) fn of(image: &'a DeepImage, channel: Option<usize>) -> Values<'a> {
        match channel.map(|c| &image.planes[c]) {
            Some(Plane::F32(v)) => Values::F32(v),
            Some(Plane::F16(v)) => Values::F16(v),
            Some(Plane::U32(v)) => Values::U32(v),
            None => Values::Zero,
        }
    }

    /// Value `i` as f32 ([`Plane::get_f32`]; 0 for no channel). Half floats are converted
    /// inline, in software (`half`'s `to_f32_const`, the same value bit for bit, NaNs
    /// included): `to_f32` calls a converter chosen at run time, a call that makes the
    /// compositing loops spill their sums from registers.
    #[inline(always)]
    pub(crate) fn get(self, i: usize) -> f32 {
        match self {
            Values::F32(v) => v[i],
            Values::F16(v) => v[i].to_f32_const(),
            Values::U32(v) => v[i] as f32,
            Values::Zero => 0.0,
        }
    }
}

/// What the merge reads of one input: its depth channels and the source of each composited
/// column (`MergePlan::sources`).
#[derive(Clone, Debug)]
pub(crate) struct InputViews<'a> {
    /// Z, if the input has it.
    pub(crate) z: Option<Values<'a>>,
    /// ZBack, if the input has it.
    pub(crate) zback: Option<Values<'a>>,
    /// One per composited column.
    pub(crate) columns: Vec<Values<'a>>,
}

impl<'a> InputViews<'a> {
    /// The views of `image`, whose depth channels are `depth` and whose composited columns
    /// come from `sources`.
    pub(crate) fn new(
        image: &'a DeepImage,
        (z, zback): (Option<usize>, Option<usize>),
        sources: &[Option<usize>],
    ) -> Self {
        InputViews {
            z: z.map(|c| Values::of(image, Some(c))),
            zback: zback.map(|c| Values::of(image, Some(c))),
            columns: sources.iter().map(|&c| Values::of(image, c)).collect(),
        }
    }

    /// The (Z, ZBack) of sample `i` as [`super::read_sample`] reads them (no Z: 0; no ZBack:
    /// Z), before `depth_key`.
    #[inline]
    pub(crate) fn depths(&self, i: usize) -> (f32, f32) {
        let zf = self.z.map_or(0.0, |v| v.get(i));
        let zb = self.zback.map_or(zf, |v| v.get(i));
        (zf, zb)
    }
}
