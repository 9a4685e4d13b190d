//! Every call the Python module makes into the `deepmerge` library, and nothing else: reading,
//! merging (engine choice included), flattening, holdout, writing and `info`.
//!
//! The rest of the extension only converts between Python and these functions, so when the
//! library's API changes this file is the one to rebind. The bindings are on the final API:
//!
//! - [`merge_to_file`] (Python `merge(..., out=PATH)` with every input a path) is
//!   [`stream::merge_files`], exactly what `deepmerge IN... -o OUT` runs: bands of rows within
//!   `memory_budget` bytes ([`stream::StreamOptions::budget`], default
//!   [`stream::DEFAULT_MEMORY_BUDGET`], the CLI's `--memory-budget`), the same bytes as the CLI.
//! - [`merge`] (an in-memory result, or `DeepImage` inputs) needs the whole inputs and the whole
//!   result in memory, so there `memory_budget` can only refuse: it is
//!   [`ReadOptions::max_memory`] for each decoded input and the limit of [`check_merge`] for
//!   the output (default [`DEFAULT_MAX_MEMORY`]).
//! - `channels` on [`read`] is the reader's channel selection ([`ChannelSelection`], the CLI's
//!   `--channels`): the part is read through the chunk reader (`exr::ChunkSource`) keeping only the selected channels
//!   (plus Z, ZBack and the alphas they need), so the others are never stored.
//!
//! Nothing here touches Python: every function is safe to run with the GIL released.

use std::borrow::Cow;
use std::cell::RefCell;
use std::path::{Path, PathBuf};

use deepmerge::backend::{choose_engine, Backend, EngineChoice};
use deepmerge::composite::{check_merge, holdout as holdout_images, HoldoutMode, MergeOutput};
use deepmerge::deep::{Bounds, Channel, DeepImage, FlatImage};
use deepmerge::exr::{
    self, ChannelSelection, FlatType, MetadataMode, OutputOptions, PartInfo, PartSelector,
    ReadOptions, DEFAULT_MAX_MEMORY,
};
use deepmerge::info::{sample_stats, SampleStats};
use deepmerge::request::{FieldNames, MergeRequest};
use deepmerge::stream::{self, merge_checked, OutputWindow, PartPlan, PartRequest};
use deepmerge::{Error, Result};

/// How to read one file.
#[derive(Clone, Debug, Default)]
pub struct ReadRequest {
    /// The part (default: the first deep part, as the CLI).
    pub part: PartSelector,
    /// Keep only these channels and what they need, as `--channels` (all when `None`).
    pub channels: Option<ChannelSelection>,
    /// Most bytes the decoded image may take (the CLI's default when `None`).
    pub memory_budget: Option<u64>,
}

impl ReadRequest {
    fn options(&self) -> ReadOptions {
        ReadOptions {
            part: self.part.clone(),
            max_memory: self.max_memory(),
        }
    }

    fn max_memory(&self) -> u64 {
        self.memory_budget.unwrap_or(DEFAULT_MAX_MEMORY)
    }
}

/// The selection `--channels A,B` makes, from a list of names. A name the CLI's comma-separated
/// list could not hold is refused rather than split.
pub fn channel_selection(names: &[String]) -> Result<ChannelSelection> {
    if let Some(bad) = names.iter().find(|n| n.contains(',')) {
        return Err(Error::Usage(format!(
            "channel name {bad:?} has a comma; give each name as its own list item"
        )));
    }
    ChannelSelection::parse(&names.join(","))
}

/// Read a deep part of `path`, refusing NaN depths as the CLI does before merging.
pub fn read(path: &Path, request: &ReadRequest) -> Result<DeepImage> {
    let image = exr::read_deep_channels(path, &request.options(), request.channels.as_ref())?;
    image.check_depths().map_err(|e| e.in_file(path))?;
    Ok(image)
}

/// One input of a merge: a file, or an image already in memory.
pub enum Input<'a> {
    /// Read with the merge's read options.
    Path(PathBuf),
    /// Used as it is; `name` stands for it in messages.
    Image { image: &'a DeepImage, name: String },
}

/// What [`merge_to_file`] did.
#[derive(Clone, Debug)]
pub struct FileReport {
    /// Bands merged (1 for an in-memory merge written whole).
    pub bands: usize,
    /// Rows in the tallest band.
    pub max_band_rows: usize,
    /// The output's data window.
    pub window: Bounds,
    /// The budget it ran in, bytes.
    pub memory_budget: u64,
    /// The engine that merged: "cpu" or "gl".
    pub engine: &'static str,
    /// Which part of an input with several deep parts was merged, when none was chosen.
    pub notes: Vec<String>,
    /// The output's part names, when it was merged part by part (else empty).
    pub parts: Vec<String>,
}

/// Merge the files `inputs` into `output` as `deepmerge IN... -o OUT` does: the engine chosen
/// first (so a `backend="gl"` without GL fails before reading), then
/// [`stream::StreamMerge::open`] and [`stream::StreamMerge::run`] within the budget; the same
/// bytes as the CLI's file. `request` was checked ([`MergeRequest::check`]) by the caller.
pub fn merge_to_file(
    inputs: &[PathBuf],
    output: &Path,
    request: &MergeRequest,
) -> Result<FileReport> {
    let options = request.stream_options()?;
    let parts = request.part_request(inputs.len(), &FieldNames)?;
    with_engine(
        request.backend,
        request.gl.is_given(),
        request.deep,
        |engine| {
            exr::check_output_is_not_an_input(output, inputs)?;
            let plan = stream::plan_parts(inputs, &parts)?;
            let (on, name) = (engine.merging(request.gl_options()), engine.name());
            let reports = stream::merge_parts(inputs, output, &plan, &options, on, None)?;
            let (notes, parts) = match plan {
                PartPlan::One { notes, .. } => (notes, Vec::new()),
                PartPlan::Each(each) => (Vec::new(), each.into_iter().map(|p| p.name).collect()),
            };
            Ok(FileReport {
                bands: reports.iter().map(|r| r.bands).sum(),
                max_band_rows: reports.iter().map(|r| r.max_band_rows).max().unwrap_or(0),
                window: reports[0].window,
                memory_budget: options.budget,
                engine: name,
                notes,
                parts,
            })
        },
    )
}

/// Write an in-memory merge's result as the CLI writes its output; `first_file` (the first
/// input, when it is a file) gives the attributes `--metadata first` carries.
pub fn write_merged(
    output: &Path,
    merged: &MergeOutput,
    request: &MergeRequest,
    first_file: Option<(&Path, &PartSelector)>,
) -> Result<()> {
    let (deep_write, flat_write) = request.write_options()?;
    let mut carried = Vec::new();
    let metadata = request.metadata.unwrap_or_default();
    if let (MetadataMode::First, Some((path, part))) = (metadata, first_file) {
        let parts = exr::read_parts_info(path)?;
        let chosen = match part {
            PartSelector::FirstDeep => parts.iter().find(|p| p.deep),
            PartSelector::Index(i) => parts.get(*i),
            PartSelector::Name(n) => parts.iter().find(|p| p.name.as_deref() == Some(n)),
        };
        if let Some(chosen) = chosen {
            carried = exr::carried_attributes(&chosen.attributes);
        }
    }
    match merged {
        MergeOutput::Flat(flat) => {
            let mut options = flat_write;
            options.attributes.extend(carried);
            exr::write_flat_with(output, flat, &options)
        }
        MergeOutput::Deep(deep) => {
            let mut options = deep_write;
            options.attributes.extend(carried);
            exr::write_deep_with(output, deep, &options)
        }
    }
}

/// The part of input `i` an in-memory merge reads: one image holds one part, so a part-by-part
/// merge needs a file to write (`out=PATH`).
pub fn in_memory_part(parts: &PartRequest, i: usize) -> Result<PartSelector> {
    match parts {
        PartRequest::Auto => Ok(PartSelector::FirstDeep),
        PartRequest::Every(p) => Ok(p.clone()),
        PartRequest::PerInput(p) => Ok(p[i].clone()),
        PartRequest::All => Err(Error::Usage(
            "all_parts writes a multi-part file: pass out=PATH and path inputs".into(),
        )),
    }
}

/// Merge `inputs` in memory: read (whole), check against the budget, merge; the result is
/// what `deepmerge IN... -o OUT` writes.
pub fn merge(inputs: &[Input], request: &MergeRequest) -> Result<MergeOutput> {
    let parts = request.part_request(inputs.len(), &FieldNames)?;
    let budget = request.memory_budget;
    // A channel name is refused when no input has it, as the streamed merge refuses it; each
    // input then keeps what the selection keeps of its own channels.
    let mut selections = Vec::new();
    if let Some(selection) = &request.channels {
        let mut channels = Vec::new();
        for (i, input) in inputs.iter().enumerate() {
            if let Input::Path(path) = input {
                let source = exr::ChunkSource::open(path, &in_memory_part(&parts, i)?, budget)?;
                channels.push((path.as_path(), source.all_channels));
            }
        }
        let listed: Vec<(&Path, &[Channel])> =
            channels.iter().map(|(p, c)| (*p, c.as_slice())).collect();
        selection.check_names(&listed)?;
        selections = channels
            .iter()
            .map(|(_, all)| selection.restricted_to(all))
            .collect();
    }
    // Files are read first, in order, so a bad file is reported before the engine starts.
    let mut read_images = Vec::new();
    for (i, input) in inputs.iter().enumerate() {
        if let Input::Path(path) = input {
            let read_request = ReadRequest {
                part: in_memory_part(&parts, i)?,
                channels: selections.get(read_images.len()).cloned(),
                memory_budget: Some(budget),
            };
            read_images.push(read(path, &read_request)?);
        }
    }
    let mut from_files = read_images.iter();
    let mut names: Vec<PathBuf> = Vec::with_capacity(inputs.len());
    let mut images: Vec<&DeepImage> = Vec::with_capacity(inputs.len());
    for input in inputs {
        match input {
            Input::Path(path) => {
                names.push(path.clone());
                images.push(from_files.next().expect("one image per path"));
            }
            Input::Image { image, name } => {
                image
                    .check_depths()
                    .map_err(|e| e.in_file(Path::new(name)))?;
                names.push(PathBuf::from(name));
                images.push(image);
            }
        }
    }
    let paths: Vec<&Path> = names.iter().map(PathBuf::as_path).collect();
    let options = request.merge_options();
    check_merge(&images, &paths, &options, budget)?;
    // The union is the merge's own window; any other is given to it, as the streamed merge does.
    let window = match request.bbox {
        OutputWindow::Union => None,
        bbox => {
            let windows: Vec<Bounds> = images.iter().map(|i| i.data_window).collect();
            Some(bbox.resolve(&windows)?)
        }
    };
    // The pipeline's own dispatch and pruning (`stream::merge_checked`): the depths of every
    // input were checked above, as the streamed merge's reader checks each band's.
    with_engine(
        request.backend,
        request.gl.is_given(),
        request.deep,
        |engine| {
            let images = images.iter().map(|&i| Cow::Borrowed(i)).collect();
            merge_checked(
                engine.merging(request.gl_options()),
                images,
                &options,
                &request.pruning,
                window,
            )
            .map(|(merged, _stats)| merged)
        },
    )
    .map_err(|e| e.in_merge(&paths))
}

/// The engine `request` runs on in this thread: "cpu" or "gl".
pub fn engine_name(request: &MergeRequest) -> Result<&'static str> {
    with_engine(
        request.backend,
        request.gl.is_given(),
        request.deep,
        |engine| Ok(engine.name()),
    )
}

/// What an engine is chosen by: the backend, whether GL options were given, and whether the
/// output is deep (which `Auto` weighs).
type EngineKey = (Backend, bool, bool);

/// The engine for (`backend`, GL options given, deep output) on this thread, made on first use
/// and kept.
///
/// A GL context is current on the thread that made it and may not move, so each thread that
/// merges with GL gets its own context, made once and reused by its later calls (a context costs
/// shader compiles to make); merges on different threads run on their own contexts at once.
/// `Auto` is decided once per thread too, since deciding makes a context.
fn with_engine<T>(
    backend: Backend,
    gl_options_given: bool,
    deep_output: bool,
    run: impl FnOnce(&EngineChoice) -> Result<T>,
) -> Result<T> {
    thread_local! {
        static ENGINES: RefCell<Vec<(EngineKey, EngineChoice)>> = const { RefCell::new(Vec::new()) };
    }
    let key = (backend, gl_options_given, deep_output);
    ENGINES.with(|engines| {
        let mut engines = engines.borrow_mut();
        let at = match engines.iter().position(|(k, _)| *k == key) {
            Some(at) => at,
            None => {
                // No size gate: this thread keeps its context for every later merge, so the
                // start-up is paid once (`choose_engine`).
                engines.push((
                    key,
                    choose_engine(backend, gl_options_given, deep_output, None)?,
                ));
                engines.len() - 1
            }
        };
        run(&engines[at].1)
    })
}

/// Composite one image front to back (`merge` of one input, flat output).
pub fn flatten(image: &DeepImage, with_z: bool) -> Result<FlatImage> {
    let request = MergeRequest {
        flat_z: with_z,
        backend: Backend::Cpu,
        memory_budget: DEFAULT_MAX_MEMORY,
        writes_file: false,
        ..MergeRequest::default()
    };
    let input = Input::Image {
        image,
        name: "image".into(),
    };
    match merge(&[input], &request)? {
        MergeOutput::Flat(flat) => Ok(flat),
        MergeOutput::Deep(_) => Err(Error::internal("a flat merge returned a deep image")),
    }
}

/// Hold `image` out by `holdout` (`deepmerge holdout`).
pub fn holdout(image: &DeepImage, holdout: &DeepImage, cull: bool) -> Result<DeepImage> {
    let mode = if cull {
        HoldoutMode::Cull
    } else {
        HoldoutMode::Attenuate
    };
    holdout_images(image, holdout, mode)
}

/// Write a deep image as `deepmerge --deep` does: `deepImageState` recorded when `deep_state`
/// (`--no-deep-state` leaves it out, for readers that refuse it).
pub fn write_deep(
    path: &Path,
    image: &DeepImage,
    output: &OutputOptions,
    deep_state: bool,
) -> Result<()> {
    exr::write_deep_with(path, image, &output.deep(deep_state)?)
}

/// Write a flat image as `deepmerge` without `--deep` does.
pub fn write_flat(
    path: &Path,
    image: &FlatImage,
    flat_type: FlatType,
    output: &OutputOptions,
) -> Result<()> {
    exr::write_flat_with(path, image, &output.flat(flat_type))
}

/// One part of a file as `deepmerge info` describes it.
pub struct PartSummary {
    /// What the header says.
    pub header: PartInfo,
    /// Sample statistics of deep parts.
    pub samples: Option<SampleStats>,
}

/// What `deepmerge info FILE` reports, as data.
pub fn info(path: &Path, memory_budget: Option<u64>) -> Result<Vec<PartSummary>> {
    exr::read_parts_info(path)?
        .into_iter()
        .map(|header| {
            let samples = if header.deep {
                let options = ReadOptions {
                    part: PartSelector::Index(header.index),
                    max_memory: memory_budget.unwrap_or(DEFAULT_MAX_MEMORY),
                };
                Some(sample_stats(&exr::read_deep(path, &options)?))
            } else {
                None
            };
            Ok(PartSummary { header, samples })
        })
        .collect()
}

/// `deepmerge info FILE [--channels LIST]`'s report, word for word: the description, then what
/// a sample costs (and, with `channels`, what it costs keeping only those).
pub fn info_text(
    path: &Path,
    memory_budget: Option<u64>,
    channels: Option<&ChannelSelection>,
) -> Result<String> {
    let mut text =
        deepmerge::info::describe_file(path, memory_budget.unwrap_or(DEFAULT_MAX_MEMORY))?;
    text.push_str(&deepmerge::info::describe_sample_cost(path, channels)?);
    Ok(text)
}
