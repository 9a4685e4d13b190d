//! The reference tidy applied to one pixel held as a fragment list (keys in merge order plus
//! `stride` values per key), the form the GL engine keeps merged pixels in. The GL engine uses
//! it for the rare pixels too long for one pass of `tidy.comp`; it is the reference itself
//! (f64 maths), not the f32 twin of the shader, so the engine never leans on its test oracle.

use super::flatten::flatten_pixel;
use super::pixel::{CompositeChannels, CompositeKind, PixelSamples};
use super::tidy::{tidy_deep_pixel, tidy_pixel};
use crate::vocab::{Fragment, Sample};

impl CompositeChannels {
    /// The columns of a fragment list whose column k has its alpha at `alpha_of[k]` (`None`:
    /// k is an alpha), as the GPU stages describe them; names are left empty.
    pub fn from_alpha_of(alpha_of: &[Option<usize>]) -> Self {
        let kinds: Vec<CompositeKind> = alpha_of
            .iter()
            .map(|a| match a {
                None => CompositeKind::Alpha,
                Some(alpha) => CompositeKind::Colour { alpha: *alpha },
            })
            .collect();
        CompositeChannels {
            names: vec![String::new(); kinds.len()],
            alphas: (0..kinds.len())
                .filter(|&k| kinds[k] == CompositeKind::Alpha)
                .collect(),
            kinds,
        }
    }
}

impl CompositeChannels {
    /// Per column, the column of its alpha (`None` for alphas): the inverse of
    /// [`CompositeChannels::from_alpha_of`], the table the GPU stages are specialised with.
    pub fn alpha_of(&self) -> Vec<Option<usize>> {
        self.kinds
            .iter()
            .map(|k| match k {
                CompositeKind::Alpha => None,
                CompositeKind::Colour { alpha } => Some(*alpha),
            })
            .collect()
    }
}

/// The list as the reference's pixel (values trimmed from `stride` to the composited columns).
fn to_pixel(keys: &[Fragment], values: &[f32], stride: usize, width: usize) -> PixelSamples {
    let mut pixel = PixelSamples::new(width);
    for (s, key) in keys.iter().enumerate() {
        pixel.push(Sample::from(*key), &values[s * stride..s * stride + width]);
    }
    pixel
}

/// Tidy one pixel's list for deep output (coincident points merged, `tidy_deep_pixel`): the
/// tidied keys (a piece keeps its source's input and index) and their values, `stride` per key
/// (columns past the composited ones are 0).
pub fn tidy_list(
    keys: &[Fragment],
    values: &[f32],
    stride: usize,
    channels: &CompositeChannels,
) -> (Vec<Fragment>, Vec<f32>) {
    let mut pixel = to_pixel(keys, values, stride, channels.len());
    tidy_deep_pixel(&mut pixel, channels);
    let mut out_values = vec![0.0; pixel.len() * stride];
    for s in 0..pixel.len() {
        out_values[s * stride..s * stride + pixel.width].copy_from_slice(pixel.row(s));
    }
    let out_keys = pixel
        .samples
        .iter()
        .map(|s| Fragment::try_from(*s).expect("indices came from fragments"))
        .collect();
    (out_keys, out_values)
}

/// Tidy and flatten one pixel's list: `stride` flat values and the front-most contributing
/// sample as the flat merge writes it, `[input, index, Z bits, 1]` (all 0 when none).
pub fn tidy_flatten_list(
    keys: &[Fragment],
    values: &[f32],
    stride: usize,
    channels: &CompositeChannels,
) -> (Vec<f32>, [u32; 4]) {
    let mut pixel = to_pixel(keys, values, stride, channels.len());
    tidy_pixel(&mut pixel, channels);
    let flat = flatten_pixel(&pixel, channels);
    let mut out = vec![0.0; stride];
    out[..flat.values.len()].copy_from_slice(&flat.values);
    let front = flat.front.map_or([0; 4], |s| {
        let s = pixel.samples[s];
        [s.input, s.index as u32, s.z.to_bits(), 1]
    });
    (out, front)
}
