//! How a merge writes a deep output in an array layout ([`DeepWrites`]): a merge invocation
//! writes its own pixel's run of slots, so into a linearised image (and the tails of blocked
//! interleaved groups) neighbouring invocations write far apart and their stores do not
//! coalesce. Three ways are kept, since which is fastest is the hardware's to say
//! (docs/benchmarks.md, Table 2): straight into the layout (the default: on an H100 it was the
//! fastest in every layout on hairball, "fourth run"), into an interleaved image relaid out
//! after (`relayout.rs`), or through the workgroup's shared memory
//! (`glsl/include/out_staging.glsl`). All give the same bytes.

use crate::gpu::program::Defines;
use crate::gpu::GlContext;
use crate::vocab::Layout;

/// How a merge writes a linearised or blocked interleaved deep output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeepWrites {
    /// Straight into the layout: each invocation writes its pixel's run of slots.
    #[default]
    Direct,
    /// Into an interleaved image, then relaid out in slot order ([`relayout`]). (LL has no slot
    /// order; IA is what the merge writes anyway.)
    Relayout,
    /// Through shared memory (`glsl/include/out_staging.glsl`): a workgroup's pixels own one
    /// contiguous range of slots in every array layout, so where that range fits in
    /// `group_bytes` of shared memory the invocations store their lists there and the group
    /// copies the range out in slot order, with no second pass. Larger groups write directly.
    /// (LL has no slot ranges: it writes directly.)
    Staged {
        /// Shared memory a group of `GROUP_SIZE` pixels stages in (keys, and the values when
        /// they are written), within the driver's `GL_MAX_COMPUTE_SHARED_MEMORY_SIZE`.
        group_bytes: u32,
    },
}

impl DeepWrites {
    /// Every way, the default first; [`DeepWrites::Staged`] with [`Self::STAGED_GROUP_BYTES`].
    pub const ALL: [DeepWrites; 3] = [
        DeepWrites::Direct,
        DeepWrites::Relayout,
        DeepWrites::Staged {
            group_bytes: Self::STAGED_GROUP_BYTES,
        },
    ];

    /// The staged writes' shared memory per group unless told otherwise: 16 KiB, 1,024 keys
    /// for 32 pixels (a deep merge of the 1080p powerplant pair holds 25 samples a pixel).
    /// More stages more groups but leaves fewer groups resident on each multiprocessor: the
    /// hardware's to choose (`DEEPMERGE_GL_DEEP_WRITES=staged:8K`, docs/benchmarks.md).
    pub const STAGED_GROUP_BYTES: u32 = 16 << 10;

    /// The layout a merge into `layout` writes under this choice.
    pub fn written_layout(self, layout: Layout) -> Layout {
        match (self, layout) {
            (DeepWrites::Relayout, Layout::Linearised | Layout::BlockedInterleaved) => {
                Layout::Interleaved
            }
            _ => layout,
        }
    }

    /// How this choice is named (`DEEPMERGE_GL_DEEP_WRITES`, reports): `direct`, `relayout` or
    /// `staged:<bytes>`.
    pub fn name(self) -> String {
        match self {
            DeepWrites::Direct => "direct".into(),
            DeepWrites::Relayout => "relayout".into(),
            DeepWrites::Staged { group_bytes } => format!("staged:{group_bytes}"),
        }
    }

    /// What a merge writing `layout` does under this choice: `Direct` where the choice changes
    /// nothing (staged LL, which has no slot ranges; relayout of LL or IA, written as they are).
    pub fn effective(self, layout: Layout) -> DeepWrites {
        match (self, layout) {
            (DeepWrites::Staged { .. }, Layout::LinkedList)
            | (DeepWrites::Relayout, Layout::LinkedList | Layout::Interleaved) => {
                DeepWrites::Direct
            }
            _ => self,
        }
    }

    /// The samples a group stages in a merge writing `layout` on `ctx`, with `stride` values a
    /// sample when `with_values` (`None`: it writes directly). The shared memory is bounded by
    /// what the driver offers, less a word for the group's flag.
    pub fn staged_samples(
        self,
        ctx: &GlContext,
        layout: Layout,
        stride: usize,
        with_values: bool,
    ) -> Option<u32> {
        let DeepWrites::Staged { group_bytes } = self else {
            return None;
        };
        if layout == Layout::LinkedList {
            return None;
        }
        let limit = ctx.info().max_shared_memory_bytes.saturating_sub(16);
        let per_sample = 16 + if with_values { 4 * stride as u32 } else { 0 };
        let samples = group_bytes.min(limit) / per_sample;
        (samples > 0).then_some(samples)
    }

    /// The defines of a merge writing a deep image in `deep_layout` this way on `ctx`
    /// (`OUT_STAGED`, `STAGE_SAMPLES`); none for a flat composite (`None`).
    pub(crate) fn defines(
        self,
        defines: Defines,
        ctx: &GlContext,
        deep_layout: Option<Layout>,
        stride: usize,
        with_values: bool,
    ) -> Defines {
        match deep_layout.and_then(|layout| self.staged_samples(ctx, layout, stride, with_values)) {
            Some(samples) => defines.set("OUT_STAGED", 1).set("STAGE_SAMPLES", samples),
            None => defines,
        }
    }
}
