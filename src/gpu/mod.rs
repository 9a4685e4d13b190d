//! The OpenGL compute engine: a headless context ([`GlContext`]), stages in `glsl/` loaded with
//! `#define`s ([`program`]), the GPU scan ([`scan`]), layout builds and pairwise merges
//! ([`resident`]) and the whole-image merge in row bands ([`merge_images_gl`], [`GpuMerger`]).
//!
//! Every stage has a CPU twin in `cpu` with the same name; the tests compare them. The engine
//! never calls a twin: what both share lives in [`crate::vocab`].
//!
//! How a merge runs (per row band of the union window, bands sized so that every merged buffer
//! fits GL_MAX_SHADER_STORAGE_BLOCK_SIZE or [`GlOptions::band_budget_bytes`]):
//! 1. the host gathers each input's band into a pixel-ordered stream of keys (Z, ZBack, input,
//!    sample index) and composited values, sorting a pixel first when the input is not known to
//!    be sorted (`sort.comp` on the GPU, or the host on a software rasteriser);
//! 2. upload counts and stream; GPU exclusive scan → offsets; per-group min counts (IA, BIA);
//!    scatter into the layout (LL by atomic counter + `atomicExchange` head insertion);
//! 3. k-way (`MergeStrategy::KWay`, the default, up to [`crate::vocab::MAX_KWAY_INPUTS`]
//!    inputs): the inputs' streams are stacked into one image (input k's pixel p at
//!    `k * kway_stride + p`) and `merge_kway.comp` merges all their lists per pixel in one
//!    dispatch; chain (`MergeStrategy::Chain`, and beyond that many inputs): merge input 0 with
//!    input 1, the result (resident, any layout) with input 2, and so on. The merged counts come
//!    from a GPU counting pass and scan. LL lists come out reversed, so chained merges alternate
//!    direction (`merger.rs::merge_directions`) and every list is read the way it was built;
//!    the last merge runs front to back. A band the driver cannot hold is merged again as
//!    bands of half the budget;
//! 4. flat: the last merge composites front to back with the reference's arithmetic and flags
//!    pixels where volumes overlap; deep: the merged keys are read back and every channel is
//!    copied bit-exactly from the original planes by the source reference;
//! 5. where volumes overlap: `tidy.comp` tidies and flattens the flagged pixels from the last
//!    merge's lists (flat), or writes the tidied deep image (count → scan → emit), with the
//!    pixels listed by stream compaction ([`compact`]) when asked (`--gpu-stages gpu`); by
//!    default the host does it with the `composite` functions instead, bit-identical to the
//!    CPU engine on every device ([`GlOptions::tidy_on_gpu`]).

pub(crate) mod buffer;
pub mod compact;
mod context;
mod fence;
pub mod gather;
mod hazard;
pub mod loop_cap;
pub mod mapped;
pub mod memory;
mod merge;
pub(crate) mod pool;
mod profile;
pub mod program;
pub mod reader_staging;
pub mod resident;
pub mod scan;
pub mod sort;
pub mod stages;
pub mod starting;
mod stats;
pub mod strict;
pub mod tidy;

pub use buffer::GpuBuffer;
pub use context::{GlContext, GlInfo};
pub use fence::FenceStats;
pub use mapped::{BufferStorage, TransferPath, TransferStats};
pub(crate) use merge::issue_gl_over;
pub use merge::{
    merge_checked_images_gl_over, merge_images_gl, merge_images_gl_over, uses_kway, GpuMerger,
    IssuedMerge, PAIRWISE_MEAN_SAMPLES,
};
pub use pool::PoolStats;
pub use profile::{copy_bandwidth, upload_bandwidth, GpuProfile, StageTime, STAGES};
pub use stages::stage_of_program;
pub use starting::StartingGl;
pub use stats::{BufferBytes, GpuStats};

pub use crate::vocab::{Layout, LongLists, MergeMethod, PixelOrder, RbmBlocks};

/// Every `DEEPMERGE_GL_*` setting checked as a GL context would read it: the first bad value
/// is an error naming its variable (`env_setting::check_settings`, the CLI's start).
pub fn check_env_settings() -> crate::Result<()> {
    mapped::EnvSettings::from_env().map(|_| ())
}

/// How the GL engine lays out and merges images.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GlOptions {
    /// Layout of every image on the GPU (inputs, intermediates, deep output).
    pub layout: Layout,
    /// Stepwise or register block merging.
    pub method: MergeMethod,
    /// Register block size for RBM and BIA, 1..=32.
    pub block_size: u32,
    /// Which pixel each layout index stands for.
    pub pixel_order: PixelOrder,
    /// Most bytes one merged buffer of a band may take (0: the GL limit
    /// GL_MAX_SHADER_STORAGE_BLOCK_SIZE). Smaller budgets force more bands.
    pub band_budget_bytes: u64,
    /// Where inputs that need sorting (`MergeOptions::sort`) are sorted: `None` and `Some(true)`
    /// on the GPU (`sort.comp`, after the gather, in the shape for the device:
    /// `sort::SortShape`), so the host never touches samples; `Some(false)` on the host, which
    /// then gathers those inputs itself (bit-identical either way: the sort is exact).
    pub sort_on_gpu: Option<bool>,
    /// Where pixels whose volume samples overlap are tidied (and flattened, for flat output;
    /// deep output with `tidy` too): `None` and `Some(false)` on the host (`composite`,
    /// bit-identical to the CPU engine, on every device); `Some(true)` on the GPU (`tidy.comp`,
    /// f32, within 1e-5 of the f64 reference, so not the CPU engine's bytes: on an H100 a
    /// default streamed merge with overlapping volumes wrote other bytes than the CPU engine
    /// while the GPU tidied by default on hardware).
    pub tidy_on_gpu: Option<bool>,
    /// How RBM holds its register blocks (`merge.comp`'s `RBM_SHIFT`).
    pub rbm_blocks: RbmBlocks,
    /// Who merges a pixel with a long list: its own invocation, or a workgroup
    /// (`merge_coop.comp`; pairwise merges only).
    pub long_lists: LongLists,
    /// Whether a band's GPU work is issued before the band before it is read back, so that the
    /// host stages one band while the GPU works on the other (two bands resident at once, each
    /// within half the GPU budget). `None`: on hardware, not on a software rasteriser, whose
    /// dispatches finish as they are issued so that nothing would overlap
    /// (`DEEPMERGE_GL_OVERLAP=0|1` sets the default, for measurements).
    pub overlap_bands: Option<bool>,
    /// Whether a k-way merge of two inputs with long lists (a mean of
    /// [`PAIRWISE_MEAN_SAMPLES`] or more per pixel and input) runs the pairwise kernel
    /// (`merge.comp`) instead of `merge_kway.comp`: the same bytes, and on an H100 1.6x
    /// (hairball) and 2.7x (powerplant) faster, where short lists (atrium) were 1.5x slower
    /// (docs/benchmarks.md, "Table 5 on hardware"). `None`: on hardware, not on a software
    /// rasteriser (where it was not measured). `DEEPMERGE_GL_PAIRWISE=0|1` sets the default, for
    /// measurements.
    pub pairwise_long_pairs: Option<bool>,
    /// How a merge writes a linearised or blocked interleaved deep output: straight (the
    /// default, the fastest on an H100), into an interleaved image relaid out after, or through
    /// shared memory (`resident::DeepWrites`). `DEEPMERGE_GL_DEEP_WRITES=direct|relayout|staged`
    /// overrides it, for measurements.
    pub deep_writes: resident::DeepWrites,
    /// What comes back of a deep output merged by its keys alone with nothing for the host to
    /// tidy: the runs of its packed sources (`source_runs.comp`, 8 or 12 bytes a run of samples
    /// taking consecutive values of one input), its packed sources (`sources.comp`, 4 or 8
    /// bytes a sample) or the image in its layout (16-byte keys, walked on the host). `None`:
    /// the device's default ([`Self::deep_readback_on`]). `DEEPMERGE_GL_DEEP_READBACK=
    /// runs|sources|image` overrides it, for measurements.
    pub deep_readback: Option<resident::DeepReadback>,
}

impl GlOptions {
    /// Whether bands overlap on `ctx`: [`Self::overlap_bands`] when set, else what
    /// `DEEPMERGE_GL_OVERLAP` (0 or 1) said when the context was made, else on hardware only.
    pub fn overlaps_bands(&self, ctx: &GlContext) -> bool {
        self.overlaps_bands_given(ctx.overlap_from_env(), ctx.info().software)
    }

    /// [`Self::overlaps_bands`] from what `DEEPMERGE_GL_OVERLAP` said (`from_env`) and whether
    /// the device is a software rasteriser: the one rule, for a context made or still starting
    /// (`starting.rs`).
    pub(crate) fn overlaps_bands_given(&self, from_env: Option<bool>, software: bool) -> bool {
        self.overlap_bands.or(from_env).unwrap_or(!software)
    }

    /// Whether a k-way merge of two inputs with long lists runs the pairwise kernel on `ctx`:
    /// [`Self::pairwise_long_pairs`] when set, else what `DEEPMERGE_GL_PAIRWISE` said when the
    /// context was made, else on hardware only.
    pub fn pairs_long_lists_pairwise(&self, ctx: &GlContext) -> bool {
        self.pairwise_long_pairs
            .or(ctx.pairwise_from_env())
            .unwrap_or(!ctx.info().software)
    }

    /// How a merge on `ctx` writes a linearised deep output: what `DEEPMERGE_GL_DEEP_WRITES`
    /// said when the context was made (for measurements), else [`Self::deep_writes`].
    pub fn deep_writes_on(&self, ctx: &GlContext) -> resident::DeepWrites {
        ctx.deep_writes_from_env().unwrap_or(self.deep_writes)
    }

    /// What a deep output's readback brings back on `ctx`: what `DEEPMERGE_GL_DEEP_READBACK`
    /// said when the context was made (for measurements), else [`Self::deep_readback`], else
    /// the runs on a GPU and the packed sources on a software rasteriser. Finding the runs is a
    /// mark, a scan and a scatter over every sample: a millisecond of a GPU's time for the
    /// 1080p powerplant pair's 51 M samples, where the host then copies 27 MiB out of mapped
    /// memory instead of 203 MiB and walks 2.5 M runs instead of 51 M samples; on llvmpipe
    /// those passes are the host's own cores, slower than the walk they save (a deep merge of
    /// that pair took 9.1 s against 7.2 s).
    pub fn deep_readback_on(&self, ctx: &GlContext) -> resident::DeepReadback {
        ctx.deep_readback_from_env()
            .or(self.deep_readback)
            .unwrap_or(if ctx.info().software {
                resident::DeepReadback::Sources
            } else {
                resident::DeepReadback::Runs
            })
    }

    /// Whether inputs that need sorting are sorted by `sort.comp` (unless the host is asked to).
    pub fn sorts_on_gpu(&self) -> bool {
        self.sort_on_gpu.unwrap_or(true)
    }

    /// Whether overlapping volumes are tidied by `tidy.comp`: only when asked
    /// ([`Self::tidy_on_gpu`]), since its f32 arithmetic is not the CPU engine's bytes.
    pub fn tidies_on_gpu(&self) -> bool {
        self.tidy_on_gpu.unwrap_or(false)
    }
}

impl Default for GlOptions {
    /// Chosen on an NVIDIA H100 (docs/benchmarks.md): LA was the fastest layout in 5 of the 8
    /// k-way rows of Table 5 and within 23% in the others; shifted register blocks were as fast
    /// as indexed ones or up to 1.6x faster (hairball, LA). Block size 8 was the only size
    /// measured there.
    fn default() -> Self {
        GlOptions {
            layout: Layout::Linearised,
            method: MergeMethod::RegisterBlock,
            block_size: 8,
            pixel_order: PixelOrder::RowMajor,
            band_budget_bytes: 0,
            sort_on_gpu: None,
            tidy_on_gpu: None,
            rbm_blocks: RbmBlocks::Shifted,
            // Not yet measured on hardware: one invocation per pixel, as before the choice.
            long_lists: LongLists::PerPixel,
            overlap_bands: None,
            pairwise_long_pairs: None,
            // Not yet measured on hardware: the writes as before.
            deep_writes: resident::DeepWrites::Direct,
            // The device's: runs on a GPU, packed sources on a software rasteriser (no walk of
            // the layout on the host either way; `deep_readback_on`).
            deep_readback: None,
        }
    }
}
