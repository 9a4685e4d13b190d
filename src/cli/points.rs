//! `deepmerge points IN -o OUT.ply`: its arguments and its run function (the operation is
//! [`deepmerge::ops::points`]). It reads as every operation does ([`super::ops::InputArgs`]);
//! its output is a PLY file, so the EXR output options do not apply.

use std::path::PathBuf;

use clap::Args;
use deepmerge::ops::points::CAMERA_NAMES;
use deepmerge::ops::{run_points as run_point_cloud, CameraMode, Points};
use deepmerge::Result;

use super::ops::{input_of, InputArgs};
use super::options::named;

/// `deepmerge points`.
#[derive(Args, Debug)]
pub struct PointsArgs {
    /// Deep EXR input.
    input: PathBuf,
    /// Output: a binary little-endian PLY file.
    #[arg(short, long, value_name = "OUT.ply")]
    output: PathBuf,
    /// Keep samples whose alpha is at least this (0 to 1; default: every sample).
    #[arg(
        long,
        value_name = "A",
        default_value_t = 0.0,
        allow_hyphen_values = true
    )]
    min_alpha: f32,
    /// auto: the header's camera (worldToCamera, worldToNDC) when it has one, else pixel
    /// coordinates; file: the header's camera or an error; pixels: pixel coordinates and Z.
    #[arg(long, value_name = "MODE", default_value = "auto", value_parser = named::<CameraMode>(CAMERA_NAMES))]
    camera: CameraMode,
    /// The raster the camera's NDC spans, X0,Y0,X1,Y1 (default: the display window): for an
    /// image cut out of a larger render, that render's display window in this image's pixels.
    #[arg(long, value_name = "X0,Y0,X1,Y1", allow_hyphen_values = true)]
    frame: Option<String>,
    /// Also draw the points seen from above into this PNG: across the camera's x, up the view
    /// depth (near at the bottom).
    #[arg(long, value_name = "PNG")]
    top_view: Option<PathBuf>,
    #[command(flatten)]
    read: InputArgs,
}

/// Run `points`.
pub fn run_points(args: &PointsArgs) -> Result<()> {
    let points = Points::new(args.min_alpha, args.camera, args.frame.as_deref())?
        .with_top_view(args.top_view.as_deref())?;
    let (part, budget, band_rows) = input_of(&args.read)?;
    run_point_cloud(&points, &args.input, &args.output, &part, budget, band_rows)?;
    Ok(())
}
