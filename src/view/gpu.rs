//! The viewer's GPU side, on the window's own context: each layer's arrays in storage buffers,
//! the slice pass (`glsl/view/slice.comp`: re-flatten only what lies between the near and far
//! planes, through `over.glsl`) and the image pass (`glsl/view/view_image.frag`: camera, view and
//! display transform; the id view also reads the band's samples and ids, to find the sample
//! whose depth the slice found in front). Both programs come from the engine's loader ([`GlContext::program`] and
//! [`resolve`]), with the same `#define`s the merge stages get.

use glow::HasContext;

use super::display;
use super::load::Layer;
use crate::composite::{CompositeChannels, CompositeKind};
use crate::error::{Error, Result};
use crate::gpu::program::{resolve, Defines};
use crate::gpu::resident::ColumnSpec;
use crate::gpu::GlContext;

/// Invocations per work group of the slice pass.
const SLICE_GROUP: usize = 64;

/// The `#define`s of a layer's column table (`over.glsl` reads them).
fn column_defines(columns: &CompositeChannels) -> Defines {
    let spec = ColumnSpec {
        alpha_of: columns
            .kinds
            .iter()
            .map(|k| match *k {
                CompositeKind::Alpha => None,
                CompositeKind::Colour { alpha } => Some(alpha),
            })
            .collect(),
    };
    spec.defines(Defines::default())
}

/// A storage buffer holding `data` (at least 16 bytes: GL refuses empty storage blocks).
unsafe fn upload<T: bytemuck::Pod>(gl: &glow::Context, data: &[T]) -> Result<glow::Buffer> {
    let bytes: &[u8] = bytemuck::cast_slice(data);
    let buffer = gl
        .create_buffer()
        .map_err(|e| Error::Gl(format!("cannot create a buffer: {e}")))?;
    gl.bind_buffer(glow::SHADER_STORAGE_BUFFER, Some(buffer));
    if bytes.len() >= 16 {
        gl.buffer_data_u8_slice(glow::SHADER_STORAGE_BUFFER, bytes, glow::STATIC_DRAW);
    } else {
        let mut padded = bytes.to_vec();
        padded.resize(16, 0);
        gl.buffer_data_u8_slice(glow::SHADER_STORAGE_BUFFER, &padded, glow::STATIC_DRAW);
    }
    if gl.get_error() == glow::OUT_OF_MEMORY {
        gl.delete_buffer(buffer);
        return Err(Error::GlMemory(format!(
            "out of GPU memory uploading {} bytes",
            bytes.len()
        )));
    }
    Ok(buffer)
}

/// A storage buffer of `bytes` (at least 16) that a shader fills before anything reads it: the
/// GL engine's allocation, so both say the same when GPU memory runs out.
unsafe fn scratch(gl: &glow::Context, bytes: usize) -> Result<glow::Buffer> {
    crate::gpu::buffer::allocate_raw(gl, bytes.max(16), false)
}

/// The rows of a layer's data window that one set of storage buffers holds: a band. Every
/// buffer of a band fits one storage block, so a layer of any size is sliced band by band.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayerBand {
    /// First row (0: the data window's top row).
    pub row0: usize,
    /// Rows held.
    pub rows: usize,
    /// First sample of the band in the layer's arrays.
    pub sample0: usize,
    /// Samples held.
    pub samples: usize,
}

impl LayerBand {
    /// Bytes of the band's five buffers (offsets, depths, values, sliced image, ids) for a data
    /// window `width` pixels wide, `stride` values and `id_stride` ids per sample, each at
    /// least 16.
    pub fn buffer_bytes(&self, width: usize, stride: usize, id_stride: usize) -> [u64; 5] {
        let pixels = (self.rows * width) as u64;
        let samples = self.samples as u64;
        [
            (pixels + 1) * 4,
            samples * 8,
            samples * stride as u64 * 4,
            pixels * (stride as u64 + 2) * 4,
            samples * id_stride as u64 * 4,
        ]
        .map(|b| b.max(16))
    }
}

/// What the buffers of [`LayerBand::buffer_bytes`] hold, for messages.
const BUFFER_NAMES: [&str; 5] = ["offsets", "depths", "values", "sliced image", "ids"];

/// Cut `layer` into bands of whole rows, as tall as `block_limit` allows for every one of a
/// band's buffers. A single row that does not fit is an [`Error::GlMemory`].
pub fn plan_bands(layer: &Layer, block_limit: u64) -> Result<Vec<LayerBand>> {
    let width = layer.data_window.width();
    let height = layer.data_window.height();
    let stride = layer.stride();
    let id_stride = layer.id_stride();
    let row_start = |row: usize| layer.offsets[row * width] as usize;
    let band = |row0: usize, rows: usize| LayerBand {
        row0,
        rows,
        sample0: row_start(row0),
        samples: row_start(row0 + rows) - row_start(row0),
    };
    let fits = |b: &LayerBand| {
        b.buffer_bytes(width, stride, id_stride)
            .iter()
            .all(|&n| n <= block_limit)
    };
    let mut bands = Vec::new();
    let mut row0 = 0;
    while row0 < height {
        let first = band(row0, 1);
        if !fits(&first) {
            let bytes = first.buffer_bytes(width, stride, id_stride);
            let worst = (0..bytes.len()).max_by_key(|&k| bytes[k]).unwrap_or(0);
            return Err(Error::GlMemory(format!(
                "row {} of the {} layer needs {} bytes for its {} in one buffer, more than the storage-block limit ({block_limit})",
                layer.data_window.y0 as i64 + row0 as i64,
                layer.name,
                bytes[worst],
                BUFFER_NAMES[worst]
            )));
        }
        // The tallest band from `row0` that fits: rows only add bytes, so a binary search.
        let (mut lo, mut hi) = (1, height - row0);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if fits(&band(row0, mid)) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        bands.push(band(row0, lo));
        row0 += lo;
    }
    if bands.is_empty() {
        bands.push(band(0, 0));
    }
    Ok(bands)
}

/// The bands of `layer` on `ctx`: planned for the driver's storage-block limit, and planned
/// again with half the limit while the context refuses one of the buffers
/// ([`GlContext::check_fits`]: a driver that binds less than it claims), down to single rows.
pub fn plan_layer(ctx: &GlContext, layer: &Layer) -> Result<LayerPlan> {
    let width = layer.data_window.width();
    let stride = layer.stride();
    let id_stride = layer.id_stride();
    let mut limit = ctx.info().max_ssbo_bytes;
    loop {
        let bands = plan_bands(layer, limit)?;
        let refused = bands.iter().find_map(|b| {
            b.buffer_bytes(width, stride, id_stride)
                .iter()
                .zip(BUFFER_NAMES)
                .find_map(|(&bytes, name)| {
                    ctx.check_fits(
                        bytes as usize,
                        &format!("the {} layer's {name}", layer.name),
                    )
                    .err()
                })
        });
        match refused {
            None => {
                let bytes = bands
                    .iter()
                    .flat_map(|b| b.buffer_bytes(width, stride, id_stride))
                    .sum();
                return Ok(LayerPlan { bands, bytes });
            }
            Some(Error::GlMemory(why)) => {
                limit /= 2;
                if plan_bands(layer, limit).is_err() {
                    return Err(Error::GlMemory(format!(
                        "{why}; bands of single rows do not fit either"
                    )));
                }
            }
            Some(other) => return Err(other),
        }
    }
}

/// How a layer is held on the GPU: its bands and the bytes of all their buffers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerPlan {
    /// Top to bottom.
    pub bands: Vec<LayerBand>,
    /// Bytes of every buffer of every band.
    pub bytes: u64,
}

/// One band resident on the GPU.
struct GpuBand {
    band: LayerBand,
    offsets: glow::Buffer,
    depths: glow::Buffer,
    values: glow::Buffer,
    /// Per pixel: the composited columns, the front depth (NaN: none) and the count inside.
    sliced: glow::Buffer,
    /// Per sample, the layer's ids ([`Layer::id_stride`] each; 16 unused bytes without ids).
    ids: glow::Buffer,
}

impl GpuBand {
    /// The buffers in binding order: the slice pass binds the first four, the image pass all.
    fn buffers(&self) -> [glow::Buffer; 5] {
        [
            self.offsets,
            self.depths,
            self.values,
            self.sliced,
            self.ids,
        ]
    }
}

/// One layer resident on the GPU in bands, with the output of its last slice.
pub struct GpuLayer {
    bands: Vec<GpuBand>,
    /// The data window's width and first row (absolute).
    width: usize,
    y0: i32,
    stride: usize,
    id_stride: usize,
    bytes: u64,
    slice_program: glow::Program,
    image_program: glow::Program,
}

impl GpuLayer {
    /// Move `layer`'s arrays to the GPU in the bands [`plan_layer`] chose and build its
    /// programs. The host arrays are let go as their bands are uploaded, last band first, so
    /// each array shrinks in place (`realloc` to a smaller size does not copy) and a layer is
    /// never held twice: on a software rasteriser the GPU's buffers are host memory too. On
    /// success the layer's arrays are empty ([`Layer::release_samples`]); after a failure they
    /// are partly gone, and the layer is not shown.
    pub fn upload(ctx: &GlContext, layer: &mut Layer, plan: &LayerPlan) -> Result<GpuLayer> {
        let gl = &ctx.gl;
        let columns = column_defines(&layer.columns);
        let slice_program = ctx.program(
            "slice.comp",
            &columns.clone().set("GROUP_SIZE_VIEW", SLICE_GROUP),
        )?;
        let mut image_defines = columns;
        for (name, value) in display::shader_defines() {
            image_defines = image_defines.set(name, value);
        }
        let image_program = image_program(ctx, &image_defines)?;
        let width = layer.data_window.width();
        let stride = layer.stride();
        let id_stride = layer.id_stride();
        let mut made = GpuLayer {
            bands: Vec::with_capacity(plan.bands.len()),
            width,
            y0: layer.data_window.y0,
            stride,
            id_stride,
            bytes: plan.bytes,
            slice_program,
            image_program,
        };
        for &band in plan.bands.iter().rev() {
            let p0 = band.row0 * width;
            let p1 = p0 + band.rows * width;
            // Offsets from the band's first sample, so each band's arrays start at 0.
            let offsets: Vec<u32> = layer.offsets[p0..=p1]
                .iter()
                .map(|&o| o - band.sample0 as u32)
                .collect();
            let s = band.sample0..band.sample0 + band.samples;
            let values = &layer.values[s.start * stride..s.end * stride];
            let ids = &layer.ids[s.start * id_stride..s.end * id_stride];
            let sliced_bytes = band.buffer_bytes(width, stride, id_stride)[3] as usize;
            // SAFETY: buffer creation and upload on the current context; a buffer made before
            // a failure is owned by `made`, whose `delete` frees it.
            unsafe {
                let offsets = upload(gl, &offsets)?;
                let depths = upload(gl, &layer.depths[s.clone()]).inspect_err(|_| {
                    gl.delete_buffer(offsets);
                    made.delete(ctx);
                })?;
                let values = upload(gl, values).inspect_err(|_| {
                    gl.delete_buffer(offsets);
                    gl.delete_buffer(depths);
                    made.delete(ctx);
                })?;
                let sliced = scratch(gl, sliced_bytes).inspect_err(|_| {
                    for b in [offsets, depths, values] {
                        gl.delete_buffer(b);
                    }
                    made.delete(ctx);
                })?;
                let ids = upload(gl, ids).inspect_err(|_| {
                    for b in [offsets, depths, values, sliced] {
                        gl.delete_buffer(b);
                    }
                    made.delete(ctx);
                })?;
                made.bands.push(GpuBand {
                    band,
                    offsets,
                    depths,
                    values,
                    sliced,
                    ids,
                });
            }
            layer.offsets.truncate(p0 + 1);
            layer.offsets.shrink_to_fit();
            layer.depths.truncate(band.sample0);
            layer.depths.shrink_to_fit();
            layer.values.truncate(band.sample0 * stride);
            layer.values.shrink_to_fit();
            layer.ids.truncate(band.sample0 * id_stride);
            layer.ids.shrink_to_fit();
        }
        made.bands.reverse();
        layer.release_samples();
        if let Err(e) = ctx.check("uploading a layer") {
            made.delete(ctx);
            return Err(e);
        }
        Ok(made)
    }

    /// Bands held.
    pub fn bands(&self) -> usize {
        self.bands.len()
    }

    /// Bytes of all the layer's buffers on the GPU.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Re-flatten every pixel with only what lies in [near, far], band by band.
    pub fn slice(&self, ctx: &GlContext, near: f32, far: f32) -> Result<()> {
        let gl = &ctx.gl;
        ctx.use_program("slice.comp", self.slice_program);
        // SAFETY: the program belongs to this context and is in use.
        unsafe {
            let set = |name: &str, v: f32| {
                let at = gl.get_uniform_location(self.slice_program, name);
                gl.uniform_1_f32(at.as_ref(), v);
            };
            set("u_near", near);
            set("u_far", far);
        }
        for band in &self.bands {
            let pixels = band.band.rows * self.width;
            for (binding, buffer) in band.buffers().into_iter().take(4).enumerate() {
                ctx.bind_storage_buffer(binding as u32, buffer);
            }
            ctx.uniform_u32(self.slice_program, "u_pixels", pixels as u32);
            ctx.dispatch(pixels, SLICE_GROUP)?;
        }
        Ok(())
    }

    /// What the last slice wrote, for every pixel of the data window in row-major order: the
    /// composited columns, the front depth (NaN: none) and the count inside, `stride + 2`
    /// floats per pixel (the tests compare it with [`Layer::slice_pixel`]).
    pub fn read_sliced(&self, ctx: &GlContext) -> Result<Vec<f32>> {
        let gl = &ctx.gl;
        let per_pixel = self.stride + 2;
        let mut out = Vec::new();
        for band in &self.bands {
            let mut floats = vec![0f32; band.band.rows * self.width * per_pixel];
            // SAFETY: the buffer belongs to this context and holds at least this many bytes.
            unsafe {
                gl.memory_barrier(glow::BUFFER_UPDATE_BARRIER_BIT);
                gl.bind_buffer(glow::SHADER_STORAGE_BUFFER, Some(band.sliced));
                gl.get_buffer_sub_data(
                    glow::SHADER_STORAGE_BUFFER,
                    0,
                    bytemuck::cast_slice_mut(&mut floats),
                );
            }
            out.extend_from_slice(&floats);
        }
        ctx.check("reading the sliced image back")?;
        Ok(out)
    }

    /// Draw the last slice over the image area, band by band: each band draws the window
    /// pixels whose image row it holds (the first band also those above the data window, the
    /// last those below), so every window pixel is drawn once.
    pub fn draw(&self, ctx: &GlContext, vao: glow::VertexArray, params: &DrawParams) -> Result<()> {
        let gl = &ctx.gl;
        let p = self.image_program;
        let (window_w, window_h) = (params.window.0 as i32, params.window.1 as i32);
        // SAFETY: the program, buffers and vertex array belong to this context.
        unsafe {
            gl.enable(glow::SCISSOR_TEST);
            gl.disable(glow::BLEND);
            gl.disable(glow::FRAMEBUFFER_SRGB);
            gl.viewport(0, 0, window_w, window_h);
            gl.use_program(Some(p));
            let at = |name: &str| gl.get_uniform_location(p, name);
            gl.uniform_2_f32(
                at("u_origin").as_ref(),
                params.origin[0] as f32,
                params.origin[1] as f32,
            );
            gl.uniform_1_f32(at("u_zoom").as_ref(), params.zoom as f32);
            gl.uniform_1_f32(at("u_height").as_ref(), params.window.1 as f32);
            let d = params.display_window;
            gl.uniform_2_i32(at("u_display0").as_ref(), d[0], d[1]);
            gl.uniform_4_i32(at("u_display").as_ref(), d[0], d[1], d[2], d[3]);
            gl.uniform_1_i32(at("u_view").as_ref(), params.view);
            let c = params.rgba;
            gl.uniform_4_i32(at("u_rgba").as_ref(), c[0], c[1], c[2], c[3]);
            gl.uniform_1_i32(at("u_channel").as_ref(), params.channel);
            gl.uniform_1_f32(at("u_gain").as_ref(), params.exposure.exp2());
            gl.uniform_2_f32(
                at("u_depth_range").as_ref(),
                params.depth_range.0,
                params.depth_range.1,
            );
            gl.uniform_2_f32(at("u_slice").as_ref(), params.slice.0, params.slice.1);
            gl.uniform_1_i32(at("u_id_channel").as_ref(), params.id_channel);
            gl.uniform_1_i32(at("u_id_stride").as_ref(), self.id_stride as i32);
            let pin = params.pinned.unwrap_or((i32::MIN, i32::MIN));
            gl.uniform_2_i32(at("u_pinned").as_ref(), pin.0, pin.1);
            gl.uniform_1_i32(
                at("u_pin_shown").as_ref(),
                i32::from(params.pinned.is_some()),
            );
            gl.bind_vertex_array(Some(vao));
            let w = params.data_window;
            let last = self.bands.len().saturating_sub(1);
            for (i, band) in self.bands.iter().enumerate() {
                let y0 = self.y0 + band.band.row0 as i32;
                let y1 = y0 + band.band.rows as i32 - 1;
                let rows = (
                    if i == 0 { i32::MIN } else { y0 },
                    if i == last { i32::MAX } else { y1 },
                );
                // Only the window rows this band can own (one row of slack each side; the
                // shader decides exactly), and only the image area: on a software rasteriser
                // every fragment costs.
                let window_row =
                    |image_row: i32| params.origin[1] + (image_row - d[1]) as f64 * params.zoom;
                let top = if i == 0 {
                    0
                } else {
                    (window_row(y0).floor() as i64 - 1).clamp(0, window_h as i64) as i32
                };
                let bottom = if i == last {
                    window_h
                } else {
                    (window_row(y1 + 1).ceil() as i64 + 1).clamp(0, window_h as i64) as i32
                };
                if bottom <= top {
                    continue;
                }
                gl.scissor(
                    0,
                    window_h - bottom,
                    params.image_width as i32,
                    bottom - top,
                );
                gl.uniform_4_i32(at("u_data").as_ref(), w[0], y0, w[2], y1);
                gl.uniform_2_i32(at("u_rows").as_ref(), rows.0, rows.1);
                for (binding, buffer) in band.buffers().into_iter().enumerate() {
                    gl.bind_buffer_base(glow::SHADER_STORAGE_BUFFER, binding as u32, Some(buffer));
                }
                gl.draw_arrays(glow::TRIANGLES, 0, 3);
            }
            gl.disable(glow::SCISSOR_TEST);
        }
        ctx.check("drawing the image")
    }

    /// Free the buffers (the programs stay cached in the context).
    pub fn delete(&self, ctx: &GlContext) {
        // SAFETY: the buffers belong to this context and are not used after this.
        unsafe {
            for band in &self.bands {
                for b in band.buffers() {
                    ctx.gl.delete_buffer(b);
                }
            }
        }
    }
}

/// What the image pass needs to know besides the layer.
#[derive(Clone, Debug)]
pub struct DrawParams {
    /// Window size in pixels.
    pub window: (u32, u32),
    /// Width of the image area (the window less the panel), from the left edge.
    pub image_width: u32,
    /// Camera origin (window pixels) and zoom.
    pub origin: [f64; 2],
    /// Window pixels per image pixel.
    pub zoom: f64,
    /// Display window x0, y0, x1, y1.
    pub display_window: [i32; 4],
    /// Data window x0, y0, x1, y1.
    pub data_window: [i32; 4],
    /// Which view (`VIEW_*` in the shader).
    pub view: i32,
    /// Columns of R, G, B, A (-1 where absent).
    pub rgba: [i32; 4],
    /// The column the channel view shows.
    pub channel: i32,
    /// The id channel the id view shows (an index into [`Layer::id_names`]; -1 otherwise).
    pub id_channel: i32,
    /// The slice's near and far planes (the id view finds the slice's front sample again).
    pub slice: (f32, f32),
    /// Exposure in stops.
    pub exposure: f32,
    /// Depths the depth view spans.
    pub depth_range: (f32, f32),
    /// The pinned pixel, outlined.
    pub pinned: Option<(i32, i32)>,
}

/// The image pass's program.
fn image_program(ctx: &GlContext, defines: &Defines) -> Result<glow::Program> {
    draw_program(ctx, "view_image.vert", "view_image.frag", defines)
}

/// A drawing program of the vertex stage `vertex_file` and the fragment stage `fragment_file`
/// (the latter specialised with `defines`), built with the engine's resolver and cached in the
/// context as its compute programs are.
pub(super) fn draw_program(
    ctx: &GlContext,
    vertex_file: &str,
    fragment_file: &str,
    defines: &Defines,
) -> Result<glow::Program> {
    let key = format!("{vertex_file}|{fragment_file}|{:?}", defines.0);
    if let Some(p) = ctx.programs.borrow().get(&key) {
        return Ok(*p);
    }
    let gl = &ctx.gl;
    let (vertex, _) = resolve(vertex_file, &Defines::default())?;
    let (fragment, _) = resolve(fragment_file, defines)?;
    // SAFETY: object creation and queries on the current context.
    let program = unsafe {
        let program = gl
            .create_program()
            .map_err(|e| Error::Gl(format!("cannot create a program: {e}")))?;
        let mut shaders = Vec::new();
        for (kind, text, name) in [
            (glow::VERTEX_SHADER, &vertex, vertex_file),
            (glow::FRAGMENT_SHADER, &fragment, fragment_file),
        ] {
            let shader = gl
                .create_shader(kind)
                .map_err(|e| Error::Gl(format!("glsl/{name}: cannot create shader: {e}")))?;
            gl.shader_source(shader, text);
            gl.compile_shader(shader);
            if !gl.get_shader_compile_status(shader) {
                let log = gl.get_shader_info_log(shader).replace('\n', " | ");
                return Err(Error::Gl(format!("glsl/{name} failed to compile: {log}")));
            }
            gl.attach_shader(program, shader);
            shaders.push(shader);
        }
        gl.link_program(program);
        for s in shaders {
            gl.detach_shader(program, s);
            gl.delete_shader(s);
        }
        if !gl.get_program_link_status(program) {
            let log = gl.get_program_info_log(program).replace('\n', " | ");
            return Err(Error::Gl(format!(
                "glsl/view/{vertex_file} and {fragment_file} failed to link: {log}"
            )));
        }
        program
    };
    ctx.programs.borrow_mut().insert(key, program);
    Ok(program)
}
