//! `deepmerge reformat IN -o OUT --size WxH | --scale S`: its arguments and its run function
//! (the operation is [`deepmerge::ops::reformat`]). It takes every operation's input and
//! output options ([`super::ops::InputArgs`], [`super::ops::OpOutputArgs`]).

use std::path::PathBuf;

use clap::Args;
use deepmerge::ops::reformat::{DEFAULT_MAX_GATHER, FILTER_NAMES};
use deepmerge::ops::{run_reformat as run_reformatting, Filter, Reformat};
use deepmerge::Result;

use super::ops::{request_of, InputArgs, OpOutputArgs};
use super::options::named;

/// `deepmerge reformat`.
#[derive(Args, Debug)]
pub struct ReformatArgs {
    /// Deep EXR input.
    input: PathBuf,
    /// The new display window size, WIDTHxHEIGHT (the data window follows, overscan in
    /// proportion).
    #[arg(
        long,
        value_name = "WxH",
        required_unless_present = "scale",
        conflicts_with = "scale"
    )]
    size: Option<String>,
    /// Scale the display window by S (> 0); sides are rounded, at least 1.
    #[arg(long, value_name = "S", allow_hyphen_values = true)]
    scale: Option<f64>,
    /// box: gather each footprint's pixels so that flattening commutes with resizing; nearest:
    /// each output pixel takes one input pixel's samples unchanged.
    #[arg(long, value_name = "FILTER", default_value = "box", value_parser = named::<Filter>(FILTER_NAMES))]
    filter: Filter,
    /// The box filter refuses an output pixel that would gather more samples than this.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_GATHER)]
    max_gather: u64,
    #[command(flatten)]
    out: OpOutputArgs,
    #[command(flatten)]
    read: InputArgs,
}

/// Run `reformat`.
pub fn run_reformat(args: &ReformatArgs) -> Result<()> {
    let reformat = Reformat::new(
        args.size.as_deref(),
        args.scale,
        args.filter,
        args.max_gather,
    )?;
    let request = request_of(&args.out, &args.read)?;
    run_reformatting(&reformat, &args.input, &args.out.output, request)
}
