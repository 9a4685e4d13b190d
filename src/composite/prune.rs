//! The merge's sample pruning, from Nuke and Gaffer: `--drop-transparent [EPS]` (Nuke
//! DeepMerge's `drop_zero_threshold`) and `--drop-hidden [THRESHOLD]` (Gaffer DeepState's
//! `pruneOccluded`/`occludedThreshold`, Nuke DeepMerge's `drop hidden samples`).
//!
//! Exact semantics:
//! - **drop transparent**: before the merge, every input drops the samples whose alpha channels
//!   (A, RA, GA, BA, in any layer) are all at most EPS (default 1e-7); an input without any
//!   alpha channel keeps every sample (nothing says it is transparent). Both outputs.
//! - **drop hidden**: after the merge, in deep output, each pixel's samples are taken front to
//!   back. A sample is dropped when the samples before it that lie wholly in front of it (their
//!   back, ZBack or Z for a point, at or before its Z) accumulate at least THRESHOLD (default 1:
//!   opaque) in every alpha channel, with "over" (`acc = acc + (1 − acc)·a`, in f64). A volume
//!   reaching past a sample's front does not count: only part of it lies in front. On tidy
//!   samples this is Gaffer's cut after the accumulation reaches THRESHOLD. The accumulation
//!   does not depend on THRESHOLD, so a lower one drops at least as much, always a suffix of
//!   each pixel sorted by Z; with the default nothing visible is dropped, so the flat composite
//!   is unchanged (within rounding), and no sample is ever added. A sample whose Z is NaN is
//!   never hidden, and its pixel counts as unsorted: there each sample is judged alone.
//!
//! Both run on the host around either engine's merge, so the CPU and GL engines give the same
//! bytes with them.

use super::MergeOutput;
use crate::deep::{ChannelRole, DeepImage};
use crate::error::{Error, Result};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::deep::builder::{build_band, RowBuilder};

/// The default of `--drop-transparent` given without a value.
pub const DEFAULT_TRANSPARENT_EPS: f32 = 1e-7;

/// The default of `--drop-hidden` given without a value.
pub const DEFAULT_HIDDEN_THRESHOLD: f32 = 1.0;

/// Which samples the merge drops (see the module docs); the default drops none.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Pruning {
    /// Drop the inputs' samples whose alphas are all at most this.
    pub drop_transparent: Option<f32>,
    /// Drop the deep output's samples behind the point where the accumulated alpha reaches this.
    pub drop_hidden: Option<f32>,
}

impl Pruning {
    /// Refuse values that are not numbers, and a threshold outside (0, 1].
    pub fn check(&self) -> Result<()> {
        if self
            .drop_transparent
            .is_some_and(|e| !e.is_finite() || e < 0.0)
        {
            return Err(Error::Usage(
                "the transparent-sample threshold must be a finite alpha of at least 0".into(),
            ));
        }
        if self.drop_hidden.is_some_and(|t| !(t > 0.0 && t <= 1.0)) {
            return Err(Error::Usage(
                "the hidden-sample threshold must be an accumulated alpha in (0, 1]".into(),
            ));
        }
        Ok(())
    }

    /// An input band with the transparent samples dropped (unchanged when not asked).
    pub fn inputs(&self, image: DeepImage) -> DeepImage {
        match self.drop_transparent {
            Some(eps) => drop_transparent(&image, eps),
            None => image,
        }
    }

    /// The merge's output with the hidden samples dropped (deep output only).
    pub fn output(&self, merged: MergeOutput) -> MergeOutput {
        match (self.drop_hidden, merged) {
            (Some(threshold), MergeOutput::Deep(image)) => {
                MergeOutput::Deep(drop_hidden(&image, threshold))
            }
            (_, other) => other,
        }
    }
}

fn alpha_channels(image: &DeepImage) -> Vec<usize> {
    image
        .channels
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            matches!(
                c.role,
                ChannelRole::Alpha
                    | ChannelRole::RedAlpha
                    | ChannelRole::GreenAlpha
                    | ChannelRole::BlueAlpha
            )
        })
        .map(|(i, _)| i)
        .collect()
}

/// `image` without the samples whose alphas are all at most `eps`.
pub fn drop_transparent(image: &DeepImage, eps: f32) -> DeepImage {
    let alphas = alpha_channels(image);
    if alphas.is_empty() {
        return image.clone();
    }
    let window = image.data_window;
    build_band(
        &image.channels,
        window,
        image.display_window,
        image.state,
        |y, row: &mut RowBuilder| {
            for x in window.x0..=window.x1 {
                let p = window.index_of(x, y).expect("inside");
                for i in image.range(p) {
                    if alphas.iter().any(|&c| image.planes[c].get_f32(i) > eps) {
                        row.copy(image, i);
                    }
                }
                row.end_pixel();
            }
        },
    )
}

/// `image` (each pixel front to back) without the samples hidden behind opaque ones: a sample is
/// dropped when the samples before it that lie wholly in front of it (their back at or before
/// its front) accumulate at least `threshold` in every alpha channel.
pub fn drop_hidden(image: &DeepImage, threshold: f32) -> DeepImage {
    let alphas = alpha_channels(image);
    if alphas.is_empty() {
        return image.clone();
    }
    let (z_channel, zback_channel) = image.depth_channels();
    let front = |i: usize| z_channel.map_or(0.0, |c| image.planes[c].get_f32(i));
    // A point's back is its front; a ZBack before Z counts as a point.
    let back =
        |i: usize| zback_channel.map_or(front(i), |c| image.planes[c].get_f32(i).max(front(i)));
    let window = image.data_window;
    let threshold = threshold as f64;
    build_band(
        &image.channels,
        window,
        image.display_window,
        image.state,
        |y, row: &mut RowBuilder| {
            let mut in_front = InFront::new(alphas.len());
            for x in window.x0..=window.x1 {
                let p = window.index_of(x, y).expect("inside");
                let range = image.range(p);
                let sorted = range
                    .clone()
                    .zip(range.clone().skip(1))
                    .all(|(i, j)| front(i) <= front(j));
                in_front.clear();
                for k in range.clone() {
                    let z = front(k);
                    let hidden = if sorted {
                        // Fronts never go back, so a sample wholly in front of this one is
                        // wholly in front of every later one: accumulate it once.
                        while let Some(i) = in_front.pop_ending_by(z) {
                            in_front.accumulate(alphas.iter().map(|&c| image.planes[c].get_f32(i)));
                        }
                        in_front.reached(threshold)
                    } else {
                        // Out of order (after a merge, only where a Z is NaN): judge each sample
                        // by every earlier one.
                        let mut earlier = InFront::new(alphas.len());
                        for i in (range.start..k).filter(|&i| back(i) <= z) {
                            earlier.accumulate(alphas.iter().map(|&c| image.planes[c].get_f32(i)));
                        }
                        earlier.reached(threshold)
                    };
                    if hidden && sorted {
                        // Every later sample starts at or behind this one: hidden too.
                        break;
                    }
                    if !hidden {
                        row.copy(image, k);
                    }
                    if sorted {
                        in_front.push(back(k), k);
                    }
                }
                row.end_pixel();
            }
        },
    )
}

/// One pixel's samples seen so far, by back depth, and the accumulated alpha (per alpha
/// channel) of those already known to lie wholly in front of the current sample.
struct InFront {
    pending: BinaryHeap<Reverse<(u32, u32, usize)>>,
    accumulated: Vec<f64>,
}

impl InFront {
    fn new(channels: usize) -> Self {
        InFront {
            pending: BinaryHeap::new(),
            accumulated: vec![0.0; channels],
        }
    }

    fn clear(&mut self) {
        self.pending.clear();
        self.accumulated.iter_mut().for_each(|a| *a = 0.0);
    }

    fn push(&mut self, back: f32, sample: usize) {
        self.pending
            .push(Reverse((ordered_bits(back), back.to_bits(), sample)));
    }

    /// The pending sample with the nearest back, when that back is at or before `front`.
    fn pop_ending_by(&mut self, front: f32) -> Option<usize> {
        let Reverse((_, back, sample)) = *self.pending.peek()?;
        (f32::from_bits(back) <= front).then(|| {
            self.pending.pop();
            sample
        })
    }

    /// "Over" each alpha channel (`acc = acc + (1 − acc)·a`, in f64).
    fn accumulate(&mut self, alphas: impl Iterator<Item = f32>) {
        for (acc, a) in self.accumulated.iter_mut().zip(alphas) {
            *acc += (1.0 - *acc) * a as f64;
        }
    }

    fn reached(&self, threshold: f64) -> bool {
        self.accumulated.iter().all(|&acc| acc >= threshold)
    }
}

/// An f32's bits in an order that agrees with its value (every NaN after +inf, so that a NaN
/// back never counts as in front), for the heap's order.
fn ordered_bits(value: f32) -> u32 {
    let bits = value.to_bits();
    if value.is_nan() {
        u32::MAX
    } else if bits >> 31 == 1 {
        !bits
    } else {
        bits | 0x8000_0000
    }
}
