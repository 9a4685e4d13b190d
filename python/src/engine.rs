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
//!   `--channels`): the part is read through [`ChunkSource`] keeping only the selected channels
//!   (plus Z, ZBack and the alphas they need), so the others are never stored.
//!
//! Nothing here touches Python: every function is safe to run with the GIL released.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use deepmerge::backend::{choose_engine, Backend, Engine};
use deepmerge::composite::{
    check_merge, holdout as holdout_images, merge_images_over, HoldoutMode, MergeOptions,
    MergeOutput, OutputKind,
};
use deepmerge::deep::{Bounds, DeepImage, FlatImage};
use deepmerge::exr::{
    self, DeepWriteOptions, FlatType, FlatWriteOptions, MetadataMode, OutputOptions, PartInfo,
    PartSelector, ReadOptions, DEFAULT_MAX_MEMORY,
};
use deepmerge::gpu::{merge_images_gl_over, GlOptions};
use deepmerge::info::{sample_stats, SampleStats};
use deepmerge::job::check_output_is_not_an_input;
use deepmerge::stream::{
    self, ChannelSelection, ChunkSource, MergeEngine, OutputWindow, StreamOptions,
    DEFAULT_MEMORY_BUDGET,
};
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
    let Some(selection) = &request.channels else {
        let image = exr::read_deep(path, &request.options())?;
        image.check_depths().map_err(|e| e.in_file(path))?;
        return Ok(image);
    };
    // The chunk reader with the selection: unselected channels are unpacked chunk by chunk
    // (the codec packs all channels together) but never stored.
    let budget = request.max_memory();
    let mut source = ChunkSource::open(path, &request.part, budget)?;
    let all = source.all_channels.clone();
    if let Some(missing) = selection
        .names()
        .iter()
        .find(|n| !all.iter().any(|c| &c.name == *n))
    {
        let have: Vec<&str> = all.iter().map(|c| c.name.as_str()).collect();
        return Err(Error::format(format!(
            "no channel {missing} (channels: {})",
            have.join(", ")
        ))
        .in_file(path));
    }
    source.keep_channels(|c| selection.keeps(c, &all));
    source.count_rows()?;
    // What `read_deep` checks, for the kept channels: the window's tables and the samples.
    let window = source.window;
    let total: u64 = source.row_samples.iter().sum();
    let need = (window.area() as u64)
        .saturating_mul(16)
        .saturating_add(total.saturating_mul(source.sample_bytes()));
    if need > budget {
        return Err(
            Error::over_budget(format_args!("its {total} samples"), need, budget).in_file(path),
        );
    }
    // `take_rows` checks the depths of what it hands out.
    source.take_rows(window.y0..=window.y1)
}

/// One input of a merge: a file, or an image already in memory.
pub enum Input<'a> {
    /// Read with the merge's read options.
    Path(PathBuf),
    /// Used as it is; `name` stands for it in messages.
    Image { image: &'a DeepImage, name: String },
}

/// What a merge makes and on which engine.
#[derive(Clone, Debug)]
pub struct MergeRequest {
    /// Flat (with Z or not) or deep output.
    pub output: OutputKind,
    /// Tidy deep output.
    pub tidy: bool,
    /// The engine asked for.
    pub backend: Backend,
    /// GL-only options (layout, method); `Some` selects GL under `Auto`, as the CLI's flags do.
    pub gl: Option<GlOptions>,
    /// Part of path inputs.
    pub part: PartSelector,
    /// Bytes: the streamed merge's working budget ([`merge_to_file`], default 1 GiB); the most
    /// one decoded input or the output may take in memory ([`merge`], default 8 GiB).
    pub memory_budget: Option<u64>,
    /// Keep only these channels of path inputs (`--channels`).
    pub channels: Option<ChannelSelection>,
    /// The output data window (`--bbox`).
    pub bbox: OutputWindow,
}

impl MergeRequest {
    fn merge_options(&self) -> MergeOptions {
        MergeOptions {
            output: self.output,
            tidy: self.tidy,
            ..MergeOptions::default()
        }
    }
}

/// How a merge's output file is written (`--compression`, `--zstd-level`, `--metadata`,
/// `--flat-type`).
#[derive(Clone, Debug, Default)]
pub struct WriteRequest {
    /// Deep output.
    pub deep: DeepWriteOptions,
    /// Flat output.
    pub flat: FlatWriteOptions,
    /// Which input attributes the output carries.
    pub metadata: MetadataMode,
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
}

/// Merge the files `inputs` into `output` as `deepmerge IN... -o OUT` does: the engine chosen
/// first (so a `backend="gl"` without GL fails before reading), then
/// [`stream::StreamMerge::open`] and [`stream::StreamMerge::run`] within the budget; the same
/// bytes as the CLI's file.
pub fn merge_to_file(
    inputs: &[PathBuf],
    output: &Path,
    request: &MergeRequest,
    write: &WriteRequest,
) -> Result<FileReport> {
    let options = StreamOptions {
        part: request.part.clone(),
        merge: request.merge_options(),
        flat_write: write.flat.clone(),
        deep_write: write.deep.clone(),
        metadata: write.metadata,
        budget: request.memory_budget.unwrap_or(DEFAULT_MEMORY_BUDGET),
        channels: request.channels.clone(),
        band_rows: None,
        pruning: Default::default(),
        bbox: request.bbox,
    };
    with_engine(request.backend, request.gl.is_some(), |engine| {
        check_output_is_not_an_input(output, inputs)?;
        let merge = stream::StreamMerge::open(inputs, &options, None)?;
        let window = merge.window();
        let (on, name) = match engine {
            Engine::Gl(ctx) => (MergeEngine::Gl(ctx, request.gl.unwrap_or_default()), "gl"),
            Engine::Cpu { .. } => (MergeEngine::Cpu, "cpu"),
        };
        let report = merge.run(output, on, None)?;
        Ok(FileReport {
            bands: report.bands,
            max_band_rows: report.max_band_rows,
            window,
            memory_budget: options.budget,
            engine: name,
        })
    })
}

/// Write an in-memory merge's result as the CLI writes its output; `first_file` (the first
/// input, when it is a file) gives the attributes `--metadata first` carries.
pub fn write_merged(
    output: &Path,
    merged: &MergeOutput,
    write: &WriteRequest,
    first_file: Option<(&Path, &PartSelector)>,
) -> Result<()> {
    let mut carried = Vec::new();
    if let (MetadataMode::First, Some((path, part))) = (write.metadata, first_file) {
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
            let mut options = write.flat.clone();
            options.attributes.extend(carried);
            exr::write_flat_with(output, flat, &options)
        }
        MergeOutput::Deep(deep) => {
            let mut options = write.deep.clone();
            options.attributes.extend(carried);
            exr::write_deep_with(output, deep, &options)
        }
    }
}

/// Merge `inputs` in memory: read (whole), check against the budget, merge; the result is
/// what `deepmerge IN... -o OUT` writes.
pub fn merge(inputs: &[Input], request: &MergeRequest) -> Result<MergeOutput> {
    let read_request = ReadRequest {
        part: request.part.clone(),
        channels: request.channels.clone(),
        memory_budget: request.memory_budget,
    };
    // Files are read first, in order, so a bad file is reported before the engine starts.
    let mut read_images = Vec::new();
    for input in inputs {
        if let Input::Path(path) = input {
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
    let max_memory = request.memory_budget.unwrap_or(DEFAULT_MAX_MEMORY);
    check_merge(&images, &paths, &options, max_memory)?;
    // The union is the merge's own window; any other is given to it, as the streamed merge does.
    let window = match request.bbox {
        OutputWindow::Union => None,
        bbox => {
            let windows: Vec<Bounds> = images.iter().map(|i| i.data_window).collect();
            Some(bbox.resolve(&windows)?)
        }
    };
    with_engine(
        request.backend,
        request.gl.is_some(),
        |engine| match engine {
            Engine::Gl(ctx) => {
                let gl = request.gl.unwrap_or_default();
                merge_images_gl_over(ctx, &images, &options, &gl, window)
                    .map(|(merged, _stats)| merged)
            }
            Engine::Cpu { .. } => merge_images_over(&images, &options, window),
        },
    )
    .map_err(|e| e.in_merge(&paths))
}

/// The engine `request` runs on in this thread: "cpu" or "gl".
pub fn engine_name(request: &MergeRequest) -> Result<&'static str> {
    with_engine(request.backend, request.gl.is_some(), |engine| {
        Ok(match engine {
            Engine::Gl(_) => "gl",
            Engine::Cpu { .. } => "cpu",
        })
    })
}

/// The engine for (`backend`, GL options given) on this thread, made on first use and kept.
///
/// A GL context is current on the thread that made it and may not move, so each thread that
/// merges with GL gets its own context, made once and reused by its later calls (a context costs
/// shader compiles to make); merges on different threads run on their own contexts at once.
/// `Auto` is decided once per thread too, since deciding makes a context.
fn with_engine<T>(
    backend: Backend,
    gl_options_given: bool,
    run: impl FnOnce(&Engine) -> Result<T>,
) -> Result<T> {
    thread_local! {
        static ENGINES: RefCell<Vec<((Backend, bool), Engine)>> = const { RefCell::new(Vec::new()) };
    }
    let key = (backend, gl_options_given);
    ENGINES.with(|engines| {
        let mut engines = engines.borrow_mut();
        let at = match engines.iter().position(|(k, _)| *k == key) {
            Some(at) => at,
            None => {
                engines.push((key, choose_engine(backend, gl_options_given)?));
                engines.len() - 1
            }
        };
        run(&engines[at].1)
    })
}

/// Composite one image front to back (`merge` of one input, flat output).
pub fn flatten(image: &DeepImage, with_z: bool) -> Result<FlatImage> {
    let request = MergeRequest {
        output: OutputKind::Flat { z: with_z },
        tidy: false,
        backend: Backend::Cpu,
        gl: None,
        part: PartSelector::FirstDeep,
        memory_budget: None,
        channels: None,
        bbox: OutputWindow::Union,
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

/// Write a deep image as `deepmerge --deep` does (records `deepImageState`).
pub fn write_deep(path: &Path, image: &DeepImage, output: &OutputOptions) -> Result<()> {
    exr::write_deep_with(path, image, &output.deep(true)?)
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
