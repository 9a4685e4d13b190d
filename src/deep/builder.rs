//! Building a deep image (an operation's or a pruned merge's output band) sample by sample: rows are filled in parallel (rayon),
//! each into its own [`RowBuilder`], and joined in order into one [`DeepImage`].
//!
//! A sample is either copied bit for bit from the input ([`RowBuilder::copy`]) or pushed with
//! new values for some channels ([`RowBuilder::push_changed`]), each converted once to its
//! channel's storage type.

use rayon::prelude::*;

use crate::deep::{offsets_from_counts, Bounds, Channel, DeepImage, DeepState, Plane};

/// The samples of one output row being built.
pub struct RowBuilder {
    counts: Vec<u32>,
    planes: Vec<Plane>,
    in_pixel: u32,
}

impl RowBuilder {
    fn new(channels: &[Channel], width: usize) -> Self {
        RowBuilder {
            counts: Vec::with_capacity(width),
            planes: channels
                .iter()
                .map(|c| Plane::with_capacity(c.sample_type, 0))
                .collect(),
            in_pixel: 0,
        }
    }

    /// Append sample `i` of `from` (which has the output's channels) unchanged.
    pub fn copy(&mut self, from: &DeepImage, i: usize) {
        for (plane, source) in self.planes.iter_mut().zip(&from.planes) {
            plane.push_from(source, i);
        }
        self.in_pixel += 1;
    }

    /// Append sample `i` of `from` with the channels `value` gives a value for changed (each
    /// rounded once to its channel's type) and the others copied.
    pub fn push_changed(
        &mut self,
        from: &DeepImage,
        i: usize,
        value: impl Fn(usize) -> Option<f64>,
    ) {
        for (c, (plane, source)) in self.planes.iter_mut().zip(&from.planes).enumerate() {
            match value(c) {
                Some(v) => plane.push_f32(v as f32),
                None => plane.push_from(source, i),
            }
        }
        self.in_pixel += 1;
    }

    /// Close the current pixel (possibly with no samples) and start the next one.
    pub fn end_pixel(&mut self) {
        self.counts.push(self.in_pixel);
        self.in_pixel = 0;
    }
}

/// Build a band over `window` with `channels`: `fill(y, row)` pushes the samples of every pixel
/// of row `y`, left to right, ending each with [`RowBuilder::end_pixel`].
pub fn build_band(
    channels: &[Channel],
    window: Bounds,
    display_window: Bounds,
    state: DeepState,
    fill: impl Fn(i32, &mut RowBuilder) + Sync,
) -> DeepImage {
    let rows: Vec<RowBuilder> = (window.y0..=window.y1)
        .into_par_iter()
        .map(|y| {
            let mut row = RowBuilder::new(channels, window.width());
            fill(y, &mut row);
            debug_assert_eq!(row.counts.len(), window.width(), "a count per pixel");
            row
        })
        .collect();
    let mut counts = Vec::with_capacity(window.area());
    for row in &rows {
        counts.extend_from_slice(&row.counts);
    }
    let offsets = offsets_from_counts(&counts);
    let total = *offsets.last().unwrap_or(&0) as usize;
    let planes = (0..channels.len())
        .into_par_iter()
        .map(|c| {
            let mut plane = Plane::with_capacity(channels[c].sample_type, total);
            for row in &rows {
                plane.append(&row.planes[c]);
            }
            plane
        })
        .collect();
    DeepImage {
        display_window,
        data_window: window,
        channels: channels.to_vec(),
        offsets,
        planes,
        state,
    }
}
