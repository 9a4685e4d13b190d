//! `deepmerge holdout IN HOLDOUT -o OUT`: its arguments and its run function. It takes the
//! merge's options that apply to it: `--part`, `--memory-budget` (`--max-memory`, its old
//! name), the output options (`--compression`, `--zstd-level`, `--metadata`), deep output's
//! `--no-deep-state` and `--tidy`, and `--flat` (with `--flat-z`, `--flat-type`) for the flat
//! composite of the held-out image. Deep output stays the default, as it always was; `*.png` is
//! a flat preview. `--backend gl` is refused with the reason (see
//! [`deepmerge::ops::holdout::check_backend`]).

use std::path::PathBuf;

use clap::Args;
use deepmerge::composite::HoldoutMode;
use deepmerge::exr::{FlatType, PartSelector};
use deepmerge::ops::holdout::check_backend;
use deepmerge::ops::run_holdout as run_streamed_holdout;
use deepmerge::request::{Backend, OutputRequest};
use deepmerge::Result;

use super::ops::{run_sequence, SequenceArgs};
use super::options::{memory_size, named, Flags};
use crate::{OutputArgs, ProgressArg, DEFAULT_BUDGET, FLAT_TYPES};

/// `deepmerge holdout`.
#[derive(Args, Debug)]
pub struct HoldoutArgs {
    /// The deep image to hold out.
    input: PathBuf,
    /// The deep image that holds it out.
    holdout: PathBuf,
    /// Output: a deep EXR (the default), a flat EXR with --flat, or `*.png` for an 8-bit sRGB
    /// preview of the flat composite.
    #[arg(short, long, value_name = "OUT")]
    output: PathBuf,
    /// Drop samples behind the holdout's first opaque depth instead of attenuating.
    #[arg(long)]
    cull: bool,
    /// Write the flat composite of the held-out image instead of deep samples.
    #[arg(long)]
    flat: bool,
    /// With --flat: add a Z channel (depth of the front-most contributing sample).
    #[arg(long, requires = "flat")]
    flat_z: bool,
    /// With --flat: storage type of flat colour and alpha.
    #[arg(long, value_name = "TYPE", requires = "flat", value_parser = named::<FlatType>(FLAT_TYPES))]
    flat_type: Option<FlatType>,
    #[command(flatten)]
    write: OutputArgs,
    /// Leave `deepImageState` out of deep output.
    #[arg(long)]
    no_deep_state: bool,
    /// Tidy deep output: split overlapping volumes, merge coincident ones.
    #[arg(long)]
    tidy: bool,
    /// Part to read from multi-part files (both): an index or a name (default: the first deep
    /// part).
    #[arg(long, value_name = "PART")]
    part: Option<String>,
    /// The memory the holdout works in (GiB, or a size with a unit: 512MiB): bands of rows are
    /// sized from both files' sample counts to fit it (`--max-memory` is the old name).
    #[arg(
        long = "memory-budget",
        visible_alias = "max-memory",
        value_name = "SIZE",
        default_value = DEFAULT_BUDGET
    )]
    memory_budget: String,
    /// Bands of exactly N rows, whatever the budget says (for tests and measurements).
    #[arg(long, value_name = "N", hide = true, value_parser = clap::value_parser!(u32).range(1..))]
    band_rows: Option<u32>,
    /// Run a frame sequence: the frames (1-100, 1-100x4, 1-10,20) of the inputs and the output
    /// with a frame token (#### or @@@@, %04d, $F4), as the merge runs them.
    #[arg(long, value_name = "RANGE", allow_hyphen_values = true)]
    frames: Option<String>,
    /// Progress: a bar when stderr is a terminal (auto), the bar, `openjd_progress: N` lines
    /// (Open Job Description) or `Progress: N%` lines (Deadline) on stdout, or none.
    #[arg(long, value_enum, value_name = "MODE")]
    progress: Option<ProgressArg>,
    /// Print nothing but errors.
    #[arg(short, long, conflicts_with = "progress")]
    quiet: bool,
    /// Which engine runs the holdout: the CPU (auto, cpu); gl is refused, saying why.
    #[arg(long, value_name = "ENGINE", default_value = "auto", value_parser = named::<Backend>(&["auto", "cpu", "gl"]))]
    backend: Backend,
}

/// Run `holdout`.
pub fn run_holdout(args: &HoldoutArgs) -> Result<()> {
    deepmerge::preview::check_output_is_a_file(&args.output)?;
    check_backend(args.backend)?;
    let request = OutputRequest {
        flat: args.flat,
        flat_z: args.flat_z,
        flat_type: args.flat_type,
        tidy: args.tidy,
        deep_state: !args.no_deep_state,
        compression: args.write.compression,
        zstd_level: args.write.zstd_level,
        metadata: args.write.metadata,
        part: args
            .part
            .as_deref()
            .map(|p| p.parse().expect("infallible"))
            .unwrap_or(PartSelector::FirstDeep),
        memory_budget: memory_size("--memory-budget", &args.memory_budget)?,
        band_rows: args.band_rows.map(|n| n as usize),
        channels: None,
        quiet: false,
    };
    request.check(&args.output, &Flags)?;
    let mode = if args.cull {
        HoldoutMode::Cull
    } else {
        HoldoutMode::Attenuate
    };
    let sequence = SequenceArgs {
        frames: args.frames.clone(),
        progress: args.progress,
        quiet: args.quiet,
    };
    let inputs = [args.input.clone(), args.holdout.clone()];
    run_sequence(&sequence, &inputs, &args.output, &mut |inputs, output| {
        let options = request.stream_options(output)?;
        run_streamed_holdout(&inputs[0], &inputs[1], output, mode, &options, None)
    })
}
