//! The `deepmerge` command line: parse, run, report. No algorithm code lives here.

mod cli_conventions;
mod memory_reuse;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use deepmerge::bench::{self, BenchArgs};
use deepmerge::composite::{MergeStrategy, Pruning};
use deepmerge::error::ErrorKind;
use deepmerge::exr::ChannelSelection;
use deepmerge::exr::{self, Codec, FlatType, MetadataMode, PartSelector, ReadOptions};
use deepmerge::gpu::{GlContext, Layout, MergeMethod, PixelOrder, RbmBlocks};
use deepmerge::inspect::TableValues;
use deepmerge::job::{MergeJob, SequenceSummary};
use deepmerge::progress::Progress;
use deepmerge::request::{Backend, GlRequest, MergeOption, MergeRequest};
use deepmerge::run_stats::{counted, CpuUse, RunStats, Stage};
use deepmerge::sequence::{self, FramePattern};
use deepmerge::stream::{plan_parts, PartPlan, StreamMerge, StreamOptions};
use deepmerge::{cleanup, heatmap, scene, Error, Result};

mod cli;

use cli::options::{memory_size, named, Flags};

#[derive(Parser, Debug)]
#[command(
    name = "deepmerge",
    version,
    long_version = cli_conventions::LONG_VERSION,
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
    /// Hold IN out by HOLDOUT: attenuate IN's samples by the holdout's transmittance at their
    /// depth (splitting volumes where needed), or with --cull drop those behind its opaque depth.
    Holdout(cli::holdout::HoldoutArgs),
    /// Flatten one deep file into a flat EXR, or a PNG preview for `-o *.png` (the merge of
    /// one input).
    Flatten(cli::ops::FlattenArgs),
    /// Run a compositing graph from a script (TOML: inputs, nodes, outputs) in one streamed
    /// pass: no intermediate files, each input decoded once; --frames for sequences.
    Comp(cli::comp::CompArgs),
    /// Print the OpenGL device, renderer, version and the limits the engine depends on.
    GpuInfo {
        /// Also compile merge.comp's register-block variants (layouts LA and BIA; stepwise, RBM
        /// indexed and RBM shifted; blocks 4, 8, 16; flat and deep), write each driver program
        /// binary to DIR, and say which hold local-memory arrays (NVIDIA's binaries carry their
        /// assembly; `lmem` there means a block left the registers).
        #[arg(long, value_name = "DIR")]
        programs: Option<PathBuf>,
        /// Check the GL engine against the CPU engine, byte for byte, on the bundled real files
        /// and procedural cases (long messy lists, overlapping volumes, an empty input, disjoint
        /// windows, small bands) in every layout, method, strategy, output, stage placement,
        /// long-list schedule and two block sizes: one line per group; exits 1 listing the
        /// failing cases. Run it after a driver update. A software rasteriser runs a reduced set.
        #[arg(long)]
        verify: bool,
        /// With --verify: the folder holding Balls.exr, Leaves.exr and Trunks.exr (default: the
        /// repository's tests/data/openexr-images).
        #[arg(long, value_name = "DIR", requires = "verify")]
        data: Option<PathBuf>,
        /// With --verify: the whole set at full size, on a software rasteriser too.
        #[arg(long, requires = "verify")]
        full: bool,
        /// With --verify: only the case sets whose name contains TEXT (e.g. hairball, volumes).
        #[arg(long, value_name = "TEXT", requires = "verify")]
        only: Option<String>,
        /// Release pooled GPU buffers without their fences, as the pool once did: for the test
        /// that shows --verify and strict mode catch the hazard. Never for real work.
        #[arg(long, requires = "verify", hide = true)]
        unfenced_pool: bool,
    },
    /// Write a procedural benchmark scene as deep EXR inputs PREFIX_0.exr, PREFIX_1.exr, ...
    Scene {
        /// atrium, powerplant, hairball or planes.
        #[arg(value_parser = clap::builder::PossibleValuesParser::new(scene::SCENE_NAMES))]
        name: String,
        /// Image size, WIDTHxHEIGHT.
        #[arg(long, default_value = "1920x1080")]
        size: String,
        /// Random seed: the same seed gives the same files.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Number of inputs (2 for a pair, 4 for pairwise chains).
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(2..=16))]
        inputs: u32,
        /// Output prefix.
        #[arg(short, long, value_name = "PREFIX")]
        output: PathBuf,
    },
    /// Draw a deep file's depth complexity as a PNG: blue <=16, green 16-64, yellow 64-128,
    /// red 128-512 samples per pixel, magenta above, black where empty; over the display and
    /// data windows together (overscan included), with the legend and the windows below.
    Heatmap {
        /// Deep EXR input.
        file: PathBuf,
        /// Output PNG.
        #[arg(short, long, value_name = "PNG")]
        output: PathBuf,
        /// Part to read from multi-part inputs: an index or a name.
        #[arg(long, value_name = "PART")]
        part: Option<String>,
    },
    /// Print the paper-style benchmark tables: every engine, oiiotool and the bandwidth floor,
    /// measured in one run (the same options as `cargo bench --bench paper_tables`).
    Bench(BenchArgs),
    /// Describe deep and flat EXR files: parts, windows, channels, sample statistics.
    Info {
        /// Files to describe.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Refuse inputs that would take more than this once decoded: GiB, or a size with a
        /// unit (512MiB).
        #[arg(long, value_name = "SIZE", default_value = "8")]
        max_memory: String,
        /// Also say what a sample costs when a merge keeps only these channels.
        #[arg(long, value_name = "LIST")]
        channels: Option<String>,
        /// Print the samples of pixel X,Y (absolute coordinates, negative ones too) instead: per
        /// deep part, the table the viewer's inspector shows.
        #[arg(long, value_name = "X,Y", allow_hyphen_values = true)]
        pixel: Option<String>,
        /// With --pixel: only this part (an index or a name); default every deep part.
        #[arg(long, value_name = "PART", requires = "pixel")]
        part: Option<String>,
        /// Also list the id manifest's ids with their names, per channel (the names idselect
        /// and grade take).
        #[arg(long, conflicts_with = "pixel")]
        ids: bool,
        /// With --pixel: the running "over" in merge order instead of the raw values.
        #[arg(long, requires = "pixel")]
        accumulated: bool,
        /// Also print every other header attribute of each part, with its type.
        #[arg(long, conflicts_with = "pixel")]
        all_attributes: bool,
    },
    /// Open a window on the merge of FILE... (or on one file): composite, channels, depth and
    /// depth-complexity views, depth slicing on the GPU and a pixel inspector.
    View(deepmerge::view::ViewArgs),
    /// Print a completion script for SHELL on stdout (e.g. `deepmerge completions bash >
    /// ~/.local/share/bash-completion/completions/deepmerge`).
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff) on stdout (e.g. `deepmerge manpage >
    /// ~/.local/share/man/man1/deepmerge.1`), or with COMMAND the page of that command
    /// (deepmerge-COMMAND.1).
    Manpage {
        /// A command (holdout, info, ...): its own page.
        command: Option<String>,
    },
}

/// How every command that writes an EXR writes it: compression and carried metadata.
#[derive(Args, Clone, Debug)]
pub(crate) struct OutputArgs {
    // The names and the help are the codec table's (`exr::CODEC_NAMES`, `exr::compression_help`),
    // so a new codec needs no edit here.
    #[arg(long, value_name = "CODEC", help = exr::compression_help(), value_parser = named::<Codec>(exr::CODEC_NAMES))]
    compression: Option<Codec>,
    /// The zstd level, 1 to 22 (default 5, OpenEXR's), with --compression zstd.
    #[arg(long, value_name = "N")]
    zstd_level: Option<i32>,
    /// Header attributes of the output: the first input's (first, the default: its part's,
    /// but those the writer states) or none (only the writer's own); the writer's own
    /// (channels, windows, compression...) and `software` are always its own.
    #[arg(long, value_name = "WHICH", value_parser = named::<MetadataMode>(&["first", "none"]))]
    metadata: Option<MetadataMode>,
}

/// The storage types of flat colour, as `--flat-type` names them.
pub(crate) const FLAT_TYPES: &[&str] = &["half", "float"];

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum GpuStagesArg {
    /// Sort on the GPU (exact); tidy on the host, bit-identical to the CPU engine.
    Auto,
    /// Always on the GPU (`sort.comp`, `tidy.comp`; the tidy in f32, within 1e-5 of the CPU
    /// engine where volumes overlap).
    Gpu,
    /// Always on the host (bit-identical to the CPU engine).
    Host,
}

#[derive(Args, Debug)]
struct MergeArgs {
    /// Deep EXR inputs, front-most priority first (ties in depth keep this order); one input is
    /// flattened (or, with --deep, sorted and optionally tidied).
    #[arg(value_name = "INPUT", num_args = 1.., required = true)]
    inputs: Vec<PathBuf>,
    /// Output EXR (written to a temporary file, then renamed), or `*.png` for an 8-bit sRGB
    /// preview of flat output.
    #[arg(short, long, value_name = "OUT", required = true)]
    output: Option<PathBuf>,
    /// Write a merged deep image instead of a flat composite.
    #[arg(long)]
    deep: bool,
    #[command(flatten)]
    write: OutputArgs,
    /// Storage type of flat colour and alpha: half or float (default: float where an input's
    /// colour or alpha is float, half otherwise).
    #[arg(long, value_name = "TYPE", value_parser = named::<FlatType>(FLAT_TYPES))]
    flat_type: Option<FlatType>,
    /// Add a Z channel to flat output (depth of the front-most contributing sample).
    #[arg(long)]
    flat_z: bool,
    /// Leave `deepImageState` out of deep output (for readers that refuse it, e.g. PyPI OpenEXR).
    #[arg(long)]
    no_deep_state: bool,
    /// Tidy deep output: split overlapping volumes, merge coincident volumes and points.
    #[arg(long)]
    tidy: bool,
    /// Drop the inputs' samples whose alphas are all at most EPS (default 1e-7).
    #[arg(long, value_name = "EPS", num_args = 0..=1, default_missing_value = "1e-7")]
    drop_transparent: Option<f32>,
    /// Deep output: drop the samples behind the point where the accumulated alpha reaches
    /// THRESHOLD (default 1, opaque).
    #[arg(long, value_name = "THRESHOLD", num_args = 0..=1, default_missing_value = "1")]
    drop_hidden: Option<f32>,
    /// The output data window: the union of the inputs' (default), their intersection, the
    /// first input's, or the box X0,Y0,X1,Y1 (inclusive corners).
    #[arg(
        long,
        value_name = "union|intersection|first|X0,Y0,X1,Y1",
        default_value = "union",
        allow_hyphen_values = true
    )]
    bbox: String,
    /// Which engine runs the merge: auto (a deep merge of 256 MiB or more of input files on a
    /// host with a GPU and 4 to 8 threads on OpenGL, measured faster there; everything else on
    /// the CPU engine, faster there; --runstats says why; GPU options such as --layout select
    /// OpenGL),
    /// cpu (the reference engine) or gl (OpenGL 4.3 compute).
    #[arg(long, value_name = "ENGINE", default_value = "auto", value_parser = named::<Backend>(&["auto", "cpu", "gl"]))]
    backend: Backend,
    /// GPU layout of the inputs and of deep intermediates: ll, la, ia or bia (GL backend;
    /// default la, the fastest measured on an H100).
    #[arg(long, value_name = "LAYOUT", value_parser = named::<Layout>(&Layout::CLI_NAMES))]
    layout: Option<Layout>,
    /// Register-block merging (GL backend; the default).
    #[arg(long, conflicts_with = "stepwise")]
    rbm: bool,
    /// Stepwise merging (GL backend).
    #[arg(long)]
    stepwise: bool,
    /// Register block size, 1 to 32 (GL backend).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=32))]
    block: Option<u32>,
    /// How register blocks are indexed: shifted (constant indices; the default) or indexed (a
    /// moving index) (GL backend; same output, speed differs by compiler).
    #[arg(long, value_name = "HOW", value_parser = named::<RbmBlocks>(&["shifted", "indexed"]))]
    rbm_blocks: Option<RbmBlocks>,
    /// Who merges pixels with long lists: per-pixel (one invocation each; the default) or
    /// cooperative[=N] (a workgroup for pixels of more than N fragments, 64 if not given; needs
    /// --merge-strategy chain) (GL backend; same output, speed differs by device).
    #[arg(long, value_name = "HOW")]
    gpu_long_lists: Option<deepmerge::gpu::LongLists>,
    /// Pixel order of GPU layouts: row (row-major), or tiled (8x4 raster tiles) (GL backend).
    #[arg(long, value_name = "ORDER", value_parser = named::<PixelOrder>(&["row", "tiled"]))]
    pixel_order: Option<PixelOrder>,
    /// Where the GL backend sorts messy inputs and tidies overlapping volumes.
    #[arg(long, value_enum)]
    gpu_stages: Option<GpuStagesArg>,
    /// GPU memory the GL backend may use (e.g. 8G, 512M): its bands are sized to it (default:
    /// three quarters of what the driver reports free; under llvmpipe, whose buffers are host
    /// memory, 64M for a merge and the host's for the viewer).
    #[arg(long, value_name = "SIZE")]
    gpu_memory: Option<String>,
    /// Print GPU statistics: buffers per layout (bytes), bands, timings (GL backend).
    #[arg(long)]
    stats: bool,
    /// How N inputs merge per pixel: all in one pass (kway, the default) or a chain of pairwise
    /// merges (chain, the paper's iterated merging); both engines, same output.
    #[arg(long, value_name = "HOW", default_value = "kway", value_parser = named::<MergeStrategy>(&["kway", "chain"]))]
    merge_strategy: MergeStrategy,
    /// Sort every input pixel, even where the file says it is sorted.
    #[arg(long, conflicts_with = "assume_sorted")]
    sort: bool,
    /// Trust that every input's pixels are sorted, whatever the file says.
    #[arg(long)]
    assume_sorted: bool,
    /// The part of multi-part inputs to merge: an index or a name, given once for every input
    /// or once per input in input order (`--part rgba.right --part 0`). Default: part by part
    /// when every input has the same deep parts (stereo), else each input's first deep part.
    #[arg(long, value_name = "PART", action = clap::ArgAction::Append)]
    part: Vec<String>,
    /// Merge part by part: each deep part of the first input with the part of every other
    /// input of the same name or `view`, into a multi-part output; a part missing is an error.
    #[arg(long, conflicts_with = "part")]
    all_parts: bool,
    /// The memory the merge works in: GiB, or a size with a unit (512MiB, 2G). Bands of rows
    /// are sized from the inputs' sample counts to fit it; only a single row over its share is
    /// refused (`--max-memory` is the old name).
    #[arg(
        long = "memory-budget",
        visible_alias = "max-memory",
        value_name = "SIZE",
        default_value = DEFAULT_BUDGET
    )]
    memory_budget: String,
    /// Keep only these channels (comma-separated), plus Z, ZBack and the alphas they need; the
    /// others are never decoded into memory.
    #[arg(long, value_name = "LIST")]
    channels: Option<String>,
    /// Bands of exactly N rows, whatever the budget says (for tests and measurements).
    #[arg(long, value_name = "N", hide = true, value_parser = clap::value_parser!(u32).range(1..))]
    band_rows: Option<u32>,
    /// Read and inflate every chunk the merge would, with the same bands and threads, and
    /// stop there: no merge, nothing written (-o is not touched). The decode floor of
    /// `benches/stream_vs_oiiotool.py` (docs/benchmarks.md, "CPU streaming floor").
    #[arg(long, hide = true, conflicts_with = "frames")]
    decode_only: bool,
    /// Measure the codec floor around the merge (docs/benchmarks.md, "The codec floor"): decode
    /// the inputs alone, merge, then encode the output again alone, and print the merge's wall
    /// time as a multiple of decode + encode, and how busy the threads were in the decode and
    /// in the merge.
    #[arg(long, hide = true, conflicts_with_all = ["frames", "decode_only"])]
    codec_floor: bool,
    /// Merge a frame sequence: the frames (1-100, 1-100x4, 1-10,20,30-40, -5--1) of paths with
    /// a frame token (#### or @@@@, %04d, $F4); inputs without one are used for every frame.
    #[arg(long, value_name = "RANGE", allow_hyphen_values = true)]
    frames: Option<String>,
    /// Frames merged at the same time (CPU engine; default: the number of cores).
    #[arg(short, long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    jobs: Option<u32>,
    /// A frame that fails is a warning, not an error: the exit code is 0 if any frame was
    /// written.
    #[arg(long, requires = "frames")]
    skip_bad_frames: bool,
    /// Progress: a bar when stderr is a terminal (auto), the bar, `openjd_progress: N` lines
    /// (Open Job Description) or `Progress: N%` lines (Deadline) on stdout, or none.
    #[arg(long, value_enum, value_name = "MODE")]
    progress: Option<ProgressArg>,
    /// Print nothing but errors (and, with --skip-bad-frames, the skipped frames).
    #[arg(short, long, conflicts_with_all = ["progress", "runstats", "stats"])]
    quiet: bool,
    /// Print the time of each stage (read, merge, write) and the peak memory at the end.
    #[arg(long)]
    runstats: bool,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum ProgressArg {
    Auto,
    Bar,
    Openjd,
    Plain,
    None,
}

/// Whether the command line asks for quiet (`-q`: nothing but errors), on the merge or on the
/// subcommand it names; commands without the flag are not quiet.
fn asks_quiet(matches: &clap::ArgMatches) -> bool {
    let quiet = |m: &clap::ArgMatches| matches!(m.try_get_one::<bool>("quiet"), Ok(Some(true)));
    quiet(matches) || matches.subcommand().is_some_and(|(_, sub)| quiet(sub))
}

fn main() -> ExitCode {
    // Times count from here when DEEPMERGE_TIMELINE asks for a timeline.
    deepmerge::timeline::start();
    cli_conventions::die_quietly_on_closed_stdout();
    // Before anything is written: leftovers of earlier runs are what is older than this.
    exr::mark_run_start();
    // Before any temporary file exists: SIGINT/SIGTERM remove them, `ulimit -f` is EFBIG.
    if let Err(e) = cleanup::install_signal_handlers() {
        eprintln!("deepmerge: error: cannot install signal handlers: {e}");
        return ExitCode::FAILURE;
    }
    let matches = command().get_matches();
    // Before the merge's buffers exist: freed band buffers are kept for the next band (not by
    // the viewer, a long-lived window that should hand memory back).
    match memory_reuse::MallocSetting::from_env() {
        Ok(setting) if matches.subcommand_name() != Some("view") => memory_reuse::apply(setting),
        Ok(_) => {}
        Err(e) => return exit_with(Err(e), "--memory-budget"),
    }
    // Every measurement setting, refused before any file is opened and whatever the command
    // (the runs read them again where they start: a GL setting only where a context starts, so
    // a bad one would otherwise pass silently under `--backend cpu`); and a `DEEPMERGE_*` name
    // deepmerge does not know, most likely a misspelt switch, said once.
    if let Err(e) = deepmerge::env_setting::check_settings() {
        return exit_with(Err(e), "--memory-budget");
    }
    if !asks_quiet(&matches) {
        for (name, nearest) in deepmerge::env_setting::unknown_settings() {
            eprintln!(
                "deepmerge: warning: {}",
                deepmerge::env_setting::unknown_setting_warning(&name, nearest)
            );
        }
    }
    // An operation of the table is its own subcommand (`cli::ops`); the rest are `Command`'s.
    if let Some((name, args)) = matches.subcommand() {
        if let Some(spec) = deepmerge::ops::find(name) {
            return exit_with(cli::ops::run_operation(spec, args), "--memory-budget");
        }
    }
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // The spelling of the memory budget's option in this command, for its refusals.
    let budget_flag = match &cli.command {
        Some(Command::Info { .. } | Command::Holdout { .. } | Command::View(_)) => "--max-memory",
        _ => "--memory-budget",
    };
    let result = match cli.command {
        Some(Command::Info {
            files,
            max_memory,
            channels,
            pixel,
            part,
            accumulated,
            all_attributes,
            ids,
        }) => run_info(
            &files,
            &max_memory,
            channels.as_deref(),
            pixel,
            part,
            accumulated,
            all_attributes,
            ids,
        ),
        Some(Command::View(args)) => match deepmerge::view::run(&args) {
            Ok(true) => Ok(()),
            // The error was shown in the window and printed on stderr already.
            Ok(false) => return ExitCode::FAILURE,
            Err(e) => Err(e),
        },
        Some(Command::Holdout(args)) => cli::holdout::run_holdout(&args),
        Some(Command::Flatten(args)) => cli::ops::run_flatten(&args),
        Some(Command::Comp(args)) => cli::comp::run_comp(&args),
        Some(Command::GpuInfo {
            programs,
            verify,
            data,
            full,
            only,
            unfenced_pool,
        }) => {
            if verify {
                let options = deepmerge::verify::VerifyOptions {
                    data_dir: data,
                    full,
                    only,
                };
                run_gpu_verify(&options, unfenced_pool)
            } else {
                run_gpu_info(programs.as_deref())
            }
        }
        Some(Command::Scene {
            name,
            size,
            seed,
            inputs,
            output,
        }) => run_scene(&name, &size, seed, inputs as usize, &output),
        Some(Command::Heatmap { file, output, part }) => run_heatmap(&file, &output, part),
        Some(Command::Bench(args)) => bench::run_front_end(&args, std::env::current_exe().ok()),
        Some(Command::Completions { shell }) => {
            cli_conventions::print_completions(shell, &mut command());
            Ok(())
        }
        Some(Command::Manpage { command }) => {
            cli_conventions::print_manpage(self::command(), command.as_deref())
        }
        None => run_merge(&cli.merge),
    };
    exit_with(result, budget_flag)
}

/// The command line: `Cli`'s commands with the operations of the table among them (after
/// `flatten`, as their help lists them).
fn command() -> clap::Command {
    let mut command = Cli::command();
    let derived: Vec<String> = command
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    let operations = cli::ops::subcommands();
    let first = 2; // holdout, flatten
    for (i, name) in derived.iter().enumerate() {
        let order = if i < first { i } else { i + operations.len() };
        command = command.mut_subcommand(name, |c| c.display_order(order));
    }
    for (k, operation) in operations.into_iter().enumerate() {
        command = command.subcommand(operation.display_order(first + k));
    }
    command
}

/// The exit of a command that gave `result`: its error printed in one line.
fn exit_with(result: Result<()>, budget_flag: &str) -> ExitCode {
    if let Some(timeline) = deepmerge::timeline::report() {
        eprint!("{timeline}");
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("deepmerge: error: {}", error_line(&e, budget_flag));
            ExitCode::from(exit_code(e.kind()))
        }
    }
}

/// The exit status of an error of `kind`: the table of docs/cli.md ("Exit codes"), beside the
/// Python exception classes (`python/src/errors.rs`). 2 for usage, as clap's own usage errors;
/// 3 for a refusal of the memory budget, which a larger budget lets run; 1 for the rest.
fn exit_code(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::Usage => 2,
        ErrorKind::OverBudget => 3,
        ErrorKind::Io
        | ErrorKind::Malformed
        | ErrorKind::Unsupported
        | ErrorKind::Gl
        | ErrorKind::Internal => 1,
    }
}

/// The line printed for `e`: the library's message and, for a refusal of the memory budget,
/// the option that raises it (`budget_flag`, as this command spells it): the library names no
/// option.
fn error_line(e: &Error, budget_flag: &str) -> String {
    match e.kind() {
        ErrorKind::OverBudget => format!("{e} (raise it with {budget_flag})"),
        _ => e.to_string(),
    }
}

/// `gpu-info --verify`: the device, then the table; an error listing every failing case.
fn run_gpu_verify(options: &deepmerge::verify::VerifyOptions, unfenced_pool: bool) -> Result<()> {
    let ctx = GlContext::new()?;
    print!("{}", ctx.info());
    ctx.use_release_fences(!unfenced_pool);
    let report = deepmerge::verify::verify(&ctx, options, &mut std::io::stdout())?;
    let failures = report.failures();
    let runs: usize = report.groups.iter().map(|g| g.runs).sum();
    if failures.is_empty() {
        println!(
            "all {runs} merges equal the CPU engine's on {}{}",
            report.device,
            if report.skipped.is_empty() {
                String::new()
            } else {
                format!(" ({} case sets skipped, above)", report.skipped.len())
            }
        );
        return Ok(());
    }
    for f in &failures {
        eprintln!("deepmerge: verify: {f}");
    }
    // A merge that stopped with an error is not one whose bytes differ: say how many of each
    // (on an H200, strict mode stopped merges whose bytes were never compared).
    let failed = failures.iter().filter(|f| f.contains(": failed: ")).count();
    Err(Error::Gl(format!(
        "{} of {runs} merges did not equal the CPU engine's on {}: {} differ, {failed} failed",
        failures.len(),
        report.device,
        failures.len() - failed
    )))
}

fn run_gpu_info(programs: Option<&Path>) -> Result<()> {
    let ctx = GlContext::new()?;
    print!("{}", ctx.info());
    let Some(dir) = programs else {
        return Ok(());
    };
    std::fs::create_dir_all(dir).map_err(|e| Error::create_folder(dir, e))?;
    // A, then B, G, R over A: the scenes' channels.
    let columns = deepmerge::gpu::resident::ColumnSpec {
        alpha_of: vec![None, Some(0), Some(0), Some(0)],
    };
    println!("merge.comp program binaries in {}:", dir.display());
    for layout in [Layout::Linearised, Layout::BlockedInterleaved] {
        for (method, rbm_blocks) in [
            (MergeMethod::Stepwise, RbmBlocks::Indexed),
            (MergeMethod::RegisterBlock, RbmBlocks::Indexed),
            (MergeMethod::RegisterBlock, RbmBlocks::Shifted),
        ] {
            for block_size in [4, 8, 16] {
                for deep in [false, true] {
                    let spec = deepmerge::gpu::resident::MergeSpec {
                        method,
                        block_size,
                        descending: false,
                        rbm_blocks,
                    };
                    let binary = deepmerge::gpu::resident::merge_program_binary(
                        &ctx, layout, spec, &columns, deep,
                    )?;
                    let name = format!(
                        "merge-{}-{}{}-b{block_size}-{}.bin",
                        layout.name(),
                        method.name(),
                        if method == MergeMethod::RegisterBlock {
                            format!("-{}", rbm_blocks.name())
                        } else {
                            String::new()
                        },
                        if deep { "deep" } else { "flat" }
                    );
                    let path = dir.join(&name);
                    std::fs::write(&path, &binary).map_err(|e| Error::write(&path, e))?;
                    let lmem = count_word(&binary, b"lmem");
                    println!(
                        "  {name}: {} bytes, 'lmem' {} times{}",
                        binary.len(),
                        lmem,
                        if lmem > 0 { " (local memory)" } else { "" }
                    );
                }
            }
        }
    }
    Ok(())
}

/// How often `word` occurs in `bytes`.
fn count_word(bytes: &[u8], word: &[u8]) -> usize {
    bytes.windows(word.len()).filter(|w| *w == word).count()
}

/// `--memory-budget` by default: [`deepmerge::stream::DEFAULT_MEMORY_BUDGET`], 1 GiB.
pub(crate) const DEFAULT_BUDGET: &str = "1";

fn run_scene(name: &str, size: &str, seed: u64, inputs: usize, prefix: &Path) -> Result<()> {
    let (width, height) = scene::parse_size(size)?;
    for path in scene::write_scene(name, width, height, seed, inputs, prefix)? {
        println!("{}", path.display());
    }
    Ok(())
}

fn run_heatmap(file: &Path, output: &Path, part: Option<String>) -> Result<()> {
    deepmerge::preview::check_output_is_a_file(output)?;
    let options = ReadOptions {
        part: part
            .map(|p| p.parse().expect("infallible"))
            .unwrap_or_default(),
        ..ReadOptions::default()
    };
    let image = exr::read_deep(file, &options)?;
    heatmap::write_heatmap(&image, output)
}

#[allow(clippy::too_many_arguments)]
fn run_info(
    files: &[PathBuf],
    max_memory: &str,
    channels: Option<&str>,
    pixel: Option<String>,
    part: Option<String>,
    accumulated: bool,
    all_attributes: bool,
    ids: bool,
) -> Result<()> {
    let max_memory = memory_size("--max-memory", max_memory)?;
    let selection = channels.map(ChannelSelection::parse).transpose()?;
    let pixel = pixel
        .map(|p| deepmerge::info::parse_pixel(&p))
        .transpose()?;
    let part: Option<PartSelector> = part.map(|p| p.parse().expect("infallible"));
    let mode = if accumulated {
        TableValues::Accumulated
    } else {
        TableValues::Raw
    };
    // Every file is described; a bad one is reported on its own line and the run fails at the
    // end, so one bad file in a listing hides nothing about the others. A single file's error
    // is the run's one error line.
    if let [file] = files {
        let text = match pixel {
            Some(pixel) => {
                deepmerge::info::describe_pixel_of(0, file, part.as_ref(), pixel, mode, max_memory)?
            }
            None => {
                let mut text = deepmerge::info::describe_file(file, max_memory)?
                    + &deepmerge::info::describe_sample_cost(file, selection.as_ref())?;
                if all_attributes {
                    text += &deepmerge::info::describe_attributes(file)?;
                }
                if ids {
                    text += &deepmerge::info::describe_ids(file)?;
                }
                text
            }
        };
        print!("{text}");
        return Ok(());
    }
    let mut failed = 0;
    let mut sections = 0;
    for (input, f) in files.iter().enumerate() {
        let text = match pixel {
            Some(pixel) => {
                deepmerge::info::describe_pixel_of(input, f, part.as_ref(), pixel, mode, max_memory)
            }
            None => deepmerge::info::describe_file(f, max_memory).and_then(|mut text| {
                text += &deepmerge::info::describe_sample_cost(f, selection.as_ref())?;
                if all_attributes {
                    text += &deepmerge::info::describe_attributes(f)?;
                }
                if ids {
                    text += &deepmerge::info::describe_ids(f)?;
                }
                Ok(text)
            }),
        };
        match text {
            Ok(text) => {
                // Pixel tables are separated by a blank line, as the viewer's `t` prints them.
                if pixel.is_some() && sections > 0 {
                    println!();
                }
                sections += 1;
                print!("{text}");
            }
            Err(e) => {
                eprintln!("deepmerge: error: {}", error_line(&e, "--max-memory"));
                failed += 1;
            }
        }
    }
    match failed {
        0 => Ok(()),
        _ => Err(Error::format(format!(
            "{failed} of {} file(s) could not be described",
            files.len()
        ))),
    }
}

/// The merge the command line asks for: each flag mapped onto the library's request, which
/// owns the rules (`MergeRequest::check`).
fn merge_request(args: &MergeArgs) -> Result<MergeRequest> {
    Ok(MergeRequest {
        deep: args.deep,
        flat_z: args.flat_z,
        flat_type: args.flat_type,
        tidy: args.tidy,
        deep_state: !args.no_deep_state,
        sort: args.sort,
        assume_sorted: args.assume_sorted,
        strategy: args.merge_strategy,
        pruning: Pruning {
            drop_transparent: args.drop_transparent,
            drop_hidden: args.drop_hidden,
        },
        bbox: args
            .bbox
            .parse()
            .map_err(|e| Error::Usage(format!("--bbox: {e}")))?,
        part: args
            .part
            .iter()
            .map(|p| p.parse().expect("infallible"))
            .collect(),
        all_parts: args.all_parts,
        channels: args
            .channels
            .as_deref()
            .map(ChannelSelection::parse)
            .transpose()?,
        memory_budget: memory_size("--memory-budget", &args.memory_budget)?,
        band_rows: args.band_rows.map(|n| n as usize),
        backend: args.backend,
        gl: GlRequest {
            layout: args.layout,
            method: if args.stepwise {
                Some(MergeMethod::Stepwise)
            } else if args.rbm {
                Some(MergeMethod::RegisterBlock)
            } else {
                None
            },
            block_size: args.block,
            rbm_blocks: args.rbm_blocks,
            long_lists: args.gpu_long_lists,
            pixel_order: args.pixel_order,
            stages_on_gpu: match args.gpu_stages {
                Some(GpuStagesArg::Gpu) => Some(true),
                Some(GpuStagesArg::Host) => Some(false),
                Some(GpuStagesArg::Auto) | None => None,
            },
            stats: args.stats,
            gpu_memory: args
                .gpu_memory
                .as_deref()
                .map(|text| memory_size("--gpu-memory", text))
                .transpose()?,
        },
        compression: args.write.compression,
        zstd_level: args.write.zstd_level,
        metadata: args.write.metadata,
        writes_file: true,
        jobs: args.jobs.map(|j| j as usize),
    })
}

/// Refuse a first input that names no file but is a slip for a command (`deepmerge flaten
/// IN -o OUT`): clap reads an unknown word as the merge's first input, which would otherwise
/// fail as a file that cannot be read, with no word of the command meant.
fn check_not_a_misspelt_command(inputs: &[PathBuf]) -> Result<()> {
    let Some(first) = inputs.first() else {
        return Ok(());
    };
    let word = first.to_string_lossy();
    if first.exists() || first.extension().is_some() || word.contains('/') {
        return Ok(());
    }
    let nearest = command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .map(|name| (strsim::damerau_levenshtein(&word, &name), name))
        .min()
        // Close: a slip of a letter or two, not another word.
        .filter(|(distance, name)| *distance <= 2 && *distance < name.len() / 2);
    match nearest {
        Some((_, name)) => Err(Error::Usage(format!(
            "{word}: no such file, and no command of that name (did you mean `deepmerge {name}`?)"
        ))),
        None => Ok(()),
    }
}

fn run_merge(args: &MergeArgs) -> Result<()> {
    check_not_a_misspelt_command(&args.inputs)?;
    let output = args.output.as_ref().expect("clap requires -o");
    deepmerge::preview::check_output_is_a_file(output)?;
    let request = merge_request(args)?;
    request.check(args.inputs.len(), &Flags)?;
    deepmerge::preview::check_output_name(output, args.deep)?;
    if deepmerge::preview::is_png_path(output) {
        // A PNG preview is a picture of the flat composite: the EXR options are refused, not
        // ignored.
        deepmerge::request::refuse_with_png(
            &[
                (args.write.compression.is_some(), MergeOption::Compression),
                (args.write.zstd_level.is_some(), MergeOption::ZstdLevel),
                (args.write.metadata.is_some(), MergeOption::Metadata),
                (args.flat_type.is_some(), MergeOption::FlatType),
                (args.flat_z, MergeOption::FlatZ),
            ],
            &Flags,
        )?;
    }
    // Parse the sequence before choosing the engine: a usage error should not wait for GL.
    let output_pattern = FramePattern::parse(output)?;
    let frames = match (&args.frames, &output_pattern) {
        (Some(range), Some(_)) => Some(sequence::parse_frames(range)?),
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
        (None, None) => None,
    };
    if frames.is_none() && request.jobs.is_some() {
        return Err(Error::Usage("-j applies to sequences (--frames)".into()));
    }
    // The inputs' patterns too, so a malformed one is a usage error, not a literal path.
    let sequence_inputs: Vec<(PathBuf, Option<FramePattern>)> = if frames.is_some() {
        args.inputs
            .iter()
            .map(|p| Ok((p.clone(), FramePattern::parse(p)?)))
            .collect::<Result<_>>()?
    } else {
        Vec::new()
    };
    let job = MergeJob::new(&request, args.inputs.len(), !args.quiet)?;
    // Choose the engine before reading. `--backend gl`, and `auto` where it chooses GL, make the
    // context on a helper thread meanwhile (a host without GL fails where the merge first needs
    // it, saying why; `auto` falls back to the CPU engine there instead). A sequence
    // keeps `auto` on the CPU engine, which merges frames side by side (`-j`; not measured
    // against one GL frame at a time).
    // The input files' size too: a small deep merge would not win back a GL context's start-up.
    let input_bytes = args
        .inputs
        .iter()
        .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .sum();
    let engine = request.engine(frames.is_some(), Some(input_bytes))?;
    let progress_mode = cli::ops::progress_mode(args.quiet, args.progress);
    let stats = RunStats::new();
    let (steps, what) = match &frames {
        Some(f) => (f.len() as u64, "frames"),
        None => (3, "stages"),
    };
    let progress = Progress::new(progress_mode, steps, what);
    // Which engine runs, and on which GPU, for a user who asked for the run's details
    // (--runstats, --stats): a merge's default output is only what the user needs (a plain
    // merge says nothing).
    let frames_note = match &frames {
        Some(f) => format!(", {}", counted(f.len(), "frame")),
        None => String::new(),
    };
    // Said once the merge has succeeded (a GL context still starting when the merge began is
    // made by then; one no band needed is made here).
    let announce = || -> Option<String> {
        if !(args.runstats || args.stats) {
            return None;
        }
        match engine.started_context().ok().flatten() {
            // Why the CPU engine runs when it was not asked for by name (`--backend auto`).
            None if !engine.is_gl() && args.runstats => Some(format!(
                "deepmerge: merging {} on the CPU engine{}{frames_note}",
                counted(args.inputs.len(), "input"),
                engine.cpu_reason()
            )),
            Some(ctx) => {
                let gl = request.gl_options();
                let kway = deepmerge::gpu::uses_kway(job.merge.strategy, args.inputs.len());
                // Two inputs may take the pairwise kernel where their lists are long, band by band
                // (`GlOptions::pairwise_long_pairs`): say so rather than name one kernel.
                let kernel = if !kway {
                    gl.method.name().to_string()
                } else if args.inputs.len() == 2 && gl.pairs_long_lists_pairwise(ctx) {
                    format!("k-way, or {} where lists are long,", gl.method.name())
                } else {
                    "k-way".to_string()
                };
                // Why `--backend auto` chose GL, where it did (" (auto: ...)", or empty).
                let why = engine.gl_reason();
                Some(format!(
                "deepmerge: merging {} with OpenGL on {} ({} {kernel} block {}){why}{frames_note}",
                counted(args.inputs.len(), "input"),
                ctx.info().renderer,
                gl.layout.name(),
                gl.block_size
            ))
            }
            _ => None,
        }
    };
    // Read and inflate every chunk the merge would, and nothing else.
    let decode_inputs = |stats: &RunStats| -> Result<()> {
        let options = job.stream_options();
        let per_part = match plan_parts(&args.inputs, &job.parts)? {
            PartPlan::One { parts, .. } => vec![parts],
            PartPlan::Each(each) => each
                .into_iter()
                .map(|p| p.parts.into_iter().map(PartSelector::Index).collect())
                .collect(),
        };
        for input_parts in per_part {
            let options = StreamOptions {
                input_parts,
                ..options.clone()
            };
            StreamMerge::open(&args.inputs, &options, Some(stats))?.decode_only(Some(stats))?;
        }
        Ok(())
    };
    if args.decode_only {
        // As for --codec-floor: a GL context still starting is made first, not beside the decode.
        engine.started_context()?;
        decode_inputs(&stats)?;
        if args.runstats {
            eprint!("{}", stats.report(1));
        }
        return Ok(());
    }
    if args.codec_floor {
        if deepmerge::preview::is_png_path(output) {
            return Err(Error::Usage(
                "--codec-floor measures EXR output, not a PNG preview".into(),
            ));
        }
        // A GL context still starting is made first, so that it neither slows the floor's
        // decode nor counts in the merge's time (as when contexts were made before any read).
        engine.started_context()?;
        let decode = RunStats::new();
        let decode_cpu = CpuUse::now();
        let decode_start = std::time::Instant::now();
        decode_inputs(&decode)?;
        let decode_wall = decode_start.elapsed();
        let decode_s = decode.seconds(Stage::Read);
        let merge_cpu = CpuUse::now();
        let start = std::time::Instant::now();
        job.run_one(&engine, &args.inputs, output, &stats, &progress, &|| None)?;
        let merge_wall = start.elapsed();
        let merged_cpu = CpuUse::now();
        let merge_s = merge_wall.as_secs_f64();
        let encode_s = deepmerge::stream::codec_floor::encode_only(output, &job.stream_options())?;
        let floor = decode_s + encode_s;
        // How busy the threads were in each: a merge above its floor with its threads busy
        // does more work than the codecs; one with idle threads waits on something serial.
        let threads = rayon::current_num_threads();
        let busy = match (decode_cpu, merge_cpu, merged_cpu) {
            (Some(a), Some(b), Some(c)) => format!(
                "; {} busy: decode {:.0}%, merge {:.0}%",
                counted(threads, "thread"),
                100.0 * b.since(a).busy_share(decode_wall, threads),
                100.0 * c.since(b).busy_share(merge_wall, threads)
            ),
            _ => String::new(),
        };
        eprintln!(
            "codec floor: decode {decode_s:.3} s + encode {encode_s:.3} s = {floor:.3} s; \
             the merge took {merge_s:.3} s wall, {:.2}x the floor{busy}",
            merge_s / floor.max(1e-9)
        );
        if args.runstats {
            eprint!("{}", stats.report(1));
        }
        return Ok(());
    }
    let (Some(frames), Some(pattern)) = (frames, output_pattern) else {
        job.run_one(&engine, &args.inputs, output, &stats, &progress, &announce)?;
        progress.finish();
        if args.runstats {
            eprint!("{}", stats.report(1));
        }
        return Ok(());
    };
    let jobs = args
        .jobs
        .map(|j| j as usize)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    // A sequence merges its GL frames one at a time on the context: made before the first.
    engine.started_context()?;
    if let Some(line) = announce() {
        progress.note(&line);
    }
    let summary = job.run_sequence(
        &engine,
        &sequence_inputs,
        &pattern,
        &frames,
        jobs,
        args.skip_bad_frames,
        &stats,
        &progress,
    );
    if args.runstats {
        eprint!("{}", stats.report(frames.len()));
    }
    sequence_result(summary, args.skip_bad_frames, args.quiet)
}

/// The exit of a sequence: every frame written is success; failed frames are an error, unless
/// skipped, where at least one written frame is needed.
fn sequence_result(summary: SequenceSummary, skip_bad: bool, quiet: bool) -> Result<()> {
    let SequenceSummary { written, failed } = summary;
    let verb = if skip_bad { "skipped" } else { "failed" };
    if !quiet || failed > 0 {
        eprintln!(
            "deepmerge: {} written, {failed} {verb}",
            counted(written, "frame")
        );
    }
    match (failed, written, skip_bad) {
        (0, _, _) => Ok(()),
        (_, w, true) if w > 0 => Ok(()),
        _ => Err(Error::format(format!(
            "{failed} of {} frames {verb}",
            written + failed
        ))),
    }
}
