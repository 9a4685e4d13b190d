//! The sources of a merged deep image, packed in pixel order for the readback
//! (`sources.comp`, twin `cpu::sources::pack_sources`): a deep output merged by its keys alone
//! with nothing for the host to tidy needs of each sample only (input, index), so one or two
//! words a sample come back ([`SourcePacking`]) instead of the image's 16-byte keys in its
//! layout (and a linked list's links), and the host copies them in order instead of walking
//! the layout sample by sample.

use super::{base_defines, layout_defines, GpuImage};
use crate::error::Result;
use crate::gpu::buffer::GpuBuffer;
use crate::gpu::program::Defines;
use crate::gpu::scan::exclusive_scan_buffer;
use crate::gpu::GlContext;
use crate::vocab::{SourcePacking, GROUP_SIZE};

/// What the readback of a deep output merged by its keys alone brings back, when the host
/// tidies nothing (`GlOptions::deep_readback`; the device's default where it says nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeepReadback {
    /// The packed sources ([`pack_sources`]).
    Sources,
    /// The image in its layout, keys and all.
    Image,
    /// The runs of the packed sources ([`source_runs`]): a record for each run of samples
    /// taking consecutive values of one input, 8 or 12 bytes a run (about 20 samples a run on
    /// the 1080p powerplant pair), where the GPU's pixel order is the window's; the packed
    /// sources elsewhere.
    Runs,
}

/// `image`'s packed sources (sample i of pixel p at position `offsets[p] + i`), and one word
/// counting its inconsistencies: pixels whose list or group minimum disagrees with their count,
/// positions whose address falls outside the image.
pub fn pack_sources<'a>(
    ctx: &'a GlContext,
    image: &GpuImage<'a>,
    packing: SourcePacking,
) -> Result<(GpuBuffer<'a>, GpuBuffer<'a>)> {
    let words = packing.words();
    // Every position below the sample count is written (or its pixel counted in `bad`).
    let sources = ctx.scratch((image.samples * words * 4).max(16))?;
    let bad = ctx.zeroed(4)?;
    let index_bits = packing.index_bits();
    let defines = layout_defines(
        base_defines(image.block_size),
        "IN",
        image.layout,
        0,
        "readonly",
    )
    .set("SOURCE_WORDS", words)
    .set("INDEX_BITS", index_bits)
    .set("LIST_ASCENDING", u32::from(image.ascending));
    let program = ctx.use_stage("sources.comp", &defines)?;
    ctx.uniform_u32(program, "u_pixels", image.pixels as u32);
    ctx.uniform_u32(program, "u_samples", image.samples as u32);
    image.bind(0);
    sources.bind(10);
    bad.bind(11);
    ctx.set_dispatch_bytes((image.keys.bytes + sources.bytes) as u64);
    if image.layout.links_lists() {
        ctx.dispatch(image.pixels, GROUP_SIZE as usize)?;
    } else {
        // Every position, and every pixel's group minimum (empty pixels too).
        ctx.dispatch(image.samples.max(image.pixels), GROUP_SIZE as usize)?;
    }
    Ok((sources, bad))
}

/// The runs of a merged deep image's packed sources, resident ([`source_runs`]).
pub struct GpuSourceRuns<'a> {
    /// One record a run, in position order: its first position, then its first sample's source
    /// as packed ([`SourcePacking::run_words`] words). Room for a run at every position, since
    /// how many there are is known only on the GPU.
    pub records: GpuBuffer<'a>,
    /// The exclusive scan of the runs' starts, `samples + 1` u32: at `samples`, how many runs.
    pub rank: GpuBuffer<'a>,
    /// Positions in the sources.
    pub samples: usize,
}

/// The runs of `sources` (`samples` positions packed as `packing` by [`pack_sources`]): a run is
/// positions whose samples take consecutive values of one input (`source_runs.comp`, twin
/// `cpu::sources::source_runs`). The starts are marked, ranked by the GPU scan and scattered.
pub fn source_runs<'a>(
    ctx: &'a GlContext,
    sources: &GpuBuffer<'a>,
    samples: usize,
    packing: SourcePacking,
) -> Result<GpuSourceRuns<'a>> {
    let starts = ctx.scratch((samples * 4).max(16))?;
    let stage = |stage: u32| {
        let defines = Defines::default()
            .set("GROUP_SIZE", GROUP_SIZE)
            .set("STAGE", stage)
            .set("SOURCE_WORDS", packing.words())
            .set("INDEX_BITS", packing.index_bits())
            .set("RUN_WORDS", packing.run_words());
        let program = ctx.use_stage("source_runs.comp", &defines)?;
        ctx.uniform_u32(program, "u_samples", samples as u32);
        Ok::<_, crate::error::Error>(program)
    };
    if samples > 0 {
        stage(0)?;
        sources.bind(0);
        starts.bind(1);
        ctx.set_dispatch_bytes((samples * (packing.words() + 1) * 4) as u64);
        ctx.dispatch(samples, GROUP_SIZE as usize)?;
    }
    let rank = exclusive_scan_buffer(ctx, &starts, samples)?;
    let records = ctx.scratch((samples * packing.run_words() * 4).max(16))?;
    if samples > 0 {
        stage(1)?;
        sources.bind(0);
        starts.bind(1);
        rank.bind(2);
        records.bind(3);
        ctx.set_dispatch_bytes((samples * 3 * 4) as u64);
        ctx.dispatch(samples, GROUP_SIZE as usize)?;
    }
    Ok(GpuSourceRuns {
        records,
        rank,
        samples,
    })
}
