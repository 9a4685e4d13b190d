//! `deepmerge comp SCRIPT [--frames RANGE]`: run a compositing graph (`deepmerge::comp`) in one
//! streamed pass, once per frame when its paths hold frame tokens. Frames run one after another
//! (each is already parallel inside); a failed frame is one line naming it and the others still
//! run, as in the merge's sequences. Progress lines for farms as the merge prints them.

use std::path::PathBuf;

use clap::Args;
use deepmerge::comp::{read_script, run_graph, run_graph_with, GraphEngine, RunOptions};
use deepmerge::progress::{Progress, ProgressMode};
use deepmerge::{sequence, Error, Result};

use super::options::memory_size;
use crate::{ProgressArg, DEFAULT_BUDGET};

/// `deepmerge comp`.
#[derive(Args, Debug)]
pub struct CompArgs {
    /// The script: a TOML file naming inputs, nodes and outputs (docs/operations.md, "comp").
    script: PathBuf,
    /// Run a frame sequence: the frames (1-100, 1-100x4, 1-10,20) of the script's paths with a
    /// frame token (#### or @@@@, %04d, $F4).
    #[arg(long, value_name = "RANGE", allow_hyphen_values = true)]
    frames: Option<String>,
    /// The memory the whole graph works in (GiB, or a size with a unit: 512MiB).
    #[arg(long = "memory-budget", value_name = "SIZE", default_value = DEFAULT_BUDGET)]
    memory_budget: String,
    /// Bands of exactly N rows, whatever the budget says (for tests and measurements).
    #[arg(long, value_name = "N", hide = true, value_parser = clap::value_parser!(u32).range(1..))]
    band_rows: Option<u32>,
    /// A frame that fails is a warning, not an error: the exit code is 0 if any frame was
    /// written.
    #[arg(long, requires = "frames")]
    skip_bad_frames: bool,
    /// Progress: a bar when stderr is a terminal (auto), the bar, `openjd_progress: N` lines
    /// (Open Job Description) or `Progress: N%` lines (Deadline) on stdout, or none.
    #[arg(long, value_enum, value_name = "MODE")]
    progress: Option<ProgressArg>,
    /// Print nothing but errors.
    #[arg(short, long, conflicts_with = "progress")]
    quiet: bool,
}

/// Run `comp`.
pub fn run_comp(args: &CompArgs) -> Result<()> {
    // The script first: every refusal of it comes before any image file is read.
    let graph = read_script(&args.script)?;
    let options = RunOptions {
        budget: memory_size("--memory-budget", &args.memory_budget)?,
        band_rows: args.band_rows.map(|n| n as usize),
    };
    let tokens = graph.has_frame_tokens()?;
    let frames = match (&args.frames, tokens) {
        (Some(range), true) => sequence::parse_frames(range)?,
        (Some(_), false) => {
            return Err(Error::Usage(format!(
                "--frames needs a frame token (####, %04d, $F4) in a path of {}",
                args.script.display()
            )))
        }
        (None, true) => {
            return Err(Error::Usage(format!(
                "{} has paths with a frame token; give the frames with --frames",
                args.script.display()
            )))
        }
        (None, false) => {
            let progress = Progress::new(progress_mode(args), 1, "frames");
            run_graph(&graph, &options)?;
            progress.finish();
            return Ok(());
        }
    };
    let progress = Progress::new(progress_mode(args), frames.len() as u64, "frames");
    let (mut written, mut failed) = (0, 0);
    // One GL context for every frame (where the graph merges on GL).
    let engine = GraphEngine::new();
    for &frame in &frames {
        match graph
            .for_frame(frame)
            .and_then(|g| run_graph_with(&g, &options, &engine))
        {
            Ok(()) => written += 1,
            Err(e) => {
                failed += 1;
                let what = if args.skip_bad_frames {
                    "warning"
                } else {
                    "error"
                };
                progress.note(&format!("deepmerge: {what}: frame {frame}: {e}"));
            }
        }
        progress.step();
    }
    progress.finish();
    let verb = if args.skip_bad_frames {
        "skipped"
    } else {
        "failed"
    };
    if failed > 0 && !args.quiet {
        eprintln!(
            "deepmerge: {} written, {failed} {verb}",
            crate::counted(written, "frame")
        );
    }
    match (failed, written, args.skip_bad_frames) {
        (0, _, _) => Ok(()),
        (_, w, true) if w > 0 => Ok(()),
        _ => Err(Error::format(format!(
            "{failed} of {} frames {verb}",
            written + failed
        ))),
    }
}

fn progress_mode(args: &CompArgs) -> ProgressMode {
    super::ops::progress_mode(args.quiet, args.progress)
}
