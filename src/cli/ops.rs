//! The single-input commands: `flatten` (the merge of one input), and every operation of the
//! table [`deepmerge::ops::OPERATIONS`] (`slice`, `crop`, `transform`, `idselect`, `deepen`,
//! `recolor`, `grade`, `reformat`, `points`), whose subcommands are made from the table with
//! clap's builder ([`subcommands`]) and run through it ([`run_operation`]). One input (two for
//! `recolor`), one output, streamed in bands within `--memory-budget`. Output options are the
//! merge's: deep output takes `--compression`, `--no-deep-state` and `--tidy`; an output named
//! `*.png` is an 8-bit sRGB preview of the flat composite; any other extension than `.exr` or
//! `.png` is refused.

use std::path::{Path, PathBuf};

use clap::builder::PossibleValuesParser;
use clap::{value_parser, Arg, ArgAction, ArgGroup, ArgMatches, Args, Command, FromArgMatches};
use deepmerge::exr::ChannelSelection;
use deepmerge::exr::{FlatType, PartSelector};
use deepmerge::job::SequenceSummary;
use deepmerge::ops::registry::{self, OpSpec, OpValue, OpValues, Produces, Ran, ValueKind};
use deepmerge::progress::{Progress, ProgressMode};
use deepmerge::request::OutputRequest;
use deepmerge::sequence::{self, FramePattern};
use deepmerge::stream::{merge_parts, plan_parts, MergeEngine, PartRequest};
use deepmerge::{Error, Result};

use super::options::{memory_size, named, Flags};
use crate::{OutputArgs, ProgressArg, DEFAULT_BUDGET, FLAT_TYPES};

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
}

/// The progress `quiet` and `--progress` ask for (the merge's, `comp`'s and every single-input
/// command's).
pub fn progress_mode(quiet: bool, progress: Option<ProgressArg>) -> ProgressMode {
    match (quiet, progress) {
        (true, _) => ProgressMode::None,
        (false, None | Some(ProgressArg::Auto)) => ProgressMode::Auto,
        (false, Some(ProgressArg::Bar)) => ProgressMode::Bar,
        (false, Some(ProgressArg::Openjd)) => ProgressMode::OpenJd,
        (false, Some(ProgressArg::Plain)) => ProgressMode::Plain,
        (false, Some(ProgressArg::None)) => ProgressMode::None,
    }
}

/// Run a single-input command once, or with `--frames` once per frame, as the merge runs a
/// sequence: the output path needs a frame token (and one without `--frames` is refused), the
/// inputs' tokens take the frame too; a failed frame is one line and the others still run;
/// progress and the closing line as the merge's. `once` gets the frame's inputs and output.
fn run_frames(
    read: &InputArgs,
    inputs: &[PathBuf],
    output: &Path,
    once: &mut dyn FnMut(&[PathBuf], &Path) -> Result<()>,
) -> Result<()> {
    let sequence = SequenceArgs {
        frames: read.frames.clone(),
        progress: read.progress,
        quiet: read.quiet,
    };
    run_sequence(&sequence, inputs, output, once)
}

/// `--frames`, `--progress` and `-q` as a command with its own arguments takes them (`holdout`).
pub struct SequenceArgs {
    /// The frames' range, if a sequence.
    pub frames: Option<String>,
    /// The progress asked for.
    pub progress: Option<ProgressArg>,
    /// Nothing but errors.
    pub quiet: bool,
}

/// [`run_frames`] for a command with its own arguments.
pub fn run_sequence(
    sequence: &SequenceArgs,
    inputs: &[PathBuf],
    output: &Path,
    once: &mut dyn FnMut(&[PathBuf], &Path) -> Result<()>,
) -> Result<()> {
    let pattern = FramePattern::parse(output)?;
    let (frames, pattern) = match (&sequence.frames, pattern) {
        (Some(range), Some(pattern)) => (sequence::parse_frames(range)?, pattern),
        (Some(_), None) => {
            return Err(Error::Usage(format!(
                "--frames needs a frame token (####, %04d, $F4) in the output path {}",
                output.display()
            )))
        }
        (None, Some(_)) => {
            return Err(Error::Usage(format!(
                "{} has a frame token; give the frames with --frames",
                output.display()
            )))
        }
        (None, None) => return once(inputs, output),
    };
    let input_patterns: Vec<Option<FramePattern>> = inputs
        .iter()
        .map(|p| FramePattern::parse(p))
        .collect::<Result<_>>()?;
    let progress = Progress::new(
        progress_mode(sequence.quiet, sequence.progress),
        frames.len() as u64,
        "frames",
    );
    let (mut written, mut failed) = (0, 0);
    for &frame in &frames {
        let paths: Vec<PathBuf> = inputs
            .iter()
            .zip(&input_patterns)
            .map(|(path, p)| p.as_ref().map_or_else(|| path.clone(), |p| p.path(frame)))
            .collect();
        match once(&paths, &pattern.path(frame)) {
            Ok(()) => written += 1,
            Err(e) => {
                failed += 1;
                progress.note(&format!("deepmerge: error: frame {frame}: {e}"));
            }
        }
        progress.step();
    }
    progress.finish();
    crate::sequence_result(SequenceSummary { written, failed }, false, sequence.quiet)
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
    /// Storage type of flat colour and alpha: half or float (default: float where an input's
    /// colour or alpha is float, half otherwise).
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
    // The parts as the one-input merge reads them: every deep part of a multi-part input
    // (a multi-part output), unless --part picks one. So flatten writes the merge's bytes.
    let parts = match &args.read.part {
        Some(part) => PartRequest::Every(part.parse().expect("infallible")),
        None => PartRequest::Auto,
    };
    let inputs = std::slice::from_ref(&args.input);
    run_frames(&args.read, inputs, &args.output, &mut |inputs, output| {
        let options = request.stream_options(output)?;
        deepmerge::exr::check_output_is_not_an_input(output, inputs)?;
        let plan = plan_parts(inputs, &parts)?;
        merge_parts(inputs, output, &plan, &options, MergeEngine::Cpu, None)?;
        Ok(())
    })
}

/// The reading half of a request: part, budget, bands.
fn read_request(read: &InputArgs) -> Result<OutputRequest> {
    Ok(OutputRequest {
        part: part_of(read),
        memory_budget: memory_size("--memory-budget", &read.memory_budget)?,
        band_rows: read.band_rows.map(|n| n as usize),
        quiet: read.quiet,
        ..OutputRequest::default()
    })
}

/// An operation's request from its flags, checked against its output in the flags' words.
fn request_of(out: &OpOutputArgs, read: &InputArgs) -> Result<OutputRequest> {
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

/// The subcommand of every operation of the table, as clap's derive would make it from
/// argument structs: the inputs, the operation's options, the output options, the reading
/// options.
pub fn subcommands() -> Vec<Command> {
    deepmerge::ops::OPERATIONS
        .iter()
        .map(|spec| subcommand(spec))
        .collect()
}

fn subcommand(spec: &OpSpec) -> Command {
    let mut command = Command::new(spec.name);
    for input in spec.inputs {
        command = command.arg(
            Arg::new(input.python)
                .value_name(input.python.to_uppercase())
                .help(input.help)
                .required(true)
                .value_parser(value_parser!(PathBuf)),
        );
    }
    // A file of the operation's own kind is named before its options (an image's output
    // comes with the output options, after them).
    if let Produces::File { value_name, help } = spec.produces {
        command = command.arg(
            Arg::new("output")
                .short('o')
                .long("output")
                .value_name(value_name)
                .help(help)
                .required(true)
                .value_parser(value_parser!(PathBuf)),
        );
    }
    for option in spec.options {
        let mut arg = Arg::new(option.name)
            .long(option.flag())
            .help(option.help)
            .allow_hyphen_values(option.hyphen_values)
            .required(option.required);
        if option.kind != ValueKind::Flag {
            arg = arg.value_name(option.value_name);
        }
        arg = match option.kind {
            ValueKind::Flag => arg.action(ArgAction::SetTrue),
            ValueKind::F32 => arg.value_parser(value_parser!(f32)),
            ValueKind::F64 => arg.value_parser(value_parser!(f64)),
            ValueKind::Count => arg.value_parser(value_parser!(u64)),
            ValueKind::Name(names) => arg.value_parser(PossibleValuesParser::new(names)),
            ValueKind::Path => arg.value_parser(value_parser!(PathBuf)),
            ValueKind::Ids => arg.action(ArgAction::Append),
            ValueKind::Text | ValueKind::Numbers { .. } | ValueKind::ChannelValues => arg,
        };
        if let Some(default) = option.default {
            arg = arg.default_value(default);
        }
        if let Some(other) = option.either {
            // One group for the pair, so that clap's refusal of neither names both
            // (`<--scale <S>|--size <WxH>>`, the pair in name order), not only the first.
            let mut pair = [option.name, other];
            pair.sort();
            let group = format!("{}-or-{}", pair[0], pair[1]);
            if !command.get_groups().any(|g| g.get_id() == group.as_str()) {
                command = command.group(
                    ArgGroup::new(group)
                        .args(pair)
                        .required(true)
                        .multiple(false),
                );
            }
        }
        if let Some(other) = option.conflicts_with {
            arg = arg.conflicts_with(other);
        }
        command = command.arg(arg);
    }
    command = match spec.produces {
        Produces::Image => OpOutputArgs::augment_args(command),
        Produces::File { .. } => command,
    };
    // The derived arguments bring their struct's doc as `about`: the operation's is the help.
    InputArgs::augment_args(command).about(spec.help)
}

/// The operation's values as the command line gave them.
fn values_of(spec: &'static OpSpec, matches: &ArgMatches) -> OpValues {
    let mut values = OpValues::new(spec);
    for option in spec.options {
        let id = option.name;
        let text = || matches.get_one::<String>(id).cloned().map(OpValue::Text);
        let value = match option.kind {
            ValueKind::Flag => matches.get_flag(id).then_some(OpValue::Flag(true)),
            ValueKind::F32 => matches
                .get_one::<f32>(id)
                .map(|&x| OpValue::Number(x as f64)),
            ValueKind::F64 => matches.get_one::<f64>(id).map(|&x| OpValue::Number(x)),
            ValueKind::Count => matches.get_one::<u64>(id).map(|&n| OpValue::Count(n)),
            ValueKind::Path => matches.get_one::<PathBuf>(id).cloned().map(OpValue::Path),
            ValueKind::Ids => matches
                .get_many::<String>(id)
                .map(|texts| OpValue::Texts(texts.cloned().collect())),
            ValueKind::Text
            | ValueKind::Name(_)
            | ValueKind::Numbers { .. }
            | ValueKind::ChannelValues => text(),
        };
        if let Some(value) = value {
            values.set(option, value);
        }
    }
    values
}

/// Run the operation `spec` with the command line's `matches` (of its [`subcommand`]).
pub fn run_operation(spec: &'static OpSpec, matches: &ArgMatches) -> Result<()> {
    // An output that is a directory is refused first, before any input is read, as the merge
    // refuses it.
    if let Some(output) = matches.get_one::<PathBuf>("output") {
        deepmerge::preview::check_output_is_a_file(output)?;
    }
    let operation = (spec.build)(&values_of(spec, matches), &Flags)?;
    let inputs: Vec<PathBuf> = spec
        .inputs
        .iter()
        .map(|input| {
            matches
                .get_one::<PathBuf>(input.python)
                .cloned()
                .expect("a required input")
        })
        .collect();
    let read = InputArgs::from_arg_matches(matches).map_err(|e| Error::Usage(e.to_string()))?;
    let (request, output) = match spec.produces {
        Produces::Image => {
            let out =
                OpOutputArgs::from_arg_matches(matches).map_err(|e| Error::Usage(e.to_string()))?;
            (request_of(&out, &read)?, out.output)
        }
        Produces::File { .. } => {
            let output = matches.get_one::<PathBuf>("output").cloned();
            (read_request(&read)?, output.expect("a required output"))
        }
    };
    let quiet = read.quiet;
    run_frames(&read, &inputs, &output, &mut |inputs, output| {
        if let Some(note) = operation.note(inputs).ok().flatten().filter(|_| !quiet) {
            eprintln!("deepmerge {}: {note}", spec.name);
        }
        let ran = registry::run(spec, operation.as_ref(), inputs, output, request.clone())?;
        if ran == Ran::Empty && !quiet {
            eprintln!(
                "deepmerge {}: {}: nothing of the input remains; the image is written with no \
                 samples",
                spec.name,
                output.display()
            );
        }
        Ok(())
    })
}
