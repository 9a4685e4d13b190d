//! The merge's sample pruning, from Nuke and Gaffer: `--drop-transparent [EPS]` (Nuke
//! DeepMerge's `drop_zero_threshold`) and `--drop-hidden [THRESHOLD]` (Gaffer DeepState's
//! `pruneOccluded`/`occludedThreshold`, Nuke DeepMerge's `drop hidden samples`).
//!
//! Exact semantics:
//! - **drop transparent**: before the merge, every input drops the samples whose alpha channels
//!   (A, RA, GA, BA, in any layer) are all at most EPS (default 1e-7); an input without any
//!   alpha channel keeps every sample (nothing says it is transparent). Both outputs.
//! - **drop hidden**: after the merge, in deep output, each pixel's samples (in merge order,
//!   front to back) accumulate their alphas per alpha channel with "over"
//!   (`acc = acc + (1 − acc)·a`, in f64). Once every alpha channel's accumulation has reached
//!   THRESHOLD (default 1: opaque) at a sample, the samples that start at or behind that
//!   sample's back (its ZBack, or its Z for a point) are dropped; the sample itself and any
//!   sample starting inside its volume are kept. With the default threshold nothing visible
//!   is dropped, so the flat composite is unchanged (within rounding), and no sample is ever
//!   added.
//!
//! Both run on the host around either engine's merge, so the CPU and GL engines give the same
//! bytes with them.

use super::MergeOutput;
use crate::deep::{ChannelRole, DeepImage};
use crate::error::{Error, Result};

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

/// `image` (each pixel front to back) without the samples hidden behind the point where the
/// accumulated alpha reaches `threshold` in every alpha channel.
pub fn drop_hidden(image: &DeepImage, threshold: f32) -> DeepImage {
    let alphas = alpha_channels(image);
    if alphas.is_empty() {
        return image.clone();
    }
    let (z_channel, zback_channel) = image.depth_channels();
    let window = image.data_window;
    let threshold = threshold as f64;
    build_band(
        &image.channels,
        window,
        image.display_window,
        image.state,
        |y, row: &mut RowBuilder| {
            let mut accumulated = vec![0f64; alphas.len()];
            for x in window.x0..=window.x1 {
                let p = window.index_of(x, y).expect("inside");
                accumulated.iter_mut().for_each(|a| *a = 0.0);
                let mut hidden_from: Option<f32> = None;
                for i in image.range(p) {
                    let z = z_channel.map_or(0.0, |c| image.planes[c].get_f32(i));
                    if hidden_from.is_some_and(|back| z >= back) {
                        continue;
                    }
                    row.copy(image, i);
                    if hidden_from.is_some() {
                        continue;
                    }
                    for (acc, &c) in accumulated.iter_mut().zip(&alphas) {
                        let a = image.planes[c].get_f32(i) as f64;
                        *acc += (1.0 - *acc) * a;
                    }
                    if accumulated.iter().all(|&acc| acc >= threshold) {
                        let zback = zback_channel.map_or(z, |c| image.planes[c].get_f32(i));
                        hidden_from = Some(zback.max(z));
                    }
                }
                row.end_pixel();
            }
        },
    )
}
