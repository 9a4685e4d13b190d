//! The GPU stages on resident buffers: build an image in a layout from a pixel-ordered stream
//! (upload → scan → min counts → scatter) and merge two images into a third or into a flat
//! composite, pairwise (`merge.comp`) or all inputs of a stacked image in one pass
//! (`merge_kway.comp`, [`GpuStack`]). The host-side orchestration (bands, inputs, readback)
//! lives in `merge/`.

use glow::HasContext;

use super::buffer::GpuBuffer;
use super::program::Defines;
use super::scan::exclusive_scan_buffer;
use super::stats::BufferBytes;
use super::GlContext;
use crate::error::{Error, Result};
pub use crate::vocab::kway_stride;
use crate::vocab::{BuiltImage, Fragment, Layout, MergeMethod, GROUP_SIZE, MAX_KWAY_INPUTS};

/// What the flat composite needs to know about the composited columns (from
/// `composite::CompositeChannels`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnSpec {
    /// Per column, the column of its alpha, or `None` for alpha columns.
    pub alpha_of: Vec<Option<usize>>,
}

impl ColumnSpec {
    /// Values stored per fragment slot (at least 1: GLSL has no empty arrays).
    pub fn stride(&self) -> usize {
        self.alpha_of.len().max(1)
    }

    /// Add the column table to `defines` (`NUM_COLUMNS`, `ALPHA_OF_LIST`, `ALPHAS_LIST`, ...), as
    /// every stage that composites reads it.
    pub fn defines(&self, defines: Defines) -> Defines {
        let mut alpha_of: Vec<String> = self
            .alpha_of
            .iter()
            .map(|a| a.map_or("-1".to_string(), |a| a.to_string()))
            .collect();
        if alpha_of.is_empty() {
            alpha_of.push("-1".into());
        }
        let alphas: Vec<String> = self
            .alpha_of
            .iter()
            .enumerate()
            .filter(|(_, a)| a.is_none())
            .map(|(k, _)| k.to_string())
            .collect();
        let count = alphas.len();
        defines
            .set("NUM_COLUMNS", self.stride())
            .set("ALPHA_OF_LIST", alpha_of.join(","))
            .set("NUM_ALPHAS", count)
            .set("NUM_ALPHAS_ALLOC", count.max(1))
            .set(
                "ALPHAS_LIST",
                if count == 0 {
                    "0".to_string()
                } else {
                    alphas.join(",")
                },
            )
    }
}

/// One deep image resident on the GPU in a layout.
pub struct GpuImage<'a> {
    /// The layout.
    pub layout: Layout,
    /// BIA block size (also what RBM merges it with).
    pub block_size: u32,
    /// For LL: lists run front to back. Arrays are stored ascending.
    pub ascending: bool,
    /// Pixels.
    pub pixels: usize,
    /// Fragments.
    pub samples: usize,
    /// Values per slot.
    pub stride: usize,
    /// Fragment keys, one per slot (LL: node 0 unused).
    pub keys: GpuBuffer<'a>,
    /// `stride` values per slot.
    pub values: GpuBuffer<'a>,
    /// Exclusive scan of the counts (`pixels + 1`).
    pub offsets: GpuBuffer<'a>,
    /// IA/BIA: per-group min counts; LL: heads.
    pub aux1: GpuBuffer<'a>,
    /// LL: next pointers, with the node counter in entry 0.
    pub aux2: GpuBuffer<'a>,
}

impl<'a> GpuImage<'a> {
    /// Bytes of each buffer, as `--stats` reports them.
    pub fn bytes(&self) -> BufferBytes {
        BufferBytes {
            keys: self.keys.bytes as u64,
            values: self.values.bytes as u64,
            offsets: self.offsets.bytes as u64,
            min_counts_or_heads: if self.layout == Layout::Linearised {
                0
            } else {
                self.aux1.bytes as u64
            },
            next: if self.layout == Layout::LinkedList {
                self.aux2.bytes as u64
            } else {
                0
            },
        }
    }

    fn bind(&self, first: u32) {
        self.keys.bind(first);
        self.values.bind(first + 1);
        self.offsets.bind(first + 2);
        self.aux1.bind(first + 3);
        self.aux2.bind(first + 4);
    }

    /// Read the whole image back into its CPU twin's form (values only when `with_values`).
    pub fn read_back(&self, with_values: bool) -> BuiltImage {
        let slots = self.samples + usize::from(self.layout == Layout::LinkedList);
        let groups = self.pixels.div_ceil(GROUP_SIZE as usize);
        BuiltImage {
            layout: self.layout,
            block_size: self.block_size,
            columns: self.stride,
            offsets: self.offsets.read(self.pixels + 1),
            min_counts: match self.layout {
                Layout::Interleaved | Layout::BlockedInterleaved => self.aux1.read(groups),
                _ => Vec::new(),
            },
            head: if self.layout == Layout::LinkedList {
                self.aux1.read(self.pixels)
            } else {
                Vec::new()
            },
            next: if self.layout == Layout::LinkedList {
                self.aux2.read(slots)
            } else {
                Vec::new()
            },
            slots: self.keys.read(slots),
            values: if with_values {
                self.values.read(slots * self.stride)
            } else {
                Vec::new()
            },
            ascending: self.ascending,
        }
    }
}

pub(crate) fn layout_defines(
    defines: Defines,
    name: &str,
    layout: Layout,
    binding: u32,
    access: &str,
) -> Defines {
    let mut defines = defines
        .set(&format!("{name}_LAYOUT"), layout.glsl_id())
        .set(&format!("{name}_ACCESS"), access);
    for k in 0..5 {
        defines = defines.set(&format!("{name}_BINDING_{k}"), binding + k);
    }
    defines
}

/// The BLOCK_SIZE a stage on `layout` is specialised with: only BIA depends on it, so the
/// others share one program (compiling on llvmpipe is slow enough to matter).
fn block_for(layout: Layout, block_size: u32) -> u32 {
    if layout == Layout::BlockedInterleaved {
        block_size
    } else {
        1
    }
}

fn base_defines(block_size: u32) -> Defines {
    Defines::default()
        .set("GROUP_SIZE", GROUP_SIZE)
        .set("BLOCK_SIZE", block_size)
}

/// Allocate the buffers of an image with `offsets` already computed (`samples` in all).
#[allow(clippy::too_many_arguments)]
fn allocate<'a>(
    ctx: &'a GlContext,
    layout: Layout,
    block_size: u32,
    ascending: bool,
    pixels: usize,
    samples: usize,
    stride: usize,
    offsets: GpuBuffer<'a>,
) -> Result<GpuImage<'a>> {
    let slots = samples + usize::from(layout == Layout::LinkedList);
    let keys = ctx.zeroed(slots * std::mem::size_of::<Fragment>())?;
    let values = ctx.zeroed(slots * stride * 4)?;
    let (aux1, aux2) = match layout {
        Layout::LinkedList => {
            let next = ctx.zeroed(slots * 4)?;
            // The node counter starts at 1 (node 0 is the null node): set on the GPU.
            ctx.set_u32_one(&next, 0)?;
            (ctx.zeroed(pixels * 4)?, next)
        }
        Layout::Linearised => (ctx.zeroed(4)?, ctx.zeroed(4)?),
        Layout::Interleaved | Layout::BlockedInterleaved => {
            let groups = pixels.div_ceil(GROUP_SIZE as usize);
            let min_counts = ctx.zeroed(groups * 4)?;
            let program = ctx.use_stage(
                "min_counts.comp",
                &base_defines(block_for(layout, block_size)).set("LAYOUT", layout.glsl_id()),
            )?;
            ctx.uniform_u32(program, "u_pixels", pixels as u32);
            offsets.bind(0);
            min_counts.bind(1);
            ctx.set_dispatch_bytes((offsets.bytes + min_counts.bytes) as u64);
            ctx.dispatch(groups, 64)?;
            (min_counts, ctx.zeroed(4)?)
        }
    };
    Ok(GpuImage {
        layout,
        block_size,
        ascending: layout != Layout::LinkedList || ascending,
        pixels,
        samples,
        stride,
        keys,
        values,
        offsets,
        aux1,
        aux2,
    })
}

/// Build `layout` from per-pixel `counts` and the stream (`keys` pixel after pixel, `values`
/// `stride` per key): upload, GPU scan, min counts, scatter. `ascending` picks an LL list's
/// direction.
#[allow(clippy::too_many_arguments)]
pub fn build_image<'a>(
    ctx: &'a GlContext,
    layout: Layout,
    block_size: u32,
    ascending: bool,
    counts: &[u32],
    keys: &[Fragment],
    values: &[f32],
    stride: usize,
    sort_pixels: bool,
) -> Result<GpuImage<'a>> {
    let pixels = counts.len();
    let samples = keys.len();
    if values.len() != samples * stride {
        return Err(Error::internal("stream values do not match its keys"));
    }
    ctx.check_fits((samples + 1) * 16.max(stride * 4), "a deep image")?;
    let upload = |data: &[u8]| ctx.upload(data);
    let count_buffer = upload(bytemuck::cast_slice(counts))?;
    let offsets = exclusive_scan_buffer(ctx, &count_buffer, pixels)?;
    drop(count_buffer);
    let image = allocate(
        ctx, layout, block_size, ascending, pixels, samples, stride, offsets,
    )?;
    let stream_keys = upload(bytemuck::cast_slice(keys))?;
    let stream_values = upload(bytemuck::cast_slice(values))?;
    if sort_pixels {
        // The stream is linearised by the scanned counts: sort each pixel's run in place,
        // values along, before it is scattered into the layout.
        super::sort::sort_pixels(
            ctx,
            &image.offsets,
            &stream_keys,
            pixels,
            samples,
            Some(super::sort::SortValues {
                values: &stream_values,
                columns: stride,
            }),
        )?;
    }
    let defines = layout_defines(
        base_defines(block_for(layout, block_size)),
        "OUT",
        layout,
        0,
        "",
    )
    .set("NUM_COLUMNS", stride)
    .set("LL_ASCENDING", u32::from(ascending));
    let program = ctx.use_stage("build.comp", &defines)?;
    // The image binds its own buffers from 0 on.
    image.bind(0);
    // Reads the stream and the offsets, writes every slot's key and values.
    ctx.set_dispatch_bytes(
        2 * (stream_keys.bytes + stream_values.bytes) as u64 + image.offsets.bytes as u64,
    );
    ctx.run_per_pixel(program, pixels, &[(10, &stream_keys), (11, &stream_values)])?;
    Ok(image)
}

/// How one merge runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MergeSpec {
    /// Stepwise or register blocks.
    pub method: MergeMethod,
    /// Register block size (and BIA block).
    pub block_size: u32,
    /// Walk the lists back to front (see `glsl/merge.comp`).
    pub descending: bool,
    /// How RBM indexes its blocks (ignored by stepwise).
    pub rbm_blocks: super::RbmBlocks,
}

impl MergeSpec {
    pub(crate) fn defines(
        &self,
        a: &GpuImage,
        b: &GpuImage,
        out: Option<Layout>,
    ) -> Result<Defines> {
        for (name, image) in [("A", a), ("B", b)] {
            if image.layout == Layout::LinkedList && image.ascending == self.descending {
                return Err(Error::internal(format!(
                    "list {name} runs the other way from the merge"
                )));
            }
        }
        // A stepwise merge touching no BIA image does not depend on the block size.
        let uses_block = self.method == MergeMethod::RegisterBlock
            || a.layout == Layout::BlockedInterleaved
            || b.layout == Layout::BlockedInterleaved
            || out == Some(Layout::BlockedInterleaved);
        let d = base_defines(if uses_block { self.block_size } else { 1 })
            .set(
                "MERGE_METHOD",
                u32::from(self.method == MergeMethod::RegisterBlock),
            )
            .set("MERGE_DESC", u32::from(self.descending))
            .set(
                "RBM_SHIFT",
                u32::from(
                    self.method == MergeMethod::RegisterBlock
                        && self.rbm_blocks == super::RbmBlocks::Shifted,
                ),
            );
        let d = layout_defines(d, "A", a.layout, 0, "readonly");
        Ok(layout_defines(d, "B", b.layout, 5, "readonly"))
    }
}

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
/// `long`, pixels with long lists are listed there for `merge_coop.comp` instead of merged.
fn use_merge_stage(
    ctx: &GlContext,
    a: &GpuImage,
    b: &GpuImage,
    spec: MergeSpec,
    columns: &ColumnSpec,
    deep_layout: Option<Layout>,
    long: Option<&Listing>,
) -> Result<glow::Program> {
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
    let program = use_merge_stage(ctx, &a, &b, spec, columns, deep.then_some(layout), None)?;
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
    merge_deep_listing(ctx, a, b, layout, spec, columns, None)
}

/// [`merge_deep`], listing the long pixels for the cooperative merge when `long` says where
/// (`merge/coop.rs::merge_deep_scheduled` runs that merge next).
pub(crate) fn merge_deep_listing<'a>(
    ctx: &'a GlContext,
    a: &GpuImage<'a>,
    b: &GpuImage<'a>,
    layout: Layout,
    spec: MergeSpec,
    columns: &ColumnSpec,
    long: Option<&Listing>,
) -> Result<GpuImage<'a>> {
    let pixels = a.pixels;
    let samples = a.samples + b.samples;
    ctx.check_fits((samples + 1) * 16.max(a.stride * 4), "a merged deep image")?;
    // Counting pass and scan for the output's offsets.
    let counts = ctx.zeroed(pixels * 4)?;
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
    )?;
    use_merge_stage(ctx, a, b, spec, columns, Some(layout), long)?;
    out.bind(10);
    ctx.set_dispatch_bytes(a.bytes().total() + b.bytes().total() + out.bytes().total());
    ctx.dispatch(pixels, GROUP_SIZE as usize)?;
    Ok(out)
}

/// A flat composite resident on the GPU.
pub struct GpuFlat<'a> {
    /// `stride` values per pixel.
    pub values: GpuBuffer<'a>,
    /// Per pixel (input, index, Z bits, flags): 1 = has a front sample, 2 = needs tidying.
    pub front: GpuBuffer<'a>,
    /// Pixels.
    pub pixels: usize,
    /// One u32: how many pixels are flagged 2 (needs tidying).
    pub flagged: GpuBuffer<'a>,
}

impl GpuFlat<'_> {
    /// Bytes of the composite's values and front records.
    pub fn bytes(&self) -> u64 {
        (self.values.bytes + self.front.bytes) as u64
    }
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
    use_merge_stage(ctx, a, b, spec, columns, None, long)?;
    flat.values.bind(10);
    flat.front.bind(11);
    flat.flagged.bind(12);
    ctx.set_dispatch_bytes(a.bytes().total() + b.bytes().total() + flat.bytes());
    ctx.dispatch(pixels, GROUP_SIZE as usize)?;
    Ok(flat)
}

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
) -> Result<()> {
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
    let program = ctx.use_stage("merge_kway.comp", &defines)?;
    stack.set_uniforms(ctx, program);
    stack.image.bind(0);
    Ok(())
}

/// Merge every input of `stack` in one pass (`merge_kway.comp`) into a new deep image of the
/// band in `layout` (BIA blocks of `block_size`); same lists as the pairwise chain.
pub fn merge_deep_kway<'a>(
    ctx: &'a GlContext,
    stack: &GpuStack<'a>,
    layout: Layout,
    block_size: u32,
    columns: &ColumnSpec,
) -> Result<GpuImage<'a>> {
    let pixels = stack.pixels;
    let samples = stack.image.samples;
    ctx.check_fits(
        (samples + 1) * 16.max(stack.image.stride * 4),
        "a merged deep image",
    )?;
    let counts = ctx.zeroed(pixels * 4)?;
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
    )?;
    use_kway_stage(ctx, stack, block_size, columns, Some(layout))?;
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
    use_kway_stage(ctx, stack, block_size, columns, None)?;
    flat.values.bind(10);
    flat.front.bind(11);
    flat.flagged.bind(12);
    ctx.set_dispatch_bytes(stack.image.bytes().total() + flat.bytes());
    ctx.dispatch(pixels, GROUP_SIZE as usize)?;
    Ok(flat)
}
