//! Procedural benchmark scenes modelled on the paper's (section 5): `atrium`, `powerplant`,
//! `hairball` and `planes`, each a set of deep inputs to merge.
//!
//! A scene is two layers of primitives (interior/exterior, or hairball/planes and random spheres)
//! built from its parameter file in `scenes/` (embedded in the binary) and a seed, then rasterised
//! into deep images with every fragment kept, as a GPU capturing transparent geometry would:
//! channels A, B, G, R (half, premultiplied) and Z (float), samples sorted by depth in each pixel
//! (state Sorted), alpha in (0, 1]. The same (scene, size, seed, inputs) always gives bit-identical
//! images; generation is parallel over rows.
//!
//! With two inputs, input 0 is layer 0 and input 1 is layer 1. With more (four for the paper's
//! iterated pairwise merge, Table 3), layer 0's primitives are dealt round-robin over the first
//! half of the inputs and layer 1's over the second half, so that merging inputs pairwise,
//! (0 + 1) + (2 + 3), rebuilds the two-input scene.

mod builders;
mod params;
mod raster;
mod rng;

use std::path::{Path, PathBuf};

pub use params::{SceneParams, SCENE_FILES};
pub use raster::{rasterize, Primitive, Shape, DEPTH_PER_UNIT};
pub use rng::SceneRng;

use crate::deep::DeepImage;
use crate::error::{Error, Result};
use crate::exr::{write_deep, Codec};

/// The scene names, in the paper's order.
pub const SCENE_NAMES: [&str; 4] = ["atrium", "powerplant", "hairball", "planes"];

/// The two-input scene `name` at `width` x `height` for `seed`.
pub fn generate(name: &str, width: usize, height: usize, seed: u64) -> Result<Vec<DeepImage>> {
    generate_inputs(name, width, height, seed, 2)
}

/// Scene `name` split into `inputs` deep images (2 or more; 4 for pairwise chains).
pub fn generate_inputs(
    name: &str,
    width: usize,
    height: usize,
    seed: u64,
    inputs: usize,
) -> Result<Vec<DeepImage>> {
    if width == 0 || height == 0 {
        return Err(Error::Usage(format!(
            "scene size {width}x{height}: both sides must be at least 1 pixel"
        )));
    }
    if inputs < 2 {
        return Err(Error::Usage(format!(
            "a scene has at least 2 inputs (layer 0 and layer 1), not {inputs}"
        )));
    }
    let mut params = SceneParams::embedded(name)?;
    let aspect = width as f32 / height as f32;
    let layers = match name {
        "atrium" => builders::atrium(&mut params, seed, aspect)?,
        "powerplant" => builders::powerplant(&mut params, seed, aspect)?,
        "hairball" => builders::hairball(&mut params, seed, aspect)?,
        "planes" => builders::planes(&mut params, seed, aspect)?,
        other => return Err(params::unknown_scene(other)),
    };
    params.finish()?;
    let first_inputs = inputs.div_ceil(2);
    let mut images = Vec::with_capacity(inputs);
    for (layer, parts) in [
        (&layers.first, first_inputs),
        (&layers.second, inputs - first_inputs),
    ] {
        for part in 0..parts {
            // Round-robin, so each part spreads over the whole frame like its layer does.
            let subset: Vec<Primitive> = layer.iter().skip(part).step_by(parts).cloned().collect();
            images.push(rasterize(&subset, width, height, layers.max_samples)?);
        }
    }
    Ok(images)
}

/// Parse `WxH` (as `--size` takes it).
pub fn parse_size(text: &str) -> Result<(usize, usize)> {
    let bad = || {
        Error::Usage(format!(
            "size {text:?}: expected WIDTHxHEIGHT, e.g. 1920x1080"
        ))
    };
    let (w, h) = text.split_once(['x', 'X']).ok_or_else(bad)?;
    let w: usize = w.trim().parse().map_err(|_| bad())?;
    let h: usize = h.trim().parse().map_err(|_| bad())?;
    if w == 0 || h == 0 {
        return Err(bad());
    }
    Ok((w, h))
}

/// The file names `write_scene` uses: `PREFIX_0.exr`, `PREFIX_1.exr`, ...
pub fn scene_paths(prefix: &Path, inputs: usize) -> Vec<PathBuf> {
    (0..inputs)
        .map(|i| {
            let mut name = prefix.as_os_str().to_owned();
            name.push(format!("_{i}.exr"));
            PathBuf::from(name)
        })
        .collect()
}

/// Generate scene `name` and write its inputs as deep scanline EXR files (ZIPS, which every
/// reader takes) to `PREFIX_0.exr`, `PREFIX_1.exr`, ...; returns the paths written.
pub fn write_scene(
    name: &str,
    width: usize,
    height: usize,
    seed: u64,
    inputs: usize,
    prefix: &Path,
) -> Result<Vec<PathBuf>> {
    let images = generate_inputs(name, width, height, seed, inputs)?;
    let paths = scene_paths(prefix, inputs);
    for (image, path) in images.iter().zip(&paths) {
        write_deep(path, image, Codec::Zips)?;
    }
    Ok(paths)
}
