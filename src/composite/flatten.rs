//! Front-to-back "over": `out = out + (1 - out.A) * s` for every composited channel, each colour
//! attenuated by its own alpha (A, or RA/GA/BA where present), stopping once every alpha is 1.

use super::pixel::{CompositeChannels, CompositeKind, PixelSamples};

/// A flattened pixel.
#[derive(Clone, Debug, PartialEq)]
pub struct FlattenResult {
    /// One value per composited channel.
    pub values: Vec<f32>,
    /// Index (in the pixel's sample list) of the front-most sample with any alpha above 0: the
    /// one that supplies ids and Z to flat output.
    pub front: Option<usize>,
}

/// Composite a pixel's samples (already in merge order, tidied where volumes overlap).
pub fn flatten_pixel(pixel: &PixelSamples, channels: &CompositeChannels) -> FlattenResult {
    let mut out = vec![0.0f32; channels.len()];
    let mut front = None;
    for s in 0..pixel.len() {
        if channels.alphas.iter().all(|&a| out[a] >= 1.0) && !channels.alphas.is_empty() {
            break;
        }
        let row = pixel.row(s);
        if front.is_none() && channels.alphas.iter().any(|&a| row[a] > 0.0) {
            front = Some(s);
        }
        // Colours first: they read the alpha accumulated before this sample.
        for (k, kind) in channels.kinds.iter().enumerate() {
            if let CompositeKind::Colour { alpha } = *kind {
                out[k] += (1.0 - out[alpha]) * row[k];
            }
        }
        for &a in &channels.alphas {
            out[a] += (1.0 - out[a]) * row[a];
        }
    }
    FlattenResult { values: out, front }
}
