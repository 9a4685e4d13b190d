//! The reference merge: any number of deep images over the union of their data windows, to a flat
//! composite or to a merged deep image. Rows are processed in parallel; per pixel the cost is a
//! gather, a stable sort of each input's samples where the [`SortPolicy`] asks for one, and a
//! merge of the inputs' runs; linear in the samples for sorted inputs. A flat merge of up to
//! eight inputs of points walks each pixel's runs in merge order instead, only as far as the
//! composite reads ([`super::walk`]).
//!
//! Volumes are tidied ([`super::tidy`]) only in pixels where they overlap something. The gate
//! has two steps: gathering notes whether the pixel holds any volume at all (one OR per sample
//! in a loop that already compares Z with ZBack), and only then does [`needs_tidy`] look for an
//! overlap. Points-only inputs therefore pay nothing measurable (`benches/tidy_cost.rs`). A tidy
//! deep output also merges coincident points (one pass comparing neighbours' depths), which
//! OpenEXR's tidy state rules out; flat output composites them in order.
//!
//! Channels that are not composited:
//! - uint channels (ids) are never blended. Deep output copies them bit-exactly from the sample
//!   they belong to (a piece cut from a volume by tidying keeps its source's ids; volumes or
//!   points merged by tidying keep the ids of the first in merge order). Flat output takes them from the
//!   front-most contributing sample: the first in merge order with any alpha above 0.
//! - Z and ZBack: deep output keeps them, except for tidied pieces, which carry their new bounds.
//!   Flat output's optional Z is the front-most contributing sample's Z.

use std::ops::Range;

use rayon::prelude::*;

use super::order::{merge_runs_kway, merge_sorted_runs, sort_samples, SortPolicy, MAX_HEAP_RUNS};
use super::pixel::{CompositeChannels, PixelSamples};
use super::source_runs::{push_source_runs, samples_in, SourceRun};
use super::tidy::{has_coincident_points, needs_tidy, tidy_deep_pixel};
use super::views::{InputViews, Values};
use crate::deep::{
    Bounds, Channel, ChannelRole, DeepImage, DeepState, FlatImage, Plane, PlaneValue, SampleType,
};
use crate::error::{Error, Result};
use crate::vocab::{depth_key, MergeStrategy, Sample};

/// What the merge produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputKind {
    /// A flat composite; with `z`, also the Z of the front-most contributing sample.
    Flat {
        /// Add a Z channel.
        z: bool,
    },
    /// A merged deep image.
    Deep,
}

/// How to merge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MergeOptions {
    /// Flat or deep output.
    pub output: OutputKind,
    /// Tidy deep output: split overlapping volumes and merge coincident samples, volumes and
    /// points (flat output always splits where volumes overlap, since that is what makes its
    /// colour right, and composites coincident points in order).
    pub tidy: bool,
    /// Which inputs' pixels are sorted before merging (`--sort`, `--assume-sorted`).
    pub sort: SortPolicy,
    /// One pass over all inputs per pixel, or a chain of pairwise merges (`--merge-strategy`);
    /// same output either way.
    pub strategy: MergeStrategy,
}

impl Default for MergeOptions {
    fn default() -> Self {
        MergeOptions {
            output: OutputKind::Flat { z: false },
            tidy: false,
            sort: SortPolicy::Auto,
            strategy: MergeStrategy::KWay,
        }
    }
}

/// The result of a merge.
#[derive(Clone, Debug, PartialEq)]
pub enum MergeOutput {
    /// Flat composite.
    Flat(FlatImage),
    /// Merged deep image.
    Deep(DeepImage),
}

/// Everything the merge needs to know about its inputs, worked out once.
pub struct MergePlan<'a> {
    /// The inputs, first on the command line first.
    pub inputs: Vec<&'a DeepImage>,
    /// Union of the data windows.
    pub window: Bounds,
    /// The first input's display window.
    pub display_window: Bounds,
    /// Composited channels and their alphas.
    pub composite: CompositeChannels,
    /// Per input, the source channel of each composited column.
    pub sources: Vec<Vec<Option<usize>>>,
    /// Per input, its Z and ZBack channels.
    pub depth: Vec<(Option<usize>, Option<usize>)>,
    /// Channels of deep output: the union of the inputs', types promoted where they disagree.
    pub deep_channels: Vec<Channel>,
    /// Which inputs get their pixels sorted ([`SortPolicy::Auto`] unless changed).
    pub sort: SortPolicy,
    /// How the inputs' runs are merged per pixel ([`MergeStrategy::KWay`] unless changed).
    pub strategy: MergeStrategy,
    /// Per input, typed views of its depth channels and composited columns.
    pub(super) views: Vec<InputViews<'a>>,
}

impl<'a> MergePlan<'a> {
    /// Plan a merge; refuses inputs without a Z channel and channels whose types cannot be joined.
    pub fn new(inputs: &[&'a DeepImage]) -> Result<Self> {
        if inputs.is_empty() {
            return Err(Error::Usage("nothing to merge".into()));
        }
        if let Some((name, int_input, float_input)) = channel_conflict(inputs) {
            return Err(Error::Usage(format!(
                "channel {name} is an integer channel in input {} and a float channel in input {}",
                int_input + 1,
                float_input + 1
            )));
        }
        let mut deep_channels: Vec<Channel> = Vec::new();
        for image in inputs {
            for c in &image.channels {
                match deep_channels.iter_mut().find(|d| d.name == c.name) {
                    Some(d) if d.sample_type != c.sample_type => d.sample_type = SampleType::F32,
                    Some(_) => {}
                    None => deep_channels.push(c.clone()),
                }
            }
        }
        deep_channels.sort_by(|a, b| a.name.cmp(&b.name));
        let composite = CompositeChannels::of(inputs);
        let sources: Vec<Vec<Option<usize>>> =
            inputs.iter().map(|i| composite.sources_in(i)).collect();
        let depth: Vec<(Option<usize>, Option<usize>)> =
            inputs.iter().map(|i| i.depth_channels()).collect();
        let views = inputs
            .iter()
            .zip(&sources)
            .zip(&depth)
            .map(|((image, sources), &depth)| InputViews::new(image, depth, sources))
            .collect();
        let window = inputs
            .iter()
            .map(|i| i.data_window)
            .reduce(|a, b| a.union(&b))
            .expect("non-empty");
        Ok(MergePlan {
            inputs: inputs.to_vec(),
            window,
            display_window: inputs[0].display_window,
            composite,
            sources,
            depth,
            deep_channels,
            sort: SortPolicy::Auto,
            strategy: MergeStrategy::KWay,
            views,
        })
    }

    /// The samples of every input at absolute pixel (x, y), in merge order.
    pub fn ordered_samples(&self, x: i32, y: i32, out: &mut Vec<Sample>) {
        self.ordered_samples_into(x, y, out, &mut Vec::new());
    }

    /// [`Self::ordered_samples`] with a reusable scratch buffer for merging the inputs' runs.
    /// Each input's run is sorted where [`Self::sort`] asks; the runs are then merged in one
    /// pass ([`merge_runs_kway`]) or each into the runs before it ([`MergeStrategy::Chain`]), as
    /// [`Self::strategy`] says: the same order either way.
    ///
    /// Returns whether any of the pixel's samples is a volume. That falls out of the gather for
    /// free, and a pixel without one cannot need tidying: the merge then skips even the
    /// [`needs_tidy`] pass, so points-only pixels pay nothing for volume support.
    pub fn ordered_samples_into(
        &self,
        x: i32,
        y: i32,
        out: &mut Vec<Sample>,
        scratch: &mut Vec<Sample>,
    ) -> bool {
        out.clear();
        let mut any_volume = false;
        // Two inputs merge the same way either way (one merge of two runs); more than the heap
        // holds go to the chain, with the same result.
        let kway = self.strategy == MergeStrategy::KWay
            && (3..=MAX_HEAP_RUNS).contains(&self.inputs.len());
        // Run r of the pixel spans out[bounds[r]..bounds[r + 1]] (k-way only).
        let mut bounds = [0usize; MAX_HEAP_RUNS + 1];
        let mut runs = 0;
        for (i, image) in self.inputs.iter().enumerate() {
            let Some(p) = image.pixel_index(x, y) else {
                continue;
            };
            let views = &self.views[i];
            let start = out.len();
            // The keys `read_sample` reads, through the typed views; points with a float Z
            // (the common case) in a loop of their own.
            match (views.z, views.zback) {
                (Some(Values::F32(z)), None) => {
                    out.extend(image.range(p).map(|index| Sample {
                        z: z[index],
                        zback: z[index],
                        input: i as u32,
                        index: index as u64,
                    }));
                }
                _ => {
                    for index in image.range(p) {
                        let (z, zback) = views.depths(index);
                        let (z, zback) = depth_key(z, zback);
                        let sample = Sample {
                            z,
                            zback,
                            input: i as u32,
                            index: index as u64,
                        };
                        any_volume |= sample.is_volume();
                        out.push(sample);
                    }
                }
            }
            if self.sort.sorts(image.state) {
                // Stable and adaptive: already sorted pixels cost one pass.
                sort_samples(&mut out[start..]);
            }
            if kway {
                runs += 1;
                bounds[runs] = out.len();
            } else {
                merge_sorted_runs(out, start, scratch);
            }
        }
        if kway {
            merge_runs_kway(out, &bounds[..=runs], scratch);
        }
        any_volume
    }
}

impl MergePlan<'_> {
    /// The reference's per-pixel tidy for deep output: `samples` (in merge order) gathered with
    /// their values into `pixel` and tidied there, coincident points merged
    /// ([`tidy_deep_pixel`]).
    pub fn tidy_samples(&self, samples: &[Sample], pixel: &mut PixelSamples) {
        pixel.gather(samples, &self.inputs, &self.sources);
        tidy_deep_pixel(pixel, &self.composite);
    }
}

/// The first channel name that is an integer channel in one input and a float channel in
/// another, with the indices of those inputs (integer first): such channels cannot be joined.
pub fn channel_conflict(inputs: &[&DeepImage]) -> Option<(String, usize, usize)> {
    for (i, image) in inputs.iter().enumerate() {
        for c in image
            .channels
            .iter()
            .filter(|c| c.sample_type == SampleType::U32)
        {
            let float_in = inputs.iter().position(|other| {
                other
                    .channels
                    .iter()
                    .any(|o| o.name == c.name && o.sample_type != SampleType::U32)
            });
            if let Some(j) = float_in {
                return Some((c.name.clone(), i, j));
            }
        }
    }
    None
}

/// Sample `index` of `image` (input number `input`), its key read from its Z and ZBack channels
/// `depth` by [`depth_key`] (no Z: depth 0; no ZBack: a point). Every engine reads keys here.
pub fn read_sample(
    image: &DeepImage,
    (z, zback): (Option<usize>, Option<usize>),
    input: u32,
    index: usize,
) -> Sample {
    let zf = z.map_or(0.0, |c| image.planes[c].get_f32(index));
    let zb = zback.map_or(zf, |c| image.planes[c].get_f32(index));
    let (z, zback) = depth_key(zf, zb);
    Sample {
        z,
        zback,
        input,
        index: index as u64,
    }
}

/// Merge `inputs` (two or more for a real merge; one is allowed and just re-orders or flattens),
/// sorting the inputs' pixels as [`MergeOptions::sort`] says.
pub fn merge_images(inputs: &[&DeepImage], options: &MergeOptions) -> Result<MergeOutput> {
    merge_images_over(inputs, options, None)
}

/// [`merge_images`] over `window` instead of the union of the inputs' data windows, when given:
/// a band of a streamed merge (`crate::stream`) is the union of the inputs' whole windows cut
/// to the band's rows, which the inputs' band images alone do not tell.
pub fn merge_images_over(
    inputs: &[&DeepImage],
    options: &MergeOptions,
    window: Option<Bounds>,
) -> Result<MergeOutput> {
    for image in inputs {
        image.check_depths()?;
    }
    merge_checked_images_over(inputs, options, window)
}

/// [`merge_images_over`] of inputs whose depths are already checked
/// ([`DeepImage::check_depths`]; the streamed merge's reader checks every band it hands out).
pub fn merge_checked_images_over(
    inputs: &[&DeepImage],
    options: &MergeOptions,
    window: Option<Bounds>,
) -> Result<MergeOutput> {
    let mut plan = MergePlan::new(inputs)?;
    if let Some(window) = window {
        plan.window = window;
    }
    plan.sort = options.sort;
    plan.strategy = options.strategy;
    if matches!(options.output, OutputKind::Flat { .. }) && plan.composite.is_empty() {
        // Nothing contributes to a composite without alpha or colour: the image would have no
        // channels (or only zeros), which no EXR writer takes.
        return Err(Error::Usage(
            "the inputs hold no colour or alpha channel, so a flat composite has nothing to show; \
             merge them as deep output"
                .into(),
        ));
    }
    Ok(match options.output {
        OutputKind::Flat { z } => MergeOutput::Flat(merge_flat(&plan, z)),
        OutputKind::Deep => MergeOutput::Deep(merge_deep(&plan, options.tidy)),
    })
}

/// Every row of the window, in parallel: `new_row(width)` makes a row's output and
/// `add_pixels(row, pixels, pixel)` adds one or two neighbouring pixels, left to right, each
/// given as its samples in merge order ([`MergePlan::ordered_samples_into`]) and whether any is
/// a volume, with a scratch pixel to gather values into (two at a time lets a flat merge
/// composite both in one loop: [`MergePlan::push_flattened_pair`]); `add_empty(row, n)` adds n
/// pixels without samples, for the runs of a row that no input's window reaches (which cost
/// one call, not one per pixel: inputs far apart leave long runs). `walk(row, x, y, n)` is
/// offered the n (one or two) pixels from (x, y) first and adds them itself where it can,
/// returning true (a flat merge's walk that orders only what it composites:
/// [`MergePlan::push_walked`]); the others are gathered and given to `add_pixels`.
fn map_rows<R, N, A, E, W>(
    plan: &MergePlan,
    new_row: N,
    add_pixels: A,
    add_empty: E,
    walk: W,
) -> Vec<R>
where
    R: Send,
    N: Fn(usize) -> R + Sync + Send,
    A: Fn(&mut R, &[(&[Sample], bool)], &mut PixelSamples) + Sync + Send,
    E: Fn(&mut R, usize) + Sync + Send,
    W: Fn(&mut R, i32, i32, usize) -> bool + Sync + Send,
{
    let window = plan.window;
    let width = window.width();
    let columns = plan.composite.len();
    (0..window.height())
        .into_par_iter()
        .map_init(
            || {
                let pixel = PixelSamples::new(columns);
                (Vec::new(), Vec::new(), Vec::new(), pixel)
            },
            |(first, second, scratch, pixel), row| {
                let y = window.y0 + row as i32;
                let mut out = new_row(width);
                let mut x = window.x0;
                for (x0, x1) in covered_runs(plan, y) {
                    if x0 > x {
                        add_empty(&mut out, (x0 - x) as usize);
                    }
                    x = x0;
                    while x <= x1 {
                        let n = if x < x1 { 2 } else { 1 };
                        if !walk(&mut out, x, y, n) {
                            let a = plan.ordered_samples_into(x, y, first, scratch);
                            if n == 2 {
                                let b = plan.ordered_samples_into(x + 1, y, second, scratch);
                                add_pixels(&mut out, &[(first, a), (second, b)], pixel);
                            } else {
                                add_pixels(&mut out, &[(first, a)], pixel);
                            }
                        }
                        x += n as i32;
                    }
                }
                if x <= window.x1 {
                    add_empty(&mut out, (window.x1 - x + 1) as usize);
                }
                out
            },
        )
        .collect()
}

/// The runs of row `y` of the merge's window that some input's data window covers, left to
/// right, joined where they touch or overlap.
fn covered_runs(plan: &MergePlan, y: i32) -> Vec<(i32, i32)> {
    let window = plan.window;
    let mut runs: Vec<(i32, i32)> = plan
        .inputs
        .iter()
        .map(|i| i.data_window)
        .filter(|w| w.y0 <= y && y <= w.y1 && w.x0 <= w.x1)
        .map(|w| (w.x0.max(window.x0), w.x1.min(window.x1)))
        .filter(|(x0, x1)| x0 <= x1)
        .collect();
    runs.sort_unstable();
    let mut joined: Vec<(i32, i32)> = Vec::with_capacity(runs.len());
    for (x0, x1) in runs {
        match joined.last_mut() {
            Some(last) if x0 as i64 <= last.1 as i64 + 1 => last.1 = last.1.max(x1),
            _ => joined.push((x0, x1)),
        }
    }
    joined
}

fn merge_flat(plan: &MergePlan, with_z: bool) -> FlatImage {
    let walker = plan.walker();
    let rows = map_rows(
        plan,
        |width| plan.flat_pixels(width),
        |out, pixels, pixel| match *pixels {
            [first, second] => plan.push_flattened_pair(out, [first, second], pixel),
            _ => {
                for &(samples, any_volume) in pixels {
                    plan.push_flattened(out, samples, any_volume, pixel);
                }
            }
        },
        |out, n| plan.push_empty(out, n),
        |out, x, y, n| {
            walker
                .as_ref()
                .is_some_and(|walker| plan.push_walked(walker, out, x, y, n))
        },
    );
    let mut all = plan.flat_pixels(0);
    for mut row in rows {
        all.append(&mut row);
    }
    plan.flat_image(all, with_z)
}

fn merge_deep(plan: &MergePlan, tidy: bool) -> DeepImage {
    let new_row = |width| DeepRow {
        counts: Vec::with_capacity(width),
        pieces: Vec::new(),
        tidied: Vec::new(),
    };
    let add_empty = |out: &mut DeepRow, n| out.counts.extend(std::iter::repeat_n(0, n));
    let rows = map_rows(
        plan,
        new_row,
        |out, pixels, pixel| {
            for &(samples, any_volume) in pixels {
                // Points-only pixels skip the overlap pass; coincident points merge (OpenEXR's
                // tidy).
                let overlaps = tidy && any_volume && needs_tidy(samples);
                if overlaps || (tidy && has_coincident_points(samples)) {
                    plan.tidy_samples(samples, pixel);
                    out.counts.push(pixel.len() as u32);
                    let first = out.tidied.len();
                    for s in 0..pixel.len() {
                        out.tidied.push((pixel.samples[s], pixel.row(s).to_vec()));
                    }
                    out.pieces.push(RowPiece::Tidied(first..out.tidied.len()));
                } else {
                    out.counts.push(samples.len() as u32);
                    let keys = samples.iter().map(|s| (s.input, s.index));
                    match out.pieces.last_mut() {
                        Some(RowPiece::Runs(runs)) => push_source_runs(runs, keys),
                        _ => {
                            let mut runs = Vec::new();
                            push_source_runs(&mut runs, keys);
                            out.pieces.push(RowPiece::Runs(runs));
                        }
                    }
                }
            }
        },
        add_empty,
        // Deep output keeps every sample: nothing to walk past.
        |_, _, _, _| false,
    );

    let counts: Vec<u32> = rows.iter().flat_map(|r| r.counts.iter().copied()).collect();
    let planes: Vec<Plane> = plan
        .deep_channels
        .par_iter()
        .map(|channel| build_plane(plan, channel, &rows))
        .collect();
    plan.merged_image(&counts, planes, tidy)
}

/// One row of a deep merge: per-pixel counts, and its samples in merge order as pieces: runs of
/// samples that copy their inputs' values, and the samples of tidied pixels (split or merged:
/// each with its new composited values), kept in `tidied`.
struct DeepRow {
    counts: Vec<u32>,
    pieces: Vec<RowPiece>,
    tidied: Vec<(Sample, Vec<f32>)>,
}

/// A stretch of a [`DeepRow`]'s samples.
enum RowPiece {
    /// Samples copied from the inputs, as runs of their values.
    Runs(Vec<SourceRun>),
    /// The samples `tidied[range]` of tidied pixels.
    Tidied(Range<usize>),
}

impl DeepRow {
    /// How many samples the row holds.
    fn samples(&self) -> usize {
        self.pieces
            .iter()
            .map(|piece| match piece {
                RowPiece::Runs(runs) => samples_in(runs),
                RowPiece::Tidied(range) => range.len(),
            })
            .sum()
    }
}

/// Rows of a deep merge whose values one task gathers into a piece of an output plane.
const PLANE_PIECE_ROWS: usize = 16;

/// One output plane. Untouched samples copy their source value bit-exactly (a channel an input
/// lacks gives 0); samples made by tidying take their new depth or composited value. Pieces of
/// [`PLANE_PIECE_ROWS`] rows are gathered in parallel and joined in order: one task per
/// channel alone left the cores idle while the widest channels finished (the deep merge's
/// serial tail; issue 25 item 6).
fn build_plane(plan: &MergePlan, channel: &Channel, rows: &[DeepRow]) -> Plane {
    let sources = plan.channel_sources(channel);
    let pieces: Vec<Plane> = rows
        .par_chunks(PLANE_PIECE_ROWS)
        .map(|chunk| {
            let n = chunk.iter().map(DeepRow::samples).sum();
            let mut piece = Plane::with_capacity(channel.sample_type, n);
            for row in chunk {
                for part in &row.pieces {
                    match part {
                        RowPiece::Runs(runs) => plan.gather_runs(&mut piece, &sources, runs),
                        RowPiece::Tidied(range) => {
                            for (sample, values) in &row.tidied[range.clone()] {
                                plan.push_value(&mut piece, &sources, sample, Some(values));
                            }
                        }
                    }
                }
            }
            piece
        })
        .collect();
    Plane::concat(channel.sample_type, &pieces)
}

/// Where one deep output channel's values come from.
pub struct ChannelSources {
    role: ChannelRole,
    /// Its column among the composited values, if it is composited.
    column: Option<usize>,
    /// Per input, its channel of that name.
    inputs: Vec<Option<usize>>,
}

impl MergePlan<'_> {
    /// The merged deep image over the union window from per-pixel counts and the planes of
    /// [`MergePlan::deep_channels`]; it claims to be sorted, or tidy when it was tidied.
    pub fn merged_image(&self, counts: &[u32], planes: Vec<Plane>, tidy: bool) -> DeepImage {
        let state = if tidy {
            DeepState::Tidy
        } else {
            DeepState::Sorted
        };
        DeepImage::from_counts(
            self.display_window,
            self.window,
            self.deep_channels.clone(),
            counts,
            planes,
            state,
        )
        .expect("counts and planes built together")
    }

    /// Where `channel` (one of [`MergePlan::deep_channels`]) comes from in each input.
    pub fn channel_sources(&self, channel: &Channel) -> ChannelSources {
        ChannelSources {
            role: channel.role,
            column: self.composite.names.iter().position(|n| n == &channel.name),
            inputs: self
                .inputs
                .iter()
                .map(|i| i.channel_index(&channel.name))
                .collect(),
        }
    }

    /// Append `sample`'s value of a deep output channel to `plane`: a bit-exact copy from its
    /// input (0 where the input lacks the channel), or, for a piece made by tidying (`tidied`:
    /// its composited values), its new depth or value.
    pub fn push_value(
        &self,
        plane: &mut Plane,
        sources: &ChannelSources,
        sample: &Sample,
        tidied: Option<&[f32]>,
    ) {
        let new_value = tidied.and_then(|values| match sources.role {
            ChannelRole::Z => Some(sample.z),
            ChannelRole::ZBack => Some(sample.zback),
            _ => sources.column.map(|k| values[k]),
        });
        match new_value {
            Some(v) => plane.push_f32(v),
            None => self.push_source(plane, sources, sample.input, sample.index),
        }
    }

    /// Append to `plane` the value of input `input`'s sample `index` in the channel `sources`
    /// names (zero where that input lacks it): a merged sample that kept its input's values.
    pub fn push_source(&self, plane: &mut Plane, sources: &ChannelSources, input: u32, index: u64) {
        match sources.inputs[input as usize] {
            Some(c) => plane.push_from(&self.inputs[input as usize].planes[c], index as usize),
            None => plane.push_zero(),
        }
    }

    /// [`MergePlan::push_source`] for each (input, index) of `keys` in turn. Where every input
    /// holding the channel holds it in the output's type (the usual case), the planes are
    /// taken typed once and each value is one indexed copy; the match per value of
    /// `push_source` was the largest part of a deep merge outside the codecs.
    pub fn gather_sources(
        &self,
        plane: &mut Plane,
        sources: &ChannelSources,
        keys: impl Iterator<Item = (u32, u64)>,
    ) {
        match plane.sample_type() {
            SampleType::U32 => self.gather_typed::<u32>(plane, sources, keys),
            SampleType::F16 => self.gather_typed::<half::f16>(plane, sources, keys),
            SampleType::F32 => self.gather_typed::<f32>(plane, sources, keys),
        }
    }

    /// Per input, its plane of `sources`' channel when typed as `T`, the output's type (None
    /// inside: the input lacks the channel); None outside when some input needs converting.
    fn typed_sources<T: PlaneValue>(&self, sources: &ChannelSources) -> Option<Vec<Option<&[T]>>> {
        sources
            .inputs
            .iter()
            .zip(&self.inputs)
            .map(|(c, input)| match c {
                Some(c) => T::values(&input.planes[*c]).map(Some),
                None => Some(None),
            })
            .collect()
    }

    fn gather_typed<T: PlaneValue>(
        &self,
        plane: &mut Plane,
        sources: &ChannelSources,
        keys: impl Iterator<Item = (u32, u64)>,
    ) {
        match (self.typed_sources::<T>(sources), T::values_mut(plane)) {
            (Some(typed), Some(out)) => {
                out.extend(keys.map(|(input, index)| match typed[input as usize] {
                    Some(values) => values[index as usize],
                    None => T::ZERO,
                }))
            }
            _ => {
                for (input, index) in keys {
                    self.push_source(plane, sources, input, index);
                }
            }
        }
    }

    /// [`MergePlan::gather_sources`] of the samples `runs` hold: where every input holding the
    /// channel holds it in the output's type, each run is one copy of a slice of its input's
    /// plane (zeros where the input lacks the channel); else value by value.
    pub fn gather_runs(&self, plane: &mut Plane, sources: &ChannelSources, runs: &[SourceRun]) {
        match plane.sample_type() {
            SampleType::U32 => self.gather_runs_typed::<u32>(plane, sources, runs),
            SampleType::F16 => self.gather_runs_typed::<half::f16>(plane, sources, runs),
            SampleType::F32 => self.gather_runs_typed::<f32>(plane, sources, runs),
        }
    }

    fn gather_runs_typed<T: PlaneValue>(
        &self,
        plane: &mut Plane,
        sources: &ChannelSources,
        runs: &[SourceRun],
    ) {
        match (self.typed_sources::<T>(sources), T::values_mut(plane)) {
            (Some(typed), Some(out)) => {
                for run in runs {
                    let (start, len) = (run.start as usize, run.len as usize);
                    match typed[run.input as usize] {
                        Some(values) => out.extend_from_slice(&values[start..start + len]),
                        None => out.resize(out.len() + len, T::ZERO),
                    }
                }
            }
            _ => {
                for run in runs {
                    for k in 0..run.len as u64 {
                        self.push_source(plane, sources, run.input, run.start + k);
                    }
                }
            }
        }
    }
}
