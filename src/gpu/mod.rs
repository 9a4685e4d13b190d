//! The OpenGL compute engine: a headless context ([`GlContext`]), stages in `glsl/` loaded with
//! `#define`s ([`program`]), the GPU scan ([`scan`]), layout builds and pairwise merges
//! ([`engine`]) and the whole-image merge in row bands ([`merge_images_gl`], [`GpuMerger`]).
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
//!    pixels listed by stream compaction ([`compact`]); on a software rasteriser the host does
//!    it with the `composite` functions instead (faster there, and bit-identical to the CPU
//!    engine; [`GlOptions::tidy_on_gpu`]).

mod buffer;
pub mod compact;
mod context;
mod merge;
mod profile;
pub mod program;
pub mod resident;
pub mod scan;
pub mod sort;
mod stats;
pub mod tidy;

pub use buffer::GpuBuffer;
pub use context::{GlContext, GlInfo};
pub use merge::{merge_images_gl, merge_images_gl_over, uses_kway, GpuMerger};
pub use profile::{copy_bandwidth, stage_of_program, GpuProfile, StageTime, STAGES};
pub use stats::{BufferBytes, GpuStats};

pub use crate::vocab::{Layout, MergeMethod, PixelOrder};

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
    /// Where inputs that need sorting (`MergeOptions::sort`) are sorted: `None` picks the GPU
    /// stage (`sort.comp`) on hardware and the host on a software rasteriser, where the host is
    /// about ten times faster (measured on llvmpipe); `Some(true)` forces the GPU stage.
    pub sort_on_gpu: Option<bool>,
    /// Where pixels whose volume samples overlap are tidied (and flattened, for flat output;
    /// deep output with `tidy` too): `None` picks the GPU stages (`tidy.comp`, f32, within 1e-5
    /// of the f64 reference) on hardware and the host (`composite`, bit-identical to the CPU
    /// engine) on a software rasteriser, where the host is faster (measured on llvmpipe);
    /// `Some(true)` forces the GPU stages, `Some(false)` the host.
    pub tidy_on_gpu: Option<bool>,
    /// How RBM holds its register blocks (`merge.comp`'s `RBM_SHIFT`).
    pub rbm_blocks: RbmBlocks,
    /// Who merges a pixel with a long list: its own invocation, or a workgroup
    /// (`merge_coop.comp`; pairwise merges only).
    pub long_lists: LongLists,
}

/// How a register-block merge indexes its blocks: both give the same output bit for bit; which
/// is faster depends on the compiler (see docs/benchmarks.md for the hardware measurement).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RbmBlocks {
    /// `block[pos]` with a moving position: a dynamic index (about 2x faster than shifting on
    /// llvmpipe; up to 1.6x slower on an H100).
    Indexed,
    /// The head is always `block[0]` and the block shifts down after every emit: constant
    /// indices only, so a GPU compiler can keep the blocks in registers.
    Shifted,
}

impl RbmBlocks {
    /// Both, in the order benches print them.
    pub const ALL: [RbmBlocks; 2] = [RbmBlocks::Indexed, RbmBlocks::Shifted];

    /// The CLI's name.
    pub fn name(self) -> &'static str {
        match self {
            RbmBlocks::Indexed => "indexed",
            RbmBlocks::Shifted => "shifted",
        }
    }
}

impl std::str::FromStr for RbmBlocks {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        RbmBlocks::ALL
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| format!("unknown register-block indexing '{s}' (indexed or shifted)"))
    }
}

/// Who merges a pixel's lists in a pairwise merge: both give the same output bit for bit; which
/// is faster depends on the device and on how long the lists are (docs/benchmarks.md names the
/// hardware measurement that decides the default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LongLists {
    /// One invocation per pixel, whatever its length (`merge.comp` alone).
    PerPixel,
    /// Pixels whose two lists hold more than `threshold` fragments together are merged by a
    /// workgroup each (`merge_coop.comp`), the others by their own invocation; 0 sends every
    /// pixel with a fragment to the workgroups.
    Cooperative {
        /// Most fragments a pixel may hold and still be merged by one invocation.
        threshold: u32,
    },
}

impl LongLists {
    /// The threshold `cooperative` alone stands for: eight register blocks of the default size.
    pub const DEFAULT_THRESHOLD: u32 = 64;

    /// The CLI's spelling: `per-pixel` or `cooperative=N`.
    pub fn name(self) -> String {
        match self {
            LongLists::PerPixel => "per-pixel".into(),
            LongLists::Cooperative { threshold } => format!("cooperative={threshold}"),
        }
    }
}

impl std::str::FromStr for LongLists {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let threshold = match s.split_once('=') {
            None if s == "per-pixel" => return Ok(LongLists::PerPixel),
            None if s == "cooperative" => LongLists::DEFAULT_THRESHOLD,
            Some(("cooperative", n)) => n.parse::<u32>().map_err(|_| {
                format!(
                    "'{n}' is not a fragment count (cooperative=N, N from 0 to {})",
                    u32::MAX
                )
            })?,
            _ => {
                return Err(format!(
                    "unknown long-list merging '{s}' (per-pixel, cooperative or cooperative=N)"
                ))
            }
        };
        Ok(LongLists::Cooperative { threshold })
    }
}

impl GlOptions {
    /// Whether inputs that need sorting are sorted by `sort.comp` on this device
    /// ([`stage_on_gpu`]).
    pub fn sorts_on_gpu(&self, info: &GlInfo) -> bool {
        stage_on_gpu(self.sort_on_gpu, info)
    }

    /// Whether overlapping volumes are tidied by `tidy.comp` on this device
    /// ([`stage_on_gpu`]).
    pub fn tidies_on_gpu(&self, info: &GlInfo) -> bool {
        stage_on_gpu(self.tidy_on_gpu, info)
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
        }
    }
}

/// Whether a GL stage with placement `requested` (`Some(true)`: GPU, `Some(false)`: host,
/// `None`: choose) runs on the GPU of the device described by `info`.
pub fn stage_on_gpu(requested: Option<bool>, info: &GlInfo) -> bool {
    requested.unwrap_or(!info.software)
}
