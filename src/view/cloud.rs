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
//! - **Interaction.** While the camera moves, each chunk draws every `every`-th point, chosen
//!   so a frame stays near [`LOD_TARGET_MS`] on the device it runs on; when the camera rests,
//!   the next frame draws every point ([`PointLod`]).

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

/// The longest attribute stride GL promises (`GL_MAX_VERTEX_ATTRIB_STRIDE`, 2048 bytes), in
/// points: the most a chunk can skip between the points it draws.
const MAX_EVERY: usize = 2048 / std::mem::size_of::<PointRecord>();

/// What the window asks the worker for.
#[derive(Clone)]
pub struct CloudRequest {
    /// The layer the cloud is of (0: the merge).
    pub layer: usize,
    /// The layer's name, for messages.
    pub layer_name: String,
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
    /// The points, in `points`' order (inputs, rows, samples).
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
            let keep = made % stride == 0;
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

/// The level of detail while the camera moves: how many points a frame can draw within
/// [`LOD_TARGET_MS`], learnt from the frames drawn so far.
#[derive(Clone, Copy, Debug, Default)]
pub struct PointLod {
    /// Points the next moving frame may draw (none until a frame was timed).
    budget: Option<f64>,
}

/// The frame time the level of detail aims at while the camera moves, in ms.
pub const LOD_TARGET_MS: f64 = 40.0;
/// The fewest points a moving frame draws, however slow the device.
const LOD_MIN_POINTS: f64 = 20_000.0;

impl PointLod {
    /// Every how many points each chunk draws in a moving frame of a cloud of `held` points.
    pub fn every(&self, held: usize) -> usize {
        match self.budget {
            None => 1,
            Some(budget) => (held as f64 / budget).ceil().clamp(1.0, usize::MAX as f64) as usize,
        }
    }

    /// A frame drawing `drawn` points took `ms`: aim the next moving frame at the target.
    /// The step is damped (the geometric mean of the old and new estimates) so one slow
    /// frame, the machine being busy, does not halve the detail.
    pub fn learn(&mut self, drawn: usize, ms: f64) {
        if drawn == 0 || ms <= 0.0 {
            return;
        }
        let proposed = (drawn as f64 * LOD_TARGET_MS / ms).max(LOD_MIN_POINTS);
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
    /// Each chunk draws every `every`-th point (1: all).
    pub every: usize,
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

    /// Draw the points into the image area, with a depth test against a cleared depth
    /// buffer; returns the number drawn.
    pub fn draw(&self, ctx: &GlContext, params: &PointDrawParams) -> Result<usize> {
        let gl = &ctx.gl;
        let p = self.program;
        // Past GL's attribute stride a chunk draws a prefix of every MAX_EVERY-th point: as
        // many points, from fewer rows (only for clouds hundreds of times the frame's budget).
        let step = params.every.clamp(1, MAX_EVERY);
        let record = std::mem::size_of::<PointRecord>() as i32;
        let mut drawn = 0;
        // SAFETY: the program, buffers and vertex array belong to this context.
        unsafe {
            gl.viewport(0, 0, params.area.0 as i32, params.area.1 as i32);
            gl.enable(glow::SCISSOR_TEST);
            gl.scissor(0, 0, params.area.0 as i32, params.area.1 as i32);
            gl.clear_depth_f32(1.0);
            gl.clear(glow::DEPTH_BUFFER_BIT);
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
                let count = len.div_ceil(params.every).min(len.div_ceil(step));
                gl.bind_buffer(glow::ARRAY_BUFFER, Some(buffer));
                let stride = record * step as i32;
                gl.vertex_attrib_pointer_f32(0, 3, glow::FLOAT, false, stride, 0);
                gl.vertex_attrib_pointer_f32(1, 1, glow::FLOAT, false, stride, 12);
                gl.vertex_attrib_pointer_f32(2, 4, glow::UNSIGNED_BYTE, true, stride, 16);
                gl.vertex_attrib_pointer_f32(3, 4, glow::UNSIGNED_BYTE, true, stride, 20);
                gl.draw_arrays(glow::POINTS, 0, count as i32);
                drawn += count;
            }
            gl.bind_buffer(glow::ARRAY_BUFFER, None);
            gl.bind_vertex_array(None);
            gl.disable(glow::DEPTH_TEST);
            gl.disable(glow::SCISSOR_TEST);
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
        assert_eq!(lod.every(1_000_000), 1);
        // Ten million points in 400 ms: a million fit the target.
        lod.learn(10_000_000, 10.0 * LOD_TARGET_MS);
        assert_eq!(lod.every(10_000_000), 10);
        // Damped: a frame that came in at the target keeps the estimate.
        lod.learn(1_000_000, LOD_TARGET_MS);
        assert_eq!(lod.every(10_000_000), 10);
        // A fast device draws everything.
        let mut fast = PointLod::default();
        fast.learn(1000, 1.0);
        assert_eq!(fast.every(1000), 1);
    }
}
