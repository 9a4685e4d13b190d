//! Every call the Python module makes into the `deepmerge` library, and nothing else: reading,
//! merging (engine choice included), flattening, holdout, writing and `info`.
//!
//! The rest of the extension only converts between Python and these functions, so when the
//! library's API changes (the streaming band merge of issue 10, a `channels` read option) this
//! file is the one to rebind. Today:
//!
//! - `memory_budget` is [`ReadOptions::max_memory`]: the most bytes one decoded input (and the
//!   merged output, [`check_merge`]) may take, refused with the CLI's `--max-memory` message when
//!   over. The streaming merge will turn it into a real working-set budget; rebinding
//!   [`merge`] for path inputs is a few lines here.
//! - `channels` on [`read`] is applied after decoding (every channel is decoded, the others are
//!   dropped), until the reader can skip them.
//!
//! Nothing here touches Python: every function is safe to run with the GIL released.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use deepmerge::backend::{choose_engine, Backend, Engine};
use deepmerge::composite::{
    check_merge, holdout as holdout_images, merge_images, HoldoutMode, MergeOptions, MergeOutput,
    OutputKind,
};
use deepmerge::deep::{DeepImage, FlatImage};
use deepmerge::exr::{
    self, Codec, DeepWriteOptions, FlatType, PartInfo, PartSelector, ReadOptions,
    DEFAULT_MAX_MEMORY,
};
use deepmerge::gpu::{merge_images_gl, GlOptions};
use deepmerge::info::{sample_stats, SampleStats};
use deepmerge::{Error, Result};

/// How to read one file.
#[derive(Clone, Debug, Default)]
pub struct ReadRequest {
    /// The part (default: the first deep part, as the CLI).
    pub part: PartSelector,
    /// Keep only these channels, in file order (all when `None`).
    pub channels: Option<Vec<String>>,
    /// Most bytes the decoded image may take (the CLI's default when `None`).
    pub memory_budget: Option<u64>,
}

impl ReadRequest {
    fn options(&self) -> ReadOptions {
        ReadOptions {
            part: self.part.clone(),
            max_memory: self.memory_budget.unwrap_or(DEFAULT_MAX_MEMORY),
        }
    }
}

/// Read a deep part of `path`, refusing NaN depths as the CLI does before merging.
pub fn read(path: &Path, request: &ReadRequest) -> Result<DeepImage> {
    let mut image = exr::read_deep(path, &request.options())?;
    image.check_depths().map_err(|e| e.in_file(path))?;
    if let Some(wanted) = &request.channels {
        keep_channels(&mut image, wanted).map_err(|e| e.in_file(path))?;
    }
    Ok(image)
}

/// Drop every channel not in `wanted`; a wanted channel the image lacks is an error.
fn keep_channels(image: &mut DeepImage, wanted: &[String]) -> Result<()> {
    if let Some(missing) = wanted.iter().find(|w| image.channel_index(w).is_none()) {
        let have: Vec<&str> = image.channels.iter().map(|c| c.name.as_str()).collect();
        return Err(Error::format(format!(
            "no channel {missing} (channels: {})",
            have.join(", ")
        )));
    }
    let keep: Vec<bool> = image
        .channels
        .iter()
        .map(|c| wanted.contains(&c.name))
        .collect();
    let mut flags = keep.iter();
    image
        .channels
        .retain(|_| *flags.next().expect("one flag per channel"));
    let mut flags = keep.iter();
    image
        .planes
        .retain(|_| *flags.next().expect("one flag per plane"));
    Ok(())
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
    /// Most bytes one input or the output may take.
    pub memory_budget: Option<u64>,
}

/// Merge `inputs` as `deepmerge IN... -o OUT` does before writing: read, check, merge.
pub fn merge(inputs: &[Input], request: &MergeRequest) -> Result<MergeOutput> {
    let read_request = ReadRequest {
        part: request.part.clone(),
        channels: None,
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
    let options = MergeOptions {
        output: request.output,
        tidy: request.tidy,
        ..MergeOptions::default()
    };
    let max_memory = request.memory_budget.unwrap_or(DEFAULT_MAX_MEMORY);
    check_merge(&images, &paths, &options, max_memory)?;
    with_engine(
        request.backend,
        request.gl.is_some(),
        |engine| match engine {
            Engine::Gl(ctx) => {
                let gl = request.gl.unwrap_or_default();
                merge_images_gl(ctx, &images, &options, &gl).map(|(merged, _stats)| merged)
            }
            Engine::Cpu { .. } => merge_images(&images, &options),
        },
    )
    .map_err(|e| e.in_merge(&paths))
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
pub fn write_deep(path: &Path, image: &DeepImage, codec: Codec) -> Result<()> {
    let options = DeepWriteOptions {
        codec,
        write_state: true,
    };
    exr::write_deep_with(path, image, &options)
}

/// Write a flat image as `deepmerge` without `--deep` does.
pub fn write_flat(path: &Path, image: &FlatImage, flat_type: FlatType) -> Result<()> {
    exr::write_flat(path, image, flat_type)
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

/// `deepmerge info FILE`'s report, word for word.
pub fn info_text(path: &Path, memory_budget: Option<u64>) -> Result<String> {
    deepmerge::info::describe_file(path, memory_budget.unwrap_or(DEFAULT_MAX_MEMORY))
}
