//! Primitives and the rasteriser that turns them into a sorted deep image.
//!
//! Screen coordinates are in units of the image height: pixel (px, py) has its centre at
//! u = (px + 0.5) / height, v = (py + 0.5) / height, so shapes stay round whatever the aspect ratio
//! and a scene's depth complexity does not depend on its resolution (a shape thinner than a pixel
//! is hit by a proportionally smaller share of pixel centres, as a rasteriser would do). Depth is
//! in world units of about 0 to 100; round shapes are [`DEPTH_PER_UNIT`] deep per unit of radius.
//!
//! Every primitive that covers a pixel centre contributes one fragment (or two, front and back,
//! for closed shapes), as a GPU capturing all fragments of transparent geometry would: that is
//! what the paper's scenes are.

use half::f16;
use rayon::prelude::*;

use crate::deep::{Bounds, Channel, DeepImage, DeepState, Plane, SampleType};
use crate::error::Result;

/// World depth units per screen unit, for the depth extent of spheres and tubes.
pub const DEPTH_PER_UNIT: f32 = 100.0;

/// The geometry of a primitive.
#[derive(Clone, Debug)]
pub enum Shape {
    /// A screen-aligned rectangle at depth `z`: one fragment.
    Quad {
        /// Left, top, right, bottom in screen units.
        rect: [f32; 4],
        /// Depth.
        z: f32,
    },
    /// A sphere: front and back fragments.
    Sphere {
        /// Centre (u, v, depth).
        centre: [f32; 3],
        /// Radius in screen units.
        radius: f32,
    },
    /// A capsule from `a` to `b` ((u, v, depth) each): front and back fragments when
    /// `closed` (pipes, columns), one fragment at the centre-line depth otherwise (hair strands).
    Tube {
        /// One end.
        a: [f32; 3],
        /// The other end.
        b: [f32; 3],
        /// Radius in screen units.
        radius: f32,
        /// Whether front and back surfaces are both captured.
        closed: bool,
    },
}

/// A primitive: shape, straight (not premultiplied) colour and alpha in (0, 1].
#[derive(Clone, Debug)]
pub struct Primitive {
    /// Geometry.
    pub shape: Shape,
    /// Straight colour.
    pub colour: [f32; 3],
    /// Alpha of each fragment, in (0, 1].
    pub alpha: f32,
}

/// One captured fragment: column, depth and premultiplied RGBA.
#[derive(Clone, Copy, Debug)]
struct Fragment {
    x: u32,
    z: f32,
    rgba: [f32; 4],
}

impl Primitive {
    /// Screen bounding box: left, top, right, bottom.
    fn bbox(&self) -> [f32; 4] {
        match &self.shape {
            Shape::Quad { rect, .. } => *rect,
            Shape::Sphere { centre, radius } => [
                centre[0] - radius,
                centre[1] - radius,
                centre[0] + radius,
                centre[1] + radius,
            ],
            Shape::Tube { a, b, radius, .. } => [
                a[0].min(b[0]) - radius,
                a[1].min(b[1]) - radius,
                a[0].max(b[0]) + radius,
                a[1].max(b[1]) + radius,
            ],
        }
    }

    /// Fragment(s) at screen point (u, v) of column `x`, if the primitive covers it.
    fn fragments(&self, x: u32, u: f32, v: f32, out: &mut Vec<Fragment>) {
        // `shade` darkens the rims of round shapes (cosine of the view angle) so images read as 3D.
        let mut emit = |z: f32, shade: f32| {
            let a = self.alpha;
            out.push(Fragment {
                x,
                z,
                rgba: [
                    self.colour[0] * shade * a,
                    self.colour[1] * shade * a,
                    self.colour[2] * shade * a,
                    a,
                ],
            });
        };
        match &self.shape {
            Shape::Quad { rect, z } => {
                if u >= rect[0] && u < rect[2] && v >= rect[1] && v < rect[3] {
                    emit(*z, 1.0);
                }
            }
            Shape::Sphere { centre, radius } => {
                let (du, dv) = (u - centre[0], v - centre[1]);
                let d2 = du * du + dv * dv;
                let r2 = radius * radius;
                if d2 < r2 {
                    let h = (r2 - d2).sqrt();
                    let shade = 0.35 + 0.65 * h / radius;
                    emit(centre[2] - h * DEPTH_PER_UNIT, shade);
                    emit(centre[2] + h * DEPTH_PER_UNIT, 0.5 * shade);
                }
            }
            Shape::Tube {
                a,
                b,
                radius,
                closed,
            } => {
                let (eu, ev) = (b[0] - a[0], b[1] - a[1]);
                let len2 = eu * eu + ev * ev;
                let t = if len2 > 0.0 {
                    (((u - a[0]) * eu + (v - a[1]) * ev) / len2).clamp(0.0, 1.0)
                } else {
                    0.0
                };
                let (du, dv) = (u - (a[0] + t * eu), v - (a[1] + t * ev));
                let d2 = du * du + dv * dv;
                let r2 = radius * radius;
                if d2 < r2 {
                    let z = a[2] + t * (b[2] - a[2]);
                    let h = (r2 - d2).sqrt();
                    let shade = 0.35 + 0.65 * h / radius;
                    if *closed {
                        emit(z - h * DEPTH_PER_UNIT, shade);
                        emit(z + h * DEPTH_PER_UNIT, 0.5 * shade);
                    } else {
                        emit(z, shade);
                    }
                }
            }
        }
    }
}

/// Rasterise `primitives` into a `width` x `height` deep image (channels A, B, G, R half and Z
/// float, sorted by depth in each pixel). Pixels keep at most `max_samples` fragments, the
/// nearest ones, as a renderer with a fixed per-pixel fragment budget would.
pub fn rasterize(
    primitives: &[Primitive],
    width: usize,
    height: usize,
    max_samples: usize,
) -> Result<DeepImage> {
    let scale = height as f32;
    // Per-row lists of the primitives whose bounding box reaches the row; built serially (so
    // each list is in primitive order, which keeps the result deterministic) and read in parallel.
    let mut rows: Vec<Vec<u32>> = vec![Vec::new(); height];
    let mut columns: Vec<(u32, u32)> = Vec::with_capacity(primitives.len());
    for (i, p) in primitives.iter().enumerate() {
        let [u0, v0, u1, v1] = p.bbox();
        let first = |c: f32, n: usize| ((c * scale - 0.5).floor().max(0.0) as usize).min(n);
        let last = |c: f32, n: usize| ((c * scale - 0.5).ceil().max(-1.0) + 1.0).min(n as f32);
        let (x0, x1) = (first(u0, width), last(u1, width) as usize);
        let (y0, y1) = (first(v0, height), last(v1, height) as usize);
        columns.push((x0 as u32, x1 as u32));
        if x0 < x1 {
            for row in &mut rows[y0..y1.max(y0)] {
                row.push(i as u32);
            }
        }
    }

    struct RowOut {
        counts: Vec<u32>,
        rgba: [Vec<f16>; 4],
        z: Vec<f32>,
    }
    let out: Vec<RowOut> = rows
        .par_iter()
        .enumerate()
        .map_init(Vec::new, |fragments, (py, list)| {
            fragments.clear();
            let v = (py as f32 + 0.5) / scale;
            for &i in list {
                let (x0, x1) = columns[i as usize];
                for px in x0..x1 {
                    let u = (px as f32 + 0.5) / scale;
                    primitives[i as usize].fragments(px, u, v, fragments);
                }
            }
            // Stable: fragments at equal depth keep primitive order, so the image is a function
            // of the primitive list alone.
            fragments.sort_by(|a, b| a.x.cmp(&b.x).then(a.z.total_cmp(&b.z)));
            let mut row = RowOut {
                counts: vec![0; width],
                rgba: Default::default(),
                z: Vec::with_capacity(fragments.len()),
            };
            for f in fragments.iter() {
                let count = &mut row.counts[f.x as usize];
                if (*count as usize) < max_samples {
                    *count += 1;
                    for (plane, value) in row.rgba.iter_mut().zip(f.rgba) {
                        plane.push(f16::from_f32(value));
                    }
                    row.z.push(f.z);
                }
            }
            row
        })
        .collect();

    let counts: Vec<u32> = out.iter().flat_map(|r| r.counts.iter().copied()).collect();
    let concat_half =
        |k: usize| -> Vec<f16> { out.iter().flat_map(|r| r.rgba[k].iter().copied()).collect() };
    let (r, g, b, a) = (
        concat_half(0),
        concat_half(1),
        concat_half(2),
        concat_half(3),
    );
    let z: Vec<f32> = out.iter().flat_map(|r| r.z.iter().copied()).collect();
    // EXR channel order is by name: A, B, G, R, Z.
    let channels = vec![
        Channel::new("A", SampleType::F16),
        Channel::new("B", SampleType::F16),
        Channel::new("G", SampleType::F16),
        Channel::new("R", SampleType::F16),
        Channel::new("Z", SampleType::F32),
    ];
    let planes = vec![
        Plane::F16(a),
        Plane::F16(b),
        Plane::F16(g),
        Plane::F16(r),
        Plane::F32(z),
    ];
    let window = Bounds::from_origin_size(0, 0, width, height);
    DeepImage::from_counts(window, window, channels, &counts, planes, DeepState::Sorted)
}
