//! A merge as asked: every option of a merge in one type, [`MergeRequest`], which owns which
//! options fit together ([`MergeRequest::check`]) and gives the options each stage takes (the
//! merge's, the writers', the stream's, the GL engine's).
//!
//! The front ends only map their arguments onto it: the CLI's flags (`src/main.rs`), Python's
//! keywords (`python/src/functions.rs`) and the viewer's. A refusal names the options the way the
//! user typed them, through the front end's [`OptionNames`]: `--flat-z` on the command line,
//! `flat_z` in Python, the field name for a Rust caller ([`FieldNames`]). The option enums parse
//! their names with `FromStr` ([`crate::vocab`], [`Backend`], [`crate::exr::Codec`],
//! [`crate::exr::FlatType`], [`crate::exr::MetadataMode`]), and memory sizes have one parser
//! ([`crate::size::parse_memory`]).
//!
//! The operations' output is asked for the same way: [`OutputRequest`] (`output.rs`) holds what
//! every operation writes and reads with, checked once in the front end's words.

use std::str::FromStr;

mod output;
pub use output::{codec_with_level, refuse_with_png, OutputRequest};

use crate::composite::{MergeOptions, OutputKind, Pruning, SortPolicy};
use crate::error::{parse_name, Error, Result};
use crate::exr::{
    check_deep_output, ChannelSelection, Codec, DeepWriteOptions, FlatType, FlatWriteOptions,
    MetadataMode, OutputOptions, PartSelector,
};
use crate::stream::{OutputWindow, PartRequest, StreamOptions, DEFAULT_MEMORY_BUDGET};
use crate::vocab::{
    Layout, LongLists, MergeMethod, MergeStrategy, PixelOrder, RbmBlocks, MAX_BLOCK_SIZE,
};

/// Which engine the user asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The CPU engine for a merge, unless GPU options were given, which ask for GL
    /// (`crate::backend::choose_engine` says why).
    #[default]
    Auto,
    /// The CPU engine.
    Cpu,
    /// OpenGL compute, or an error.
    Gl,
}

impl Backend {
    /// The name the CLI and Python take.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::Cpu => "cpu",
            Backend::Gl => "gl",
        }
    }
}

impl FromStr for Backend {
    type Err = Error;

    /// `auto`, `cpu` or `gl`.
    fn from_str(s: &str) -> Result<Self> {
        parse_name(
            "the backend",
            s,
            [Backend::Auto, Backend::Cpu, Backend::Gl].map(|b| (b.name(), b)),
        )
    }
}

/// One option of a merge, as a refusal names it ([`OptionNames`] spells it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MergeOption {
    /// Deep output asked for (`--deep`, `output="deep"`).
    Deep,
    /// `--flat-z`.
    FlatZ,
    /// `--flat-type`.
    FlatType,
    /// `--tidy`.
    Tidy,
    /// `deepImageState` left out (`--no-deep-state`, `deep_state=False`).
    NoDeepState,
    /// `--compression`.
    Compression,
    /// `--zstd-level`.
    ZstdLevel,
    /// `--metadata`.
    Metadata,
    /// The output file (`-o`, `out=`).
    OutputFile,
    /// `--backend`.
    Backend,
    /// `--layout`.
    Layout,
    /// The merge method (`--rbm`/`--stepwise`, `method=`).
    Method,
    /// `--block`.
    Block,
    /// `--rbm-blocks`.
    RbmBlocks,
    /// `--gpu-long-lists`.
    LongLists,
    /// `--pixel-order`.
    PixelOrder,
    /// `--gpu-stages`.
    GpuStages,
    /// `--stats`.
    Stats,
    /// `--gpu-memory`.
    GpuMemory,
    /// `--merge-strategy`.
    Strategy,
    /// `--sort`.
    Sort,
    /// `--assume-sorted`.
    AssumeSorted,
    /// `--part`.
    Part,
    /// `--all-parts`.
    AllParts,
    /// `--memory-budget`.
    MemoryBudget,
    /// `--drop-transparent`.
    DropTransparent,
    /// `--drop-hidden`.
    DropHidden,
    /// `-j`, frames merged at the same time.
    Jobs,
    /// Flat output of an operation that writes deep samples by default (`holdout --flat`).
    Flat,
    /// `slice`'s front plane.
    Near,
    /// `slice`'s back plane.
    Far,
    /// `crop`'s box.
    Box,
    /// `transform`'s translation.
    Translate,
    /// `transform`'s depth offset.
    ZOffset,
    /// `transform`'s depth scale.
    ZScale,
    /// `idselect`'s ids.
    Id,
    /// `idselect`'s mask output.
    Mask,
    /// `deepen`'s constant depth.
    Z,
    /// `deepen`'s depth channel.
    ZChannel,
    /// `deepen`'s thickness.
    Thickness,
    /// `deepen`'s back-depth channel.
    ZBackChannel,
}

/// How a front end spells each option in its refusals.
pub trait OptionNames {
    /// `option` as the user sets it: a flag (`--flat-z`), a keyword (`flat_z`), or for the
    /// options that are a value of another, that setting (`--deep`, `output="deep"`).
    fn spell(&self, option: MergeOption) -> &'static str;

    /// `option` set to `value`, as the user would write it (`--backend cpu`, `backend="cpu"`).
    fn setting(&self, option: MergeOption, value: &str) -> String;

    /// An option of an operation of the table ([`crate::ops::OPERATIONS`]) as the user sets it:
    /// its flag (`--min-alpha`), keyword (`min_alpha`) or script field. A new operation words
    /// its refusals with this, needing no [`MergeOption`] of its own. By default, the keyword.
    fn operation_option(&self, option: &crate::ops::registry::OptionSpec) -> String {
        option.name.to_string()
    }
}

/// The names of [`MergeRequest`]'s fields, for library callers.
pub struct FieldNames;

impl OptionNames for FieldNames {
    fn spell(&self, option: MergeOption) -> &'static str {
        match option {
            MergeOption::Deep => "deep",
            MergeOption::FlatZ => "flat_z",
            MergeOption::FlatType => "flat_type",
            MergeOption::Tidy => "tidy",
            MergeOption::NoDeepState => "deep_state = false",
            MergeOption::Compression => "compression",
            MergeOption::ZstdLevel => "zstd_level",
            MergeOption::Metadata => "metadata",
            MergeOption::OutputFile => "an output file",
            MergeOption::Backend => "backend",
            MergeOption::Layout => "gl.layout",
            MergeOption::Method => "gl.method",
            MergeOption::Block => "gl.block_size",
            MergeOption::RbmBlocks => "gl.rbm_blocks",
            MergeOption::LongLists => "gl.long_lists",
            MergeOption::PixelOrder => "gl.pixel_order",
            MergeOption::GpuStages => "gl.stages_on_gpu",
            MergeOption::Stats => "gl.stats",
            MergeOption::GpuMemory => "gl.gpu_memory",
            MergeOption::Strategy => "strategy",
            MergeOption::Sort => "sort",
            MergeOption::AssumeSorted => "assume_sorted",
            MergeOption::Part => "part",
            MergeOption::AllParts => "all_parts",
            MergeOption::MemoryBudget => "memory_budget",
            MergeOption::DropTransparent => "pruning.drop_transparent",
            MergeOption::DropHidden => "pruning.drop_hidden",
            MergeOption::Jobs => "jobs",
            MergeOption::Flat => "flat",
            MergeOption::Near => "near",
            MergeOption::Far => "far",
            MergeOption::Box => "box",
            MergeOption::Translate => "translate",
            MergeOption::ZOffset => "z_offset",
            MergeOption::ZScale => "z_scale",
            MergeOption::Id => "id",
            MergeOption::Mask => "mask",
            MergeOption::Z => "z",
            MergeOption::ZChannel => "z_channel",
            MergeOption::Thickness => "thickness",
            MergeOption::ZBackChannel => "zback_channel",
        }
    }

    fn setting(&self, option: MergeOption, value: &str) -> String {
        format!("{} = {value}", self.spell(option))
    }
}

/// The GL engine's options as asked; `None` (and `stats` false) for what was not given, so
/// that a request with none leaves the engine to [`Backend`] and the GL defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GlRequest {
    /// The layout of images on the GPU.
    pub layout: Option<Layout>,
    /// Stepwise or register-block merging.
    pub method: Option<MergeMethod>,
    /// The register block size, 1 to [`MAX_BLOCK_SIZE`].
    pub block_size: Option<u32>,
    /// How register blocks are indexed.
    pub rbm_blocks: Option<RbmBlocks>,
    /// Who merges pixels with long lists in a pairwise merge.
    pub long_lists: Option<LongLists>,
    /// The pixel order of GPU layouts.
    pub pixel_order: Option<PixelOrder>,
    /// Where the sort and tidy stages run: `Some(true)` on the GPU, `Some(false)` on the host.
    pub stages_on_gpu: Option<bool>,
    /// Print the GL engine's statistics and stage profile.
    pub stats: bool,
    /// Bytes the GL engine may use on the device (`None`: three quarters of what it has free,
    /// `gpu::memory::default_budget`).
    pub gpu_memory: Option<u64>,
}

impl GlRequest {
    /// The options given, in the order the CLI lists them.
    pub fn given(&self) -> Vec<MergeOption> {
        [
            (self.layout.is_some(), MergeOption::Layout),
            (self.method.is_some(), MergeOption::Method),
            (self.block_size.is_some(), MergeOption::Block),
            (self.rbm_blocks.is_some(), MergeOption::RbmBlocks),
            (self.long_lists.is_some(), MergeOption::LongLists),
            (self.pixel_order.is_some(), MergeOption::PixelOrder),
            (self.stages_on_gpu.is_some(), MergeOption::GpuStages),
            (self.stats, MergeOption::Stats),
            (self.gpu_memory.is_some(), MergeOption::GpuMemory),
        ]
        .into_iter()
        .filter_map(|(given, option)| given.then_some(option))
        .collect()
    }

    /// Whether any GL option was given (they select GL under [`Backend::Auto`]).
    pub fn is_given(&self) -> bool {
        !self.given().is_empty()
    }

    /// The GL engine's options: the defaults with what was given.
    #[cfg(feature = "gl")]
    pub fn options(&self) -> crate::gpu::GlOptions {
        let defaults = crate::gpu::GlOptions::default();
        crate::gpu::GlOptions {
            layout: self.layout.unwrap_or(defaults.layout),
            method: self.method.unwrap_or(defaults.method),
            block_size: self.block_size.unwrap_or(defaults.block_size),
            pixel_order: self.pixel_order.unwrap_or(defaults.pixel_order),
            sort_on_gpu: self.stages_on_gpu,
            tidy_on_gpu: self.stages_on_gpu,
            rbm_blocks: self.rbm_blocks.unwrap_or(defaults.rbm_blocks),
            long_lists: self.long_lists.unwrap_or(defaults.long_lists),
            band_budget_bytes: self
                .gpu_memory
                .map_or(0, crate::gpu::memory::band_budget_of),
            overlap_bands: None,
            pairwise_long_pairs: None,
            deep_writes: Default::default(),
            deep_readback: None,
        }
    }
}

/// Every option of a merge of files (or of images in memory), as asked. The defaults are
/// `deepmerge IN... -o OUT`'s.
#[derive(Clone, Debug)]
pub struct MergeRequest {
    /// Deep output instead of a flat composite.
    pub deep: bool,
    /// Flat output: add the Z of the front-most contributing sample.
    pub flat_z: bool,
    /// Flat output: the storage of colour and alpha (`None`: as the inputs store it, float where
    /// an input's colour or alpha is float, else half).
    pub flat_type: Option<FlatType>,
    /// Deep output: split overlapping volumes and merge coincident samples.
    pub tidy: bool,
    /// Deep output: write `deepImageState` (some readers, e.g. PyPI OpenEXR, refuse it).
    pub deep_state: bool,
    /// Sort every input pixel, whatever the file says.
    pub sort: bool,
    /// Trust every input's pixels to be sorted, whatever the file says.
    pub assume_sorted: bool,
    /// All inputs in one pass per pixel, or a chain of pairwise merges.
    pub strategy: MergeStrategy,
    /// Samples dropped around the merge.
    pub pruning: Pruning,
    /// The output's data window.
    pub bbox: OutputWindow,
    /// The part of multi-part inputs: none (chosen per file), one for every input, or one per
    /// input in input order.
    pub part: Vec<PartSelector>,
    /// Merge part by part into a multi-part output.
    pub all_parts: bool,
    /// Keep only these channels (and what they need).
    pub channels: Option<ChannelSelection>,
    /// The memory the merge works in, in bytes.
    pub memory_budget: u64,
    /// Bands of exactly this many rows, whatever the budget says (for tests and measurements).
    pub band_rows: Option<usize>,
    /// Which engine merges.
    pub backend: Backend,
    /// The GL engine's options.
    pub gl: GlRequest,
    /// The output file's compression (`None`: ZIPS for deep output, ZIP for flat).
    pub compression: Option<Codec>,
    /// The zstd level, with zstd compression.
    pub zstd_level: Option<i32>,
    /// Which input attributes the output carries (`None`: the first input's).
    pub metadata: Option<MetadataMode>,
    /// Whether the result is written to a file (false for a merge kept in memory, where the
    /// writing options do not apply).
    pub writes_file: bool,
    /// Frames merged at the same time (a sequence on the CPU engine).
    pub jobs: Option<usize>,
}

impl Default for MergeRequest {
    fn default() -> Self {
        MergeRequest {
            deep: false,
            flat_z: false,
            flat_type: None,
            tidy: false,
            deep_state: true,
            sort: false,
            assume_sorted: false,
            strategy: MergeStrategy::KWay,
            pruning: Pruning::default(),
            bbox: OutputWindow::Union,
            part: Vec::new(),
            all_parts: false,
            channels: None,
            memory_budget: DEFAULT_MEMORY_BUDGET,
            band_rows: None,
            backend: Backend::Auto,
            gl: GlRequest::default(),
            compression: None,
            zstd_level: None,
            metadata: None,
            writes_file: true,
            jobs: None,
        }
    }
}

impl MergeRequest {
    /// Refuse options that do not fit together or do not apply, naming them as `names` spells
    /// them; `inputs` is the number of inputs (for `part`). Every front end calls this before
    /// reading anything, so a usage error never waits for a file or for GL.
    pub fn check(&self, inputs: usize, names: &dyn OptionNames) -> Result<()> {
        let name = |o| names.spell(o);
        let usage = |message: String| Err(Error::Usage(message));
        let deep = name(MergeOption::Deep);
        if self.deep {
            for (given, option) in [
                (self.flat_z, MergeOption::FlatZ),
                (self.flat_type.is_some(), MergeOption::FlatType),
            ] {
                if given {
                    return usage(format!(
                        "{} applies to flat output, not {deep}",
                        name(option)
                    ));
                }
            }
        } else {
            for (given, option, why) in [
                (
                    self.tidy,
                    MergeOption::Tidy,
                    "flat output is always composited tidily",
                ),
                (
                    !self.deep_state,
                    MergeOption::NoDeepState,
                    "flat output has no deepImageState",
                ),
                (
                    self.pruning.drop_hidden.is_some(),
                    MergeOption::DropHidden,
                    "a flat composite shows nothing of what is hidden",
                ),
            ] {
                if given {
                    return usage(format!(
                        "{} applies to deep output; add {deep} ({why})",
                        name(option)
                    ));
                }
            }
        }
        if self.sort && self.assume_sorted {
            return usage(format!(
                "{} and {} cannot be used together",
                name(MergeOption::Sort),
                name(MergeOption::AssumeSorted)
            ));
        }
        if !self.writes_file {
            let writing: Vec<&str> = [
                (self.compression.is_some(), MergeOption::Compression),
                (self.zstd_level.is_some(), MergeOption::ZstdLevel),
                (self.metadata.is_some(), MergeOption::Metadata),
                (self.flat_type.is_some(), MergeOption::FlatType),
            ]
            .into_iter()
            .filter_map(|(given, option)| given.then_some(name(option)))
            .collect();
            if !writing.is_empty() {
                let verb = if writing.len() == 1 {
                    "applies"
                } else {
                    "apply"
                };
                return usage(format!(
                    "{} {verb} when writing a file: pass {}",
                    writing.join(", "),
                    name(MergeOption::OutputFile)
                ));
            }
        }
        self.output_options(names)?;
        if self.memory_budget == 0 {
            return usage(format!(
                "{} must be a positive size",
                name(MergeOption::MemoryBudget)
            ));
        }
        if let Some(eps) = self.pruning.drop_transparent {
            if !(eps.is_finite() && eps >= 0.0) {
                return usage(format!(
                    "{} takes a finite alpha of at least 0, not {eps}",
                    name(MergeOption::DropTransparent)
                ));
            }
        }
        if let Some(threshold) = self.pruning.drop_hidden {
            if !(threshold > 0.0 && threshold <= 1.0) {
                return usage(format!(
                    "{} takes an accumulated alpha in (0, 1], not {threshold}",
                    name(MergeOption::DropHidden)
                ));
            }
        }
        if let Some(block) = self.gl.block_size {
            if !(1..=MAX_BLOCK_SIZE).contains(&block) {
                return usage(format!(
                    "{} must be 1 to {MAX_BLOCK_SIZE}, not {block}",
                    name(MergeOption::Block)
                ));
            }
        }
        if matches!(self.gl.long_lists, Some(LongLists::Cooperative { .. }))
            && self.strategy == MergeStrategy::KWay
        {
            return usage(format!(
                "{} cooperative merges pairwise only: add {} (the k-way kernel has no \
                 cooperative path yet)",
                name(MergeOption::LongLists),
                names.setting(MergeOption::Strategy, "chain")
            ));
        }
        let gl_given = self.gl.given();
        if self.backend == Backend::Cpu && !gl_given.is_empty() {
            let list: Vec<&str> = gl_given.iter().map(|&o| name(o)).collect();
            let (verb, pronoun) = match list.len() {
                1 => ("chooses", "it does"),
                _ => ("choose", "they do"),
            };
            return usage(format!(
                "{} {verb} how the GPU merges; {pronoun} not apply to {}",
                list.join(", "),
                names.setting(MergeOption::Backend, "cpu")
            ));
        }
        if self.jobs.is_some_and(|j| j > 1) && self.uses_gl() {
            return usage(format!(
                "{} merges frames at the same time on the CPU engine; the GL engine merges one \
                 frame at a time (its context belongs to one thread): leave {} out, or use {}",
                name(MergeOption::Jobs),
                name(MergeOption::Jobs),
                names.setting(MergeOption::Backend, "cpu")
            ));
        }
        self.part_request(inputs, names)?;
        Ok(())
    }

    /// Whether the merge runs on the GL engine: asked for, or GL options given under `Auto`.
    pub fn uses_gl(&self) -> bool {
        match self.backend {
            Backend::Gl => true,
            Backend::Auto => self.gl.is_given(),
            Backend::Cpu => false,
        }
    }

    /// The merge's own options.
    pub fn merge_options(&self) -> MergeOptions {
        MergeOptions {
            output: if self.deep {
                OutputKind::Deep
            } else {
                OutputKind::Flat { z: self.flat_z }
            },
            tidy: self.tidy,
            sort: if self.sort {
                SortPolicy::Always
            } else if self.assume_sorted {
                SortPolicy::AssumeSorted
            } else {
                SortPolicy::Auto
            },
            strategy: self.strategy,
        }
    }

    /// The output file's compression and metadata, the zstd level checked.
    pub fn output_options(&self, names: &dyn OptionNames) -> Result<OutputOptions> {
        let compression = output::codec_with_level(self.compression, self.zstd_level, names)?;
        if let (true, Some(codec)) = (self.deep, compression) {
            check_deep_output(codec)?;
        }
        Ok(OutputOptions {
            compression,
            metadata: self.metadata.unwrap_or_default(),
        })
    }

    /// Which parts are read.
    pub fn part_request(&self, inputs: usize, names: &dyn OptionNames) -> Result<PartRequest> {
        let part = names.spell(MergeOption::Part);
        match (self.part.len(), self.all_parts) {
            (0, true) => Ok(PartRequest::All),
            (_, true) => Err(Error::Usage(format!(
                "{} merges every part; it does not take {part}",
                names.spell(MergeOption::AllParts)
            ))),
            (0, false) => Ok(PartRequest::Auto),
            (1, false) => Ok(PartRequest::Every(self.part[0].clone())),
            (n, false) if n == inputs => Ok(PartRequest::PerInput(self.part.clone())),
            (n, false) => Err(Error::Usage(format!(
                "{part} names {n} parts for {inputs} inputs: give one part (for every input) \
                 or one per input, in input order"
            ))),
        }
    }

    /// The deep and flat writers' options (before the input's carried attributes).
    pub fn write_options(&self) -> Result<(DeepWriteOptions, FlatWriteOptions)> {
        let output = self.output_options(&FieldNames)?;
        let deep = if self.deep {
            output.deep(self.deep_state)?
        } else {
            DeepWriteOptions::default()
        };
        Ok((deep, output.flat(self.flat_type.unwrap_or_default())))
    }

    /// The streamed merge's options (the parts are [`Self::part_request`]'s business).
    pub fn stream_options(&self) -> Result<StreamOptions> {
        let (deep_write, flat_write) = self.write_options()?;
        Ok(StreamOptions {
            part: PartSelector::FirstDeep,
            input_parts: Vec::new(),
            merge: self.merge_options(),
            flat_write,
            deep_write,
            metadata: self.metadata.unwrap_or_default(),
            budget: self.memory_budget,
            channels: self.channels.clone(),
            band_rows: self.band_rows,
            band_threads: None,
            pruning: self.pruning,
            flat_type_follows_inputs: self.flat_type.is_none(),
            bbox: self.bbox,
        })
    }

    /// The GL engine's options.
    #[cfg(feature = "gl")]
    pub fn gl_options(&self) -> crate::gpu::GlOptions {
        self.gl.options()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CLI's spelling, as a test stand-in.
    struct Flags;

    impl OptionNames for Flags {
        fn spell(&self, option: MergeOption) -> &'static str {
            match option {
                MergeOption::Deep => "--deep",
                MergeOption::FlatZ => "--flat-z",
                MergeOption::Backend => "--backend",
                MergeOption::Layout => "--layout",
                MergeOption::Jobs => "-j",
                MergeOption::ZstdLevel => "--zstd-level",
                MergeOption::Compression => "--compression",
                other => FieldNames.spell(other),
            }
        }

        fn setting(&self, option: MergeOption, value: &str) -> String {
            format!("{} {value}", self.spell(option))
        }
    }

    #[test]
    fn refusals_name_options_as_the_front_end_spells_them() {
        let flat_z_deep = MergeRequest {
            deep: true,
            flat_z: true,
            ..MergeRequest::default()
        };
        let e = flat_z_deep.check(2, &Flags).unwrap_err().to_string();
        assert_eq!(e, "--flat-z applies to flat output, not --deep");
        let e = flat_z_deep.check(2, &FieldNames).unwrap_err().to_string();
        assert_eq!(e, "flat_z applies to flat output, not deep");

        let cpu_with_layout = MergeRequest {
            backend: Backend::Cpu,
            gl: GlRequest {
                layout: Some(Layout::BlockedInterleaved),
                ..GlRequest::default()
            },
            ..MergeRequest::default()
        };
        let e = cpu_with_layout.check(2, &Flags).unwrap_err().to_string();
        assert_eq!(
            e,
            "--layout chooses how the GPU merges; it does not apply to --backend cpu"
        );

        let level_without_zstd = MergeRequest {
            zstd_level: Some(3),
            ..MergeRequest::default()
        };
        let e = level_without_zstd.check(2, &Flags).unwrap_err().to_string();
        assert_eq!(e, "--zstd-level applies to --compression zstd");
    }

    #[test]
    fn jobs_are_refused_only_where_gl_merges() {
        let jobs = |backend, layout: Option<Layout>| MergeRequest {
            jobs: Some(2),
            backend,
            gl: GlRequest {
                layout,
                ..GlRequest::default()
            },
            ..MergeRequest::default()
        };
        assert!(jobs(Backend::Cpu, None).check(2, &Flags).is_ok());
        assert!(jobs(Backend::Auto, None).check(2, &Flags).is_ok());
        for refused in [
            jobs(Backend::Gl, None),
            jobs(Backend::Auto, Some(Layout::Linearised)),
        ] {
            let e = refused.check(2, &Flags).unwrap_err();
            assert!(matches!(e, Error::Usage(_)), "{e}");
            assert!(e.to_string().starts_with("-j merges frames"), "{e}");
        }
        let one_job = MergeRequest {
            jobs: Some(1),
            ..jobs(Backend::Gl, None)
        };
        assert!(one_job.check(2, &Flags).is_ok());
    }

    #[test]
    fn the_stream_options_follow_the_request() {
        let request = MergeRequest {
            deep: true,
            tidy: true,
            deep_state: false,
            assume_sorted: true,
            strategy: MergeStrategy::Chain,
            compression: Some(Codec::Zstd { level: 5 }),
            zstd_level: Some(9),
            ..MergeRequest::default()
        };
        request.check(2, &FieldNames).unwrap();
        let options = request.stream_options().unwrap();
        assert_eq!(options.merge.output, OutputKind::Deep);
        assert!(options.merge.tidy);
        assert_eq!(options.merge.sort, SortPolicy::AssumeSorted);
        assert_eq!(options.merge.strategy, MergeStrategy::Chain);
        assert!(!options.deep_write.write_state);
        assert_eq!(options.deep_write.codec, Codec::Zstd { level: 9 });
        assert_eq!(options.metadata, MetadataMode::First);
    }

    #[test]
    fn option_enums_parse_their_names_and_list_them_when_refusing() {
        assert_eq!("BIA".parse::<Layout>().unwrap(), Layout::BlockedInterleaved);
        assert_eq!(
            "stepwise".parse::<MergeMethod>().unwrap(),
            MergeMethod::Stepwise
        );
        assert_eq!("gl".parse::<Backend>().unwrap(), Backend::Gl);
        let e = "xx".parse::<Layout>().unwrap_err().to_string();
        assert_eq!(e, "the layout must be one of LL, LA, IA, BIA, not \"xx\"");
    }
}
