//! Building an image in a layout on the GPU from a pixel-ordered stream (`build.comp`, twin
//! `cpu::build::build`): from a stream on the GPU (the gather's, [`build_from_stream`]) or
//! uploaded from the host ([`build_image`]): scan, min counts, optional per-pixel sort, scatter.
//! A linearised image is the sorted stream itself, so it skips the scatter.

use super::*;
use crate::gpu::sort::{SortShape, SortSizes};

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
    let stream = upload_stream(ctx, counts, keys, values, stride)?;
    build_from_stream(ctx, layout, block_size, ascending, stream, sort_pixels)
}

/// Upload a pixel-ordered stream made on the host (per-pixel `counts`, `keys` pixel after pixel,
/// `stride` values per key) and scan its counts on the GPU.
pub fn upload_stream<'a>(
    ctx: &'a GlContext,
    counts: &[u32],
    keys: &[Fragment],
    values: &[f32],
    stride: usize,
) -> Result<Stream<'a>> {
    let pixels = counts.len();
    let samples = keys.len();
    if values.len() != samples * stride {
        return Err(Error::internal("stream values do not match its keys"));
    }
    ctx.check_fits((samples + 1) * 16.max(stride * 4), "a deep image")?;
    let sort_sizes = SortSizes::of_lengths(counts.iter().copied(), SortShape::for_device(ctx));
    let count_buffer = ctx.upload(counts)?;
    let offsets = exclusive_scan_buffer(ctx, &count_buffer, pixels)?;
    drop(count_buffer);
    Ok(Stream {
        offsets,
        keys: ctx.upload(keys)?,
        values: ctx.upload(values)?,
        pixels,
        samples,
        stride,
        sort_sizes: Some(sort_sizes),
        with_values: true,
    })
}

/// A pixel-ordered stream on the GPU: the scanned counts (`pixels + 1` offsets), the fragment
/// keys and `stride` values per key, as the gather (`gpu::gather`) or an upload leaves them.
pub struct Stream<'a> {
    /// Exclusive scan of the per-pixel counts (`pixels + 1` entries).
    pub offsets: GpuBuffer<'a>,
    /// Fragment keys, pixel after pixel.
    pub keys: GpuBuffer<'a>,
    /// `stride` values per key.
    pub values: GpuBuffer<'a>,
    /// Layout pixels.
    pub pixels: usize,
    /// Samples (keys).
    pub samples: usize,
    /// Values per key.
    pub stride: usize,
    /// The lists' sizes for the per-pixel sort, where the host knows them (so that it need not
    /// wait for the GPU to count them: `gpu::sort`).
    pub sort_sizes: Option<SortSizes>,
    /// False when only the keys were gathered (`values` holds nothing): the image built from
    /// it has no values either ([`GpuImage::with_values`]).
    pub with_values: bool,
}

/// Build `layout` from a stream already on the GPU: min counts, an optional per-pixel sort
/// (`sort_pixels`: each pixel's run sorted in place, stably, values along), scatter.
pub fn build_from_stream<'a>(
    ctx: &'a GlContext,
    layout: Layout,
    block_size: u32,
    ascending: bool,
    stream: Stream<'a>,
    sort_pixels: bool,
) -> Result<GpuImage<'a>> {
    let Stream {
        offsets,
        keys: stream_keys,
        values: stream_values,
        pixels,
        samples,
        stride,
        sort_sizes,
        with_values,
    } = stream;
    ctx.check_fits((samples + 1) * 16.max(stride * 4), "a deep image")?;
    if layout == Layout::Linearised {
        // A linearised image is the stream itself (slot = offset + index): sorted in place, it
        // is taken as it is, with no scatter and no second copy of the samples.
        if sort_pixels {
            crate::gpu::sort::sort_pixels(
                ctx,
                &offsets,
                &stream_keys,
                pixels,
                samples,
                with_values.then_some(crate::gpu::sort::SortValues {
                    values: &stream_values,
                    columns: stride,
                }),
                sort_sizes,
            )?;
        }
        return Ok(GpuImage {
            layout,
            block_size,
            ascending: true,
            pixels,
            samples,
            stride,
            keys: stream_keys,
            values: stream_values,
            offsets,
            aux1: ctx.zeroed(4)?,
            aux2: ctx.zeroed(4)?,
            with_values,
        });
    }
    let image = allocate(
        ctx,
        layout,
        block_size,
        ascending,
        pixels,
        samples,
        stride,
        offsets,
        with_values,
    )?;
    if sort_pixels {
        // The stream is linearised by the scanned counts: sort each pixel's run in place,
        // values along, before it is scattered into the layout.
        crate::gpu::sort::sort_pixels(
            ctx,
            &image.offsets,
            &stream_keys,
            pixels,
            samples,
            with_values.then_some(crate::gpu::sort::SortValues {
                values: &stream_values,
                columns: stride,
            }),
            sort_sizes,
        )?;
    }
    let defines = layout_defines(base_defines(layout.block(block_size)), "OUT", layout, 0, "")
        .set("NUM_COLUMNS", stride)
        .set("LL_ASCENDING", u32::from(ascending));
    let program = ctx.use_stage("build.comp", &keys_only(defines, with_values))?;
    // The image binds its own buffers from 0 on.
    image.bind(0);
    // Reads the stream and the offsets, writes every slot's key and values.
    ctx.set_dispatch_bytes(
        2 * (stream_keys.bytes + stream_values.bytes) as u64 + image.offsets.bytes as u64,
    );
    ctx.run_per_pixel(program, pixels, &[(10, &stream_keys), (11, &stream_values)])?;
    Ok(image)
}
