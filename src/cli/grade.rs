//! `deepmerge grade IN -o OUT`: its arguments and its run function (the operation is
//! [`deepmerge::ops::grade`]). It takes every operation's input and output options
//! ([`super::ops::InputArgs`], [`super::ops::OpOutputArgs`]).

use std::path::PathBuf;

use clap::Args;
use deepmerge::ops::{run_grade as run_grading, Grade, GradeArgs as GradeTexts};
use deepmerge::Result;

use super::ops::{request_of, InputArgs, OpOutputArgs};

/// `deepmerge grade`.
#[derive(Args, Debug)]
pub struct GradeArgs {
    /// Deep EXR input.
    input: PathBuf,
    /// Black lift: v = lift + v*(gain - lift). V for every colour channel, R,G,B, or
    /// NAME=V[,NAME=V...].
    #[arg(long, value_name = "V|R,G,B|NAME=V", allow_hyphen_values = true)]
    lift: Option<String>,
    /// Gain (multiplier), applied with the lift.
    #[arg(long, value_name = "V|R,G,B|NAME=V", allow_hyphen_values = true)]
    gain: Option<String>,
    /// Offset added after lift and gain.
    #[arg(long, value_name = "V|R,G,B|NAME=V", allow_hyphen_values = true)]
    offset: Option<String>,
    /// Gamma (> 0), applied last: v^(1/gamma) for v > 0.
    #[arg(long, value_name = "V|R,G,B|NAME=V", allow_hyphen_values = true)]
    gamma: Option<String>,
    /// Contrast (>= 0) about 0.18, applied first after saturation.
    #[arg(long, value_name = "V|R,G,B|NAME=V", allow_hyphen_values = true)]
    contrast: Option<String>,
    /// Saturation of R, G and B (>= 0; 0 is grey), applied first, about the Rec. 709 luma.
    #[arg(long, value_name = "S", allow_hyphen_values = true)]
    saturation: Option<f64>,
    /// Depth mask: grade samples whose Z is at or behind this depth (default -inf).
    #[arg(long, value_name = "Z", allow_hyphen_values = true)]
    near: Option<f64>,
    /// Depth mask: grade samples whose Z is in front of this depth (default +inf).
    #[arg(long, value_name = "Z", allow_hyphen_values = true)]
    far: Option<f64>,
    /// Soften the depth mask: it falls linearly to 0 over this depth outside [near, far).
    #[arg(
        long,
        value_name = "D",
        default_value_t = 0.0,
        allow_hyphen_values = true
    )]
    ramp: f64,
    /// Id mask: grade only samples whose CHANNEL holds one of the ids (as idselect's --id,
    /// manifest names included). Repeat for more channels: all must match.
    #[arg(long = "id", value_name = "CHANNEL=N|NAME[,...]")]
    ids: Vec<String>,
    #[command(flatten)]
    out: OpOutputArgs,
    #[command(flatten)]
    read: InputArgs,
}

/// Run `grade`.
pub fn run_grade(args: &GradeArgs) -> Result<()> {
    let grade = Grade::parse(&GradeTexts {
        lift: args.lift.as_deref(),
        gamma: args.gamma.as_deref(),
        gain: args.gain.as_deref(),
        offset: args.offset.as_deref(),
        saturation: args.saturation,
        contrast: args.contrast.as_deref(),
        near: args.near,
        far: args.far,
        ramp: args.ramp,
        ids: &args.ids,
    })?;
    let request = request_of(&args.out, &args.read)?;
    run_grading(&grade, &args.input, &args.out.output, request)
}
