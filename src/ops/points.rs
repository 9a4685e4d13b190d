//! `points`: every sample of a deep image as a point in 3-D, written as a binary
//! little-endian PLY file (Nuke's DeepToPoints), streamed in bands of rows.
//!
//! Exact semantics:
//! - **Which samples.** Every sample whose alpha (`A`, else the largest of `RA`, `GA`, `BA`;
//!   1 without any alpha) is at least `min_alpha` (default 0: every sample). A volume is one
//!   point at its front depth `Z`.
//! - **Position, with a camera.** The header's `worldToCamera` and `worldToNDC` (m44f, row
//!   vectors as Imath stores them: `p' = p M`), as Arnold, RenderMan and Nuke write them. The
//!   pixel centre (x + ½, y + ½) maps to normalised device coordinates over the **frame**
//!   (the display window, or `--frame` for an image cut out of a larger render):
//!   `ndc_x = 2 (x + ½ − x0) / w − 1`, `ndc_y = 1 − 2 (y + ½ − y0) / h` (y up). `Z` is the
//!   depth along the camera's view axis (as Nuke's ScanlineRender and the renderers write it,
//!   not the distance along the ray): the camera-space point has `z = ±Z`, the sign being the
//!   one that puts it in front of the camera (positive `w` of the projection; −Z, OpenEXR's
//!   camera looking down −z, for an orthographic projection), and the `x`, `y` that project to
//!   the pixel centre through `worldToNDC`. The point is that camera-space point in world
//!   space (through the inverse of `worldToCamera`).
//! - **Position, without a camera.** (x + ½, y + ½, Z) in pixel units, y down; the command
//!   says so on one line. [`CameraMode::Require`] refuses a file without a camera instead;
//!   [`CameraMode::Pixels`] ignores one.
//! - **Colour.** The unpremultiplied `R`, `G`, `B` (each by its own alpha where it has one;
//!   0 where that alpha is 0) encoded as 8-bit sRGB, and the alpha as an 8-bit value, the
//!   preview's encoding ([`crate::preview::preview_rgba`]); grey from the first colour channel
//!   where there is no `R`, `G`, `B`.
//! - **File.** `ply`, `format binary_little_endian 1.0`, one `vertex` element with float `x`,
//!   `y`, `z` and uchar `red`, `green`, `blue`, `alpha`, points in row order, then sample
//!   order. The vertex count is written into a fixed-width field of the header once known
//!   (padded with spaces, which PLY readers skip), so the points are written band by band
//!   through a temporary file renamed at the end.
//! - **Top view.** Optionally ([`write_top_view`], `--top-view PNG`) the points seen from above:
//!   across the camera's x, up its view depth, near at the bottom, one scale for both.

use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use super::registry::{OpSpec, Operation, OptionSpec, Produces, Ran, ValueKind, DEEP_INPUT};
use crate::composite::{CompositeChannels, CompositeKind, OutputKind};
use crate::deep::{Bounds, ChannelRole, DeepImage};
use crate::error::{Error, Result};
use crate::exr::{AtomicFile, ChunkSource, PartSelector, RawAttribute};
use crate::request::OutputRequest;
use crate::stream::plan::OutputShape;
use crate::stream::{plan_bands, StreamOptions};
use std::path::PathBuf;
use std::sync::Arc;

/// A 4x4 matrix, row-major, applied to row vectors (`p' = p M`), as Imath's `M44f`.
pub type Matrix = [[f64; 4]; 4];

/// Where points go without a camera, or whether one must be there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CameraMode {
    /// The header's camera when it has one, else pixel coordinates (said on one line).
    #[default]
    Auto,
    /// The header's camera; a file without one is refused.
    Require,
    /// Pixel coordinates and depth, whatever the header holds.
    Pixels,
}

impl std::str::FromStr for CameraMode {
    type Err = Error;
    fn from_str(text: &str) -> Result<Self> {
        match text {
            "auto" => Ok(CameraMode::Auto),
            "file" => Ok(CameraMode::Require),
            "pixels" => Ok(CameraMode::Pixels),
            _ => Err(Error::Usage(format!(
                "--camera is auto, file or pixels, not {text:?}"
            ))),
        }
    }
}

/// The camera modes' names, as the CLI lists them.
pub const CAMERA_NAMES: &[&str] = &["auto", "file", "pixels"];

/// What `points` writes (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct Points {
    /// Keep samples whose alpha is at least this.
    pub min_alpha: f32,
    /// Camera or pixel coordinates.
    pub camera: CameraMode,
    /// The raster the camera's NDC spans, when not the display window.
    pub frame: Option<Bounds>,
    /// Also draw the points seen from above into this PNG ([`write_top_view`]).
    pub top_view: Option<std::path::PathBuf>,
    /// Print no note on stderr (where the points are placed from): `-q`.
    pub quiet: bool,
}

impl Points {
    /// Options from the CLI's texts; a bad threshold or frame is refused in one line.
    pub fn new(min_alpha: f32, camera: CameraMode, frame: Option<&str>) -> Result<Self> {
        if !(0.0..=1.0).contains(&min_alpha) {
            return Err(Error::Usage(format!(
                "--min-alpha is an alpha from 0 to 1, not {min_alpha}"
            )));
        }
        let frame = frame
            .map(|text| {
                let crop = super::Crop::parse(text, false).map_err(|_| {
                    Error::Usage(format!(
                        "--frame takes X0,Y0,X1,Y1 (the render's display window, inclusive), \
                         not {text:?}"
                    ))
                })?;
                Ok::<_, Error>(crop.area)
            })
            .transpose()?;
        Ok(Points {
            min_alpha,
            camera,
            frame,
            top_view: None,
            quiet: false,
        })
    }
}

impl Points {
    /// The same options, also drawing the top view into `png` (a `*.png`; refused otherwise,
    /// before anything is written).
    pub fn with_top_view(self, png: Option<&Path>) -> Result<Self> {
        if let Some(png) = png {
            if !crate::preview::is_png_path(png) {
                return Err(Error::Usage(format!(
                    "{}: --top-view writes a PNG; name it *.png",
                    png.display()
                )));
            }
        }
        Ok(Points {
            top_view: png.map(Path::to_path_buf),
            ..self
        })
    }
}

/// The header's camera: world to camera and world to NDC.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Camera {
    /// `worldToCamera`.
    pub world_to_camera: Matrix,
    /// `worldToNDC`.
    pub world_to_ndc: Matrix,
    camera_to_world: Matrix,
    camera_to_ndc: Matrix,
}

fn multiply(a: &Matrix, b: &Matrix) -> Matrix {
    let mut out = [[0.0; 4]; 4];
    for (i, row) in out.iter_mut().enumerate() {
        for (j, v) in row.iter_mut().enumerate() {
            *v = (0..4).map(|k| a[i][k] * b[k][j]).sum();
        }
    }
    out
}

/// The inverse of `m` (Gauss-Jordan with partial pivoting), none when it is singular.
pub fn invert(m: &Matrix) -> Option<Matrix> {
    let mut a = *m;
    let mut inv = [[0.0; 4]; 4];
    for (i, row) in inv.iter_mut().enumerate() {
        row[i] = 1.0;
    }
    for col in 0..4 {
        let pivot = (col..4).max_by(|&r, &s| a[r][col].abs().total_cmp(&a[s][col].abs()))?;
        if a[pivot][col].abs() < 1e-12 {
            return None;
        }
        a.swap(col, pivot);
        inv.swap(col, pivot);
        let p = a[col][col];
        for j in 0..4 {
            a[col][j] /= p;
            inv[col][j] /= p;
        }
        for r in 0..4 {
            if r != col {
                let f = a[r][col];
                for j in 0..4 {
                    a[r][j] -= f * a[col][j];
                    inv[r][j] -= f * inv[col][j];
                }
            }
        }
    }
    Some(inv)
}

/// `p M` for the point `p` (w = 1): the homogeneous result.
pub fn transform(p: [f64; 3], m: &Matrix) -> [f64; 4] {
    let mut out = [0.0; 4];
    for (j, o) in out.iter_mut().enumerate() {
        *o = p[0] * m[0][j] + p[1] * m[1][j] + p[2] * m[2][j] + m[3][j];
    }
    out
}

/// A matrix attribute's value: 16 little-endian f32, row-major.
fn matrix_of(attribute: &RawAttribute) -> Option<Matrix> {
    if attribute.kind != "m44f" || attribute.value.len() != 64 {
        return None;
    }
    let mut m = [[0.0; 4]; 4];
    for (k, chunk) in attribute.value.chunks_exact(4).enumerate() {
        let v = f32::from_le_bytes(chunk.try_into().expect("4 bytes")) as f64;
        m[k / 4][k % 4] = v;
    }
    m.iter().flatten().all(|v| v.is_finite()).then_some(m)
}

impl Camera {
    /// The camera of a header, when it carries both matrices; an error when they are there
    /// but cannot be used (not invertible, not finite).
    pub fn from_attributes(attributes: &[RawAttribute]) -> Result<Option<Camera>> {
        let find = |name: &str| attributes.iter().find(|a| a.name == name);
        let (Some(w2c), Some(w2n)) = (find("worldToCamera"), find("worldToNDC")) else {
            return Ok(None);
        };
        let bad = |name: &str| Error::format(format!("its {name} is not a finite m44f matrix"));
        let world_to_camera = matrix_of(w2c).ok_or_else(|| bad("worldToCamera"))?;
        let world_to_ndc = matrix_of(w2n).ok_or_else(|| bad("worldToNDC"))?;
        Camera::new(world_to_camera, world_to_ndc).map(Some)
    }

    /// A camera from its two matrices; an error when `worldToCamera` cannot be inverted.
    pub fn new(world_to_camera: Matrix, world_to_ndc: Matrix) -> Result<Camera> {
        let camera_to_world = invert(&world_to_camera).ok_or_else(|| {
            Error::format("its worldToCamera matrix cannot be inverted, so points have no place")
        })?;
        Ok(Camera {
            world_to_camera,
            world_to_ndc,
            camera_to_world,
            camera_to_ndc: multiply(&camera_to_world, &world_to_ndc),
        })
    }

    /// The world position of the point at normalised device coordinates (nx, ny) and view
    /// depth `depth` (see the module docs), none where the projection is degenerate there.
    pub fn unproject(&self, nx: f64, ny: f64, depth: f64) -> Option<[f64; 3]> {
        let c = &self.camera_to_ndc;
        // w grows with camera z by c[2][3]: in front of the camera is where w > 0. An
        // orthographic projection (c[2][3] = 0) looks down −z, OpenEXR's camera convention.
        let cz = if c[2][3] > 0.0 { depth } else { -depth };
        // x_h - nx w = 0 and y_h - ny w = 0, linear in (cx, cy) once cz is known.
        let a11 = c[0][0] - nx * c[0][3];
        let a12 = c[1][0] - nx * c[1][3];
        let b1 = -(cz * (c[2][0] - nx * c[2][3]) + (c[3][0] - nx * c[3][3]));
        let a21 = c[0][1] - ny * c[0][3];
        let a22 = c[1][1] - ny * c[1][3];
        let b2 = -(cz * (c[2][1] - ny * c[2][3]) + (c[3][1] - ny * c[3][3]));
        let det = a11 * a22 - a12 * a21;
        if det.abs() < 1e-300 {
            return None;
        }
        let cx = (b1 * a22 - a12 * b2) / det;
        let cy = (a11 * b2 - b1 * a21) / det;
        let world = transform([cx, cy, cz], &self.camera_to_world);
        Some([world[0], world[1], world[2]])
    }

    /// The ratio of the projection's x and y scales: the frame's width over its height for a
    /// camera of square pixels (how `points` sees that a cut-out image needs `--frame`).
    pub fn aspect(&self) -> f64 {
        let c = &self.camera_to_ndc;
        (c[1][1] / c[0][0]).abs()
    }
}

/// Where each sample's point goes (the module docs' two positions).
#[derive(Clone, Debug, PartialEq)]
pub enum Placement {
    /// Through the header's camera, with normalised device coordinates over the frame.
    Camera(Box<Camera>, Bounds),
    /// At the pixel centre and depth, in pixel units, y down.
    Pixels,
}

impl Placement {
    /// The point of a sample of pixel (`x`, `y`) (absolute) at depth `depth`, none where the
    /// camera's projection is degenerate there.
    pub fn position(&self, x: i32, y: i32, depth: f64) -> Option<[f64; 3]> {
        match self {
            Placement::Pixels => Some([x as f64 + 0.5, y as f64 + 0.5, depth]),
            Placement::Camera(camera, frame) => {
                let nx = 2.0 * (x as f64 + 0.5 - frame.x0 as f64) / frame.width() as f64 - 1.0;
                let ny = 1.0 - 2.0 * (y as f64 + 0.5 - frame.y0 as f64) / frame.height() as f64;
                camera.unproject(nx, ny, depth)
            }
        }
    }
}

/// One point as `points` makes it, before it is written.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SamplePoint {
    /// The sample's index in the image.
    pub sample: usize,
    /// The sample's depth `Z` (its front, for a volume).
    pub depth: f64,
    /// Where it goes ([`Placement::position`]).
    pub position: [f64; 3],
    /// Its colour and alpha as the PLY file holds them.
    pub rgba: [u8; 4],
}

/// The header of the PLY file, with the vertex count in a fixed-width field.
fn ply_header(count: u64, input: &Path) -> Vec<u8> {
    // The file's name only: a path would make the same points differ by where they were made.
    let name: String = input
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    format!(
        "ply\nformat binary_little_endian 1.0\ncomment deepmerge points from {name}\n\
         element vertex {count:<20}\nproperty float x\nproperty float y\nproperty float z\n\
         property uchar red\nproperty uchar green\nproperty uchar blue\nproperty uchar alpha\n\
         end_header\n"
    )
    .into_bytes()
}

/// Bytes of one point in the file.
pub const POINT_BYTES: usize = 16;

/// What one band's points need of its channels.
struct Columns {
    composite: CompositeChannels,
    /// Columns of R, G and B (or one grey column three times).
    colour: Option<[usize; 3]>,
    /// The alpha the threshold reads: A, else the per-channel ones.
    alphas: Vec<usize>,
    channel_of: Vec<usize>,
    z: usize,
}

impl Columns {
    fn of(image: &DeepImage) -> Result<Columns> {
        let composite = CompositeChannels::of(&[image]);
        let role = |k: usize| ChannelRole::of(&composite.names[k], crate::deep::SampleType::F32);
        let find = |r: ChannelRole| (0..composite.len()).find(|&k| role(k) == r);
        let colour = match (
            find(ChannelRole::Red),
            find(ChannelRole::Green),
            find(ChannelRole::Blue),
        ) {
            (Some(r), Some(g), Some(b)) => Some([r, g, b]),
            _ => (0..composite.len())
                .find(|&k| matches!(composite.kinds[k], CompositeKind::Colour { .. }))
                .map(|k| [k, k, k]),
        };
        let alphas = match find(ChannelRole::Alpha) {
            Some(a) => vec![a],
            None => composite.alphas.clone(),
        };
        let channel_of = composite
            .names
            .iter()
            .map(|n| image.channel_index(n).expect("the image's channels"))
            .collect();
        let z = image
            .role_index(ChannelRole::Z)
            .ok_or_else(|| Error::format("has no Z channel, so its samples have no depth"))?;
        Ok(Columns {
            composite,
            colour,
            alphas,
            channel_of,
            z,
        })
    }
}

/// The points of one band, appended to `out`; the number written.
fn band_points(
    image: &DeepImage,
    points: &Points,
    placement: &Placement,
    out: &mut Vec<u8>,
) -> Result<u64> {
    for_each_point(image, points.min_alpha, placement, |point| {
        for v in point.position {
            out.extend_from_slice(&(v as f32).to_le_bytes());
        }
        out.extend_from_slice(&point.rgba);
    })
}

/// Every point `points` makes of `image` (samples whose alpha is at least `min_alpha`, placed
/// by `placement`), in the file's order (rows, then samples), handed to `each`; the number of
/// points. The PLY writer and the viewer's point cloud both walk the samples with this, so
/// the two place every sample alike.
pub fn for_each_point(
    image: &DeepImage,
    min_alpha: f32,
    placement: &Placement,
    mut each: impl FnMut(SamplePoint),
) -> Result<u64> {
    let columns = Columns::of(image)?;
    let value = |k: usize, i: usize| image.planes[columns.channel_of[k]].get_f32(i);
    let window = image.data_window;
    let mut written = 0u64;
    for p in 0..window.area() {
        let (x, y) = window.coords_of(p);
        for i in image.range(p) {
            let alpha = if columns.alphas.is_empty() {
                1.0
            } else {
                columns
                    .alphas
                    .iter()
                    .map(|&a| value(a, i))
                    .fold(f32::NEG_INFINITY, f32::max)
            };
            if alpha < min_alpha {
                continue;
            }
            let depth = image.planes[columns.z].get_f32(i) as f64;
            let Some(position) = placement.position(x, y, depth) else {
                continue;
            };
            let colour = columns.colour.map(|rgb| {
                rgb.map(|k| {
                    let a = match columns.composite.kinds[k] {
                        CompositeKind::Colour { alpha } => value(alpha, i),
                        CompositeKind::Alpha => 1.0,
                    };
                    if a > 0.0 {
                        value(k, i) / a
                    } else {
                        0.0
                    }
                })
            });
            let rgba = crate::preview::preview_rgba(colour, Some(alpha.clamp(0.0, 1.0)));
            each(SamplePoint {
                sample: i,
                depth,
                position,
                rgba,
            });
            written += 1;
        }
    }
    Ok(written)
}

/// Write the points of the deep part `part` of `input` to `output` (a `.ply` file), streamed
/// in bands within `budget` bytes (`band_rows` rows each when given). Says on stderr, in one
/// line, when the points are in pixel coordinates because the file has no camera. Returns the
/// number of points written.
pub fn run_points(
    points: &Points,
    input: &Path,
    output: &Path,
    part: &PartSelector,
    budget: u64,
    band_rows: Option<usize>,
) -> Result<u64> {
    let is_ply = output
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("ply"));
    if !is_ply {
        return Err(Error::Usage(format!(
            "{}: points writes a PLY file; name it *.ply",
            output.display()
        )));
    }
    crate::exr::check_output_is_not_an_input(output, &[input.to_path_buf()])?;
    let mut source = ChunkSource::open(input, part, budget)?;
    source.count_rows(budget)?;
    let camera = Camera::from_attributes(&source.attributes).map_err(|e| e.in_file(input))?;
    let placement = match (points.camera, camera) {
        (CameraMode::Pixels, _) => Placement::Pixels,
        (_, Some(camera)) => {
            let frame = points.frame.unwrap_or(source.display_window);
            let frame_aspect = frame.width() as f64 / frame.height() as f64;
            if (camera.aspect() / frame_aspect - 1.0).abs() > 0.01 {
                // A note, not an error: the output is still right for an uncut image.
                if !points.quiet {
                    eprintln!(
                        "deepmerge points: {}: the camera's projection is {:.4} wide per unit of \
                     height but the frame {frame} is {:.4}; the image may be cut out of a \
                     larger render: give that render's display window with --frame",
                        input.display(),
                        camera.aspect(),
                        frame_aspect
                    );
                }
            }
            Placement::Camera(Box::new(camera), frame)
        }
        (CameraMode::Require, None) => {
            return Err(Error::file(
                input,
                "has no camera (worldToCamera and worldToNDC), which --camera file asks for",
            ))
        }
        (CameraMode::Auto, None) => {
            if !points.quiet {
                eprintln!(
                    "deepmerge points: {}: no camera in the header (worldToCamera, \
                     worldToNDC): points are at pixel centres (x, y down) and depth Z",
                    input.display()
                );
            }
            Placement::Pixels
        }
    };
    let head = source.no_rows(source.window.y0);
    Columns::of(&head).map_err(|e| e.in_file(input))?;
    let shape = OutputShape {
        deep_value_bytes: POINT_BYTES as u64,
        columns: 0,
        ids: 0,
    };
    let options = StreamOptions {
        merge: crate::composite::MergeOptions {
            output: OutputKind::Deep,
            ..Default::default()
        },
        budget,
        band_rows,
        ..StreamOptions::default()
    };
    let window = source.window;
    let bands = plan_bands(std::slice::from_ref(&source), window, &shape, &options)
        .map_err(|e| e.in_file(input))?;
    let file = AtomicFile::create(output)?;
    let mut writer = crate::exr::WriteBehind::new(file.file());
    let header = ply_header(0, input);
    writer.write_all(&header).map_err(|e| file.error(e))?;
    let mut total = 0u64;
    let mut buffer = Vec::new();
    for band in bands {
        let image = source.take_rows(band).map_err(|e| e.in_file(input))?;
        buffer.clear();
        total +=
            band_points(&image, points, &placement, &mut buffer).map_err(|e| e.in_file(input))?;
        writer.write_all(&buffer).map_err(|e| file.error(e))?;
    }
    writer.flush().map_err(|e| file.error(e))?;
    drop(writer);
    let header = ply_header(total, input);
    let mut handle = file.file();
    handle
        .seek(SeekFrom::Start(0))
        .and_then(|_| handle.write_all(&header))
        .map_err(|e| file.error(e))?;
    file.commit()?;
    if let Some(view) = &points.top_view {
        let camera = match &placement {
            Placement::Camera(camera, _) => Some(camera.as_ref()),
            Placement::Pixels => None,
        };
        write_top_view(output, camera, view)?;
    }
    Ok(total)
}

/// The larger side of the top view, in pixels.
pub const TOP_VIEW_SIDE: usize = 512;

/// The linear value of an 8-bit sRGB component.
fn srgb_to_linear(byte: u8) -> f64 {
    let v = byte as f64 / 255.0;
    if v <= 0.04045 {
        v / 12.92
    } else {
        ((v + 0.055) / 1.055).powf(2.4)
    }
}

/// Draw the points of the PLY file `ply` (as [`run_points`] writes it) seen from above into
/// the PNG `png`: across is the camera's x (pixel x without a camera), up is depth along the
/// view axis, near at the bottom, both to one scale, the larger side [`TOP_VIEW_SIDE`] pixels.
/// A pixel's alpha is `1 − Π(1 − a)` of the points falling in it and its colour their mean
/// weighted by alpha, so the picture does not depend on the points' order. Two passes over
/// the file (bounds, then drawing): memory is the picture's, whatever the number of points.
pub fn write_top_view(ply: &Path, camera: Option<&Camera>, png: &Path) -> Result<()> {
    use std::io::{BufRead, BufReader, Read};
    let open = || -> Result<BufReader<std::fs::File>> {
        let file = std::fs::File::open(ply).map_err(|e| Error::file(ply, e.to_string()))?;
        let mut reader = BufReader::new(file);
        let mut line = String::new();
        loop {
            line.clear();
            let n = reader
                .read_line(&mut line)
                .map_err(|e| Error::file(ply, e.to_string()))?;
            if n == 0 {
                return Err(Error::file(ply, "is not a PLY file deepmerge wrote"));
            }
            if line == "end_header\n" {
                return Ok(reader);
            }
        }
    };
    // (across, depth, [r, g, b, a] bytes) of each point, in a pass over the file.
    let pass = |f: &mut dyn FnMut(f64, f64, [u8; 4])| -> Result<()> {
        let mut reader = open()?;
        let mut record = [0u8; POINT_BYTES];
        loop {
            match reader.read_exact(&mut record) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(Error::file(ply, e.to_string())),
            }
            let v = |k: usize| {
                f32::from_le_bytes(record[4 * k..4 * k + 4].try_into().expect("4 bytes")) as f64
            };
            let (across, depth) = match camera {
                Some(camera) => {
                    let q = transform([v(0), v(1), v(2)], &camera.world_to_camera);
                    (q[0], q[2].abs())
                }
                None => (v(0), v(2)),
            };
            if across.is_finite() && depth.is_finite() {
                f(
                    across,
                    depth,
                    [record[12], record[13], record[14], record[15]],
                );
            }
        }
    };
    let mut bounds: Option<[f64; 4]> = None;
    pass(&mut |a, d, _| {
        let b = bounds.get_or_insert([a, a, d, d]);
        *b = [b[0].min(a), b[1].max(a), b[2].min(d), b[3].max(d)];
    })?;
    let [a0, a1, d0, d1] = bounds.ok_or_else(|| {
        Error::file(
            ply,
            "holds no point with finite coordinates to draw a top view of",
        )
    })?;
    let (across, deep) = ((a1 - a0).max(1e-12), (d1 - d0).max(1e-12));
    let scale = (TOP_VIEW_SIDE - 1) as f64 / across.max(deep);
    let width = ((across * scale).round() as usize + 1).max(1);
    let height = ((deep * scale).round() as usize + 1).max(1);
    let mut clear = vec![1.0f64; width * height];
    let mut weight = vec![0.0f64; width * height];
    let mut colour = vec![[0.0f64; 3]; width * height];
    pass(&mut |a, d, rgba| {
        let u = (((a - a0) * scale).round() as usize).min(width - 1);
        let v = height - 1 - (((d - d0) * scale).round() as usize).min(height - 1);
        let p = v * width + u;
        let alpha = rgba[3] as f64 / 255.0;
        clear[p] *= 1.0 - alpha;
        weight[p] += alpha;
        for (c, &byte) in colour[p].iter_mut().zip(&rgba[..3]) {
            *c += alpha * srgb_to_linear(byte);
        }
    })?;
    let window = Bounds::from_origin_size(0, 0, width, height);
    let mut planes: Vec<Vec<f32>> = (0..4).map(|_| Vec::with_capacity(width * height)).collect();
    for p in 0..width * height {
        let alpha = 1.0 - clear[p];
        for (c, plane) in planes.iter_mut().take(3).enumerate() {
            let mean = if weight[p] > 0.0 {
                colour[p][c] / weight[p]
            } else {
                0.0
            };
            plane.push((mean * alpha) as f32);
        }
        planes[3].push(alpha as f32);
    }
    let channels = ["R", "G", "B", "A"]
        .into_iter()
        .zip(planes)
        .map(|(name, values)| crate::deep::FlatChannel {
            name: name.into(),
            values: crate::deep::FlatValues::F32(values),
        })
        .collect();
    let image = crate::deep::FlatImage {
        display_window: window,
        data_window: window,
        channels,
    };
    let mut writer = crate::preview::PngBandWriter::create(png, window)?;
    writer.write_band(&image)?;
    writer.finish()
}

/// `points` in the table of operations ([`super::registry`]).
pub const SPEC: OpSpec = OpSpec {
    name: "points",
    python: "points",
    help: "Write every sample as a point of a binary PLY file, placed by the header's camera \
           (worldToCamera, worldToNDC) or, without one, at pixel coordinates and depth",
    doc: "Write every sample of ``input`` with alpha at least ``min_alpha`` as a point of the \
          binary PLY file ``out``, as ``deepmerge points``: placed by the header's camera \
          (``camera=\"auto\"`` falls back to pixel coordinates, ``\"file\"`` requires the \
          camera, ``\"pixels\"`` ignores it), ``frame=(x0, y0, x1, y1)`` the render's display \
          window for a cut-out image, ``top_view=PATH`` also a PNG of the points seen from \
          above. Returns the number of points.",
    inputs: DEEP_INPUT,
    options: &[
        OptionSpec {
            name: "min_alpha",
            kind: ValueKind::F32,
            default: Some("0"),
            value_name: "A",
            help: "Keep samples whose alpha is at least this (0 to 1; default: every sample)",
            positional: true,
            hyphen_values: true,
            ..OptionSpec::NEW
        },
        OptionSpec {
            name: "camera",
            kind: ValueKind::Name(CAMERA_NAMES),
            default: Some("auto"),
            value_name: "MODE",
            help: "auto: the header's camera (worldToCamera, worldToNDC) when it has one, else \
                   pixel coordinates; file: the header's camera or an error; pixels: pixel \
                   coordinates and Z",
            ..OptionSpec::NEW
        },
        OptionSpec {
            name: "frame",
            kind: ValueKind::Numbers { sep: ",", count: 4 },
            value_name: "X0,Y0,X1,Y1",
            help: "The raster the camera's NDC spans, X0,Y0,X1,Y1 (default: the display \
                   window): for an image cut out of a larger render, that render's display \
                   window in this image's pixels",
            hyphen_values: true,
            ..OptionSpec::NEW
        },
        OptionSpec {
            name: "top_view",
            kind: ValueKind::Path,
            value_name: "PNG",
            help: "Also draw the points seen from above into this PNG: across the camera's x, \
                   up the view depth (near at the bottom)",
            ..OptionSpec::NEW
        },
    ],
    produces: Produces::File {
        value_name: "OUT.ply",
        help: "Output: a binary little-endian PLY file",
    },
    comp: false,
    build: |v, _| {
        let camera: CameraMode = v.text("camera").unwrap_or("auto").parse()?;
        let points = Points::new(v.f32("min_alpha").unwrap_or(0.0), camera, v.text("frame"))?
            .with_top_view(v.path("top_view"))?;
        Ok(Arc::new(points))
    },
};

impl Operation for Points {
    fn run(&self, inputs: &[PathBuf], output: &Path, request: OutputRequest) -> Result<Ran> {
        let quiet = Points {
            quiet: request.quiet,
            ..self.clone()
        };
        let points = run_points(
            &quiet,
            &inputs[0],
            output,
            &request.part,
            request.memory_budget,
            request.band_rows,
        )?;
        Ok(Ran::Points(points))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_keeps_its_length_whatever_the_count() {
        let p = Path::new("in.exr");
        assert_eq!(ply_header(0, p).len(), ply_header(u64::MAX, p).len());
    }

    #[test]
    fn a_camera_unprojects_onto_its_own_projection() {
        // Arnold's deepalpha.exr camera (tests/data/oiio).
        let w2c = [
            [1.0, 0.0, 0.0, 0.0],
            [0.0, 1.0, 0.0, 0.0],
            [0.0, 0.0, -1.0, 0.0],
            [1.5, 0.0, 4.0, 1.0],
        ];
        let w2n = [
            [2.4142134, 0.0, 0.0, 0.0],
            [0.0, 3.2189512, 0.0, 0.0],
            [0.0, 0.0, -1.0067115, -1.0],
            [3.6213202, 0.0, 3.9261749, 4.0],
        ];
        let camera = Camera::new(w2c, w2n).unwrap();
        let p = camera.unproject(0.25, -0.5, 3.0).unwrap();
        let ndc = transform(p, &w2n);
        assert!((ndc[0] / ndc[3] - 0.25).abs() < 1e-9);
        assert!((ndc[1] / ndc[3] + 0.5).abs() < 1e-9);
        assert!(ndc[3] > 0.0);
        let cam = transform(p, &w2c);
        assert!((cam[2].abs() - 3.0).abs() < 1e-9);
        assert!((camera.aspect() - 4.0 / 3.0).abs() < 1e-6);
        assert!(invert(&[[0.0; 4]; 4]).is_none());
    }
}
