//! The samples of one output pixel, gathered from every input into one dense table, in the form
//! tidying and flattening work on.

use super::order::Sample;
use crate::deep::{ChannelRole, DeepImage};

/// What a composited (float, non-depth) channel is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompositeKind {
    /// An alpha channel (A, RA, GA or BA).
    Alpha,
    /// A premultiplied channel attenuated by the alpha at this column of the value table.
    Colour {
        /// Column of its alpha.
        alpha: usize,
    },
}

/// The float channels that take part in compositing, in output order, with their alphas.
#[derive(Clone, Debug, PartialEq)]
pub struct CompositeChannels {
    /// Channel names.
    pub names: Vec<String>,
    /// What each is.
    pub kinds: Vec<CompositeKind>,
    /// Columns that are alphas.
    pub alphas: Vec<usize>,
}

impl CompositeChannels {
    /// The composited channels of the union of `inputs`: every float channel except Z and ZBack.
    /// R, G and B use RA, GA and BA where any input has them, else A.
    pub fn of(inputs: &[&DeepImage]) -> Self {
        let mut names: Vec<(String, ChannelRole)> = Vec::new();
        for image in inputs {
            for c in &image.channels {
                let composited = !matches!(
                    c.role,
                    ChannelRole::Z | ChannelRole::ZBack | ChannelRole::Id
                );
                if composited && !names.iter().any(|(n, _)| n == &c.name) {
                    names.push((c.name.clone(), c.role));
                }
            }
        }
        names.sort_by(|a, b| a.0.cmp(&b.0));
        let find = |role: ChannelRole| names.iter().position(|(_, r)| *r == role);
        let main_alpha = find(ChannelRole::Alpha);
        let kinds = names
            .iter()
            .map(|(_, role)| {
                let own = match role {
                    ChannelRole::Alpha
                    | ChannelRole::RedAlpha
                    | ChannelRole::GreenAlpha
                    | ChannelRole::BlueAlpha => return CompositeKind::Alpha,
                    ChannelRole::Red => find(ChannelRole::RedAlpha),
                    ChannelRole::Green => find(ChannelRole::GreenAlpha),
                    ChannelRole::Blue => find(ChannelRole::BlueAlpha),
                    _ => None,
                };
                match own.or(main_alpha) {
                    Some(alpha) => CompositeKind::Colour { alpha },
                    // Without any alpha a channel is carried as if fully transparent.
                    None => CompositeKind::Alpha,
                }
            })
            .collect::<Vec<_>>();
        let alphas = (0..names.len())
            .filter(|&i| kinds[i] == CompositeKind::Alpha)
            .collect();
        CompositeChannels {
            names: names.into_iter().map(|(n, _)| n).collect(),
            kinds,
            alphas,
        }
    }

    /// Number of columns.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True when nothing is composited.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// For one input: where each column's value comes from (a channel index of that input),
    /// falling back to the input's A for a per-channel alpha it lacks.
    pub fn sources_in(&self, image: &DeepImage) -> Vec<Option<usize>> {
        self.names
            .iter()
            .map(|n| {
                image.channel_index(n).or_else(|| {
                    let role = ChannelRole::of(n, crate::deep::SampleType::F32);
                    let per_channel = matches!(
                        role,
                        ChannelRole::RedAlpha | ChannelRole::GreenAlpha | ChannelRole::BlueAlpha
                    );
                    if per_channel {
                        image.role_index(ChannelRole::Alpha)
                    } else {
                        None
                    }
                })
            })
            .collect()
    }
}

/// One pixel's samples in merge order with their composited values, `width` per sample.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PixelSamples {
    /// Values per sample (the number of composited channels).
    pub width: usize,
    /// Each sample's depth and where it came from.
    pub samples: Vec<Sample>,
    /// Row-major values: sample `s`, column `k` at `s * width + k`.
    pub values: Vec<f32>,
}

impl PixelSamples {
    /// Empty, for `width` columns.
    pub fn new(width: usize) -> Self {
        PixelSamples {
            width,
            samples: Vec::new(),
            values: Vec::new(),
        }
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Values of sample `s`.
    pub fn row(&self, s: usize) -> &[f32] {
        &self.values[s * self.width..(s + 1) * self.width]
    }

    /// Append a sample with its values.
    pub fn push(&mut self, sample: Sample, values: &[f32]) {
        debug_assert_eq!(values.len(), self.width);
        self.samples.push(sample);
        self.values.extend_from_slice(values);
    }

    /// Fill values for `samples` (already in merge order) from the inputs' planes.
    pub fn gather(
        &mut self,
        samples: &[Sample],
        inputs: &[&DeepImage],
        sources: &[Vec<Option<usize>>],
    ) {
        self.samples.clear();
        self.values.clear();
        self.samples.extend_from_slice(samples);
        for s in samples {
            let image = inputs[s.input as usize];
            for src in &sources[s.input as usize] {
                self.values.push(match src {
                    Some(c) => image.planes[*c].get_f32(s.index as usize),
                    None => 0.0,
                });
            }
        }
    }
}
