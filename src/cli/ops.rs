//! `flatten`, `slice`, `crop`, `transform` and `idselect`: one deep input, one output, streamed in bands
//! within `--memory-budget` (`deepmerge::ops`); `deepen` (a flat input) and `recolor` (a deep
//! and a flat input) likewise. Output options are the merge's: deep output
//! takes `--compression`, `--no-deep-state` and `--tidy`; an output named `*.png` is an 8-bit
//! sRGB preview of the flat composite; any other extension than `.exr` or `.png` is refused.

use std::path::{Path, PathBuf};

use clap::Args;
use deepmerge::exr::ChannelSelection;
use deepmerge::exr::{FlatType, PartSelector};
use deepmerge::ops::{
    run_deepen as run_deepening, run_idselect as run_id_selection, run_op,
    run_recolor as run_recoloring, Crop, DeepOp, Deepen, IdSelect, Recolor, Slice, Transform,
};
use deepmerge::request::OutputRequest;
use deepmerge::stream::{merge_files, MergeEngine};
use deepmerge::Result;

use super::options::{memory_size, named, Flags};
use crate::{OutputArgs, DEFAULT_BUDGET, FLAT_TYPES};

/// What every single-input command reads with.
#[derive(Args, Debug)]
pub struct InputArgs {
    /// Part to read from multi-part inputs: an index or a name (default: the first deep part).
    #[arg(long, value_name = "PART")]
    part: Option<String>,
    /// The memory the command works in (GiB, or a size with a unit: 512MiB): bands of rows are
    /// sized to fit it.
    #[arg(long = "memory-budget", value_name = "SIZE", default_value = DEFAULT_BUDGET)]
    memory_budget: String,
    /// Bands of exactly N rows, whatever the budget says (for tests and measurements).
    #[arg(long, value_name = "N", hide = true, value_parser = clap::value_parser!(u32).range(1..))]
    band_rows: Option<u32>,
}

/// The output options of an operation: as the merge's for deep output.
#[derive(Args, Debug)]
pub struct OpOutputArgs {
    /// Output: a deep EXR, or `*.png` for an 8-bit sRGB preview of its flat composite.
    #[arg(short, long, value_name = "OUT")]
    pub(crate) output: PathBuf,
    /// Compression, zstd level and metadata, as the merge takes them.
    #[command(flatten)]
    write: OutputArgs,
    /// Leave `deepImageState` out of deep output.
    #[arg(long)]
    no_deep_state: bool,
    /// Tidy deep output: split overlapping volumes, merge coincident volumes and points.
    #[arg(long)]
    tidy: bool,
}

/// `deepmerge flatten`.
#[derive(Args, Debug)]
pub struct FlattenArgs {
    /// Deep EXR input.
    input: PathBuf,
    /// Output: a flat EXR, or `*.png` for an 8-bit sRGB preview.
    #[arg(short, long, value_name = "OUT")]
    output: PathBuf,
    /// Add a Z channel (depth of the front-most contributing sample).
    #[arg(long)]
    flat_z: bool,
    /// Storage type of flat colour and alpha: half (the default) or float.
    #[arg(long, value_name = "TYPE", value_parser = named::<FlatType>(FLAT_TYPES))]
    flat_type: Option<FlatType>,
    /// Keep only these channels (comma-separated), plus Z, ZBack and the alphas they need.
    #[arg(long, value_name = "LIST")]
    channels: Option<String>,
    /// Compression, zstd level and metadata, as the merge takes them.
    #[command(flatten)]
    write: OutputArgs,
    #[command(flatten)]
    read: InputArgs,
}

/// `deepmerge slice`.
#[derive(Args, Debug)]
pub struct SliceArgs {
    /// Deep EXR input.
    input: PathBuf,
    /// Front plane: keep from this depth on (inclusive; default -inf).
    #[arg(long, value_name = "Z", allow_hyphen_values = true)]
    near: Option<f32>,
    /// Back plane: keep up to this depth (exclusive; default +inf).
    #[arg(long, value_name = "Z", allow_hyphen_values = true)]
    far: Option<f32>,
    /// Keep what lies outside [near, far) instead.
    #[arg(long)]
    keep_outside: bool,
    #[command(flatten)]
    out: OpOutputArgs,
    #[command(flatten)]
    read: InputArgs,
}

/// `deepmerge crop`.
#[derive(Args, Debug)]
pub struct CropArgs {
    /// Deep EXR input.
    input: PathBuf,
    /// The box X0,Y0,X1,Y1: inclusive pixel corners, as EXR windows are written.
    #[arg(long = "box", value_name = "X0,Y0,X1,Y1", allow_hyphen_values = true)]
    area: String,
    /// Keep the pixels outside the box instead.
    #[arg(long)]
    keep_outside: bool,
    #[command(flatten)]
    out: OpOutputArgs,
    #[command(flatten)]
    read: InputArgs,
}

/// `deepmerge transform`.
#[derive(Args, Debug)]
pub struct TransformArgs {
    /// Deep EXR input.
    input: PathBuf,
    /// Move the image by whole pixels: X,Y (the data window; the display window stays).
    #[arg(long, value_name = "X,Y", allow_hyphen_values = true)]
    translate: Option<String>,
    /// Move the display window with the data window.
    #[arg(long)]
    move_display: bool,
    /// Add D to every depth (after the scale): Z' = Z*S + D.
    #[arg(
        long,
        value_name = "D",
        default_value_t = 0.0,
        allow_hyphen_values = true
    )]
    z_offset: f64,
    /// Multiply every depth by S (> 0): Z' = Z*S + D.
    #[arg(
        long,
        value_name = "S",
        default_value_t = 1.0,
        allow_hyphen_values = true
    )]
    z_scale: f64,
    #[command(flatten)]
    out: OpOutputArgs,
    #[command(flatten)]
    read: InputArgs,
}

/// `deepmerge idselect`.
#[derive(Args, Debug)]
pub struct IdselectArgs {
    /// Deep EXR input.
    input: PathBuf,
    /// CHANNEL=N[,N...]: keep the samples whose CHANNEL holds one of the ids (uint channels, or
    /// float channels holding whole numbers). With an idManifest, names (shell patterns, e.g.
    /// "id=blob/*") stand for the ids they name. Repeat for more channels: all must match.
    #[arg(long = "id", value_name = "CHANNEL=N|NAME[,...]", required = true)]
    ids: Vec<String>,
    /// Keep the samples that are not selected instead.
    #[arg(long)]
    invert: bool,
    /// Also write the flat alpha of the kept samples to MASK (a flat EXR, or `*.png`).
    #[arg(long, value_name = "MASK")]
    mask: Option<PathBuf>,
    #[command(flatten)]
    out: OpOutputArgs,
    #[command(flatten)]
    read: InputArgs,
}

/// `deepmerge deepen`.
#[derive(Args, Debug)]
pub struct DeepenArgs {
    /// Flat EXR input (it needs an alpha channel).
    input: PathBuf,
    /// Every sample's depth Z.
    #[arg(
        long,
        value_name = "Z",
        allow_hyphen_values = true,
        required_unless_present = "z_channel",
        conflicts_with = "z_channel"
    )]
    z: Option<f32>,
    /// Take each sample's Z from this channel of the input.
    #[arg(long, value_name = "NAME")]
    z_channel: Option<String>,
    /// Make volumes: ZBack = Z + T (T >= 0). Without it or --zback-channel, samples are points.
    #[arg(
        long,
        value_name = "T",
        conflicts_with = "zback_channel",
        allow_hyphen_values = true
    )]
    thickness: Option<f32>,
    /// Take each sample's ZBack from this channel of the input.
    #[arg(long, value_name = "NAME")]
    zback_channel: Option<String>,
    #[command(flatten)]
    out: OpOutputArgs,
    #[command(flatten)]
    read: InputArgs,
}

/// `deepmerge recolor`.
#[derive(Args, Debug)]
pub struct RecolorArgs {
    /// Deep EXR input: its samples, depths and opacity are kept.
    deep: PathBuf,
    /// Flat EXR input: the colour the deep image takes (its first flat part).
    flat: PathBuf,
    /// Also scale the opacities so that the flattened alpha is the flat image's alpha.
    #[arg(long)]
    target_alpha: bool,
    #[command(flatten)]
    out: OpOutputArgs,
    #[command(flatten)]
    read: InputArgs,
}

fn part_of(read: &InputArgs) -> PartSelector {
    read.part
        .as_deref()
        .map(|p| p.parse().expect("infallible"))
        .unwrap_or(PartSelector::FirstDeep)
}

/// Run `flatten`: the merge of one input, flat.
pub fn run_flatten(args: &FlattenArgs) -> Result<()> {
    let request = OutputRequest {
        flat: true,
        flat_z: args.flat_z,
        flat_type: args.flat_type,
        compression: args.write.compression,
        zstd_level: args.write.zstd_level,
        metadata: args.write.metadata,
        channels: args
            .channels
            .as_deref()
            .map(ChannelSelection::parse)
            .transpose()?,
        ..read_request(&args.read)?
    };
    request.check(&args.output, &Flags)?;
    let options = request.stream_options(&args.output)?;
    deepmerge::exr::check_output_is_not_an_input(&args.output, std::slice::from_ref(&args.input))?;
    merge_files(
        std::slice::from_ref(&args.input),
        &args.output,
        &options,
        MergeEngine::Cpu,
        None,
    )?;
    Ok(())
}

/// What an operation reads: the part, the memory budget in bytes and the fixed band height
/// (for `points`, which writes no EXR and so takes no output request).
pub(crate) fn input_of(read: &InputArgs) -> Result<(PartSelector, u64, Option<usize>)> {
    let request = read_request(read)?;
    Ok((request.part, request.memory_budget, request.band_rows))
}

/// The reading half of a request: part, budget, bands.
fn read_request(read: &InputArgs) -> Result<OutputRequest> {
    Ok(OutputRequest {
        part: part_of(read),
        memory_budget: memory_size("--memory-budget", &read.memory_budget)?,
        band_rows: read.band_rows.map(|n| n as usize),
        ..OutputRequest::default()
    })
}

/// An operation's request from its flags, checked against its output in the flags' words.
pub(crate) fn request_of(out: &OpOutputArgs, read: &InputArgs) -> Result<OutputRequest> {
    let request = OutputRequest {
        tidy: out.tidy,
        deep_state: !out.no_deep_state,
        compression: out.write.compression,
        zstd_level: out.write.zstd_level,
        metadata: out.write.metadata,
        ..read_request(read)?
    };
    request.check(&out.output, &Flags)?;
    Ok(request)
}

fn run(op: &dyn DeepOp, input: &Path, out: &OpOutputArgs, read: &InputArgs) -> Result<()> {
    let options = request_of(out, read)?.stream_options(&out.output)?;
    run_op(op, input, &out.output, &options, None)
}

/// Run `slice`.
pub fn run_slice(args: &SliceArgs) -> Result<()> {
    let slice = Slice::named(args.near, args.far, args.keep_outside, &Flags)?;
    run(&slice, &args.input, &args.out, &args.read)
}

/// Run `crop`.
pub fn run_crop(args: &CropArgs) -> Result<()> {
    let crop = Crop::parse_named(&args.area, args.keep_outside, &Flags)?;
    run(&crop, &args.input, &args.out, &args.read)
}

/// Run `transform`.
pub fn run_transform(args: &TransformArgs) -> Result<()> {
    let transform = Transform::named(
        args.translate.as_deref(),
        args.z_offset,
        args.z_scale,
        &Flags,
    )?
    .moving_display(args.move_display);
    // Half depths cannot hold most depth changes: the operation writes them as float, and says
    // so here, once.
    let half_depths = deepmerge::exr::read_parts_info(&args.input)?
        .iter()
        .any(|part| part.deep && transform.promotes(&part.channels));
    if half_depths {
        eprintln!(
            "deepmerge transform: {}: its Z/ZBack are half, which would overflow or not change; \
             the new depths are written as float",
            args.input.display()
        );
    }
    run(&transform, &args.input, &args.out, &args.read)
}

/// Run `idselect` (and its `--mask`).
pub fn run_idselect(args: &IdselectArgs) -> Result<()> {
    let select = IdSelect::parse_named(&args.ids, args.invert, &Flags)?;
    run_id_selection(
        &select,
        &args.input,
        &args.out.output,
        args.mask.as_deref(),
        request_of(&args.out, &args.read)?,
    )
}

/// Run `deepen`.
pub fn run_deepen(args: &DeepenArgs) -> Result<()> {
    let deepen = Deepen::named(
        args.z,
        args.z_channel.as_deref(),
        args.thickness,
        args.zback_channel.as_deref(),
        &Flags,
    )?;
    let request = request_of(&args.out, &args.read)?;
    run_deepening(&deepen, &args.input, &args.out.output, request)
}

/// Run `recolor`.
pub fn run_recolor(args: &RecolorArgs) -> Result<()> {
    let recolor = Recolor {
        target_alpha: args.target_alpha,
    };
    let request = request_of(&args.out, &args.read)?;
    run_recoloring(recolor, &args.deep, &args.flat, &args.out.output, request)
}
