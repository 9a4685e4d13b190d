//! Output assembly on the host: the bands read back into one window, then the flat image or the
//! merged deep image built exactly as the reference builds it (`composite`'s flat path, ids and
//! channel assembly; deep planes copied bit-exactly from the inputs by each sample's source),
//! with the pixels the GPU left to the host tidied by the reference.

use super::super::stats::GpuStats;
use crate::composite::source_runs::{push_source_runs, samples_in, SourceRun};
use crate::composite::tidy::needs_deep_tidy;
use crate::composite::{
    ChannelSources, FlatPixels, MergeOptions, MergeOutput, MergePlan, OutputKind, PixelSamples,
};
use crate::deep::{DeepImage, FlatImage, Plane};
use crate::vocab::{depth_less, Fragment, Sample};
use rayon::prelude::*;
use std::ops::Range;

/// Pixels one host task takes in the output's assembly: a flat output's pieces here, and a
/// band's pixels put into window order (`merger.rs`, flat values and deep sources alike).
pub(super) const PIECE_PIXELS: usize = 1 << 14;

/// Samples one task copies into a piece of a deep output plane.
const PLANE_PIECE_SAMPLES: usize = 1 << 16;

/// The output gathered band by band, row-major over the window.
pub(super) struct Accumulated {
    pub(super) flat_values: Vec<f32>,
    pub(super) flat_front: Vec<[u32; 4]>,
    pub(super) deep_counts: Vec<u32>,
    pub(super) deep_samples: Vec<Fragment>,
    /// A deep output read back by its sources or their runs (`DeepReadback::Sources`,
    /// `DeepReadback::Runs`), in place of `deep_samples`: its samples in window order as runs of
    /// consecutive values of one input, in pieces (of [`PIECE_PIXELS`] pixels, or of a number
    /// of runs read back as such) that the assembly copies in parallel.
    pub(super) deep_source_runs: Vec<Vec<SourceRun>>,
    /// Pixels the GPU tidied: (position of their first sample in `deep_samples`, `stride`
    /// values per sample).
    pub(super) deep_tidied: Vec<(usize, Vec<f32>)>,
    stride: usize,
    /// What a sample reference read back from the GPU must lie within.
    pub(super) inputs: InputSamples,
}

/// Per input, its samples. Every sample reference (input, index) read back from the GPU is
/// checked against them before the host follows it: a driver or synchronisation fault gives an
/// error, never an index out of bounds (zink, which runs the GPU's work on another thread, showed
/// a readback taken before its copy had finished panicking here).
pub(super) struct InputSamples(Vec<u64>);

impl InputSamples {
    /// Whether (`input`, `index`) names a sample of the merge's inputs.
    pub(super) fn names(&self, input: u32, index: u64) -> bool {
        self.0
            .get(input as usize)
            .is_some_and(|&samples| index < samples)
    }

    /// How many samples of `run` name none of the inputs' samples (an unknown input, or an
    /// index past its samples).
    pub(super) fn strays_in(&self, run: &SourceRun) -> u64 {
        let end = run.start + run.len as u64;
        match self.0.get(run.input as usize) {
            Some(&samples) => end.saturating_sub(samples.max(run.start)),
            None => run.len as u64,
        }
    }

    /// How many samples of `runs` name none of the inputs' samples ([`Self::strays_in`] of each).
    pub(super) fn strays_in_runs(&self, runs: &[SourceRun]) -> u64 {
        runs.iter().map(|run| self.strays_in(run)).sum()
    }

    /// Whether a flat pixel's front record (input, index, Z bits, flags) names a sample of the
    /// inputs where [`Accumulated::assemble`] will follow it: flag bit 0 says there is a front
    /// sample, bit 1 that the host tidies the pixel from its inputs instead.
    pub(super) fn names_front(&self, front: &[u32; 4]) -> bool {
        front[3] & 1 == 0 || front[3] & 2 != 0 || self.names(front[0], front[1] as u64)
    }
}

impl Accumulated {
    pub(super) fn new(plan: &MergePlan, options: &MergeOptions, stride: usize) -> Self {
        let pixels = plan.window.area();
        let flat = matches!(options.output, OutputKind::Flat { .. });
        Accumulated {
            flat_values: if flat {
                vec![0.0; pixels * stride]
            } else {
                Vec::new()
            },
            flat_front: if flat {
                vec![[0; 4]; pixels]
            } else {
                Vec::new()
            },
            deep_counts: Vec::new(),
            deep_samples: Vec::new(),
            deep_source_runs: Vec::new(),
            deep_tidied: Vec::new(),
            stride,
            inputs: InputSamples(
                plan.inputs
                    .iter()
                    .map(|i| i.sample_count() as u64)
                    .collect(),
            ),
        }
    }

    pub(super) fn assemble(
        self,
        plan: &MergePlan,
        options: &MergeOptions,
        stats: &mut GpuStats,
    ) -> MergeOutput {
        match options.output {
            OutputKind::Flat { z } => MergeOutput::Flat(self.assemble_flat(plan, z, stats)),
            OutputKind::Deep => MergeOutput::Deep(self.assemble_deep(plan, options.tidy, stats)),
        }
    }

    fn assemble_flat(self, plan: &MergePlan, with_z: bool, stats: &mut GpuStats) -> FlatImage {
        let window = plan.window;
        let stride = self.stride;
        let pixels = window.area();
        // Pieces of the window in parallel, joined in order: on a GPU host this walk is the
        // host's share of a flat merge, and one thread made it a serial tail.
        let pieces: Vec<(FlatPixels, u64)> = (0..pixels)
            .into_par_iter()
            .step_by(PIECE_PIXELS)
            .map_init(
                || {
                    (
                        Vec::new(),
                        Vec::new(),
                        PixelSamples::new(plan.composite.len()),
                    )
                },
                |(samples, scratch, pixel), first| {
                    let end = (first + PIECE_PIXELS).min(pixels);
                    let mut out = plan.flat_pixels(end - first);
                    let mut host_tidied = 0u64;
                    for i in first..end {
                        let front = self.flat_front[i];
                        if front[3] & 2 != 0 {
                            // Volumes overlap here and the GPU left the tidy to the host: the
                            // reference path.
                            host_tidied += 1;
                            let (x, y) = window.coords_of(i);
                            let any_volume = plan.ordered_samples_into(x, y, samples, scratch);
                            plan.push_flattened(&mut out, samples, any_volume, pixel);
                        } else {
                            let z = f32::from_bits(front[2]);
                            let front = (front[3] & 1 != 0).then_some(Sample {
                                z,
                                zback: z,
                                input: front[0],
                                index: front[1] as u64,
                            });
                            plan.push_flat(
                                &mut out,
                                &self.flat_values[i * stride..(i + 1) * stride],
                                front,
                            );
                        }
                    }
                    (out, host_tidied)
                },
            )
            .collect();
        let mut out = plan.flat_pixels(pixels);
        for (mut piece, host_tidied) in pieces {
            out.append(&mut piece);
            stats.host_tidied_pixels += host_tidied;
        }
        plan.flat_image(out, with_z)
    }

    /// The merged lists into `counts` and `samples`, each pixel tidied on the host where `tidy`
    /// asks and the GPU did not, with the values of tidied samples into `tidied` by position.
    fn tidy_lists(
        &self,
        plan: &MergePlan,
        tidy: bool,
        stats: &mut GpuStats,
        counts: &mut Vec<u32>,
        samples: &mut Vec<Sample>,
        tidied: &mut Vec<(usize, Vec<f32>)>,
    ) {
        let window = plan.window;
        let stride = self.stride;
        let mut pixel = PixelSamples::new(plan.composite.len());
        let mut start = 0usize;
        let mut ordered = Vec::new();
        let mut gpu_tidied = self.deep_tidied.iter().peekable();
        for (i, &n) in self.deep_counts.iter().enumerate() {
            let list = &self.deep_samples[start..start + n as usize];
            let tidied_here = match gpu_tidied.peek() {
                Some((at, _)) if *at == start && n > 0 => gpu_tidied.next(),
                _ => None,
            };
            start += n as usize;
            let first = samples.len();
            samples.extend(list.iter().map(|f| Sample::from(*f)));
            debug_assert!(samples[first..]
                .windows(2)
                .all(|w| !depth_less(w[1].key(), w[0].key())));
            if let Some((_, rows)) = tidied_here {
                // Tidied on the GPU: every sample takes its new values.
                for s in 0..n as usize {
                    tidied.push((first + s, rows[s * stride..(s + 1) * stride].to_vec()));
                }
                counts.push(n);
            } else if tidy && needs_deep_tidy(&samples[first..]) {
                stats.host_tidied_pixels += 1;
                samples.truncate(first);
                let (x, y) = window.coords_of(i);
                plan.ordered_samples(x, y, &mut ordered);
                plan.tidy_samples(&ordered, &mut pixel);
                for s in 0..pixel.len() {
                    tidied.push((samples.len(), pixel.row(s).to_vec()));
                    samples.push(pixel.samples[s]);
                }
                counts.push(pixel.len() as u32);
            } else {
                counts.push(n);
            }
        }
    }

    fn assemble_deep(self, plan: &MergePlan, tidy: bool, stats: &mut GpuStats) -> DeepImage {
        if self.deep_samples.is_empty() && self.deep_source_runs.iter().any(|r| !r.is_empty()) {
            // Read back by sources or runs: nothing to tidy (the readback asks for the keys then).
            debug_assert!(!tidy && self.deep_tidied.is_empty());
            return self.assemble_deep_by_sources(plan);
        }
        // Values of samples that tidying made, by position in `samples`.
        let mut tidied: Vec<(usize, Vec<f32>)> = Vec::new();
        let (counts, samples) = if !tidy && self.deep_tidied.is_empty() {
            // Nothing to tidy: the lists as the GPU merged them, converted in parallel (one pass
            // over every sample, which a serial loop made the host's tail of a deep GL merge).
            let samples: Vec<Sample> = self
                .deep_samples
                .par_iter()
                .map(|f| Sample::from(*f))
                .collect();
            (self.deep_counts, samples)
        } else {
            let mut counts = Vec::with_capacity(self.deep_counts.len());
            let mut samples = Vec::with_capacity(self.deep_samples.len());
            self.tidy_lists(plan, tidy, stats, &mut counts, &mut samples, &mut tidied);
            (counts, samples)
        };
        if tidied.is_empty() {
            // Every sample copies its input's values: by runs, made once for every channel.
            let runs = piece_runs(samples.len(), |range| {
                samples[range].iter().map(|s| (s.input, s.index))
            });
            return plan.merged_image(&counts, assemble_planes_by_runs(plan, &runs), tidy);
        }
        // `tidied` is in position order: each piece finds its first.
        let planes = assemble_planes(plan, samples.len(), |plane, sources, range| {
            let first = range.start;
            let from = tidied.partition_point(|(at, _)| *at < first);
            if tidied.get(from).is_none_or(|(at, _)| *at >= range.end) {
                let keys = samples[range].iter().map(|s| (s.input, s.index));
                return plan.gather_sources(plane, sources, keys);
            }
            let mut next_tidied = tidied[from..].iter().peekable();
            for (position, sample) in samples[range].iter().enumerate() {
                let values = match next_tidied.peek() {
                    Some((at, values)) if *at == first + position => {
                        next_tidied.next();
                        Some(values.as_slice())
                    }
                    _ => None,
                };
                plan.push_value(plane, sources, sample, values);
            }
        });
        plan.merged_image(&counts, planes, tidy)
    }

    /// The merged deep image from each sample's source alone: every channel copied from the
    /// input sample it names.
    fn assemble_deep_by_sources(self, plan: &MergePlan) -> DeepImage {
        let planes = assemble_planes_by_runs(plan, &self.deep_source_runs);
        plan.merged_image(&self.deep_counts, planes, false)
    }
}

/// The runs of each piece of [`assemble_planes`] (positions `k * PLANE_PIECE_SAMPLES..`), made
/// in parallel from the keys (input, index) of each piece's positions, `keys(range)`.
fn piece_runs<K>(samples: usize, keys: impl Fn(Range<usize>) -> K + Sync) -> Vec<Vec<SourceRun>>
where
    K: Iterator<Item = (u32, u64)>,
{
    (0..samples.div_ceil(PLANE_PIECE_SAMPLES))
        .into_par_iter()
        .map(|piece| {
            let first = piece * PLANE_PIECE_SAMPLES;
            let end = (first + PLANE_PIECE_SAMPLES).min(samples);
            let mut runs = Vec::new();
            push_source_runs(&mut runs, keys(first..end));
            runs
        })
        .collect()
}

/// `plan`'s deep output channels copied from the inputs by `pieces` of runs, channels and pieces
/// in parallel.
fn assemble_planes_by_runs(plan: &MergePlan, pieces: &[Vec<SourceRun>]) -> Vec<Plane> {
    plan.deep_channels
        .par_iter()
        .map(|channel| {
            let sources = plan.channel_sources(channel);
            let planes: Vec<Plane> = pieces
                .par_iter()
                .map(|runs| {
                    let mut plane = Plane::with_capacity(channel.sample_type, samples_in(runs));
                    plan.gather_runs(&mut plane, &sources, runs);
                    plane
                })
                .collect();
            Plane::concat(channel.sample_type, &planes)
        })
        .collect()
}

/// `plan`'s deep output channels over `samples` positions, channels and pieces of each in
/// parallel (a plane a task left the other cores idle: the host's serial tail of a deep GL
/// merge): `fill(plane, sources, range)` appends the values of the positions in `range`.
/// (Pieces outer, every channel of a piece in one task, measured 15% slower on two cores.)
fn assemble_planes(
    plan: &MergePlan,
    samples: usize,
    fill: impl Fn(&mut Plane, &ChannelSources, Range<usize>) + Sync,
) -> Vec<Plane> {
    plan.deep_channels
        .par_iter()
        .map(|channel| {
            let sources = plan.channel_sources(channel);
            let pieces: Vec<Plane> = (0..samples.div_ceil(PLANE_PIECE_SAMPLES))
                .into_par_iter()
                .map(|piece| {
                    let first = piece * PLANE_PIECE_SAMPLES;
                    let end = (first + PLANE_PIECE_SAMPLES).min(samples);
                    let mut plane = Plane::with_capacity(channel.sample_type, end - first);
                    fill(&mut plane, &sources, first..end);
                    plane
                })
                .collect();
            Plane::concat(channel.sample_type, &pieces)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run's strays are the samples that [`InputSamples::names`] refuses, one by one: an
    /// unknown input's run whole, and the indices past an input's samples.
    #[test]
    fn a_runs_strays_are_the_samples_it_names_that_do_not_exist() {
        let inputs = InputSamples(vec![10, 5, 0]);
        for input in 0..4u32 {
            for start in 0..14u64 {
                for len in 1..7u32 {
                    let run = SourceRun { start, input, len };
                    let one_by_one = (start..start + len as u64)
                        .filter(|&index| !inputs.names(input, index))
                        .count() as u64;
                    assert_eq!(inputs.strays_in(&run), one_by_one, "{run:?}");
                }
            }
        }
        let run = SourceRun {
            start: 8,
            input: 0,
            len: 4,
        };
        assert_eq!(inputs.strays_in(&run), 2);
    }
}
