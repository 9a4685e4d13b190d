//! The sources of a merged deep image, packed in pixel order for the readback
//! (`sources.comp`, twin `cpu::sources::pack_sources`): a deep output merged by its keys alone
//! with nothing for the host to tidy needs of each sample only (input, index), so one or two
//! words a sample come back ([`SourcePacking`]) instead of the image's 16-byte keys in its
//! layout (and a linked list's links), and the host copies them in order instead of walking
//! the layout sample by sample.

use super::{base_defines, layout_defines, GpuImage};
use crate::error::Result;
use crate::gpu::buffer::GpuBuffer;
use crate::gpu::GlContext;
use crate::vocab::{SourcePacking, GROUP_SIZE};

/// What the readback of a deep output merged by its keys alone brings back, when the host
/// tidies nothing (`GlOptions::deep_readback`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeepReadback {
    /// The packed sources ([`pack_sources`]).
    #[default]
    Sources,
    /// The image in its layout, keys and all.
    Image,
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
    let index_bits = match packing {
        SourcePacking::OneWord { index_bits } => index_bits,
        SourcePacking::TwoWords => 32,
    };
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
