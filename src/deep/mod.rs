//! The host-side deep image: a data window, a channel list with roles, per-pixel sample counts
//! stored as offsets (compressed sparse rows) and one plane of values per channel.
//!
//! Pixel `p` (row-major over the data window) owns samples `offsets[p]..offsets[p + 1]` in every
//! plane. This is the form the EXR reader produces, the CPU engine merges and the GPU uploads.

mod bounds;
pub mod builder;
mod channel;
mod flat;
pub(crate) mod parallel_extend;
mod state;

pub use bounds::Bounds;
pub use channel::{Channel, ChannelRole, Plane, PlaneValue, SampleType};
pub use flat::{FlatChannel, FlatImage, FlatValues};
pub use state::{pixel_state, DeepState};

use crate::error::{Error, Result};

/// A deep image in host memory.
#[derive(Clone, Debug, PartialEq)]
pub struct DeepImage {
    /// The display window (the frame), inclusive.
    pub display_window: Bounds,
    /// The data window: the pixels that are stored, inclusive.
    pub data_window: Bounds,
    /// Channels in EXR order (sorted by name).
    pub channels: Vec<Channel>,
    /// Exclusive prefix sum of the per-pixel sample counts; `pixel_count() + 1` entries.
    pub offsets: Vec<u64>,
    /// One plane per channel, each `sample_count()` long.
    pub planes: Vec<Plane>,
    /// What is claimed about sample order; a writer stamps the part of the claim every pixel
    /// satisfies ([`DeepImage::held_state`]).
    pub state: DeepState,
}

impl DeepImage {
    /// The part of the image inside `window` (intersected with the data window), as a new image
    /// whose data window is that intersection: samples, channels and state unchanged.
    pub fn cropped(&self, window: Bounds) -> DeepImage {
        let dw = self.data_window;
        let window = Bounds {
            x0: window.x0.max(dw.x0),
            y0: window.y0.max(dw.y0),
            x1: window.x1.min(dw.x1),
            y1: window.y1.min(dw.y1),
        };
        let mut counts = Vec::with_capacity(window.area());
        let mut planes: Vec<Plane> = self
            .channels
            .iter()
            .map(|c| Plane::with_capacity(c.sample_type, 0))
            .collect();
        for y in window.y0..=window.y1 {
            for x in window.x0..=window.x1 {
                let p = self.pixel_index(x, y).expect("inside the data window");
                counts.push(self.count(p) as u32);
                for i in self.range(p) {
                    for (c, plane) in planes.iter_mut().enumerate() {
                        plane.push_from(&self.planes[c], i);
                    }
                }
            }
        }
        DeepImage::from_counts(
            self.display_window,
            window,
            self.channels.clone(),
            &counts,
            planes,
            self.state,
        )
        .expect("a crop of a consistent image is consistent")
    }

    /// An image with the given windows and channels and no samples.
    pub fn empty(display_window: Bounds, data_window: Bounds, channels: Vec<Channel>) -> Self {
        let planes = channels
            .iter()
            .map(|c| Plane::zeros(c.sample_type, 0))
            .collect();
        DeepImage {
            display_window,
            data_window,
            offsets: vec![0; data_window.area() + 1],
            channels,
            planes,
            state: DeepState::Tidy,
        }
    }

    /// Build from per-pixel counts and planes, checking that the sizes agree.
    pub fn from_counts(
        display_window: Bounds,
        data_window: Bounds,
        channels: Vec<Channel>,
        counts: &[u32],
        planes: Vec<Plane>,
        state: DeepState,
    ) -> Result<Self> {
        if counts.len() != data_window.area() {
            return Err(Error::format(format!(
                "{} sample counts for a data window of {} pixels",
                counts.len(),
                data_window.area()
            )));
        }
        let offsets = offsets_from_counts(counts);
        let total = *offsets.last().unwrap_or(&0) as usize;
        if planes.len() != channels.len() || planes.iter().any(|p| p.len() != total) {
            return Err(Error::format("plane sizes disagree with the sample counts"));
        }
        Ok(DeepImage {
            display_window,
            data_window,
            channels,
            offsets,
            planes,
            state,
        })
    }

    /// Number of pixels in the data window.
    pub fn pixel_count(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Total number of samples.
    pub fn sample_count(&self) -> usize {
        *self.offsets.last().unwrap_or(&0) as usize
    }

    /// Samples of pixel `p` (row-major index in the data window).
    pub fn count(&self, p: usize) -> usize {
        (self.offsets[p + 1] - self.offsets[p]) as usize
    }

    /// The sample index range of pixel `p`.
    pub fn range(&self, p: usize) -> std::ops::Range<usize> {
        self.offsets[p] as usize..self.offsets[p + 1] as usize
    }

    /// Per-pixel counts.
    pub fn counts(&self) -> Vec<u32> {
        self.offsets
            .windows(2)
            .map(|w| (w[1] - w[0]) as u32)
            .collect()
    }

    /// Row-major pixel index of absolute pixel (x, y), if it lies in the data window.
    pub fn pixel_index(&self, x: i32, y: i32) -> Option<usize> {
        self.data_window.index_of(x, y)
    }

    /// Index of the channel with exactly this name.
    pub fn channel_index(&self, name: &str) -> Option<usize> {
        self.channels.iter().position(|c| c.name == name)
    }

    /// Index of the first channel with this role.
    pub fn role_index(&self, role: ChannelRole) -> Option<usize> {
        self.channels.iter().position(|c| c.role == role)
    }

    /// Its Z and ZBack channels, where present (what a sample's key is read from).
    pub fn depth_channels(&self) -> (Option<usize>, Option<usize>) {
        (
            self.role_index(ChannelRole::Z),
            self.role_index(ChannelRole::ZBack),
        )
    }

    /// The largest number of samples in one pixel.
    pub fn max_count(&self) -> usize {
        self.offsets
            .windows(2)
            .map(|w| (w[1] - w[0]) as usize)
            .max()
            .unwrap_or(0)
    }

    /// Refuse depths the merge cannot order: NaN in Z or ZBack (infinities are allowed and sort
    /// as the largest and smallest depths). Names the first offending pixel.
    pub fn check_depths(&self) -> Result<()> {
        for role in [ChannelRole::Z, ChannelRole::ZBack] {
            let Some(c) = self.role_index(role) else {
                continue;
            };
            if let Some(i) = first_nan(&self.planes[c]) {
                let p = self.offsets.partition_point(|&o| o <= i as u64) - 1;
                let (x, y) = self.data_window.coords_of(p);
                return Err(Error::format(format!(
                    "channel {} is NaN at pixel ({x}, {y}) sample {}; depths must be numbers",
                    self.channels[c].name,
                    i as u64 - self.offsets[p]
                )));
            }
        }
        Ok(())
    }
}

/// The first NaN of `plane`: a typed pass in parallel pieces (the reader checks every band it
/// decodes; the GL engine checked each band again on the merging thread, value by value, at
/// 24-37 ms a band of the 1080p pair on an H100 host).
fn first_nan(plane: &Plane) -> Option<usize> {
    use rayon::prelude::*;
    const PIECE: usize = 1 << 16;
    fn first<T: Sync>(values: &[T], is_nan: impl Fn(&T) -> bool + Sync) -> Option<usize> {
        values
            .par_chunks(PIECE)
            // Every value of a piece looked at, no early exit: the compiler makes that a vector
            // loop, where `any` tested one value at a time (2% of a flat merge's CPU time).
            .position_first(|piece| piece.iter().fold(false, |found, x| found | is_nan(x)))
            .map(|k| k * PIECE + values[k * PIECE..].iter().position(&is_nan).unwrap_or(0))
    }
    match plane {
        Plane::F32(v) => first(v, |x| x.is_nan()),
        Plane::F16(v) => first(v, |x| x.is_nan()),
        Plane::U32(_) => None,
    }
}

/// Exclusive prefix sum of counts, with the total appended.
pub fn offsets_from_counts(counts: &[u32]) -> Vec<u64> {
    let mut offsets = Vec::with_capacity(counts.len() + 1);
    let mut total = 0u64;
    offsets.push(0);
    for &c in counts {
        total += c as u64;
        offsets.push(total);
    }
    offsets
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    /// A NaN depth past the first parallel piece is found where it is, named by pixel and
    /// sample, in either float type; ZBack too; infinities pass.
    #[test]
    fn check_depths_names_the_first_nan_in_any_piece() {
        let width = 1000;
        let window = Bounds::from_origin_size(0, 0, width, 1);
        let counts = vec![200u32; width];
        let n = 200 * width;
        let image = |z: Plane, zback: Plane| {
            let channels = vec![
                Channel::new("Z", z.sample_type()),
                Channel::new("ZBack", zback.sample_type()),
            ];
            DeepImage::from_counts(
                window,
                window,
                channels,
                &counts,
                vec![z, zback],
                DeepState::Messy,
            )
            .unwrap()
        };
        let mut z: Vec<f32> = (0..n).map(|i| i as f32).collect();
        z[7] = f32::INFINITY;
        z[3] = f32::NEG_INFINITY;
        let zback = Plane::F32(z.clone());
        assert!(image(Plane::F32(z.clone()), zback.clone())
            .check_depths()
            .is_ok());
        // Sample 5 of pixel 700 (past the first 65536 samples), and a later one.
        z[700 * 200 + 5] = f32::NAN;
        z[900 * 200] = f32::NAN;
        let err = image(Plane::F32(z.clone()), zback.clone())
            .check_depths()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "channel Z is NaN at pixel (700, 0) sample 5; depths must be numbers"
        );
        let halves: Vec<f16> = z.iter().map(|&v| f16::from_f32(v)).collect();
        let err = image(
            Plane::F32((0..n).map(|i| i as f32).collect()),
            Plane::F16(halves),
        )
        .check_depths()
        .unwrap_err();
        assert!(err
            .to_string()
            .starts_with("channel ZBack is NaN at pixel (700, 0) sample 5"));
    }
}
