//! K-way merges (`merge_kway.comp`, twin `cpu::merge::merge_kway_built`): every input of a
//! stacked image merged per pixel in one pass.

use super::*;

/// `inputs` images of `pixels` pixels each, stacked into one image for `merge_kway.comp`: input
/// k's pixel p is the stacked image's pixel `k * kway_stride(pixels) + p` (the pixels past
/// `pixels` are empty). Built like any image ([`build_image`], LL lists ascending), so every
/// layout and the GPU sort serve it unchanged.
pub struct GpuStack<'a> {
    /// The stacked image.
    pub image: GpuImage<'a>,
    /// Inputs stacked, 1..=[`MAX_KWAY_INPUTS`].
    pub inputs: usize,
    /// Pixels of each input (the band).
    pub pixels: usize,
}

impl<'a> GpuStack<'a> {
    /// Wrap `image`, built from the per-input streams laid end to end, each padded to
    /// [`kway_stride`] pixels.
    pub fn new(image: GpuImage<'a>, inputs: usize, pixels: usize) -> Result<Self> {
        if !(1..=MAX_KWAY_INPUTS).contains(&inputs) {
            return Err(Error::internal(format!(
                "a k-way merge takes 1 to {MAX_KWAY_INPUTS} inputs, not {inputs}"
            )));
        }
        if image.pixels != inputs * kway_stride(pixels) {
            return Err(Error::internal("a stacked image has the wrong pixel count"));
        }
        if image.layout == Layout::LinkedList && !image.ascending {
            return Err(Error::internal(
                "a k-way merge reads LL lists front to back",
            ));
        }
        Ok(GpuStack {
            image,
            inputs,
            pixels,
        })
    }

    /// The defines of `merge_kway.comp` and `count_kway.comp` for this stack.
    fn defines(&self, block_size: u32, out: Option<Layout>) -> Defines {
        let uses_block = self.image.layout == Layout::BlockedInterleaved
            || out == Some(Layout::BlockedInterleaved);
        let d =
            base_defines(if uses_block { block_size } else { 1 }).set("NUM_INPUTS", self.inputs);
        layout_defines(d, "IN", self.image.layout, 0, "readonly")
    }

    fn set_uniforms(&self, ctx: &GlContext, program: glow::Program) {
        ctx.uniform_u32(program, "u_pixels", self.pixels as u32);
        ctx.uniform_u32(program, "u_stride", kway_stride(self.pixels) as u32);
        ctx.uniform_u32(program, "u_in_pixels", self.image.pixels as u32);
    }
}

/// Make `merge_kway.comp` current for `stack` into a deep image in `deep_layout` or (`None`) a
/// flat composite, and bind the stack; the caller binds the output.
fn use_kway_stage(
    ctx: &GlContext,
    stack: &GpuStack,
    block_size: u32,
    columns: &ColumnSpec,
    deep_layout: Option<Layout>,
    out_values: bool,
    writes: DeepWrites,
) -> Result<()> {
    check_input_values(&[&stack.image], deep_layout, out_values)?;
    let out_layout = deep_layout.unwrap_or(Layout::Linearised);
    let defines = columns
        .defines(layout_defines(
            stack.defines(block_size, deep_layout),
            "OUT",
            out_layout,
            10,
            "",
        ))
        .set("OUTPUT_DEEP", u32::from(deep_layout.is_some()));
    let defines = writes.defines(defines, ctx, deep_layout, columns.stride(), out_values);
    let program = ctx.use_stage("merge_kway.comp", &keys_only(defines, out_values))?;
    stack.set_uniforms(ctx, program);
    stack.image.bind(0);
    Ok(())
}

/// Merge every input of `stack` in one pass (`merge_kway.comp`) into a new deep image of the
/// band in `layout` (BIA blocks of `block_size`), written as `writes` says (`Relayout` is the
/// caller's: this writes `layout` itself); same lists as the pairwise chain. With
/// `with_values` false only the keys are written ([`GpuImage::with_values`]).
pub fn merge_deep_kway<'a>(
    ctx: &'a GlContext,
    stack: &GpuStack<'a>,
    layout: Layout,
    block_size: u32,
    columns: &ColumnSpec,
    with_values: bool,
    writes: DeepWrites,
) -> Result<GpuImage<'a>> {
    let pixels = stack.pixels;
    let samples = stack.image.samples;
    ctx.check_fits(
        (samples + 1) * 16.max(stack.image.stride * 4),
        "a merged deep image",
    )?;
    // count_kway.comp writes every pixel's count.
    let counts = ctx.scratch((pixels * 4).max(16))?;
    let program = ctx.use_stage("count_kway.comp", &stack.defines(1, None))?;
    stack.set_uniforms(ctx, program);
    stack.image.offsets.bind(0);
    counts.bind(1);
    ctx.set_dispatch_bytes((stack.image.offsets.bytes + counts.bytes) as u64);
    ctx.dispatch(pixels, GROUP_SIZE as usize)?;
    let offsets = exclusive_scan_buffer(ctx, &counts, pixels)?;
    drop(counts);
    // An ascending merge head-inserted into LL gives a descending list.
    let out = allocate(
        ctx,
        layout,
        block_size,
        false,
        pixels,
        samples,
        stack.image.stride,
        offsets,
        with_values,
    )?;
    use_kway_stage(
        ctx,
        stack,
        block_size,
        columns,
        Some(layout),
        with_values,
        writes,
    )?;
    out.bind(10);
    ctx.set_dispatch_bytes(stack.image.bytes().total() + out.bytes().total());
    ctx.dispatch(pixels, GROUP_SIZE as usize)?;
    Ok(out)
}

/// Merge every input of `stack` in one pass and composite front to back (`merge_kway.comp`):
/// bit for bit what the pairwise chain's last merge writes.
pub fn merge_flat_kway<'a>(
    ctx: &'a GlContext,
    stack: &GpuStack<'a>,
    block_size: u32,
    columns: &ColumnSpec,
) -> Result<GpuFlat<'a>> {
    let pixels = stack.pixels;
    let flat = GpuFlat {
        values: ctx.zeroed(pixels * columns.stride() * 4)?,
        front: ctx.zeroed(pixels * 16)?,
        pixels,
        flagged: ctx.zeroed(16)?,
    };
    use_kway_stage(
        ctx,
        stack,
        block_size,
        columns,
        None,
        true,
        DeepWrites::Direct,
    )?;
    flat.values.bind(10);
    flat.front.bind(11);
    flat.flagged.bind(12);
    ctx.set_dispatch_bytes(stack.image.bytes().total() + flat.bytes());
    ctx.dispatch(pixels, GROUP_SIZE as usize)?;
    Ok(flat)
}
