//! The `deepmerge` command line: parse, run, report. No algorithm code lives here.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use deepmerge::composite::{merge_images, MergeOptions, MergeOutput, OutputKind};
use deepmerge::deep::DeepImage;
use deepmerge::exr::{self, Codec, DeepWriteOptions, FlatType, PartSelector, ReadOptions};
use deepmerge::{Error, Result};

#[derive(Parser, Debug)]
#[command(
    name = "deepmerge",
    version,
    about = "Merge and composite OpenEXR deep images (OpenGL compute or CPU)",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    merge: MergeArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Describe deep and flat EXR files: parts, windows, channels, sample statistics.
    Info {
        /// Files to describe.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Refuse inputs that would take more than this many GiB once decoded.
        #[arg(long, value_name = "GIB", default_value_t = 8.0)]
        max_memory: f64,
    },
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum CompressionArg {
    None,
    Rle,
    Zips,
    Zip,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum BackendArg {
    /// OpenGL when a context can be made, else the CPU.
    Auto,
    /// The CPU reference engine.
    Cpu,
    /// OpenGL 4.3 compute.
    Gl,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum LayoutArg {
    Ll,
    La,
    Ia,
    Bia,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum FlatTypeArg {
    Half,
    Float,
}

#[derive(Args, Debug)]
struct MergeArgs {
    /// Deep EXR inputs, front-most priority first (ties in depth keep this order).
    #[arg(value_name = "INPUT", num_args = 2.., required = true)]
    inputs: Vec<PathBuf>,
    /// Output EXR (written to a temporary file, then renamed).
    #[arg(short, long, value_name = "OUT", required = true)]
    output: Option<PathBuf>,
    /// Write a merged deep image instead of a flat composite.
    #[arg(long)]
    deep: bool,
    /// Compression of deep output.
    #[arg(long, value_enum, default_value_t = CompressionArg::Zips)]
    compression: CompressionArg,
    /// Storage type of flat colour and alpha.
    #[arg(long, value_enum, default_value_t = FlatTypeArg::Half)]
    flat_type: FlatTypeArg,
    /// Add a Z channel to flat output (depth of the front-most contributing sample).
    #[arg(long)]
    flat_z: bool,
    /// Leave `deepImageState` out of deep output (for readers that refuse it, e.g. PyPI OpenEXR).
    #[arg(long)]
    no_deep_state: bool,
    /// Tidy deep output: split overlapping volumes, merge coincident ones.
    #[arg(long)]
    tidy: bool,
    /// Which engine runs the merge.
    #[arg(long, value_enum, default_value_t = BackendArg::Auto)]
    backend: BackendArg,
    /// GPU layout of the inputs and of deep intermediates (GL backend).
    #[arg(long, value_enum)]
    layout: Option<LayoutArg>,
    /// Register-block merging (GL backend; the default).
    #[arg(long, conflicts_with = "stepwise")]
    rbm: bool,
    /// Stepwise merging (GL backend).
    #[arg(long)]
    stepwise: bool,
    /// Register block size, 1 to 32 (GL backend).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=32))]
    block: Option<u32>,
    /// Part to read from multi-part inputs: an index or a name (default: the first deep part).
    #[arg(long, value_name = "PART")]
    part: Option<String>,
    /// Refuse inputs that would take more than this many GiB once decoded.
    #[arg(long, value_name = "GIB", default_value_t = 8.0)]
    max_memory: f64,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Info { files, max_memory }) => run_info(&files, max_memory),
        None => run_merge(&cli.merge),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("deepmerge: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn gib_to_bytes(gib: f64) -> Result<u64> {
    if !(gib > 0.0 && gib.is_finite()) {
        return Err(Error::Usage(format!(
            "--max-memory must be a positive number of GiB, not {gib}"
        )));
    }
    Ok((gib * (1u64 << 30) as f64) as u64)
}

fn run_info(files: &[PathBuf], max_memory: f64) -> Result<()> {
    let max_memory = gib_to_bytes(max_memory)?;
    for f in files {
        print!("{}", deepmerge::info::describe_file(f, max_memory)?);
    }
    Ok(())
}

/// Refuse to overwrite an input: compare canonical paths where the output already exists.
fn check_output_is_not_an_input(output: &Path, inputs: &[PathBuf]) -> Result<()> {
    let Ok(out) = output.canonicalize() else {
        return Ok(());
    };
    for input in inputs {
        if input.canonicalize().is_ok_and(|i| i == out) {
            return Err(Error::file(
                output,
                "output path is also an input; refusing to overwrite it",
            ));
        }
    }
    Ok(())
}

fn run_merge(args: &MergeArgs) -> Result<()> {
    let output = args.output.as_ref().expect("clap requires -o");
    check_output_is_not_an_input(output, &args.inputs)?;
    let gl_options_given =
        args.layout.is_some() || args.rbm || args.stepwise || args.block.is_some();
    match args.backend {
        BackendArg::Gl => {
            return Err(Error::Gl(
                "the OpenGL backend is not built yet; use --backend cpu".into(),
            ))
        }
        BackendArg::Cpu if gl_options_given => {
            return Err(Error::Usage(
                "--layout, --rbm, --stepwise and --block choose how the GPU merges; they do not apply to --backend cpu".into(),
            ))
        }
        BackendArg::Auto if gl_options_given => {
            return Err(Error::Gl(
                "--layout, --rbm, --stepwise and --block need the OpenGL backend, which is not built yet".into(),
            ))
        }
        _ => {}
    }
    if args.deep && (args.flat_z || args.flat_type != FlatTypeArg::Half) {
        return Err(Error::Usage(
            "--flat-z and --flat-type apply to flat output, not --deep".into(),
        ));
    }
    if !args.deep && (args.tidy || args.no_deep_state || args.compression != CompressionArg::Zips) {
        return Err(Error::Usage(
            "--tidy, --compression and --no-deep-state apply to deep output; add --deep (flat output is always composited tidily)".into(),
        ));
    }
    let read_options = ReadOptions {
        part: args
            .part
            .as_deref()
            .map(|p| p.parse().expect("infallible"))
            .unwrap_or(PartSelector::FirstDeep),
        max_memory: gib_to_bytes(args.max_memory)?,
    };
    let images: Vec<DeepImage> = args
        .inputs
        .iter()
        .map(|path| {
            let image = exr::read_deep(path, &read_options)?;
            image.check_depths().map_err(|e| e.in_file(path))?;
            Ok(image)
        })
        .collect::<Result<_>>()?;
    eprintln!("deepmerge: merging {} inputs on the CPU", images.len());
    let refs: Vec<&DeepImage> = images.iter().collect();
    let options = MergeOptions {
        output: if args.deep {
            OutputKind::Deep
        } else {
            OutputKind::Flat { z: args.flat_z }
        },
        tidy: args.tidy,
    };
    match merge_images(&refs, &options)? {
        MergeOutput::Flat(flat) => {
            let flat_type = match args.flat_type {
                FlatTypeArg::Half => FlatType::Half,
                FlatTypeArg::Float => FlatType::Float,
            };
            exr::write_flat(output, &flat, flat_type)
        }
        MergeOutput::Deep(deep) => {
            let codec = match args.compression {
                CompressionArg::None => Codec::None,
                CompressionArg::Rle => Codec::Rle,
                CompressionArg::Zips => Codec::Zips,
                CompressionArg::Zip => Codec::Zip,
            };
            let options = DeepWriteOptions {
                codec,
                write_state: !args.no_deep_state,
            };
            exr::write_deep_with(output, &deep, &options)
        }
    }
}
