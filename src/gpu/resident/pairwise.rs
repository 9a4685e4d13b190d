//! Pairwise merges (`merge.comp`, twin `cpu::merge::merge_built`): two resident images into a
//! third in any layout or into a flat composite; the cooperative schedule of long lists
//! (`merge/coop.rs`) runs on top of these.

use super::*;

/// Where `merge.comp` lists the pixels whose lists hold more than `threshold` fragments, leaving
/// them to the cooperative merge (`merge/coop.rs`, which owns the buffer and runs that merge
/// after this one): bound at 15, the count first.
pub(crate) struct Listing<'r> {
    /// The list (and the cooperative merge's scratch).
    pub buffer: &'r GpuBuffer<'r>,
    /// Pixels of more fragments than this are listed.
    pub threshold: u32,
}

/// Make `merge.comp` current for merging `a` with `b` into a deep image in `deep_layout`, or
/// (`None`) into a flat composite, and bind the two inputs; the caller binds the output. With
/// `long`, pixels with long lists are listed there for `merge_coop.comp` instead of merged. A
/// deep output is written as `writes` says.
#[allow(clippy::too_many_arguments)]
fn use_merge_stage(
    ctx: &GlContext,
    a: &GpuImage,
    b: &GpuImage,
    spec: MergeSpec,
    columns: &ColumnSpec,
    deep_layout: Option<Layout>,
    out_values: bool,
    long: Option<&Listing>,
    writes: DeepWrites,
) -> Result<glow::Program> {
    check_input_values(&[a, b], deep_layout, out_values)?;
    let out_layout = deep_layout.unwrap_or(Layout::Linearised);
    let defines = columns
        .defines(layout_defines(
            spec.defines(a, b, deep_layout)?,
            "OUT",
            out_layout,
            10,
            "",
        ))
        .set("OUTPUT_DEEP", u32::from(deep_layout.is_some()))
        .set("LONG_LISTS", u32::from(long.is_some()));
    let defines = writes.defines(defines, ctx, deep_layout, columns.stride(), out_values);
    let defines = keys_only(defines, out_values);
    let program = ctx.use_stage("merge.comp", &defines)?;
    ctx.uniform_u32(program, "u_pixels", a.pixels as u32);
    a.bind(0);
    b.bind(5);
    if let Some(long) = long {
        ctx.uniform_u32(program, "u_long_threshold", long.threshold);
        long.buffer.bind(15);
    }
    Ok(program)
}

/// The compiled `merge.comp` for two inputs in `layout` merged by `spec` into a deep image in
/// the same layout (`deep`) or a flat composite of `columns`, as the driver's program binary
/// (`glGetProgramBinary`): on NVIDIA it holds the generated assembly, where local-memory arrays
/// (`lmem`) show whether the register blocks stayed in registers.
pub fn merge_program_binary(
    ctx: &GlContext,
    layout: Layout,
    spec: MergeSpec,
    columns: &ColumnSpec,
    deep: bool,
) -> Result<Vec<u8>> {
    let ascending = !spec.descending;
    let empty = |ctx| {
        build_image(
            ctx,
            layout,
            spec.block_size,
            ascending,
            &[0],
            &[],
            &[],
            columns.stride(),
            false,
        )
    };
    let (a, b) = (empty(ctx)?, empty(ctx)?);
    let program = use_merge_stage(
        ctx,
        &a,
        &b,
        spec,
        columns,
        deep.then_some(layout),
        true,
        None,
        DeepWrites::Direct,
    )?;
    // SAFETY: a query of a program made on this context.
    unsafe { ctx.gl.get_program_binary(program) }
        .map(|binary| binary.buffer)
        .ok_or_else(|| Error::Gl("the driver gave no program binary".into()))
}

/// Merge `a` (earlier inputs) with `b` into a new deep image in `layout`.
pub fn merge_deep<'a>(
    ctx: &'a GlContext,
    a: &GpuImage<'a>,
    b: &GpuImage<'a>,
    layout: Layout,
    spec: MergeSpec,
    columns: &ColumnSpec,
) -> Result<GpuImage<'a>> {
    merge_deep_written(ctx, a, b, layout, spec, columns, true, DeepWrites::Direct)
}

/// [`merge_deep`], with the values written or the keys alone (`with_values`,
/// [`GpuImage::with_values`]), written into `layout` as `writes` says (`Relayout` is the
/// caller's: this writes `layout` itself).
#[allow(clippy::too_many_arguments)]
pub fn merge_deep_written<'a>(
    ctx: &'a GlContext,
    a: &GpuImage<'a>,
    b: &GpuImage<'a>,
    layout: Layout,
    spec: MergeSpec,
    columns: &ColumnSpec,
    with_values: bool,
    writes: DeepWrites,
) -> Result<GpuImage<'a>> {
    merge_deep_listing(ctx, a, b, layout, spec, columns, with_values, None, writes)
}

/// [`merge_deep_written`], with the values written or the keys alone (`with_values`,
/// [`GpuImage::with_values`]), listing the long pixels for the cooperative merge when `long`
/// says where (`merge/coop.rs::merge_deep_scheduled` runs that merge next).
#[allow(clippy::too_many_arguments)]
pub(crate) fn merge_deep_listing<'a>(
    ctx: &'a GlContext,
    a: &GpuImage<'a>,
    b: &GpuImage<'a>,
    layout: Layout,
    spec: MergeSpec,
    columns: &ColumnSpec,
    with_values: bool,
    long: Option<&Listing>,
    writes: DeepWrites,
) -> Result<GpuImage<'a>> {
    let pixels = a.pixels;
    let samples = a.samples + b.samples;
    ctx.check_fits((samples + 1) * 16.max(a.stride * 4), "a merged deep image")?;
    // Counting pass and scan for the output's offsets.
    // count.comp writes every pixel's count.
    let counts = ctx.scratch((pixels * 4).max(16))?;
    let program = ctx.use_stage("count.comp", &base_defines(1))?;
    ctx.uniform_u32(program, "u_pixels", pixels as u32);
    a.offsets.bind(0);
    b.offsets.bind(1);
    counts.bind(2);
    ctx.set_dispatch_bytes((a.offsets.bytes + b.offsets.bytes + counts.bytes) as u64);
    ctx.dispatch(pixels, GROUP_SIZE as usize)?;
    let offsets = exclusive_scan_buffer(ctx, &counts, pixels)?;
    drop(counts);
    // A descending merge head-inserted into LL gives an ascending list, and vice versa.
    let out = allocate(
        ctx,
        layout,
        spec.block_size,
        spec.descending,
        pixels,
        samples,
        a.stride,
        offsets,
        with_values,
    )?;
    use_merge_stage(
        ctx,
        a,
        b,
        spec,
        columns,
        Some(layout),
        with_values,
        long,
        writes,
    )?;
    out.bind(10);
    ctx.set_dispatch_bytes(a.bytes().total() + b.bytes().total() + out.bytes().total());
    ctx.dispatch(pixels, GROUP_SIZE as usize)?;
    Ok(out)
}

/// Merge `a` with `b` and composite front to back (the merge must run ascending).
pub fn merge_flat<'a>(
    ctx: &'a GlContext,
    a: &GpuImage<'a>,
    b: &GpuImage<'a>,
    spec: MergeSpec,
    columns: &ColumnSpec,
) -> Result<GpuFlat<'a>> {
    merge_flat_listing(ctx, a, b, spec, columns, None)
}

/// [`merge_flat`], listing the long pixels for the cooperative merge when `long` says where
/// (`merge/coop.rs::merge_flat_scheduled` runs that merge next).
pub(crate) fn merge_flat_listing<'a>(
    ctx: &'a GlContext,
    a: &GpuImage<'a>,
    b: &GpuImage<'a>,
    spec: MergeSpec,
    columns: &ColumnSpec,
    long: Option<&Listing>,
) -> Result<GpuFlat<'a>> {
    if spec.descending {
        return Err(Error::internal("a flat composite must merge front to back"));
    }
    let pixels = a.pixels;
    let flat = GpuFlat {
        values: ctx.zeroed(pixels * columns.stride() * 4)?,
        front: ctx.zeroed(pixels * 16)?,
        pixels,
        flagged: ctx.zeroed(16)?,
    };
    use_merge_stage(
        ctx,
        a,
        b,
        spec,
        columns,
        None,
        true,
        long,
        DeepWrites::Direct,
    )?;
    flat.values.bind(10);
    flat.front.bind(11);
    flat.flagged.bind(12);
    ctx.set_dispatch_bytes(a.bytes().total() + b.bytes().total() + flat.bytes());
    ctx.dispatch(pixels, GROUP_SIZE as usize)?;
    Ok(flat)
}
