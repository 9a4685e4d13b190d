//! The streamed merge as three overlapping stages: a reader thread decodes band k+1 while the
//! calling thread merges band k and a writer thread encodes and writes band k-1.
//!
//! The band planner budgets for three bands alive at once (one read, one merged, one written).
//! The stages keep to that with tokens, one per band alive: the reader takes a token before it
//! decodes a band and the writer gives it back once the band is written; the merge hands each
//! band to the writer when the writer takes it (`sync_channel(0)`). So the reader decodes ahead
//! wherever fewer bands are alive: above all while the merge is still getting ready (a GL
//! context being made, 75-100 ms on an NVIDIA H100 host, in which the reader decoded one band
//! and then waited), and where the writer keeps up. The merge runs on the calling thread
//! because a GL context is current on one thread only; the reader and writer use rayon inside
//! (chunks unpack and pack in parallel), and so does the CPU merge (rows in parallel).
//!
//! A band in which no input holds a sample (rows between inputs far apart, empty rows of an
//! input) is neither decoded nor merged: the reader passes over its rows
//! ([`ChunkSource::skip_rows`]) and the writer writes empty rows, packing an empty chunk once
//! and repeating its bytes ([`BandOutput::empty_rows`]). Such rows cost next to nothing, however
//! wide the window.
//!
//! With the GL engine on a GPU that overlaps bands (`GlOptions::overlaps_bands`), the merge
//! stage issues band k+1's GPU work before it waits for band k's readback and assembles it
//! ([`DeferredWork`]): the GPU merges one band while the host waits for and assembles the other,
//! and the writer gets each band one band later. One more band is then alive, which the band
//! planner counts, and so do the tokens ([`DeferredWork::bands_held`]).
//!
//! A failure in any stage ends the others: a reader error is sent down the channel, a merge
//! error drops the channels (the reader's next send fails, the writer sees the end before the
//! last band and drops its temporary file, and the reader's wait for a token ends with it), a
//! writer error shows as a failed send. The first error is the run's one line.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;

#[cfg(feature = "gl")]
use super::plan::plan_bands_capped;
use super::plan::{plan_bands, Band, OutputShape};
use super::StreamOptions;
use crate::composite::{
    check_compatible, merge_checked_images_over, merge_images_over, MergeOptions, MergeOutput,
    OutputKind, Pruning,
};
use crate::deep::{Bounds, Channel, ChannelRole, DeepImage};
use crate::error::{Error, Result};
use crate::exr::ChunkSource;
use crate::exr::{DeepChunkWriter, DeepWriteOptions, FlatChunkWriter, FlatWriteOptions};
#[cfg(feature = "gl")]
use crate::gpu::loop_cap::{host_band_stats, merges_short};
#[cfg(feature = "gl")]
use crate::gpu::reader_staging::{ReaderStaging, ReaderStagingOnGl};
#[cfg(feature = "gl")]
use crate::gpu::{
    issue_gl_over, merge_checked_images_gl_over, GlContext, GlOptions, GpuStats, IssuedMerge,
    StartingGl,
};
use crate::preview::PngBandWriter;
use crate::run_stats::{RunStats, Stage, Wait};

/// Which engine merges the bands: the library's one engine enum. A run's choice of engine
/// (`backend::EngineChoice`, which owns the GL context) lends one to each merge.
#[derive(Clone, Copy)]
pub enum MergeEngine<'a> {
    /// The CPU engine.
    Cpu,
    /// The GL engine on this context (current on the calling thread).
    #[cfg(feature = "gl")]
    Gl(&'a GlContext, GlOptions),
    /// The GL engine on a context still in the making on another thread, made current on the
    /// calling thread where a streamed merge first needs it (after its reader has started).
    #[cfg(feature = "gl")]
    GlStarting(&'a StartingGl, GlOptions),
    /// A build without the `gl` feature has no GL engine: this variant cannot be made.
    #[cfg(not(feature = "gl"))]
    Gl(std::convert::Infallible, std::marker::PhantomData<&'a ()>),
}

impl MergeEngine<'_> {
    /// `"cpu"` or `"gl"`, as reports name the engine.
    pub fn name(&self) -> &'static str {
        match self {
            MergeEngine::Cpu => "cpu",
            MergeEngine::Gl(..) => "gl",
            #[cfg(feature = "gl")]
            MergeEngine::GlStarting(..) => "gl",
        }
    }

    /// The GL options, for either GL variant.
    #[cfg(feature = "gl")]
    fn gl_options(&self) -> Option<GlOptions> {
        match self {
            MergeEngine::Gl(_, gl) | MergeEngine::GlStarting(_, gl) => Some(*gl),
            MergeEngine::Cpu => None,
        }
    }

    /// This engine with a GL context still starting made current here (waiting for it), or
    /// the CPU engine where `--backend auto`'s context fell back ([`StartingGl::for_merge`]).
    #[cfg(feature = "gl")]
    pub fn started(self) -> Result<Self> {
        Ok(match self {
            MergeEngine::GlStarting(starting, gl) => match starting.for_merge()? {
                Some(ctx) => MergeEngine::Gl(ctx, gl),
                None => MergeEngine::Cpu,
            },
            other => other,
        })
    }
}

/// What one merge on an engine gives: the output, and the GL engine's statistics when it ran.
#[cfg(feature = "gl")]
pub type EngineOutput = (MergeOutput, Option<GpuStats>);
/// What one merge on an engine gives (a build without the GL engine has no statistics).
#[cfg(not(feature = "gl"))]
pub type EngineOutput = (MergeOutput, Option<std::convert::Infallible>);

/// Merge `images`, whose depths are already checked, with `engine` over `window` (`None`: their
/// union), pruning as `pruning` says: the transparent samples of the inputs before the merge,
/// the hidden ones of a deep output after it, on the host around either engine, so both give
/// the same bytes. The one dispatch between the engines: each band of a streamed merge goes
/// through it, and so do in-memory merges (the Python module's). Inputs that are borrowed are
/// copied only when pruning thins them.
pub fn merge_checked(
    engine: MergeEngine<'_>,
    images: Vec<Cow<'_, DeepImage>>,
    merge: &MergeOptions,
    pruning: &Pruning,
    window: Option<Bounds>,
) -> Result<EngineOutput> {
    let images: Vec<Cow<'_, DeepImage>> = if pruning.drop_transparent.is_some() {
        images
            .into_iter()
            .map(|image| Cow::Owned(pruning.inputs(image.into_owned())))
            .collect()
    } else {
        images
    };
    let refs: Vec<&DeepImage> = images.iter().map(|i| i.as_ref()).collect();
    #[cfg(feature = "gl")]
    let engine = engine.started()?;
    let (merged, stats) = match engine {
        MergeEngine::Cpu => (merge_checked_images_over(&refs, merge, window)?, None),
        #[cfg(feature = "gl")]
        MergeEngine::Gl(ctx, gl) => {
            let (out, stats) = merge_checked_images_gl_over(ctx, &refs, merge, &gl, window)?;
            (out, Some(stats))
        }
        #[cfg(feature = "gl")]
        MergeEngine::GlStarting(..) => unreachable!("started above"),
        #[cfg(not(feature = "gl"))]
        MergeEngine::Gl(never, _) => match never {},
    };
    Ok((pruning.output(merged), stats))
}

/// What a streamed merge did.
#[derive(Clone, Debug)]
pub struct StreamReport {
    /// Bands merged.
    pub bands: usize,
    /// Rows in the tallest band.
    pub max_band_rows: usize,
    /// The GL engine's statistics, summed over the bands.
    #[cfg(feature = "gl")]
    pub gpu_stats: Option<GpuStats>,
    /// The output's data window.
    pub window: Bounds,
}

/// Merge the deep files `inputs` (front-most first) into `output` with `engine`, streaming band
/// by band within `options.budget` bytes. Stage times go to `stats` when given. The output is
/// written to a temporary file beside it and renamed on success; on failure nothing is left.
/// This is [`StreamMerge::open`] followed by [`StreamMerge::run`].
pub fn merge_files(
    inputs: &[PathBuf],
    output: &Path,
    options: &StreamOptions,
    engine: MergeEngine,
    stats: Option<&RunStats>,
) -> Result<StreamReport> {
    StreamMerge::open(inputs, options, stats)?.run(output, engine, stats)
}

/// A streamed merge whose inputs are open, checked and counted and whose bands are planned:
/// everything that can refuse the inputs has run, nothing has been decoded or written.
pub struct StreamMerge<'o> {
    options: &'o StreamOptions,
    paths: Vec<PathBuf>,
    sources: Vec<ChunkSource>,
    window: Bounds,
    bands: Vec<Band>,
    #[cfg_attr(not(feature = "gl"), allow(dead_code))]
    shape: OutputShape,
}

fn timed(stats: Option<&RunStats>, stage: Stage, f: &mut dyn FnMut() -> Result<()>) -> Result<()> {
    match stats {
        Some(s) => s.time(stage, f),
        None => f(),
    }
}

impl<'o> StreamMerge<'o> {
    /// Open `inputs`, check that they fit together, read their count tables and plan the bands.
    pub fn open(
        inputs: &[PathBuf],
        options: &'o StreamOptions,
        stats: Option<&RunStats>,
    ) -> Result<Self> {
        let paths: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
        options.pruning.check()?;
        // Refused before any input is opened (the stream reads it again when it starts).
        read_ahead_from_env()?;
        if options.pruning.drop_hidden.is_some() && options.merge.output != OutputKind::Deep {
            return Err(Error::Usage(
                "dropping hidden samples applies to deep output (a flat composite hides them \
                 anyway)"
                    .into(),
            ));
        }
        let mut sources: Vec<ChunkSource> = Vec::new();
        let span = crate::timeline::span(|| "open the inputs".into());
        timed(stats, Stage::Read, &mut || {
            if !options.input_parts.is_empty() && options.input_parts.len() != inputs.len() {
                return Err(Error::internal(format!(
                    "{} input parts for {} inputs",
                    options.input_parts.len(),
                    inputs.len()
                )));
            }
            sources = inputs
                .par_iter()
                .enumerate()
                .map(|(i, p)| {
                    let part = options.input_parts.get(i).unwrap_or(&options.part);
                    ChunkSource::open(p, part, options.budget)
                })
                .collect::<Result<_>>()?;
            if let Some(selection) = &options.channels {
                let all: Vec<(&Path, &[Channel])> = sources
                    .iter()
                    .zip(inputs)
                    .map(|(s, p)| (p.as_path(), s.all_channels.as_slice()))
                    .collect();
                selection.check_names(&all)?;
                for s in &mut sources {
                    let all = s.all_channels.clone();
                    s.keep_channels(|c| selection.keeps(c, &all));
                }
            }
            Ok(())
        })?;
        // Whether the inputs fit together at all, from their channel lists alone.
        let heads: Vec<DeepImage> = sources.iter().map(|s| s.no_rows(s.window.y0)).collect();
        let head_refs: Vec<&DeepImage> = heads.iter().collect();
        let shape = {
            let plan = check_compatible(&head_refs, &paths, &options.merge)?;
            OutputShape {
                deep_value_bytes: plan
                    .deep_channels
                    .iter()
                    .map(|c| c.sample_type.size() as u64)
                    .sum(),
                columns: plan.composite.len() as u64,
                ids: plan
                    .deep_channels
                    .iter()
                    .filter(|c| c.role == ChannelRole::Id)
                    .count() as u64,
            }
        };
        drop(heads);
        drop(span);
        let span = crate::timeline::span(|| "read the inputs' sample counts".into());
        timed(stats, Stage::Read, &mut || {
            sources
                .par_iter_mut()
                .try_for_each(|s| s.count_rows(options.budget))
        })?;
        drop(span);
        let windows: Vec<Bounds> = sources.iter().map(|s| s.window).collect();
        let window = options.bbox.resolve(&windows)?;
        let _span = crate::timeline::span(|| "plan the bands".into());
        let bands = plan_bands(&sources, window, &shape, options)?;
        Ok(StreamMerge {
            options,
            paths: inputs.to_vec(),
            sources,
            window,
            bands,
            shape,
        })
    }

    /// The planned bands, top to bottom.
    pub fn bands(&self) -> &[Band] {
        &self.bands
    }

    /// The output window: the union of the inputs' data windows, or what `--bbox` chose.
    pub fn window(&self) -> Bounds {
        self.window
    }

    /// Read and inflate every chunk the merge would, band by band on the same threads, and
    /// nothing else (no merge, no output): the floor under [`Self::run`]'s CPU time, which
    /// `deepmerge --decode-only` measures for `benches/stream_vs_oiiotool.py`.
    pub fn decode_only(self, stats: Option<&RunStats>) -> Result<()> {
        let StreamMerge {
            mut sources, bands, ..
        } = self;
        for band in bands {
            timed(stats, Stage::Read, &mut || {
                sources
                    .par_iter_mut()
                    .try_for_each(|s| s.decode_rows(band.clone()))
            })?;
        }
        Ok(())
    }

    /// Read, merge and write every band (see the module docs for the threads).
    pub fn run(
        self,
        output: &Path,
        engine: MergeEngine,
        stats: Option<&RunStats>,
    ) -> Result<StreamReport> {
        let StreamMerge {
            options,
            paths,
            sources,
            window,
            bands,
            shape,
        } = self;
        // The GL device's kind and whether bands overlap on it, for the plan: known before a
        // starting context is made.
        #[cfg(feature = "gl")]
        let gl_device = match engine {
            MergeEngine::Gl(ctx, gl) => Some((ctx.info().software, gl.overlaps_bands(ctx))),
            // `auto`'s context already fell back (an earlier part of this run): the CPU's bands.
            MergeEngine::GlStarting(starting, _) if starting.fell_back().is_some() => None,
            MergeEngine::GlStarting(starting, gl) => {
                Some((starting.software(), starting.overlaps_bands(&gl)))
            }
            MergeEngine::Cpu => None,
        };
        // On a GPU of its own, the GL engine's bands are as large as the host budget allows (or
        // `DEEPMERGE_GL_BAND_CAP` a thread): the CPU's cache-sized bands would cost a round of
        // dispatches and a readback each. With overlapped bands the merge stage holds one band
        // more, which the plan counts.
        #[cfg(feature = "gl")]
        let bands = match gl_device {
            Some((software, overlap)) if options.band_rows.is_none() => {
                let in_flight = crate::exr::BANDS_IN_FLIGHT + u64::from(overlap);
                if !software {
                    let cap = super::plan::gl_band_cap_from_env()?.map_or(u64::MAX, |cap| {
                        cap.saturating_mul(options.threads_per_band() as u64)
                    });
                    plan_bands_capped(&sources, window, &shape, options, cap, in_flight)?
                } else if overlap {
                    let cap = super::plan::MAX_BAND_BYTES;
                    plan_bands_capped(&sources, window, &shape, options, cap, in_flight)?
                } else {
                    bands
                }
            }
            _ => bands,
        };
        #[cfg(not(feature = "gl"))]
        let _ = shape;
        let paths: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
        // The first input's attributes (of the part read), as `--metadata first` asks.
        let (deep_write, flat_write) = options.write_options_from(
            &sources[0].attributes,
            &sources
                .iter()
                .map(|s| s.all_channels.as_slice())
                .collect::<Vec<_>>(),
        );
        #[cfg_attr(not(feature = "gl"), allow(unused_mut))]
        let mut report = StreamReport {
            bands: bands.len(),
            max_band_rows: bands
                .iter()
                .map(|b| (b.end() - b.start() + 1) as usize)
                .max()
                .unwrap_or(0),
            #[cfg(feature = "gl")]
            gpu_stats: None,
            window,
        };
        if let Some(stats) = stats {
            stats.note_bands(report.bands, report.max_band_rows);
        }
        let format = match options.merge.output {
            OutputKind::Deep => OutputFormat::Deep(&deep_write),
            OutputKind::Flat { .. } => OutputFormat::flat_for(output, &flat_write),
        };
        // What empty rows are written with: the output's channels, from a merge of no rows.
        // (A PNG preview has no empty-row writer: its bands are merged like any other.)
        let template = match format {
            OutputFormat::Png => None,
            _ => {
                let heads: Vec<DeepImage> = sources.iter().map(|s| s.no_rows(window.y0)).collect();
                let refs: Vec<&DeepImage> = heads.iter().collect();
                let none = Bounds {
                    y1: window.y0 - 1,
                    ..window
                };
                Some(
                    merge_images_over(&refs, &options.merge, Some(none))
                        .map_err(|e| e.in_merge(&paths))?,
                )
            }
        };
        let target = BandOutput {
            path: output,
            window,
            format,
            empty_rows: template.as_ref(),
        };
        #[cfg(feature = "gl")]
        if let (Some((_, true)), Some(gl)) = (gl_device, engine.gl_options()) {
            // Staging by the reader, where asked for (`gpu::reader_staging`), for inputs as the
            // reader decodes them (pruned inputs are new planes: those are staged as before).
            let reader_staging = match crate::gpu::reader_staging::reader_staging_from_env()? {
                Some(size) if options.pruning.drop_transparent.is_none() => {
                    let planes = |band: &Band| -> Vec<(ChannelRole, usize)> {
                        sources
                            .iter()
                            .flat_map(|s| {
                                let samples = s.samples_in(band) as usize;
                                s.channels()
                                    .into_iter()
                                    .map(move |c| (c.role, samples * c.sample_type.size()))
                            })
                            .collect()
                    };
                    Some(ReaderStaging::new(
                        matches!(options.merge.output, OutputKind::Deep),
                        size,
                        bands.iter().map(|band| (*band.start(), planes(band))),
                    ))
                }
                _ => None,
            };
            let mut work = GlBands {
                engine,
                gl,
                options,
                window,
                paths: &paths,
                pending: None,
                gpu_stats: &mut report.gpu_stats,
                reader_staging,
                reader_staging_on_gl: None,
            };
            stream_bands_deferred(sources, bands, &target, stats, &mut work)?;
            let missed = work.reader_staging.as_ref().map(|shared| shared.missed());
            drop(work);
            if let (Some(stats), Some(missed)) = (&mut report.gpu_stats, missed) {
                stats.reader_missed_bands = Some(missed);
            }
            return Ok(report);
        }
        stream_bands(sources, bands, &target, stats, &mut |band, images| {
            let band_window = Bounds {
                y0: *band.start(),
                y1: *band.end(),
                ..window
            };
            // The reader checked every band's depths as it assembled it.
            let images = images.into_iter().map(Cow::Owned).collect();
            let merged = merge_checked(
                engine,
                images,
                &options.merge,
                &options.pruning,
                Some(band_window),
            )
            .map_err(|e| e.in_merge(&paths))?;
            #[cfg(feature = "gl")]
            if let Some(band_stats) = merged.1 {
                add_stats(&mut report.gpu_stats, band_stats);
            }
            Ok(merged.0)
        })?;
        Ok(report)
    }
}

/// Add one band's GL statistics to a run's.
#[cfg(feature = "gl")]
fn add_stats(total: &mut Option<GpuStats>, band: GpuStats) {
    match total {
        Some(total) => *total += band,
        None => *total = Some(band),
    }
}

/// The GL merge of a streamed run's bands, each band's readback overlapped with the next band's
/// GPU work: a band is issued ([`issue_gl_over`]), then the band before it is waited for and
/// assembled ([`IssuedMerge::finish`]) with the inputs kept for it. The same bytes as one merge
/// per band ([`merge_checked`]), pruned the same way.
#[cfg(feature = "gl")]
struct GlBands<'r, 'c> {
    /// The GL engine, its context perhaps still starting (made current at the first band).
    engine: MergeEngine<'c>,
    gl: GlOptions,
    options: &'r StreamOptions,
    window: Bounds,
    paths: &'r [&'r Path],
    /// The band issued last: its rows, its (pruned) inputs, and its merge on the way back.
    pending: Option<(Band, Vec<DeepImage>, IssuedMerge<'c>)>,
    gpu_stats: &'r mut Option<GpuStats>,
    /// Staging by the reader, when asked for: the part the reader shares.
    reader_staging: Option<Arc<ReaderStaging>>,
    /// The merging thread's part of it, once the context is current (`None` where it stages
    /// without mapped memory).
    reader_staging_on_gl: Option<ReaderStagingOnGl<'c>>,
}

#[cfg(feature = "gl")]
impl<'c> GlBands<'_, 'c> {
    /// The context, made current here at the first call when it was still starting; `None`
    /// where `--backend auto`'s context fell back to the CPU engine.
    fn ctx(&mut self) -> Result<Option<&'c GlContext>> {
        self.engine = self.engine.started()?;
        let ctx = match self.engine {
            MergeEngine::Gl(ctx, _) => Some(ctx),
            _ => None,
        };
        if let (Some(ctx), None, Some(shared)) =
            (ctx, &self.reader_staging_on_gl, &self.reader_staging)
        {
            self.reader_staging_on_gl = ReaderStagingOnGl::new(ctx, shared.clone());
            if self.reader_staging_on_gl.is_none() {
                // Not on this context's transfers: the reader stages nothing.
                self.reader_staging = None;
            }
        }
        Ok(ctx)
    }
    /// Wait for the pending band, if any, and assemble it.
    fn finish_pending(&mut self) -> Result<Vec<(Band, MergeOutput)>> {
        let Some((band, images, issued)) = self.pending.take() else {
            return Ok(Vec::new());
        };
        let refs: Vec<&DeepImage> = images.iter().collect();
        let (merged, stats) = issued
            .finish(&refs, &self.options.merge)
            .map_err(|e| e.in_merge(self.paths))?;
        add_stats(self.gpu_stats, stats);
        let _span = crate::timeline::span(|| "prune the output, free the inputs".into());
        let output = self.options.pruning.output(merged);
        drop(refs);
        drop(images);
        Ok(vec![(band, output)])
    }
}

#[cfg(feature = "gl")]
impl DeferredWork for GlBands<'_, '_> {
    /// A context still starting is made current while the reader decodes the first bands (39
    /// ms on an NVIDIA H100 host, on top of the helper's making of it).
    fn prepare(&mut self) -> Result<()> {
        self.ctx()?;
        // Blocks for the bands the reader has yet to decode, if any.
        match &mut self.reader_staging_on_gl {
            Some(on_gl) => on_gl.top_up(),
            None => Ok(()),
        }
    }

    /// The band being issued and the one whose readback it waits for.
    fn bands_held(&self) -> usize {
        2
    }

    fn after_decode(&self) -> Option<AfterDecode> {
        let shared = self.reader_staging.clone()?;
        Some(Arc::new(move |start: i32, images: &[DeepImage]| {
            shared.stage(start, images)
        }))
    }

    fn band(&mut self, band: Band, images: Vec<DeepImage>) -> Result<Vec<(Band, MergeOutput)>> {
        let band_window = Bounds {
            y0: *band.start(),
            y1: *band.end(),
            ..self.window
        };
        let Some(ctx) = self.ctx()? else {
            // `--backend auto`'s GPU gave no usable context: every band on the CPU engine, in
            // the bands planned for the GPU (larger, within the same host budget).
            let images = images.into_iter().map(Cow::Owned).collect();
            let (merged, _) = merge_checked(
                MergeEngine::Cpu,
                images,
                &self.options.merge,
                &self.options.pruning,
                Some(band_window),
            )
            .map_err(|e| e.in_merge(self.paths))?;
            let mut ready = self.finish_pending()?;
            ready.push((band, merged));
            return Ok(ready);
        };
        // As `merge_checked` prunes: the transparent samples of the inputs before the merge
        // (`Pruning::inputs` gives an image back as it is when nothing is dropped).
        let pruning = &self.options.pruning;
        let images: Vec<DeepImage> = images.into_iter().map(|i| pruning.inputs(i)).collect();
        let refs: Vec<&DeepImage> = images.iter().collect();
        if merges_short(ctx, &refs, &self.options.merge, &self.gl) {
            // llvmpipe would merge a pixel this long short: the band on the CPU engine, after
            // the band before it.
            let merged = merge_checked_images_over(&refs, &self.options.merge, Some(band_window))
                .map_err(|e| e.in_merge(self.paths))?;
            add_stats(
                self.gpu_stats,
                host_band_stats(ctx, &self.gl, &refs, &merged),
            );
            let merged = pruning.output(merged);
            drop(refs);
            let mut ready = self.finish_pending()?;
            ready.push((band, merged));
            return Ok(ready);
        }
        // Blocks for the bands the reader has yet to decode; this band's staged planes lent for its
        // staging, and fenced once it is issued.
        if let Some(on_gl) = &mut self.reader_staging_on_gl {
            on_gl.top_up()?;
            on_gl.lend(*band.start());
        }
        // The reader checked every band's depths as it assembled it.
        let issued = issue_gl_over(ctx, &refs, &self.options.merge, &self.gl, Some(band_window));
        if let Some(on_gl) = &mut self.reader_staging_on_gl {
            on_gl.settle();
        }
        let mut issued = issued.map_err(|e| e.in_merge(self.paths))?;
        drop(refs);
        if self.pending.is_some() {
            issued.issued_ahead();
        }
        // This band's GPU work is issued: now wait for the band before it.
        let ready = self.finish_pending()?;
        // This band's copies out of the reader's blocks were issued right behind that band's
        // readback: where the GPU is through them, the reader may fill the blocks again now,
        // for the band it is decoding.
        if let Some(on_gl) = &mut self.reader_staging_on_gl {
            on_gl.reclaim_finished()?;
        }
        self.pending = Some((band, images, issued));
        Ok(ready)
    }

    fn flush(&mut self) -> Result<Vec<(Band, MergeOutput)>> {
        self.finish_pending()
    }
}

/// A streamed band's work that may hand a band's output back later than the band is handed to
/// it ([`stream_bands_deferred`]): the GL merge that overlaps one band's readback with the next
/// band's GPU work.
pub trait DeferredWork {
    /// Get ready for the first band, while the reader decodes it and the ones after it (a GL
    /// context still starting is made current here). Called once, before any band.
    fn prepare(&mut self) -> Result<()> {
        Ok(())
    }
    /// The most bands the work holds at once: 1 where it hands each band back before it takes
    /// the next, 2 where it issues a band before it hands back the one before. The band plan
    /// budgets for this many in the merge stage, one being decoded and one being written; the
    /// reader decodes ahead while fewer are alive ([`stream_bands_deferred`]).
    fn bands_held(&self) -> usize {
        1
    }
    /// Work for the reader's threads on each band it decoded, before it hands the band over
    /// (`None`: none). Called once, before the reader starts.
    fn after_decode(&self) -> Option<AfterDecode> {
        None
    }
    /// Take a band's rows (absolute, as planned) and one image per source; give back the bands
    /// whose output is now ready, in order.
    fn band(&mut self, band: Band, images: Vec<DeepImage>) -> Result<Vec<(Band, MergeOutput)>>;
    /// Give back every band still held, in order.
    fn flush(&mut self) -> Result<Vec<(Band, MergeOutput)>>;
}

/// Work the reader's threads do on a band they decoded (its first row, one image per source),
/// before handing it over ([`DeferredWork::after_decode`]).
pub type AfterDecode = Arc<dyn Fn(i32, &[DeepImage]) + Send + Sync>;

/// A band's work that hands every band back at once ([`stream_bands`]'s closure).
struct Immediate<'w>(&'w mut dyn FnMut(Band, Vec<DeepImage>) -> Result<MergeOutput>);

impl DeferredWork for Immediate<'_> {
    fn band(&mut self, band: Band, images: Vec<DeepImage>) -> Result<Vec<(Band, MergeOutput)>> {
        let out = (self.0)(band.clone(), images)?;
        Ok(vec![(band, out)])
    }

    fn flush(&mut self) -> Result<Vec<(Band, MergeOutput)>> {
        Ok(Vec::new())
    }
}

/// The file a streamed run writes: where, over which window, in which format.
pub struct BandOutput<'p> {
    /// The output path (written through a temporary file, renamed at the end).
    pub path: &'p Path,
    /// The output's data window; the bands cover its rows top to bottom.
    pub window: Bounds,
    /// What is written.
    pub format: OutputFormat<'p>,
    /// When given, a band in which no source holds a sample is neither decoded nor handed to
    /// the work: the reader passes over its rows and the writer writes empty rows with this
    /// output's channels (an empty chunk packed once, its bytes repeated). Only for work whose
    /// output rows are the band's rows and empty where the inputs are (the merge).
    pub empty_rows: Option<&'p MergeOutput>,
}

/// The format of a streamed output.
#[derive(Clone, Copy, Debug)]
pub enum OutputFormat<'o> {
    /// A deep scanline EXR.
    Deep(&'o DeepWriteOptions),
    /// A flat scanline EXR written with these options (storage type, compression, attributes).
    Flat(&'o FlatWriteOptions),
    /// An 8-bit sRGB PNG preview of the flat composite ([`crate::preview`]).
    Png,
}

impl OutputFormat<'_> {
    /// Flat output to `path`: a PNG preview when it is named `*.png` (any case), else an EXR.
    pub fn flat_for<'a>(path: &Path, flat_write: &'a FlatWriteOptions) -> OutputFormat<'a> {
        if crate::preview::is_png_path(path) {
            OutputFormat::Png
        } else {
            OutputFormat::Flat(flat_write)
        }
    }
}

/// The three-stage pipeline every streamed command runs: the reader thread takes each band's
/// rows from `sources` (in their order), `work` turns them into the output band on the calling
/// thread (a merge, an operation of `crate::ops`), the writer thread writes it to `output`.
/// `work` gets the band's rows (absolute, as planned) and one image per source; what it returns
/// must span the output window's columns and follow the previous band's rows. Stage times go to
/// `stats`; the first error ends the run and leaves no output.
pub fn stream_bands(
    sources: Vec<ChunkSource>,
    bands: Vec<Band>,
    output: &BandOutput,
    stats: Option<&RunStats>,
    work: &mut dyn FnMut(Band, Vec<DeepImage>) -> Result<MergeOutput>,
) -> Result<()> {
    stream_bands_deferred(sources, bands, output, stats, &mut Immediate(work))
}

/// [`stream_bands`] with work that may hand a band back later ([`DeferredWork`]): what it gives
/// back goes to the writer in band order; before a band with no samples (which goes straight to
/// the writer) and at the end, the work is flushed.
pub fn stream_bands_deferred(
    mut sources: Vec<ChunkSource>,
    bands: Vec<Band>,
    output: &BandOutput,
    stats: Option<&RunStats>,
    work: &mut dyn DeferredWork,
) -> Result<()> {
    let timed = |stage: Stage, f: &mut dyn FnMut() -> Result<()>| timed(stats, stage, f);
    let band_count = bands.len();
    let skip_empty = output.empty_rows.is_some();
    let after_decode = work.after_decode();
    // One token per band the plan lets be alive (`BANDS_IN_FLIGHT`, whose one merged band is
    // `bands_held` here): the reader takes one before it decodes a band, the writer gives it
    // back once the band is written.
    let alive = crate::exr::BANDS_IN_FLIGHT as usize - 1 + work.bands_held();
    // Decoded bands waiting for the merge: as many as the tokens allow, or none (the reader
    // hands each band over when the merge takes it, as before reading ahead).
    let queued = if read_ahead_from_env()? { alive } else { 0 };
    std::thread::scope(|scope| {
        let (band_tx, band_rx) = sync_channel::<Result<(Band, Option<Vec<DeepImage>>)>>(queued);
        let (merged_tx, merged_rx) = sync_channel::<(Band, Option<MergeOutput>)>(0);
        let (token_tx, token_rx) = sync_channel::<()>(alive);
        for _ in 0..alive {
            token_tx.send(()).expect("room for every token");
        }
        let reader = scope.spawn(move || {
            crate::timeline::name_thread("reader");
            for band in bands {
                // No token: the writer stopped (the run failed).
                if token_rx.recv().is_err() {
                    break;
                }
                let mut images = None;
                let span = crate::timeline::span(|| format!("decode rows {band:?}"));
                let read = timed(Stage::Read, &mut || {
                    if skip_empty && sources.iter().all(|s| s.samples_in(&band) == 0) {
                        for s in &mut sources {
                            s.skip_rows(band.clone());
                        }
                        return Ok(());
                    }
                    let decoded: Vec<DeepImage> = sources
                        .par_iter_mut()
                        .map(|s| s.take_rows(band.clone()))
                        .collect::<Result<_>>()?;
                    if let Some(after) = &after_decode {
                        after(*band.start(), &decoded);
                    }
                    images = Some(decoded);
                    Ok(())
                });
                drop(span);
                let failed = read.is_err();
                if band_tx.send(read.map(|()| (band, images))).is_err() || failed {
                    break;
                }
            }
        });
        let writer = scope.spawn(move || -> Result<()> {
            crate::timeline::name_thread("writer");
            let mut sink = match output.format {
                OutputFormat::Deep(deep_write) => Sink::Deep(DeepChunkWriter::create(
                    output.path,
                    output.window,
                    deep_write,
                )?),
                OutputFormat::Flat(flat_write) => Sink::Flat(FlatChunkWriter::create(
                    output.path,
                    output.window,
                    flat_write,
                )?),
                OutputFormat::Png => Sink::Png(PngBandWriter::create(output.path, output.window)?),
            };
            let mut written = 0;
            for (band, merged) in merged_rx {
                let _span = crate::timeline::span(|| format!("encode rows {band:?}"));
                let (y0, y1) = (*band.start(), *band.end());
                timed(
                    Stage::Write,
                    &mut || match (&mut sink, &merged, output.empty_rows) {
                        (Sink::Deep(w), Some(MergeOutput::Deep(image)), _) => w.write_band(image),
                        (Sink::Flat(w), Some(MergeOutput::Flat(image)), _) => w.write_band(image),
                        (Sink::Png(w), Some(MergeOutput::Flat(image)), _) => w.write_band(image),
                        (Sink::Deep(w), None, Some(MergeOutput::Deep(t))) => {
                            w.write_empty_rows(t, y0, y1)
                        }
                        (Sink::Flat(w), None, Some(MergeOutput::Flat(t))) => {
                            w.write_empty_rows(t, y0, y1)
                        }
                        _ => unreachable!("the work makes the output kind asked for"),
                    },
                )?;
                drop(merged);
                written += 1;
                // The reader may decode another band in its place. Never blocks: every token
                // out is a band's; the reader may have stopped.
                let _ = token_tx.try_send(());
            }
            // Fewer bands than planned: another stage failed; the temporary file goes away.
            if written < band_count {
                return Ok(());
            }
            let _span = crate::timeline::span(|| "finish the output file".into());
            timed(
                Stage::Write,
                &mut || match std::mem::replace(&mut sink, Sink::Done) {
                    Sink::Deep(w) => w.finish(),
                    Sink::Flat(w) => w.finish(),
                    Sink::Png(w) => w.finish(),
                    Sink::Done => Ok(()),
                },
            )
        });

        let waited = |what: Wait, since: Instant| {
            if let Some(stats) = stats {
                stats.waited(what, since.elapsed());
            }
        };
        // Hand bands to the writer in order; false when the writer stopped (its error is the one
        // to report).
        let send = |ready: Vec<(Band, Option<MergeOutput>)>| -> bool {
            for item in ready {
                let handed = Instant::now();
                let sent = merged_tx.send(item);
                waited(Wait::Writer, handed);
                if sent.is_err() {
                    return false;
                }
            }
            true
        };
        // The reader decodes the first band meanwhile. Start-up, not merging: untimed, as a
        // context made before the run is.
        let mut result = if band_count > 0 {
            work.prepare()
        } else {
            Ok(())
        };
        // The work's outputs, timed as the merge.
        let mut run_work = |band_images: Option<(Band, Vec<DeepImage>)>| {
            let mut ready = Vec::new();
            let _span = crate::timeline::span(|| match &band_images {
                Some((band, _)) => format!("merge rows {band:?}"),
                None => "merge: flush".into(),
            });
            let mut job = Some(band_images);
            timed(Stage::Merge, &mut || {
                ready = match job.take().expect("one call") {
                    Some((band, images)) => work.band(band, images)?,
                    None => work.flush()?,
                };
                Ok(())
            })
            .map(|()| {
                ready
                    .into_iter()
                    .map(|(band, out)| (band, Some(out)))
                    .collect::<Vec<_>>()
            })
        };
        let mut finished = result.is_ok();
        while finished {
            let asked = Instant::now();
            let Ok(message) = band_rx.recv() else {
                break;
            };
            waited(Wait::Input, asked);
            let (band, images) = match message {
                Ok(band) => band,
                Err(e) => {
                    result = Err(e);
                    finished = false;
                    break;
                }
            };
            let ready = match images {
                // No source holds a sample in these rows: nothing to work on, but the bands the
                // work holds go first.
                None => run_work(None).map(|mut ready| {
                    ready.push((band, None));
                    ready
                }),
                Some(images) => run_work(Some((band, images))),
            };
            match ready {
                Ok(ready) => {
                    if !send(ready) {
                        finished = false;
                        break;
                    }
                }
                Err(e) => {
                    result = Err(e);
                    finished = false;
                    break;
                }
            }
        }
        if finished {
            // Every band was handed to the work: what it still holds goes last.
            match run_work(None) {
                Ok(ready) => {
                    send(ready);
                }
                Err(e) => result = Err(e),
            }
        }
        drop(merged_tx);
        drop(band_rx);
        let written = writer.join().expect("writer thread");
        reader.join().expect("reader thread");
        result.and(written)
    })
}

/// Whether the reader decodes ahead of the merge, as `DEEPMERGE_READ_AHEAD` says (a measurement
/// setting): `1` (or unset) while fewer bands than planned are alive, `0` only the band after
/// the one being merged; anything else is an error that names the variable.
pub fn read_ahead_from(value: Option<&str>) -> Result<bool> {
    let choices = [("1", true), ("0", false)];
    Ok(crate::env_setting::setting("DEEPMERGE_READ_AHEAD", value, &choices)?.unwrap_or(true))
}

/// [`read_ahead_from`] of the environment now (the comp graph's pipeline reads it too; the CLI
/// asks once at its start, so that a bad value is refused before any file is opened).
pub fn read_ahead_from_env() -> Result<bool> {
    read_ahead_from(crate::env_setting::env_setting("DEEPMERGE_READ_AHEAD").as_deref())
}

/// The writer of the output kind asked for.
enum Sink {
    Deep(DeepChunkWriter),
    Flat(FlatChunkWriter),
    Png(PngBandWriter),
    Done,
}
