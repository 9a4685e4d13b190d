//! The four scenes, modelled on the paper's (Archer, Leach and van Schyndel 2018, section 5):
//! each builder turns its parameter file and a seed into two layers of primitives.
//!
//! - atrium: interior (columns, banners, plants, floor) in front of an exterior (sky, facades,
//!   trees); each layer stays under 20 fragments per pixel.
//! - powerplant: the same split, but both layers are clusters of closed pipes and tanks, dense
//!   enough to reach 64-128 fragments and beyond in the clusters.
//! - hairball: a ball of thin semi-transparent strands, densest at its core (hundreds of fragments
//!   per pixel), and a layer of random semi-transparent spheres spread through the same depths.
//! - planes: 256 screen-aligned semi-transparent quads in roughly front-to-back order, and the
//!   same kind of random spheres.
//!
//! Interior/exterior scenes keep the layers mostly apart in depth (a merge reads one input, then
//! the other); hairball and planes interleave them (a merge reads both evenly), as in the paper.

use super::params::SceneParams;
use super::raster::{Primitive, Shape};
use super::rng::SceneRng;
use crate::error::Result;

/// Two layers of primitives and the per-pixel fragment budget of the scene.
pub struct SceneLayers {
    /// Layer 0: interior, hairball or planes.
    pub first: Vec<Primitive>,
    /// Layer 1: exterior or random spheres.
    pub second: Vec<Primitive>,
    /// At most this many fragments per pixel per input (the nearest are kept).
    pub max_samples: usize,
}

/// A muted random colour: a base hue from `palette` (RGB), varied in brightness.
fn colour_near(rng: &mut SceneRng, palette: &[[f32; 3]]) -> [f32; 3] {
    let base = palette[rng.below(palette.len())];
    let k = rng.range(0.6, 1.0);
    base.map(|c| (c * k).clamp(0.0, 1.0))
}

const STONE: [[f32; 3]; 3] = [[0.85, 0.78, 0.65], [0.75, 0.70, 0.62], [0.9, 0.85, 0.75]];
const CLOTH: [[f32; 3]; 3] = [[0.8, 0.15, 0.1], [0.15, 0.3, 0.8], [0.85, 0.7, 0.1]];
const FOLIAGE: [[f32; 3]; 3] = [[0.2, 0.55, 0.15], [0.3, 0.65, 0.2], [0.15, 0.4, 0.1]];
const METAL: [[f32; 3]; 4] = [
    [0.6, 0.6, 0.62],
    [0.7, 0.45, 0.2],
    [0.3, 0.45, 0.6],
    [0.8, 0.75, 0.3],
];
const HAIR: [[f32; 3]; 3] = [[0.45, 0.3, 0.15], [0.6, 0.45, 0.25], [0.3, 0.2, 0.1]];
const BRIGHT: [[f32; 3]; 5] = [
    [0.9, 0.2, 0.2],
    [0.2, 0.8, 0.3],
    [0.25, 0.4, 0.95],
    [0.95, 0.85, 0.2],
    [0.8, 0.3, 0.9],
];

/// `spheres.*` parameters: random spheres over the whole frame within a depth range.
fn random_spheres(
    params: &mut SceneParams,
    rng: &mut SceneRng,
    prefix: &str,
    aspect: f32,
    palette: &[[f32; 3]],
    out: &mut Vec<Primitive>,
) -> Result<()> {
    let count = params.take_count(&format!("{prefix}.count"))?;
    let radius = params.take_range(&format!("{prefix}.radius"))?;
    let depth = params.take_range(&format!("{prefix}.depth"))?;
    let alpha = params.take_range(&format!("{prefix}.alpha"))?;
    let (u_range, v_range) = (
        params.take_range(&format!("{prefix}.x"))?,
        params.take_range(&format!("{prefix}.y"))?,
    );
    for _ in 0..count {
        let centre = [
            rng.range(u_range.0, u_range.1) * aspect,
            rng.range(v_range.0, v_range.1),
            rng.range(depth.0, depth.1),
        ];
        out.push(Primitive {
            shape: Shape::Sphere {
                centre,
                radius: rng.range(radius.0, radius.1),
            },
            colour: colour_near(rng, palette),
            alpha: rng.range(alpha.0, alpha.1),
        });
    }
    Ok(())
}

/// Clusters of pipes (closed tubes, axis-aligned or diagonal) and tanks: machinery.
fn machinery(
    params: &mut SceneParams,
    rng: &mut SceneRng,
    prefix: &str,
    aspect: f32,
    out: &mut Vec<Primitive>,
) -> Result<()> {
    let clusters = params.take_count(&format!("{prefix}.clusters"))?;
    let extent = params.take_range(&format!("{prefix}.cluster_size"))?;
    let pipes = params.take_count(&format!("{prefix}.pipes_per_cluster"))?;
    let length = params.take_range(&format!("{prefix}.pipe_length"))?;
    let radius = params.take_range(&format!("{prefix}.pipe_radius"))?;
    let depth = params.take_range(&format!("{prefix}.depth"))?;
    let alpha = params.take_range(&format!("{prefix}.alpha"))?;
    let tanks = params.take_count(&format!("{prefix}.tanks_per_cluster"))?;
    let tank_radius = params.take_range(&format!("{prefix}.tank_radius"))?;
    for _ in 0..clusters {
        let size = rng.range(extent.0, extent.1);
        let centre = [
            rng.range(0.1, 0.9) * aspect,
            rng.range(0.15, 0.85),
            rng.range(depth.0, depth.1),
        ];
        let depth_spread = size * 20.0;
        for _ in 0..pipes {
            let start = [
                centre[0] + rng.range(-0.5, 0.5) * size,
                centre[1] + rng.range(-0.5, 0.5) * size,
                centre[2] + rng.range(-0.5, 0.5) * depth_spread,
            ];
            let len = rng.range(length.0, length.1);
            // Mostly horizontal and vertical runs, some diagonals, some running into the depth.
            let dir = match rng.below(6) {
                0 | 1 => [1.0, 0.0, 0.0],
                2 | 3 => [0.0, 1.0, 0.0],
                4 => [0.7, 0.7, 0.0],
                _ => [0.5, 0.0, 0.86],
            };
            let end = [
                start[0] + dir[0] * len,
                start[1] + dir[1] * len,
                start[2] + dir[2] * len * 20.0,
            ];
            out.push(Primitive {
                shape: Shape::Tube {
                    a: start,
                    b: end,
                    radius: rng.range(radius.0, radius.1),
                    closed: true,
                },
                colour: colour_near(rng, &METAL),
                alpha: rng.range(alpha.0, alpha.1),
            });
        }
        for _ in 0..tanks {
            out.push(Primitive {
                shape: Shape::Sphere {
                    centre: [
                        centre[0] + rng.range(-0.5, 0.5) * size,
                        centre[1] + rng.range(-0.5, 0.5) * size,
                        centre[2] + rng.range(-0.5, 0.5) * depth_spread,
                    ],
                    radius: rng.range(tank_radius.0, tank_radius.1),
                },
                colour: colour_near(rng, &METAL),
                alpha: rng.range(alpha.0, alpha.1),
            });
        }
    }
    Ok(())
}

/// Full-frame opaque background quad at `depth` (the sky).
fn sky(aspect: f32, depth: f32) -> Primitive {
    Primitive {
        shape: Shape::Quad {
            rect: [0.0, 0.0, aspect, 1.0],
            z: depth,
        },
        colour: [0.55, 0.7, 0.9],
        alpha: 1.0,
    }
}

/// Atrium: interior colonnade in front of an exterior courtyard.
pub fn atrium(params: &mut SceneParams, seed: u64, aspect: f32) -> Result<SceneLayers> {
    let max_samples = params.take_count("max_samples")?;
    let mut rng = SceneRng::new(seed, "atrium.interior");
    let mut interior = Vec::new();
    let columns = params.take_count("interior.columns")?;
    let column_radius = params.take_range("interior.column_radius")?;
    let column_depth = params.take_range("interior.column_depth")?;
    for _ in 0..columns {
        let u = rng.range(0.0, 1.0) * aspect;
        let z = rng.range(column_depth.0, column_depth.1);
        interior.push(Primitive {
            shape: Shape::Tube {
                a: [u, -0.1, z],
                b: [u, 1.1, z],
                radius: rng.range(column_radius.0, column_radius.1),
                closed: true,
            },
            colour: colour_near(&mut rng, &STONE),
            alpha: rng.range(0.9, 1.0),
        });
    }
    let floor_depth = params.take("interior.floor_depth")?;
    let floor_top = params.take("interior.floor_top")?;
    interior.push(Primitive {
        shape: Shape::Quad {
            rect: [0.0, floor_top, aspect, 1.0],
            z: floor_depth,
        },
        colour: STONE[1],
        alpha: 1.0,
    });
    let banners = params.take_count("interior.banners")?;
    let banner_size = params.take_range("interior.banner_size")?;
    let banner_depth = params.take_range("interior.banner_depth")?;
    let banner_alpha = params.take_range("interior.banner_alpha")?;
    for _ in 0..banners {
        let (w, h) = (
            rng.range(banner_size.0, banner_size.1) * 0.4,
            rng.range(banner_size.0, banner_size.1),
        );
        let (u, v) = (rng.range(0.0, 1.0) * aspect, rng.range(0.0, 0.6));
        interior.push(Primitive {
            shape: Shape::Quad {
                rect: [u, v, u + w, v + h],
                z: rng.range(banner_depth.0, banner_depth.1),
            },
            colour: colour_near(&mut rng, &CLOTH),
            alpha: rng.range(banner_alpha.0, banner_alpha.1),
        });
    }
    random_spheres(
        params,
        &mut rng,
        "interior.plants",
        aspect,
        &FOLIAGE,
        &mut interior,
    )?;

    let mut rng = SceneRng::new(seed, "atrium.exterior");
    let mut exterior = vec![sky(aspect, params.take("exterior.sky_depth")?)];
    let facades = params.take_count("exterior.facades")?;
    let facade_width = params.take_range("exterior.facade_width")?;
    let facade_depth = params.take_range("exterior.facade_depth")?;
    for _ in 0..facades {
        let u = rng.range(-0.1, 1.0) * aspect;
        let top = rng.range(0.15, 0.6);
        exterior.push(Primitive {
            shape: Shape::Quad {
                rect: [u, top, u + rng.range(facade_width.0, facade_width.1), 1.0],
                z: rng.range(facade_depth.0, facade_depth.1),
            },
            colour: colour_near(&mut rng, &STONE),
            alpha: rng.range(0.6, 1.0),
        });
    }
    random_spheres(
        params,
        &mut rng,
        "exterior.trees",
        aspect,
        &FOLIAGE,
        &mut exterior,
    )?;
    Ok(SceneLayers {
        first: interior,
        second: exterior,
        max_samples,
    })
}

/// Powerplant: dense machinery inside, more machinery and a sky outside.
pub fn powerplant(params: &mut SceneParams, seed: u64, aspect: f32) -> Result<SceneLayers> {
    let max_samples = params.take_count("max_samples")?;
    let mut rng = SceneRng::new(seed, "powerplant.interior");
    let mut interior = Vec::new();
    machinery(params, &mut rng, "interior", aspect, &mut interior)?;
    let mut rng = SceneRng::new(seed, "powerplant.exterior");
    let mut exterior = vec![sky(aspect, params.take("exterior.sky_depth")?)];
    machinery(params, &mut rng, "exterior", aspect, &mut exterior)?;
    Ok(SceneLayers {
        first: interior,
        second: exterior,
        max_samples,
    })
}

/// Hairball: curly strands as random walks in a ball, densest at the core, plus random spheres.
pub fn hairball(params: &mut SceneParams, seed: u64, aspect: f32) -> Result<SceneLayers> {
    let max_samples = params.take_count("max_samples")?;
    let mut rng = SceneRng::new(seed, "hairball.strands");
    let strands = params.take_count("ball.strands")?;
    let segments = params.take_count("ball.segments_per_strand")?;
    let segment_length = params.take("ball.segment_length")?;
    let strand_radius = params.take("ball.strand_radius")?;
    let radius = params.take("ball.radius")?;
    let depth = params.take("ball.depth")?;
    let curl = params.take("ball.curl")?;
    let core = params.take("ball.core_exponent")?;
    let alpha = params.take_range("ball.alpha")?;
    let centre = [0.5 * aspect, 0.5];
    let mut ball = Vec::with_capacity(strands * segments);
    for _ in 0..strands {
        // Start radius r = R * x^core: an exponent above 1/3 crowds starts towards the centre,
        // which gives the dense core (hundreds of fragments) and sparse fringe of a real hairball.
        let dir0 = rng.unit_vector();
        let r0 = radius * rng.unit().powf(core);
        let mut pos = dir0.map(|c| c * r0);
        let mut dir = rng.unit_vector();
        let colour = colour_near(&mut rng, &HAIR);
        let a = rng.range(alpha.0, alpha.1);
        for _ in 0..segments {
            let kick = rng.unit_vector();
            for k in 0..3 {
                dir[k] += curl * kick[k];
            }
            let norm = (dir[0] * dir[0] + dir[1] * dir[1] + dir[2] * dir[2]).sqrt();
            dir = dir.map(|c| c / norm);
            let dist = (pos[0] * pos[0] + pos[1] * pos[1] + pos[2] * pos[2]).sqrt();
            if dist > radius {
                // Leaving the ball: reflect the outward part of the direction.
                let n = pos.map(|c| c / dist);
                let out = dir[0] * n[0] + dir[1] * n[1] + dir[2] * n[2];
                if out > 0.0 {
                    dir = [0, 1, 2].map(|k| dir[k] - 2.0 * out * n[k]);
                }
            }
            let next = [0, 1, 2].map(|k| pos[k] + dir[k] * segment_length);
            let screen = |p: [f32; 3]| {
                [
                    centre[0] + p[0],
                    centre[1] + p[1],
                    depth + p[2] * super::raster::DEPTH_PER_UNIT,
                ]
            };
            ball.push(Primitive {
                shape: Shape::Tube {
                    a: screen(pos),
                    b: screen(next),
                    radius: strand_radius,
                    closed: false,
                },
                colour,
                alpha: a,
            });
            pos = next;
        }
    }
    let mut rng = SceneRng::new(seed, "hairball.spheres");
    let mut spheres = Vec::new();
    random_spheres(params, &mut rng, "spheres", aspect, &BRIGHT, &mut spheres)?;
    Ok(SceneLayers {
        first: ball,
        second: spheres,
        max_samples,
    })
}

/// Planes: screen-aligned quads in roughly front-to-back order, plus random spheres.
pub fn planes(params: &mut SceneParams, seed: u64, aspect: f32) -> Result<SceneLayers> {
    let max_samples = params.take_count("max_samples")?;
    let mut rng = SceneRng::new(seed, "planes.quads");
    let count = params.take_count("quads.count")?;
    let size = params.take_range("quads.size")?;
    let spread = params.take("quads.centre_spread")?;
    let depth = params.take_range("quads.depth")?;
    let jitter = params.take("quads.depth_jitter")?;
    let alpha = params.take_range("quads.alpha")?;
    let mut quads = Vec::with_capacity(count);
    let step = (depth.1 - depth.0) / count.max(1) as f32;
    for i in 0..count {
        let (w, h) = (
            rng.range(size.0, size.1) * aspect,
            rng.range(size.0, size.1),
        );
        let (cu, cv) = (
            (0.5 + rng.range(-0.5, 0.5) * spread) * aspect,
            0.5 + rng.range(-0.5, 0.5) * spread,
        );
        // Quad i sits near depth slot i: "approximately coherent order".
        let z = depth.0 + step * (i as f32 + 0.5 + rng.range(-jitter, jitter));
        quads.push(Primitive {
            shape: Shape::Quad {
                rect: [cu - w / 2.0, cv - h / 2.0, cu + w / 2.0, cv + h / 2.0],
                z,
            },
            colour: colour_near(&mut rng, &BRIGHT),
            alpha: rng.range(alpha.0, alpha.1),
        });
    }
    let mut rng = SceneRng::new(seed, "planes.spheres");
    let mut spheres = Vec::new();
    random_spheres(params, &mut rng, "spheres", aspect, &BRIGHT, &mut spheres)?;
    Ok(SceneLayers {
        first: quads,
        second: spheres,
        max_samples,
    })
}
