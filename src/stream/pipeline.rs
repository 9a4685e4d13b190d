//! The streamed merge as three overlapping stages: a reader thread decodes band k+1 while the
//! calling thread merges band k and a writer thread encodes and writes band k-1.
//!
//! The stages are joined by rendezvous channels (`sync_channel(0)`): a stage hands a band over
//! only when the next one takes it, so at most three bands are alive, which is what the band
//! planner budgets for. The merge runs on the calling thread because a GL context is current on
//! one thread only; the reader and writer use rayon inside (chunks unpack and pack in
//! parallel), and so does the CPU merge (rows in parallel).
//!
//! A failure in any stage ends the others: a reader error is sent down the channel, a merge
//! error drops the channels (the reader's next send fails, the writer sees the end before the
//! last band and drops its temporary file), a writer error shows as a failed send. The first
//! error is the run's one line.

use std::path::{Path, PathBuf};
use std::sync::mpsc::sync_channel;

use rayon::prelude::*;

use super::plan::{plan_bands, Band, OutputShape};
use super::source::ChunkSource;
use super::StreamOptions;
use crate::composite::{check_compatible, merge_images_over, MergeOutput, OutputKind};
use crate::deep::{Bounds, ChannelRole, DeepImage};
use crate::error::{Error, Result};
use crate::exr::{carried_attributes, DeepChunkWriter, FlatChunkWriter, MetadataMode};
use crate::gpu::{merge_images_gl_over, GlContext, GlOptions, GpuStats};
use crate::progress::{RunStats, Stage};

/// Which engine merges the bands.
#[derive(Clone, Copy)]
pub enum MergeEngine<'a> {
    /// The CPU engine.
    Cpu,
    /// The GL engine on this context (current on the calling thread).
    Gl(&'a GlContext, GlOptions),
}

/// What a streamed merge did.
#[derive(Clone, Debug, Default)]
pub struct StreamReport {
    /// Bands merged.
    pub bands: usize,
    /// Rows in the tallest band.
    pub max_band_rows: usize,
    /// The GL engine's statistics, summed over the bands.
    pub gpu_stats: Option<GpuStats>,
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
        let mut sources: Vec<ChunkSource> = Vec::new();
        timed(stats, Stage::Read, &mut || {
            sources = inputs
                .par_iter()
                .map(|p| ChunkSource::open(p, &options.part, options.budget))
                .collect::<Result<_>>()?;
            if let Some(selection) = &options.channels {
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
        timed(stats, Stage::Read, &mut || {
            sources.par_iter_mut().try_for_each(ChunkSource::count_rows)
        })?;
        let window = sources
            .iter()
            .map(|s| s.window)
            .reduce(|a, b| a.union(&b))
            .ok_or_else(|| Error::Usage("nothing to merge".into()))?;
        let bands = plan_bands(&sources, window, &shape, options)?;
        Ok(StreamMerge {
            options,
            paths: inputs.to_vec(),
            sources,
            window,
            bands,
        })
    }

    /// The planned bands, top to bottom.
    pub fn bands(&self) -> &[Band] {
        &self.bands
    }

    /// The output window: the union of the inputs' data windows.
    pub fn window(&self) -> Bounds {
        self.window
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
            mut sources,
            window,
            bands,
        } = self;
        let paths: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
        // The first input's attributes (of the part read), as `--metadata first` asks.
        let carried = match options.metadata {
            MetadataMode::First => carried_attributes(&sources[0].attributes),
            MetadataMode::None => Vec::new(),
        };
        let timed = |stage: Stage, f: &mut dyn FnMut() -> Result<()>| timed(stats, stage, f);
        let band_count = bands.len();
        let mut report = StreamReport {
            bands: band_count,
            max_band_rows: bands
                .iter()
                .map(|b| (b.end() - b.start() + 1) as usize)
                .max()
                .unwrap_or(0),
            gpu_stats: None,
        };
        std::thread::scope(|scope| {
            let (band_tx, band_rx) = sync_channel::<Result<(Band, Vec<DeepImage>)>>(0);
            let (merged_tx, merged_rx) = sync_channel::<MergeOutput>(0);
            let reader = scope.spawn(move || {
                for band in bands {
                    let mut images = Vec::new();
                    let read = timed(Stage::Read, &mut || {
                        images = sources
                            .par_iter_mut()
                            .map(|s| s.take_rows(band.clone()))
                            .collect::<Result<_>>()?;
                        Ok(())
                    });
                    let failed = read.is_err();
                    if band_tx.send(read.map(|()| (band, images))).is_err() || failed {
                        break;
                    }
                }
            });
            let writer = scope.spawn(move || -> Result<()> {
                let mut sink = match options.merge.output {
                    OutputKind::Deep => {
                        let mut deep_write = options.deep_write.clone();
                        deep_write.attributes.extend(carried);
                        Sink::Deep(DeepChunkWriter::create(output, window, &deep_write)?)
                    }
                    OutputKind::Flat { .. } => {
                        let mut flat_write = options.flat_write.clone();
                        flat_write.attributes.extend(carried);
                        Sink::Flat(FlatChunkWriter::create(output, window, &flat_write)?)
                    }
                };
                let mut written = 0;
                for merged in merged_rx {
                    timed(Stage::Write, &mut || match (&mut sink, &merged) {
                        (Sink::Deep(w), MergeOutput::Deep(image)) => w.write_band(image),
                        (Sink::Flat(w), MergeOutput::Flat(image)) => w.write_band(image),
                        _ => unreachable!("the merge makes the output kind asked for"),
                    })?;
                    drop(merged);
                    written += 1;
                }
                // Fewer bands than planned: another stage failed; the temporary file goes away.
                if written < band_count {
                    return Ok(());
                }
                timed(
                    Stage::Write,
                    &mut || match std::mem::replace(&mut sink, Sink::Done) {
                        Sink::Deep(w) => w.finish(),
                        Sink::Flat(w) => w.finish(),
                        Sink::Done => Ok(()),
                    },
                )
            });

            let mut result = Ok(());
            for message in band_rx.iter() {
                let (band, images) = match message {
                    Ok(band) => band,
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                };
                let band_window = Bounds {
                    y0: *band.start(),
                    y1: *band.end(),
                    ..window
                };
                let refs: Vec<&DeepImage> = images.iter().collect();
                let mut merged = None;
                let merge = timed(Stage::Merge, &mut || {
                    merged = Some(match engine {
                        MergeEngine::Cpu => {
                            merge_images_over(&refs, &options.merge, Some(band_window))?
                        }
                        MergeEngine::Gl(ctx, gl) => {
                            let (out, band_stats) = merge_images_gl_over(
                                ctx,
                                &refs,
                                &options.merge,
                                &gl,
                                Some(band_window),
                            )?;
                            match &mut report.gpu_stats {
                                Some(total) => *total += band_stats,
                                None => report.gpu_stats = Some(band_stats),
                            }
                            out
                        }
                    });
                    Ok(())
                })
                .map_err(|e| e.in_merge(&paths));
                drop(refs);
                drop(images);
                if let Err(e) = merge {
                    result = Err(e);
                    break;
                }
                if merged_tx.send(merged.expect("merged")).is_err() {
                    // The writer stopped: its error is the one to report.
                    break;
                }
            }
            drop(merged_tx);
            drop(band_rx);
            let written = writer.join().expect("writer thread");
            reader.join().expect("reader thread");
            result.and(written)
        })?;
        Ok(report)
    }
}

/// The writer of the output kind asked for.
enum Sink {
    Deep(DeepChunkWriter),
    Flat(FlatChunkWriter),
    Done,
}
