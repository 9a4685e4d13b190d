//! A merge as the CLI runs it: the inputs streamed band by band through the chosen engine into
//! the output (`crate::stream`), timing each stage. One frame of a sequence is exactly this with the frame's paths
//! ([`MergeJob::run_sequence`] calls [`MergeJob::run_one`] per frame), so a sequence frame and a
//! single-frame run of the same files give the same bytes.
//!
//! Sequence frames run on `jobs` threads with the CPU engine; the GL engine's context belongs
//! to one thread, so there frames run one after another. A frame that fails (a missing or bad
//! input, an unwritable output) is reported with its file and the other frames still run.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::backend::EngineChoice;
use crate::composite::MergeOptions;
use crate::deep::DeepImage;
use crate::error::Result;
use crate::exr::{
    self, ChannelSelection, DeepWriteOptions, FlatWriteOptions, MetadataMode, PartSelector,
    ReadOptions,
};
use crate::gpu::{GlContext, GlOptions};
use crate::progress::Progress;
use crate::request::{FieldNames, MergeRequest};
use crate::run_stats::RunStats;
use crate::sequence::FramePattern;
use crate::stream::{merge_parts, plan_parts, MergeEngine, PartPlan, PartRequest, StreamOptions};

/// Everything about a merge but its paths and its engine.
#[derive(Clone, Debug)]
pub struct MergeJob {
    /// Which part of each input is read, or part by part (`--part`, `--all-parts`).
    pub parts: PartRequest,
    /// Print on stderr which part of an input with several deep parts is merged when none was
    /// chosen (the CLI's default; not under `--quiet`).
    pub part_notes: bool,
    /// What the merge produces.
    pub merge: MergeOptions,
    /// Options of flat output.
    pub flat_write: FlatWriteOptions,
    /// Options of deep output.
    pub deep_write: DeepWriteOptions,
    /// Which input attributes the output carries.
    pub metadata: MetadataMode,
    /// GL engine options (the defaults when `None`).
    pub gl: Option<GlOptions>,
    /// Print the GL engine's statistics after each merge.
    pub gl_stats: bool,
    /// The memory a merge may use, in bytes (shared by the frames merged at the same time).
    pub budget: u64,
    /// Keep only these channels (`--channels`).
    pub channels: Option<ChannelSelection>,
    /// Bands of exactly this many rows (a testing knob; `None`: planned from the budget).
    pub band_rows: Option<usize>,
    /// The threads each band may count on (`StreamOptions::band_threads`).
    pub band_threads: Option<usize>,
    /// Samples dropped around the merge (`--drop-transparent`, `--drop-hidden`).
    pub pruning: crate::composite::Pruning,
    /// The output data window (`--bbox`).
    pub bbox: crate::stream::OutputWindow,
    /// Flat output stores colour as the inputs do (no `--flat-type` given).
    pub flat_type_follows_inputs: bool,
}

/// How a sequence went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SequenceSummary {
    /// Frames written.
    pub written: usize,
    /// Frames that failed (reported as errors, or as warnings under `skip_bad`).
    pub failed: usize,
}

impl MergeJob {
    /// The job `request` asks for, over `inputs` inputs; `part_notes` as the field says. The
    /// request is checked ([`MergeRequest::check`]) by the caller, in its own words.
    pub fn new(request: &MergeRequest, inputs: usize, part_notes: bool) -> Result<Self> {
        let (deep_write, flat_write) = request.write_options()?;
        Ok(MergeJob {
            parts: request.part_request(inputs, &FieldNames)?,
            part_notes,
            merge: request.merge_options(),
            flat_write,
            deep_write,
            metadata: request.metadata.unwrap_or_default(),
            gl: request.gl.is_given().then(|| request.gl_options()),
            gl_stats: request.gl.stats,
            budget: request.memory_budget,
            channels: request.channels.clone(),
            band_rows: request.band_rows,
            band_threads: None,
            pruning: request.pruning,
            bbox: request.bbox,
            flat_type_follows_inputs: request.flat_type.is_none(),
        })
    }

    /// Merge `inputs` into `output` on `engine`, adding stage times to `stats` and a progress
    /// step after each stage. What `announce` gives is printed once the merge has succeeded, so
    /// a run that fails prints its one error line only (and a GL context still starting when
    /// the merge began is made by then, for the line to name its device).
    pub fn run_one(
        &self,
        engine: &EngineChoice,
        inputs: &[PathBuf],
        output: &Path,
        stats: &RunStats,
        progress: &Progress,
        announce: &dyn Fn() -> Option<String>,
    ) -> Result<()> {
        self.run_on(
            engine.merging(self.gl.unwrap_or_default()),
            inputs,
            output,
            stats,
            Some((progress, announce)),
        )
    }

    /// One merge on `engine` (a frame thread merges on the CPU engine: a GL context belongs to
    /// the thread that made it).
    fn run_on(
        &self,
        engine: MergeEngine,
        inputs: &[PathBuf],
        output: &Path,
        stats: &RunStats,
        progress: Option<(&Progress, &dyn Fn() -> Option<String>)>,
    ) -> Result<()> {
        let step = || progress.inspect(|p| p.0.step());
        crate::exr::check_output_is_not_an_input(output, inputs)?;
        let options = self.stream_options();
        let plan = plan_parts(inputs, &self.parts)?;
        step();
        // `--stats` profiles the merge from its first dispatch: a starting context is made here.
        let engine = if self.gl_stats {
            engine.started()?
        } else {
            engine
        };
        let gl = match engine {
            MergeEngine::Gl(ctx, _) => Some(ctx),
            _ => None,
        };
        let profiled = match gl {
            Some(ctx) if self.gl_stats => {
                ctx.profile_stages(true);
                Some(ctx)
            }
            _ => None,
        };
        let reports = merge_parts(inputs, output, &plan, &options, engine, Some(stats));
        // The pool as the merge left it, before the copy floor below takes buffers of its own.
        let pool = gl.map(GlContext::pool_stats);
        // The stage profile is read after the merge, so profiling adds no wait inside it.
        let profile = profiled.map(|ctx| {
            let mut profile = ctx.take_profile();
            ctx.profile_stages(false);
            profile.copy_bandwidth = copy_floor(ctx);
            profile
        });
        let reports = reports?;
        // A streamed merge finds a corrupt block or a NaN depth only when it decodes that band,
        // so the announcement waits for success: a run that fails prints its one error line.
        if let Some((p, announce)) = progress {
            if let Some(line) = announce() {
                p.note(&line);
            }
        }
        if let (Some((p, _)), PartPlan::One { notes, .. }) = (progress, &plan) {
            if self.part_notes {
                notes.iter().for_each(|n| p.note(n));
            }
        }
        if self.gl_stats {
            for gl_stats in reports.iter().filter_map(|r| r.gpu_stats.as_ref()) {
                eprint!("{gl_stats}");
            }
            if let Some(pool) = pool {
                eprintln!("{pool}");
            }
            if let Some(ctx) = gl {
                if let Ok(rate) = crate::gpu::upload_bandwidth(ctx, 64 << 20, 5) {
                    eprintln!(
                        "upload reference: {:.2} GB/s (64 MiB host-to-GPU uploads measured in this process)",
                        rate / 1e9
                    );
                }
            }
            if let Some(profile) = profile {
                eprintln!("{profile}");
                // The GPU's share of the merge stage: the rest it sat idle while the host
                // staged, waited on readbacks or assembled output.
                let merge_s = stats.seconds(crate::run_stats::Stage::Merge);
                let busy_s = profile.total_s();
                eprintln!(
                    "GPU busy {busy_s:.3} s of the merge stage's {merge_s:.3} s (idle {:.0}%)",
                    100.0 * (1.0 - busy_s / merge_s.max(1e-9)).max(0.0)
                );
            }
        }
        step();
        step();
        Ok(())
    }

    /// The streamed merge's options for this job.
    pub fn stream_options(&self) -> StreamOptions {
        StreamOptions {
            part: PartSelector::FirstDeep,
            input_parts: Vec::new(),
            merge: self.merge,
            flat_write: self.flat_write.clone(),
            deep_write: self.deep_write.clone(),
            metadata: self.metadata,
            budget: self.budget,
            channels: self.channels.clone(),
            band_rows: self.band_rows,
            band_threads: self.band_threads,
            pruning: self.pruning,
            bbox: self.bbox,
            flat_type_follows_inputs: self.flat_type_follows_inputs,
        }
    }

    /// Merge every frame of `frames`: `inputs`, each with its frame pattern from
    /// [`FramePattern::parse`] (`None`: the same file for every frame), into the output pattern.
    /// `jobs` frames at a time on the CPU engine. Each failed frame is printed on stderr, as an error or, with `skip_bad`, a
    /// warning, and the others still run.
    #[allow(clippy::too_many_arguments)]
    pub fn run_sequence(
        &self,
        engine: &EngineChoice,
        inputs: &[(PathBuf, Option<FramePattern>)],
        output: &FramePattern,
        frames: &[i64],
        jobs: usize,
        skip_bad: bool,
        stats: &RunStats,
        progress: &Progress,
    ) -> SequenceSummary {
        let frame_inputs = |frame: i64| -> Vec<PathBuf> {
            inputs
                .iter()
                .map(|(path, pattern)| match pattern {
                    Some(p) => p.path(frame),
                    None => path.clone(),
                })
                .collect()
        };
        // Which part is merged, said once, from the first frame's files (a frame that cannot
        // be planned reports its own error when it runs).
        if let (true, Some(&first)) = (self.part_notes, frames.first()) {
            if let Ok(PartPlan::One { notes, .. }) = plan_parts(&frame_inputs(first), &self.parts) {
                notes.iter().for_each(|n| progress.note(n));
            }
        }
        let written = AtomicUsize::new(0);
        let failed = AtomicUsize::new(0);
        let report = |frame: i64, result: Result<()>| {
            match result {
                Ok(()) => written.fetch_add(1, Ordering::Relaxed),
                Err(e) => {
                    let level = if skip_bad { "warning" } else { "error" };
                    progress.note(&format!(
                        "deepmerge: {level}: frame {frame}: {e}{}",
                        if skip_bad { " (skipped)" } else { "" }
                    ));
                    failed.fetch_add(1, Ordering::Relaxed)
                }
            };
            progress.step();
        };
        if engine.is_gl() {
            for &frame in frames {
                let result = self.run_on(
                    engine.merging(self.gl.unwrap_or_default()),
                    &frame_inputs(frame),
                    &output.path(frame),
                    stats,
                    None,
                );
                report(frame, result);
            }
        } else {
            // A shared queue of frames, `jobs` workers taking the next one: frames finish
            // roughly in order, so a farm's log reads naturally.
            let next = Mutex::new(frames.iter());
            let workers = jobs.clamp(1, frames.len().max(1));
            // Frames at the same time share the budget, and the threads their bands are
            // sized for.
            let per_frame = MergeJob {
                budget: self.budget / workers as u64,
                band_threads: Some((rayon::current_num_threads() / workers).max(1)),
                ..self.clone()
            };
            let per_frame = &per_frame;
            std::thread::scope(|scope| {
                for _ in 0..workers {
                    scope.spawn(|| loop {
                        let Some(&frame) = next.lock().expect("frame queue").next() else {
                            break;
                        };
                        let result = per_frame.run_on(
                            MergeEngine::Cpu,
                            &frame_inputs(frame),
                            &output.path(frame),
                            stats,
                            None,
                        );
                        report(frame, result);
                    });
                }
            });
        }
        progress.finish();
        SequenceSummary {
            written: written.into_inner(),
            failed: failed.into_inner(),
        }
    }
}

/// Read and check every input.
pub fn read_inputs(paths: &[PathBuf], options: &ReadOptions) -> Result<Vec<DeepImage>> {
    paths
        .iter()
        .map(|path| {
            let image = exr::read_deep(path, options)?;
            image.check_depths().map_err(|e| e.in_file(path))?;
            Ok(image)
        })
        .collect()
}

/// The GL copy kernel's bandwidth on `ctx` (64 MiB, 5 copies), the floor `--stats` compares
/// every stage with; `None` (and the profile prints no ratio) when it cannot be measured.
fn copy_floor(ctx: &GlContext) -> Option<f64> {
    crate::gpu::copy_bandwidth(ctx, 64 << 20, 5).ok()
}
