//! The points mode's point cloud: every sample of a layer's inputs as a point, placed as
//! `deepmerge points` places it (the same walk, [`crate::ops::points::for_each_point`], with
//! the header's camera or at pixel coordinates), built on a worker thread and held in vertex
//! buffers drawn as `GL_POINTS` (`glsl/view/view_points.vert`), one draw per buffer chunk.
//!
//! - **Which points.** The merge (layer 0) is the points of every input, each placed by its
//!   own header; layer i is input i's. A volume is one point at its front depth, as in `points`.
//! - **Memory.** The cloud takes [`POINT_BYTES`] per point on the GPU and as much on the host
//!   while it is built; it gets what the layers leave of the GPU memory budget. A cloud that
//!   would take more keeps every `stride`-th point (the panel and stderr say which stride), so
//!   nothing is allocated beyond the budget.
//! - **Drawing in passes.** Each chunk's points are shuffled when the cloud is built, so any
//!   run of a chunk is an even sample of it. A view of the cloud is drawn into a framebuffer of
//!   its own ([`PointCanvas`]) in `passes` passes, pass `p` drawing the `p`-th of `passes` equal
//!   runs of every chunk. While the camera moves, each frame clears the canvas and draws pass
//!   0 only, `passes` chosen so that takes about [`LOD_DRAW_MS`] on the device it runs on
//!   ([`PointLod`]); when the camera rests, the next frames add the other passes, each frame
//!   within [`REFINE_FRAME_MS`], until every point is drawn. The window only copies the canvas
//!   while nothing changes, so a frame never waits for the whole cloud.

use std::path::PathBuf;
use std::sync::Arc;

use glow::HasContext;

use super::display;
use super::orbit::Basis;
use crate::deep::DeepImage;
use crate::error::{Error, Result};
use crate::exr::{ChunkSource, ReadOptions};
use crate::gpu::GlContext;
use crate::ops::points::{for_each_point, Camera, Placement};

/// One point in a vertex buffer: position, the sample's depth `Z`, its colour as `points`
/// writes it (8-bit sRGB and alpha) and the false colour of its id (black: no id).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct PointRecord {
    /// World (or pixel) position.
    pub position: [f32; 3],
    /// The sample's `Z`, for the depth colouring.
    pub depth: f32,
    /// The colour `points` writes.
    pub rgba: [u8; 4],
    /// [`display::id_colour`] of the sample's id, alpha 255.
    pub id_rgba: [u8; 4],
}

/// Bytes of one point on the GPU (and on the host while the cloud is built).
pub const POINT_BYTES: u64 = std::mem::size_of::<PointRecord>() as u64;

/// Points per vertex buffer: small enough that a buffer is an ordinary allocation on any
/// driver, large enough that a frame is a few dozen draws.
pub const CHUNK_POINTS: usize = 1 << 18;

/// Shuffle each [`CHUNK_POINTS`] run of `records` (Fisher-Yates, a fixed xorshift sequence
/// so a cloud is drawn alike every time), so any run of a chunk is an even sample of it.
fn shuffle_chunks(records: &mut [PointRecord]) {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for chunk in records.chunks_mut(CHUNK_POINTS) {
        for i in (1..chunk.len()).rev() {
            let j = (next() % (i as u64 + 1)) as usize;
            chunk.swap(i, j);
        }
    }
}

/// What the window asks the worker for.
#[derive(Clone)]
pub struct CloudRequest {
    /// The layer the cloud is of (0: the merge).
    pub layer: usize,
    /// The inputs' files and images as read (shared with the window's inspector).
    pub files: Vec<PathBuf>,
    /// All the inputs, as loaded.
    pub inputs: Arc<Vec<DeepImage>>,
    /// Indices into `inputs` of those that make the layer.
    pub which: Vec<usize>,
    /// How they were read (the part, for the header's camera).
    pub read: ReadOptions,
    /// The id channel the id colouring shows, if the layer has one.
    pub id_channel: Option<String>,
    /// Bytes the cloud may take.
    pub budget: u64,
}

/// What describes a cloud once its points are on the GPU.
#[derive(Clone, Debug, PartialEq)]
pub struct CloudInfo {
    /// The layer it is of.
    pub layer: usize,
    /// Points held (after the stride).
    pub points: usize,
    /// Points `points` makes of the layer's inputs.
    pub samples: u64,
    /// Every `stride`-th point is held (1: all).
    pub stride: u64,
    /// The box around the points held.
    pub bounds: ([f64; 3], [f64; 3]),
    /// The nearest and farthest depth `Z` of the points held.
    pub depth_range: (f32, f32),
    /// The data's axes ([`Basis`]), from the first input's placement.
    pub basis: Basis,
    /// The id channel coloured by id, if any.
    pub id_channel: Option<String>,
    /// Where the points are: "the camera of FILE" or "pixel coordinates".
    pub placement: String,
}

/// A cloud built on the worker: the points and what describes them.
pub struct PointCloud {
    /// The points: `points`' order (inputs, rows, samples), shuffled within each chunk of
    /// [`CHUNK_POINTS`].
    pub records: Vec<PointRecord>,
    /// What describes them.
    pub info: CloudInfo,
}

/// Where `points` (camera mode `auto`) puts the samples of the deep part `read.part` of `path`,
/// whose display window is `image`'s.
fn placement_of(
    path: &std::path::Path,
    image: &DeepImage,
    read: &ReadOptions,
) -> Result<Placement> {
    let source = ChunkSource::open(path, &read.part, read.max_memory)?;
    let camera = Camera::from_attributes(&source.attributes).map_err(|e| e.in_file(path))?;
    Ok(match camera {
        Some(camera) => Placement::Camera(Box::new(camera), image.display_window),
        None => Placement::Pixels,
    })
}

/// The data's axes under `placement`: the camera's right, up and view directions in world
/// space (from points it places), or those of pixel coordinates.
fn basis_of(placement: &Placement) -> Basis {
    let Placement::Camera(camera, _) = placement else {
        return Basis::PIXELS;
    };
    let at = |nx: f64, ny: f64, depth: f64| camera.unproject(nx, ny, depth);
    let (Some(o), Some(r), Some(u), Some(f)) = (
        at(0.0, 0.0, 1.0),
        at(0.5, 0.0, 1.0),
        at(0.0, 0.5, 1.0),
        at(0.0, 0.0, 2.0),
    ) else {
        return Basis::PIXELS;
    };
    let d = |p: [f64; 3]| [p[0] - o[0], p[1] - o[1], p[2] - o[2]];
    Basis::orthonormal(d(r), d(u), d(f)).unwrap_or(Basis::PIXELS)
}

/// The stride that keeps `samples` points of [`POINT_BYTES`] within `budget` bytes.
pub fn stride_for(samples: u64, budget: u64) -> Result<u64> {
    let fits = budget / POINT_BYTES;
    if fits == 0 {
        return Err(Error::GlMemory(format!(
            "the point cloud has no room: {budget} bytes of the GPU memory budget are left beside the layers; raise --gpu-memory"
        )));
    }
    Ok(samples.div_ceil(fits).max(1))
}

/// Build the cloud `request` asks for. Runs on a worker thread.
pub fn build_cloud(request: &CloudRequest) -> Result<PointCloud> {
    let samples: u64 = request
        .which
        .iter()
        .map(|&i| request.inputs[i].sample_count() as u64)
        .sum();
    let stride = stride_for(samples, request.budget)?;
    // At most one point per sample is made, so this is the most the cloud holds.
    let mut records = Vec::with_capacity(samples.div_ceil(stride) as usize);
    let mut lo = [f64::INFINITY; 3];
    let mut hi = [f64::NEG_INFINITY; 3];
    let mut depth_range = (f32::INFINITY, f32::NEG_INFINITY);
    let mut made = 0u64;
    let mut basis = None;
    let mut placement_text = String::new();
    for &i in &request.which {
        let (path, image) = (&request.files[i], &request.inputs[i]);
        let placement = placement_of(path, image, &request.read)?;
        if basis.is_none() {
            basis = Some(basis_of(&placement));
            let name = path.file_name().map_or_else(
                || path.display().to_string(),
                |n| n.to_string_lossy().into(),
            );
            placement_text = match placement {
                Placement::Camera(..) => format!("the camera of {name}"),
                Placement::Pixels => format!("pixel coordinates ({name} has no camera)"),
            };
        }
        let ids = request
            .id_channel
            .as_ref()
            .and_then(|n| image.channel_index(n))
            .map(|c| &image.planes[c]);
        let counted = for_each_point(image, 0.0, &placement, |point| {
            let keep = made.is_multiple_of(stride);
            made += 1;
            let position = point.position.map(|v| v as f32);
            if !keep || !position.iter().all(|v| v.is_finite()) {
                return;
            }
            for k in 0..3 {
                lo[k] = lo[k].min(position[k] as f64);
                hi[k] = hi[k].max(position[k] as f64);
            }
            let depth = point.depth as f32;
            if depth.is_finite() {
                depth_range = (depth_range.0.min(depth), depth_range.1.max(depth));
            }
            let id = ids
                .and_then(|p| crate::ops::idselect::id_at(p, point.sample))
                .unwrap_or(0);
            let [r, g, b] = display::id_colour(id);
            records.push(PointRecord {
                position,
                depth,
                rgba: point.rgba,
                id_rgba: [r, g, b, 255],
            });
        })
        .map_err(|e| e.in_file(path))?;
        debug_assert!(counted <= image.sample_count() as u64);
    }
    shuffle_chunks(&mut records);
    if records.is_empty() {
        (lo, hi) = ([0.0; 3], [1.0; 3]);
    }
    if depth_range.0 > depth_range.1 {
        depth_range = (0.0, 1.0);
    }
    Ok(PointCloud {
        info: CloudInfo {
            layer: request.layer,
            points: records.len(),
            samples: made,
            stride,
            bounds: (lo, hi),
            depth_range,
            basis: basis.unwrap_or(Basis::PIXELS),
            id_channel: request.id_channel.clone(),
            placement: placement_text,
        },
        records,
    })
}

/// How the points are coloured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PointColour {
    /// A ramp from the nearest depth to the farthest ([`display::depth_ramp`]).
    Depth,
    /// The false colour of the id ([`display::id_colour`]).
    Id,
    /// The sample's own colour, as `points` writes it.
    Sample,
}

impl PointColour {
    /// The shader's `COLOUR_*` number.
    pub fn shader_id(self) -> i32 {
        match self {
            PointColour::Depth => 0,
            PointColour::Id => 1,
            PointColour::Sample => 2,
        }
    }

    /// The name the state line and the panel use.
    pub fn name(self) -> &'static str {
        match self {
            PointColour::Depth => "depth",
            PointColour::Id => "id",
            PointColour::Sample => "sample",
        }
    }
}

/// The level of detail while the camera moves: how many points a pass can draw within
/// [`LOD_DRAW_MS`], learnt from the passes drawn so far.
#[derive(Clone, Copy, Debug, Default)]
pub struct PointLod {
    /// Points a pass may draw (none until a pass was timed).
    budget: Option<f64>,
}

/// The time the level of detail gives the points of a frame while the camera moves, in ms
/// (the panel, clearing and copying the canvas take the rest of an interactive frame).
pub const LOD_DRAW_MS: f64 = 25.0;
/// The time a frame at rest may spend adding passes, in ms: long enough to fill in a large
/// cloud in a few seconds, short enough that a new drag is answered at once.
pub const REFINE_FRAME_MS: f64 = 100.0;
/// Points the first pass draws, before any pass was timed.
const LOD_FIRST_POINTS: f64 = 200_000.0;
/// The fewest points a pass draws, however slow the device.
const LOD_MIN_POINTS: f64 = 20_000.0;

impl PointLod {
    /// How many passes a cloud of `held` points is drawn in, so one pass fits the budget.
    pub fn passes(&self, held: usize) -> usize {
        let budget = self.budget.unwrap_or(LOD_FIRST_POINTS);
        (held as f64 / budget).ceil().clamp(1.0, usize::MAX as f64) as usize
    }

    /// Drawing `drawn` points took `ms`: aim the next pass at [`LOD_DRAW_MS`]. The step is
    /// damped (the geometric mean of the old and new estimates) so one slow frame, the
    /// machine being busy, does not halve the detail.
    pub fn learn(&mut self, drawn: usize, ms: f64) {
        if drawn == 0 || ms <= 0.0 {
            return;
        }
        let proposed = (drawn as f64 * LOD_DRAW_MS / ms).max(LOD_MIN_POINTS);
        self.budget = Some(match self.budget {
            None => proposed,
            Some(old) => (old * proposed).sqrt(),
        });
    }
}

/// What the points pass needs besides the cloud.
#[derive(Clone, Debug)]
pub struct PointDrawParams {
    /// The image area's size in window pixels (from the window's bottom-left corner).
    pub area: (u32, u32),
    /// The camera's view-projection matrix, column by column.
    pub matrix: [f32; 16],
    /// How the points are coloured.
    pub colour: PointColour,
    /// The depths the depth ramp spans.
    pub depth_range: (f32, f32),
    /// The depth slice: points whose depth lies outside are not drawn.
    pub slice: (f32, f32),
}

/// A cloud on the GPU: vertex buffers of [`CHUNK_POINTS`] points and the vertex array that
/// reads them.
pub struct GpuPoints {
    chunks: Vec<(glow::Buffer, usize)>,
    vao: glow::VertexArray,
    program: glow::Program,
    /// What describes the cloud.
    pub info: CloudInfo,
}

impl GpuPoints {
    /// Move `cloud`'s points to vertex buffers (the host array is let go chunk by chunk, last
    /// first, as the layers' arrays are) and build the program.
    pub fn upload(ctx: &GlContext, cloud: PointCloud) -> Result<GpuPoints> {
        let gl = &ctx.gl;
        let program = super::gpu::draw_program(
            ctx,
            "view_points.vert",
            "view_points.frag",
            &crate::gpu::program::Defines::default(),
        )?;
        let PointCloud { mut records, info } = cloud;
        // SAFETY: object creation on the current context.
        let vao = unsafe { gl.create_vertex_array() }
            .map_err(|e| Error::Gl(format!("cannot create a vertex array: {e}")))?;
        let mut made = GpuPoints {
            chunks: Vec::new(),
            vao,
            program,
            info,
        };
        let starts: Vec<usize> = (0..records.len()).step_by(CHUNK_POINTS).collect();
        for &start in starts.iter().rev() {
            let chunk = &records[start..];
            // SAFETY: buffer creation and upload on the current context; `made` owns every
            // buffer made so far and frees them on failure.
            unsafe {
                let buffer = match gl.create_buffer() {
                    Ok(b) => b,
                    Err(e) => {
                        made.delete(ctx);
                        return Err(Error::Gl(format!("cannot create a buffer: {e}")));
                    }
                };
                gl.bind_buffer(glow::ARRAY_BUFFER, Some(buffer));
                gl.buffer_data_u8_slice(
                    glow::ARRAY_BUFFER,
                    bytemuck::cast_slice(chunk),
                    glow::STATIC_DRAW,
                );
                gl.bind_buffer(glow::ARRAY_BUFFER, None);
                made.chunks.push((buffer, chunk.len()));
                if gl.get_error() == glow::OUT_OF_MEMORY {
                    made.delete(ctx);
                    return Err(Error::GlMemory(format!(
                        "out of GPU memory uploading {} points",
                        chunk.len()
                    )));
                }
            }
            records.truncate(start);
            records.shrink_to_fit();
        }
        made.chunks.reverse();
        if let Err(e) = ctx.check("uploading the point cloud") {
            made.delete(ctx);
            return Err(e);
        }
        Ok(made)
    }

    /// Bytes of the cloud's buffers.
    pub fn bytes(&self) -> u64 {
        self.info.points as u64 * POINT_BYTES
    }

    /// Vertex buffers held.
    pub fn chunks(&self) -> usize {
        self.chunks.len()
    }

    /// Draw passes `passes` of `of` (each chunk's `p`-th of `of` equal runs, for each `p`)
    /// into the bound framebuffer's `area`, depth-tested against what it holds; returns the
    /// number of points drawn.
    pub fn draw_passes(
        &self,
        ctx: &GlContext,
        params: &PointDrawParams,
        passes: std::ops::Range<usize>,
        of: usize,
    ) -> Result<usize> {
        let gl = &ctx.gl;
        let p = self.program;
        let record = std::mem::size_of::<PointRecord>() as i32;
        let mut drawn = 0;
        // SAFETY: the program, buffers and vertex array belong to this context.
        unsafe {
            gl.viewport(0, 0, params.area.0 as i32, params.area.1 as i32);
            // The panel's painter leaves its last clip rectangle behind.
            gl.disable(glow::SCISSOR_TEST);
            gl.enable(glow::DEPTH_TEST);
            gl.depth_func(glow::LESS);
            gl.disable(glow::BLEND);
            gl.disable(glow::FRAMEBUFFER_SRGB);
            gl.use_program(Some(p));
            let at = |name: &str| gl.get_uniform_location(p, name);
            gl.uniform_matrix_4_f32_slice(at("u_view_projection").as_ref(), false, &params.matrix);
            gl.uniform_1_i32(at("u_colour").as_ref(), params.colour.shader_id());
            gl.uniform_2_f32(
                at("u_depth_range").as_ref(),
                params.depth_range.0,
                params.depth_range.1,
            );
            gl.uniform_2_f32(at("u_slice").as_ref(), params.slice.0, params.slice.1);
            let ramp: Vec<f32> = display::DEPTH_RAMP.iter().flatten().copied().collect();
            gl.uniform_3_f32_slice(at("u_ramp").as_ref(), &ramp);
            gl.bind_vertex_array(Some(self.vao));
            for k in 0..4 {
                gl.enable_vertex_attrib_array(k);
            }
            for &(buffer, len) in &self.chunks {
                let run = len.div_ceil(of.max(1));
                let first = (passes.start * run).min(len);
                let last = (passes.end * run).min(len);
                if last <= first {
                    continue;
                }
                gl.bind_buffer(glow::ARRAY_BUFFER, Some(buffer));
                gl.vertex_attrib_pointer_f32(0, 3, glow::FLOAT, false, record, 0);
                gl.vertex_attrib_pointer_f32(1, 1, glow::FLOAT, false, record, 12);
                gl.vertex_attrib_pointer_f32(2, 4, glow::UNSIGNED_BYTE, true, record, 16);
                gl.vertex_attrib_pointer_f32(3, 4, glow::UNSIGNED_BYTE, true, record, 20);
                gl.draw_arrays(glow::POINTS, first as i32, (last - first) as i32);
                drawn += last - first;
            }
            gl.bind_buffer(glow::ARRAY_BUFFER, None);
            gl.bind_vertex_array(None);
            gl.disable(glow::DEPTH_TEST);
        }
        ctx.check("drawing the points")?;
        Ok(drawn)
    }

    /// Free the buffers and the vertex array (the program stays cached in the context).
    pub fn delete(&self, ctx: &GlContext) {
        // SAFETY: the objects belong to this context and are not used after this.
        unsafe {
            for &(buffer, _) in &self.chunks {
                ctx.gl.delete_buffer(buffer);
            }
            ctx.gl.delete_vertex_array(self.vao);
        }
    }
}

/// What a frame of the points mode drew.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PointsDrawn {
    /// Points drawn by this frame.
    pub drawn: usize,
    /// Passes the canvas shows.
    pub shown: usize,
    /// Passes the view is drawn in.
    pub passes: usize,
    /// Points the cloud holds.
    pub held: usize,
}

/// What a view of the cloud depends on: a canvas drawn for one is kept only for the same.
#[derive(Clone, Debug, PartialEq)]
pub struct CanvasKey {
    /// The layer whose cloud it is.
    pub layer: usize,
    /// The camera.
    pub matrix: [f32; 16],
    /// The colouring.
    pub colour: PointColour,
    /// The depth slice.
    pub slice: (f32, f32),
}

/// The framebuffer a view of the cloud is drawn into, pass by pass (colour and depth), and
/// how far it got: the window copies it into the image area every frame.
pub struct PointCanvas {
    fbo: glow::Framebuffer,
    colour: glow::Renderbuffer,
    depth: glow::Renderbuffer,
    /// Its size in pixels.
    pub size: (u32, u32),
    /// The view drawn, none when cleared for a new one.
    pub key: Option<CanvasKey>,
    /// Passes the view is drawn in.
    pub passes: usize,
    /// Passes drawn so far.
    pub done: usize,
}

/// The image area's background, as the image views clear it.
pub const BACKGROUND: [f32; 3] = [0.16, 0.16, 0.16];

impl PointCanvas {
    /// A canvas of `size` pixels (colour RGBA8, depth 24 bits).
    pub fn new(ctx: &GlContext, size: (u32, u32)) -> Result<PointCanvas> {
        let gl = &ctx.gl;
        let (w, h) = (size.0.max(1) as i32, size.1.max(1) as i32);
        // SAFETY: object creation on the current context.
        unsafe {
            let fbo = gl
                .create_framebuffer()
                .map_err(|e| Error::Gl(format!("cannot create a framebuffer: {e}")))?;
            let colour = gl
                .create_renderbuffer()
                .map_err(|e| Error::Gl(format!("cannot create a renderbuffer: {e}")))?;
            let depth = gl
                .create_renderbuffer()
                .map_err(|e| Error::Gl(format!("cannot create a renderbuffer: {e}")))?;
            gl.bind_renderbuffer(glow::RENDERBUFFER, Some(colour));
            gl.renderbuffer_storage(glow::RENDERBUFFER, glow::RGBA8, w, h);
            gl.bind_renderbuffer(glow::RENDERBUFFER, Some(depth));
            gl.renderbuffer_storage(glow::RENDERBUFFER, glow::DEPTH_COMPONENT24, w, h);
            gl.bind_renderbuffer(glow::RENDERBUFFER, None);
            gl.bind_framebuffer(glow::FRAMEBUFFER, Some(fbo));
            gl.framebuffer_renderbuffer(
                glow::FRAMEBUFFER,
                glow::COLOR_ATTACHMENT0,
                glow::RENDERBUFFER,
                Some(colour),
            );
            gl.framebuffer_renderbuffer(
                glow::FRAMEBUFFER,
                glow::DEPTH_ATTACHMENT,
                glow::RENDERBUFFER,
                Some(depth),
            );
            let status = gl.check_framebuffer_status(glow::FRAMEBUFFER);
            gl.bind_framebuffer(glow::FRAMEBUFFER, None);
            let canvas = PointCanvas {
                fbo,
                colour,
                depth,
                size,
                key: None,
                passes: 1,
                done: 0,
            };
            if status != glow::FRAMEBUFFER_COMPLETE {
                canvas.delete(ctx);
                return Err(Error::Gl(format!(
                    "the points' framebuffer is incomplete (status 0x{status:04x})"
                )));
            }
            ctx.check("making the points' framebuffer")?;
            Ok(canvas)
        }
    }

    /// Clear it for the view `key`, to be drawn in `passes` passes.
    pub fn start(&mut self, ctx: &GlContext, key: CanvasKey, passes: usize) {
        let gl = &ctx.gl;
        // SAFETY: the framebuffer belongs to this context.
        unsafe {
            gl.bind_framebuffer(glow::FRAMEBUFFER, Some(self.fbo));
            gl.disable(glow::SCISSOR_TEST);
            gl.viewport(0, 0, self.size.0 as i32, self.size.1 as i32);
            let [r, g, b] = BACKGROUND;
            gl.clear_color(r, g, b, 1.0);
            gl.clear_depth_f32(1.0);
            gl.clear(glow::COLOR_BUFFER_BIT | glow::DEPTH_BUFFER_BIT);
            gl.bind_framebuffer(glow::FRAMEBUFFER, None);
        }
        self.key = Some(key);
        self.passes = passes.max(1);
        self.done = 0;
    }

    /// Make it the framebuffer drawn into (`false`: the window's again).
    pub fn bind(&self, ctx: &GlContext, on: bool) {
        // SAFETY: the framebuffer belongs to this context.
        unsafe {
            ctx.gl
                .bind_framebuffer(glow::FRAMEBUFFER, on.then_some(self.fbo));
        }
    }

    /// Copy it into the window's framebuffer at the bottom-left corner (the image area).
    pub fn show(&self, ctx: &GlContext) -> Result<()> {
        let gl = &ctx.gl;
        let (w, h) = (self.size.0 as i32, self.size.1 as i32);
        // SAFETY: the framebuffers belong to this context.
        unsafe {
            gl.disable(glow::SCISSOR_TEST);
            gl.bind_framebuffer(glow::READ_FRAMEBUFFER, Some(self.fbo));
            gl.bind_framebuffer(glow::DRAW_FRAMEBUFFER, None);
            gl.blit_framebuffer(
                0,
                0,
                w,
                h,
                0,
                0,
                w,
                h,
                glow::COLOR_BUFFER_BIT,
                glow::NEAREST,
            );
            gl.bind_framebuffer(glow::FRAMEBUFFER, None);
        }
        ctx.check("showing the points")
    }

    /// Free it.
    pub fn delete(&self, ctx: &GlContext) {
        // SAFETY: the objects belong to this context and are not used after this.
        unsafe {
            ctx.gl.delete_framebuffer(self.fbo);
            ctx.gl.delete_renderbuffer(self.colour);
            ctx.gl.delete_renderbuffer(self.depth);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stride_keeps_the_cloud_within_its_budget() {
        assert_eq!(stride_for(1000, 1000 * POINT_BYTES).unwrap(), 1);
        assert_eq!(stride_for(1001, 1000 * POINT_BYTES).unwrap(), 2);
        assert_eq!(stride_for(0, POINT_BYTES).unwrap(), 1);
        for (samples, budget) in [(18_000_000u64, 100 << 20), (7, 3 * POINT_BYTES)] {
            let stride = stride_for(samples, budget).unwrap();
            assert!(samples.div_ceil(stride) * POINT_BYTES <= budget);
        }
        assert!(matches!(
            stride_for(10, POINT_BYTES - 1),
            Err(Error::GlMemory(_))
        ));
    }

    #[test]
    fn the_level_of_detail_aims_at_the_target() {
        let mut lod = PointLod::default();
        assert_eq!(lod.passes(100_000), 1);
        assert_eq!(lod.passes(1_000_000), 5);
        // Ten million points in ten times the target: a million fit it.
        lod.learn(10_000_000, 10.0 * LOD_DRAW_MS);
        lod.learn(1_000_000, LOD_DRAW_MS);
        assert_eq!(lod.passes(10_000_000), 10);
        // Damped: a pass that took twice the target halves the budget only by a factor √2.
        lod.learn(1_000_000, 2.0 * LOD_DRAW_MS);
        assert_eq!(lod.passes(10_000_000), 15);
        // A fast device draws everything at once.
        let mut fast = PointLod::default();
        fast.learn(1000, 1.0);
        assert_eq!(fast.passes(1000), 1);
    }

    #[test]
    fn a_shuffled_chunk_holds_the_same_points_and_is_spread() {
        let record = |k: usize| PointRecord {
            position: [k as f32, 0.0, 0.0],
            depth: 0.0,
            rgba: [0; 4],
            id_rgba: [0; 4],
        };
        let mut records: Vec<PointRecord> = (0..CHUNK_POINTS + 1000).map(record).collect();
        shuffle_chunks(&mut records);
        let mut xs: Vec<usize> = records.iter().map(|r| r.position[0] as usize).collect();
        // Points stay in their chunk, and a run of the first is drawn from all of it.
        assert!(xs[CHUNK_POINTS..].iter().all(|&x| x >= CHUNK_POINTS));
        let run = &xs[..1000];
        assert!(run.iter().any(|&x| x < CHUNK_POINTS / 4));
        assert!(run.iter().any(|&x| x > 3 * CHUNK_POINTS / 4));
        xs.sort_unstable();
        assert!(xs.iter().enumerate().all(|(i, &x)| i == x));
    }
}
