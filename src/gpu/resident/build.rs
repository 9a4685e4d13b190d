//! Building an image in a layout on the GPU from a pixel-ordered stream (`build.comp`, twin
//! `cpu::build::build`): upload, scan, min counts, scatter.

use super::*;

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
        crate::gpu::sort::sort_pixels(
            ctx,
            &image.offsets,
            &stream_keys,
            pixels,
            samples,
            Some(crate::gpu::sort::SortValues {
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
