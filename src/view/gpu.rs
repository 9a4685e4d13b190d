//! The viewer's GPU side, on the window's own context: each layer's arrays in storage buffers,
//! the slice pass (`glsl/slice.comp`: re-flatten only what lies between the near and far
//! planes, through `over.glsl`) and the image pass (`glsl/view_image.frag`: camera, view and
//! display transform). Both programs come from the engine's loader ([`GlContext::program`] and
//! [`resolve`]), with the same `#define`s the merge stages get.

use glow::HasContext;

use super::display;
use super::load::Layer;
use crate::composite::{CompositeChannels, CompositeKind};
use crate::error::{Error, Result};
use crate::gpu::engine::ColumnSpec;
use crate::gpu::program::{resolve, Defines};
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
        return Err(Error::Gl(format!(
            "out of memory uploading {} bytes",
            bytes.len()
        )));
    }
    Ok(buffer)
}

/// One layer resident on the GPU, with the output of its last slice.
pub struct GpuLayer {
    offsets: glow::Buffer,
    depths: glow::Buffer,
    values: glow::Buffer,
    /// Per pixel: the composited columns, the front depth (NaN: none) and the count inside.
    sliced: glow::Buffer,
    pixels: usize,
    slice_program: glow::Program,
    image_program: glow::Program,
}

impl GpuLayer {
    /// Upload `layer` and build its programs.
    pub fn new(ctx: &GlContext, layer: &Layer) -> Result<GpuLayer> {
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
        let out_floats = layer.pixels() * (layer.stride() + 2);
        ctx.check_fits(out_floats * 4, "the sliced image")?;
        ctx.check_fits(layer.values.len() * 4, "the layer's values")?;
        // SAFETY: buffer creation and upload on the current context.
        unsafe {
            let made = GpuLayer {
                offsets: upload(gl, &layer.offsets)?,
                depths: upload(gl, &layer.depths)?,
                values: upload(gl, &layer.values)?,
                sliced: upload(gl, &vec![0f32; out_floats.max(4)])?,
                pixels: layer.pixels(),
                slice_program,
                image_program,
            };
            ctx.check("uploading a layer")?;
            Ok(made)
        }
    }

    /// Re-flatten every pixel with only what lies in [near, far].
    pub fn slice(&self, ctx: &GlContext, near: f32, far: f32) -> Result<()> {
        let gl = &ctx.gl;
        // SAFETY: the program and buffers belong to this context.
        unsafe {
            gl.use_program(Some(self.slice_program));
            let set = |name: &str, v: f32| {
                let at = gl.get_uniform_location(self.slice_program, name);
                gl.uniform_1_f32(at.as_ref(), v);
            };
            set("u_near", near);
            set("u_far", far);
            for (binding, buffer) in [self.offsets, self.depths, self.values, self.sliced]
                .into_iter()
                .enumerate()
            {
                gl.bind_buffer_base(glow::SHADER_STORAGE_BUFFER, binding as u32, Some(buffer));
            }
        }
        ctx.uniform_u32(self.slice_program, "u_pixels", self.pixels as u32);
        ctx.dispatch(self.pixels, SLICE_GROUP)
    }

    /// Draw the last slice over the whole viewport.
    pub fn draw(&self, ctx: &GlContext, vao: glow::VertexArray, params: &DrawParams) -> Result<()> {
        let gl = &ctx.gl;
        let p = self.image_program;
        // SAFETY: the program, buffer and vertex array belong to this context.
        unsafe {
            // Only the image area: the panel covers the rest, and on a software rasteriser every
            // fragment costs.
            gl.enable(glow::SCISSOR_TEST);
            gl.scissor(0, 0, params.image_width as i32, params.window.1 as i32);
            gl.disable(glow::BLEND);
            gl.disable(glow::FRAMEBUFFER_SRGB);
            gl.viewport(0, 0, params.window.0 as i32, params.window.1 as i32);
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
            let w = params.data_window;
            gl.uniform_4_i32(at("u_data").as_ref(), w[0], w[1], w[2], w[3]);
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
            let pin = params.pinned.unwrap_or((i32::MIN, i32::MIN));
            gl.uniform_2_i32(at("u_pinned").as_ref(), pin.0, pin.1);
            gl.uniform_1_i32(
                at("u_pin_shown").as_ref(),
                i32::from(params.pinned.is_some()),
            );
            gl.bind_buffer_base(glow::SHADER_STORAGE_BUFFER, 3, Some(self.sliced));
            gl.bind_vertex_array(Some(vao));
            gl.draw_arrays(glow::TRIANGLES, 0, 3);
            gl.disable(glow::SCISSOR_TEST);
        }
        ctx.check("drawing the image")
    }

    /// Free the buffers (the programs stay cached in the context).
    pub fn delete(&self, ctx: &GlContext) {
        // SAFETY: the buffers belong to this context and are not used after this.
        unsafe {
            for b in [self.offsets, self.depths, self.values, self.sliced] {
                ctx.gl.delete_buffer(b);
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
    /// Exposure in stops.
    pub exposure: f32,
    /// Depths the depth view spans.
    pub depth_range: (f32, f32),
    /// The pinned pixel, outlined.
    pub pinned: Option<(i32, i32)>,
}

/// The image pass's program (vertex and fragment stages), built with the engine's resolver.
fn image_program(ctx: &GlContext, defines: &Defines) -> Result<glow::Program> {
    let key = format!("view_image|{:?}", defines.0);
    if let Some(p) = ctx.programs.borrow().get(&key) {
        return Ok(*p);
    }
    let gl = &ctx.gl;
    let (vertex, _) = resolve("view_image.vert", &Defines::default())?;
    let (fragment, _) = resolve("view_image.frag", defines)?;
    // SAFETY: object creation and queries on the current context.
    let program = unsafe {
        let program = gl
            .create_program()
            .map_err(|e| Error::Gl(format!("cannot create a program: {e}")))?;
        let mut shaders = Vec::new();
        for (kind, text, name) in [
            (glow::VERTEX_SHADER, &vertex, "view_image.vert"),
            (glow::FRAGMENT_SHADER, &fragment, "view_image.frag"),
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
            return Err(Error::Gl(format!("glsl/view_image failed to link: {log}")));
        }
        program
    };
    ctx.programs.borrow_mut().insert(key, program);
    Ok(program)
}
