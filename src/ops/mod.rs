//! Deep operations beyond the merge: each one reads one deep file and writes one, streamed band
//! by band within the memory budget through the merge's pipeline ([`crate::stream::stream_bands`]).
//!
//! An operation is a [`DeepOp`]: it says which rows of the input it reads and what the output's
//! windows are ([`DeepOp::windows`]), and turns one band of input rows into the same band of the
//! output ([`DeepOp::apply`]). [`run_op`] does the rest the way the merge does it: opens the
//! input, plans bands from its count tables, runs reader, operation and writer on three
//! threads, and writes the output through a temporary file. What the output is comes from
//! [`StreamOptions`] as for the merge: deep output with its compression, `deepImageState` and
//! optional tidy (the band goes through the merge of one input with `tidy`, the merge's own
//! code), or a flat composite of the result (the merge of one input, flat), written as an EXR
//! or, for `*.png`, as a PNG preview ([`crate::preview`]).
//!
//! One file per operation, each stating its exact semantics: [`slice`], [`crop`],
//! [`transform`], [`idselect`], [`grade`], [`reformat`] (its own band loop, [`run_reformat`]: output rows read
//! neighbouring input rows), [`points`] (a PLY file, not an image), [`recolor`] (a deep and a flat input), [`deepen`] (a flat
//! input, streamed by its own loop over [`crate::exr::FlatSource`] bands). [`holdout`] streams
//! the holdout of one file by another the same way, reading the two files' bands side by side.
//! The flatten is the merge of one input ([`crate::stream::merge_files`] with one path); output
//! bands are built sample by sample with [`crate::deep::builder`], and the merge's pruning
//! options live in [`crate::composite::prune`].

pub mod crop;
pub mod deepen;
pub mod grade;
pub mod holdout;
pub mod idselect;
pub mod points;
pub mod recolor;
pub mod reformat;
pub mod registry;
pub mod slice;
pub mod transform;

use std::path::Path;

use crate::composite::{merge_images_over, CompositeChannels, MergeOutput, OutputKind};
use crate::deep::{Bounds, ChannelRole, DeepImage};
use crate::error::{Error, Result};
use crate::exr::ChunkSource;
use crate::run_stats::RunStats;
use crate::stream::plan::Band;
use crate::stream::plan::OutputShape;
use crate::stream::{plan_bands, stream_bands, BandOutput, OutputFormat, StreamOptions};

pub use crop::Crop;
pub use deepen::{run_deepen, BackDepth, Deepen, DeepenRows, FrontDepth};
pub use grade::{run_grade, Grade, GradeArgs};
pub use holdout::run_holdout;
pub use idselect::{run_idselect, IdSelect};
pub use points::{run_points, CameraMode, Points};
pub use recolor::{recolor_op, run_recolor, Recolor};
pub use reformat::{run_reformat, Filter, Reformat};
pub use registry::{find, OpSpec, OpValue, OpValues, Operation, Ran};
pub use slice::Slice;
pub use transform::Transform;

/// The table of deep operations ([`registry`]): the CLI's subcommands, Python's functions and
/// `Graph` methods and the comp script's nodes are made from it, in this order.
pub const OPERATIONS: &[&OpSpec] = &[
    &slice::SPEC,
    &crop::SPEC,
    &transform::SPEC,
    &idselect::SPEC,
    &deepen::SPEC,
    &recolor::SPEC,
    &grade::SPEC,
    &reformat::SPEC,
    &points::SPEC,
];

/// The windows of an operation's output, and the input rows it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpWindows {
    /// The input's rows (and columns) the output is made from, in input coordinates.
    pub read: Bounds,
    /// The output's data window.
    pub data: Bounds,
    /// The output's display window.
    pub display: Bounds,
}

/// A deep operation applied band by band (see the module docs).
pub trait DeepOp: Sync {
    /// The output's windows and the part of the input read, from the input's data and display
    /// windows; an error when nothing would remain.
    fn windows(&self, data: Bounds, display: Bounds) -> Result<OpWindows>;

    /// The output band made from `band`, the input's rows `band.data_window` (its full width,
    /// inside `windows.read`'s rows). The result spans the output's data window's columns and
    /// holds the output rows those input rows make, with the input's channels.
    fn apply(&self, band: &DeepImage, windows: &OpWindows) -> Result<DeepImage>;

    /// For a node of a graph (`deepmerge comp`): the input rows that output rows `y0..=y1` are
    /// made from (before clipping to the input's window, whose display window is
    /// `input_display`). The same rows, unless the operation scales rows (reformat); a
    /// translation's shift is its node's own (`registry::NodeWork::Band::dy`).
    fn rows_read(
        &self,
        _input_display: Bounds,
        _windows: &OpWindows,
        y0: i32,
        y1: i32,
    ) -> (i32, i32) {
        (y0, y1)
    }

    /// Whether [`Self::rows_read`] maps rows other than one to one.
    fn scales_rows(&self) -> bool {
        false
    }

    /// For a node of a graph: output rows `rows` made from `band`, the input rows
    /// [`Self::rows_read`] names, clipped to the input's window. [`Self::apply`] unless the
    /// operation scales rows.
    fn apply_rows(
        &self,
        band: &DeepImage,
        windows: &OpWindows,
        _rows: std::ops::RangeInclusive<i32>,
    ) -> Result<DeepImage> {
        self.apply(band, windows)
    }
}

/// Apply `op` to the deep part `options.part` of `input`, writing `output` as `options` say
/// (deep or flat, compression, state, tidy, budget, bands). Stage times go to `stats`. The
/// number of samples written comes back (0: an image with no samples, which a front end
/// notes).
pub fn run_op(
    op: &dyn DeepOp,
    input: &Path,
    output: &Path,
    options: &StreamOptions,
    stats: Option<&RunStats>,
) -> Result<u64> {
    let inputs = [input.to_path_buf()];
    crate::exr::check_output_is_not_an_input(output, &inputs)?;
    let mut source = ChunkSource::open(input, &options.part, options.budget)?;
    if let Some(selection) = &options.channels {
        let all = source.all_channels.clone();
        selection.check_names(&[(input, &all)])?;
        source.keep_channels(|c| selection.keeps(c, &all));
    }
    source.count_rows(options.budget)?;
    let windows = op
        .windows(source.window, source.display_window)
        .map_err(|e| match e {
            Error::Usage(message) => Error::Usage(format!("{}: {message}", input.display())),
            other => other.in_file(input),
        })?;
    let head = source.no_rows(source.window.y0);
    let composite = CompositeChannels::of(&[&head]);
    if matches!(options.merge.output, OutputKind::Flat { .. }) && composite.is_empty() {
        return Err(Error::file(
            input,
            "holds no colour or alpha channel, so a flat composite has nothing to show",
        ));
    }
    let shape = OutputShape {
        deep_value_bytes: source.sample_bytes(),
        columns: composite.len() as u64,
        ids: head
            .channels
            .iter()
            .filter(|c| c.role == ChannelRole::Id)
            .count() as u64,
    };
    if windows.read.area() == 0 {
        // Nothing of the input remains (a crop beside the data window): the output's rows are
        // written empty, read from nothing.
        return write_empty(&head, &windows, output, options, &source.attributes)
            .map(|()| 0)
            .map_err(|e| e.in_file(input).in_merge(&[input]));
    }
    let sources = vec![source];
    let bands = plan_bands(&sources, windows.read, &shape, options)?;
    // The input's attributes (of the part read), as `--metadata first` asks: an operation keeps
    // the merge's metadata rules.
    let (deep_write, flat_write) =
        options.write_options_from(&sources[0].attributes, &[&sources[0].all_channels]);
    let format = match options.merge.output {
        OutputKind::Deep => OutputFormat::Deep(&deep_write),
        OutputKind::Flat { .. } => OutputFormat::flat_for(output, &flat_write),
    };
    let target = BandOutput {
        path: output,
        window: windows.data,
        format,
        empty_rows: None,
    };
    let mut samples = 0;
    stream_bands(sources, bands, &target, stats, &mut |_, images| {
        let mut out = op.apply(&images[0], &windows)?;
        out.display_window = windows.display;
        samples += out.sample_count() as u64;
        finish_band(out, options)
    })
    .map_err(|e| e.in_file(input).in_merge(&[input]))?;
    Ok(samples)
}

/// Write an output of `windows.data` with no samples, the channels of `head` (an input of no
/// rows), in bands that fit the budget.
fn write_empty(
    head: &DeepImage,
    windows: &OpWindows,
    output: &Path,
    options: &StreamOptions,
    attributes: &[crate::exr::RawAttribute],
) -> Result<()> {
    let data = windows.data;
    // An empty row costs its offsets (and a flat row its pixels): a generous 64 bytes a pixel.
    let width = (data.x1 - data.x0 + 1).max(1) as u64;
    let rows = (options.budget / 4 / (64 * width)).clamp(1, 1 << 16) as i32;
    let bands: Vec<Band> = (data.y0..=data.y1)
        .step_by(rows as usize)
        .map(|y0| y0..=(y0 + rows - 1).min(data.y1))
        .collect();
    let (deep_write, flat_write) = options.write_options_from(attributes, &[&head.channels]);
    let format = match options.merge.output {
        OutputKind::Deep => OutputFormat::Deep(&deep_write),
        OutputKind::Flat { .. } => OutputFormat::flat_for(output, &flat_write),
    };
    let target = BandOutput {
        path: output,
        window: data,
        format,
        empty_rows: None,
    };
    stream_bands(Vec::new(), bands, &target, None, &mut |band, _| {
        let rows = Bounds {
            y0: *band.start(),
            y1: *band.end(),
            ..data
        };
        finish_band(
            DeepImage::empty(windows.display, rows, head.channels.clone()),
            options,
        )
    })
}

/// What an operation writes and reads with: the one output request every command, Python
/// function and comp node fills ([`crate::request::OutputRequest`]); the name stays for the
/// operations' run functions.
pub type OpOutput = crate::request::OutputRequest;

/// An operation's band as the output asks: as it is for deep output, through the merge of one
/// input for a tidy deep output or a flat one.
pub(crate) fn finish_band(band: DeepImage, options: &StreamOptions) -> Result<MergeOutput> {
    let deep_as_is = options.merge.output == OutputKind::Deep && !options.merge.tidy;
    if deep_as_is {
        return Ok(MergeOutput::Deep(band));
    }
    let window = band.data_window;
    merge_images_over(&[&band], &options.merge, Some(window))
}
