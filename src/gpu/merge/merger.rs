//! The GL orchestration of one band: gather (from the decoded planes) and build every input on
//! the GPU, merge them all in
//! one pass (`MergeStrategy::KWay`: the inputs stacked into one image, `merge_kway.comp`) or
//! pairwise with the deep intermediate resident (`MergeStrategy::Chain`, and k-way merges of
//! more than `MAX_KWAY_INPUTS` inputs), tidying where volumes overlap on the GPU when the
//! policy says so, and read the result back into the output being assembled.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use rayon::prelude::*;

use super::assemble::{Accumulated, PIECE_PIXELS};
use super::band::Band;
use super::coop::{merge_deep_scheduled, merge_flat_scheduled};
use super::gather::gather_band;
use super::host_gather::host_gather;
use super::prepare;
use crate::composite::source_runs::{push_source_runs, samples_in, SourceRun};
use crate::composite::{MergeOptions, MergeOutput, MergePlan, OutputKind};
use crate::deep::DeepImage;
use crate::error::{Error, Result};
use crate::gpu::mapped::{PendingRead, TransferPath};
use crate::gpu::resident::{
    build_from_stream, build_image, kway_stride, merge_deep_kway, merge_flat_kway, pack_sources,
    relayout, source_runs, upload_stream, ColumnSpec, DeepReadback, GpuFlat, GpuImage, GpuStack,
    MergeSpec, PendingImage,
};
use crate::gpu::stats::{BufferBytes, GpuStats};
use crate::gpu::{tidy, GlContext, GlOptions, GpuBuffer};
use crate::vocab::{check_offsets, Layout, MergeStrategy, SourcePacking, MAX_KWAY_INPUTS};

/// What is resident after the merges: the flat composite or the merged deep image (with, when
/// the GPU tidied it, per pixel 1 where the walk made new values).
enum Resident<'a> {
    Flat(GpuFlat<'a>),
    Deep(GpuImage<'a>, Option<GpuBuffer<'a>>),
}

/// A band's result on its way back to the host ([`GpuMerger::start_readback`]).
pub(super) enum BandReadback<'a> {
    Flat {
        values: PendingRead,
        front: PendingRead,
    },
    Deep {
        image: Box<PendingImage>,
        marks: Option<PendingRead>,
    },
    /// A deep output's packed sources (`DeepReadback::Sources`), with the offsets they follow and
    /// the stage's count of inconsistent pixels.
    Sources {
        packing: SourcePacking,
        offsets: PendingRead,
        sources: PendingRead,
        bad: PendingRead,
    },
    /// A deep output's runs of sources (`DeepReadback::Runs`), with the offsets, how many runs
    /// there are and the count of inconsistent pixels.
    Runs {
        packing: SourcePacking,
        /// The samples of the merged image, which its offsets must end at.
        samples: usize,
        offsets: PendingRead,
        count: RunCount<'a>,
        /// The first records, as many as `count` says or up to [`RunCount::Pending`]'s room.
        records: PendingRead,
        bad: PendingRead,
    },
}

/// How many runs a band's readback of runs holds.
pub(super) enum RunCount<'a> {
    /// Read already: transfers by calls wait for every read, so the count was read first and
    /// then exactly the runs' records.
    Read(usize),
    /// On its way beside the records, of which `room` come back with it: how many there are is
    /// known only once the GPU has run, so the copy is issued for a room of half the samples
    /// (4 or 6 bytes a sample over the bus, no more than the packed sources) and the records
    /// are copied out of mapped memory only as far as the count says (1080p pairs: 20 samples
    /// a run for powerplant, 19 for hairball, 4 for atrium, whose runs a quarter would nearly
    /// have outgrown). A band with more runs than room (inputs alternating sample by sample)
    /// reads them all from `on_gpu` when it finishes, waiting for the GPU.
    Pending {
        count: PendingRead,
        room: usize,
        on_gpu: GpuBuffer<'a>,
    },
}

/// Runs one host task turns from records into [`SourceRun`]s (a piece of the output's assembly).
const RUN_PIECE: usize = 1 << 14;

/// A merge with its inputs resident on the GPU: build once, merge many (for benches), finish.
pub struct GpuMerger<'a, 'i> {
    ctx: &'a GlContext,
    plan: MergePlan<'i>,
    options: MergeOptions,
    gl_options: GlOptions,
    columns: ColumnSpec,
    band: Band,
    /// Built inputs for the chain; with a single input, an empty second image follows it.
    /// Empty for a k-way merge.
    images: Vec<GpuImage<'a>>,
    /// The inputs stacked into one image, for a k-way merge.
    stack: Option<GpuStack<'a>>,
    /// Per merge, whether it walks the lists back to front.
    descending: Vec<bool>,
    resident: Option<Resident<'a>>,
    pub(super) stats: GpuStats,
    /// Whether the stages end with `glFinish`, so that the host clocks in the stats time the GPU
    /// work (the bench API, [`Self::upload`]). A banded merge (`merge_images_gl_over`) does not:
    /// its only host synchronisation is the readback its output needs, and the per-stage GPU
    /// times come from timer queries (`--stats`), not from host clocks.
    sync_timing: bool,
}

/// Per merge (N - 1 of them, at least 1), whether it runs back to front. The last runs front to
/// back (flat needs it); an LL intermediate is head-inserted, so it comes out reversed from its
/// merge and the merge before must run the opposite way of the one that reads it.
fn merge_directions(merges: usize, layout: Layout) -> Vec<bool> {
    let mut descending = vec![false; merges];
    for m in (0..merges.saturating_sub(1)).rev() {
        descending[m] = layout == Layout::LinkedList && !descending[m + 1];
    }
    descending
}

/// Bytes of a stream gathered on the host (`--gpu-stages host`), as staged.
fn stream_bytes(counts: &[u32], keys: &[crate::vocab::Fragment], values: &[f32]) -> u64 {
    (std::mem::size_of_val(counts) + std::mem::size_of_val(keys) + std::mem::size_of_val(values))
        as u64
}

/// Whether `inputs` inputs merge in one k-way pass under `strategy`: up to
/// [`MAX_KWAY_INPUTS`]; more fall back to the pairwise chain.
pub fn uses_kway(strategy: MergeStrategy, inputs: usize) -> bool {
    strategy == MergeStrategy::KWay && (1..=MAX_KWAY_INPUTS).contains(&inputs)
}

/// Mean samples per pixel and input from which two inputs count as long lists, for
/// [`GlOptions::pairwise_long_pairs`]: between atrium's 1.9 (k-way faster) and hairball's 7.9 and
/// powerplant's 11.8 (pairwise faster) at 1080p.
pub const PAIRWISE_MEAN_SAMPLES: f64 = 4.0;

/// Whether a merge's last step needs no values on the GPU: a deep output that the GPU does not
/// tidy is read back by its keys alone (the host copies each sample's values from the input
/// its key names), so the inputs of that step are gathered and built as keys alone too (only
/// their depth planes are staged) and the step writes keys alone (`GpuImage::with_values`).
fn keys_suffice(options: &MergeOptions, gl: &GlOptions) -> bool {
    options.output == OutputKind::Deep && !(options.tidy && gl.tidies_on_gpu())
}

/// Whether the GL engine merges `plan`'s inputs in one k-way pass: [`uses_kway`], except two
/// inputs with long lists where [`GlOptions::pairwise_long_pairs`] says so (the pairwise
/// kernel is then the faster two-way merge).
fn kway_on(ctx: &GlContext, strategy: MergeStrategy, plan: &MergePlan, gl: &GlOptions) -> bool {
    if !uses_kway(strategy, plan.inputs.len()) {
        return false;
    }
    if plan.inputs.len() != 2 || !gl.pairs_long_lists_pairwise(ctx) {
        return true;
    }
    let pixels = plan.window.area().max(1) as f64;
    let samples: usize = plan.inputs.iter().map(|i| i.sample_count()).sum();
    samples as f64 / (2.0 * pixels) < PAIRWISE_MEAN_SAMPLES
}

impl<'a, 'i> GpuMerger<'a, 'i> {
    /// Build every input on the GPU over the whole union window as one band (fails when it does
    /// not fit one storage buffer; `merge_images_gl` cuts bands instead).
    pub fn upload(
        ctx: &'a GlContext,
        inputs: &[&'i DeepImage],
        options: &MergeOptions,
        gl_options: &GlOptions,
    ) -> Result<Self> {
        super::check_depths(inputs)?;
        let (plan, columns) = prepare(inputs, gl_options)?;
        let band = Band::new(0, plan.window.height(), plan.window.width(), gl_options);
        Self::build_band(ctx, plan, columns, band, options, gl_options, true)
    }

    /// Build every input of one band of a banded merge on the GPU (no `glFinish`: see
    /// `sync_timing`).
    pub(super) fn upload_band(
        ctx: &'a GlContext,
        plan: MergePlan<'i>,
        columns: ColumnSpec,
        band: Band,
        options: &MergeOptions,
        gl_options: &GlOptions,
    ) -> Result<Self> {
        Self::build_band(ctx, plan, columns, band, options, gl_options, false)
    }

    fn build_band(
        ctx: &'a GlContext,
        mut plan: MergePlan<'i>,
        columns: ColumnSpec,
        band: Band,
        options: &MergeOptions,
        gl_options: &GlOptions,
        sync_timing: bool,
    ) -> Result<Self> {
        plan.sort = options.sort;
        if kway_on(ctx, options.strategy, &plan, gl_options) {
            super::coop::refuse_kway(gl_options.long_lists)?;
            return Self::upload_stack(ctx, plan, columns, band, options, gl_options, sync_timing);
        }
        let merges = plan.inputs.len().saturating_sub(1).max(1);
        let descending = merge_directions(merges, gl_options.layout);
        let stride = columns.stride();
        let mut stats = GpuStats::new(&ctx.info().renderer, gl_options);
        stats.bands = 1;
        stats.pixels = band.pixels() as u64;
        let mut images = Vec::new();
        let gpu_sorts = gl_options.sorts_on_gpu();
        for k in 0..plan.inputs.len().max(2) {
            // Input 0 is read by merge 0, input k by merge k - 1: build lists the way it walks.
            let ascending = !descending[k.saturating_sub(1)];
            let needs_sort = k < plan.inputs.len() && plan.sort.sorts(plan.inputs[k].state);
            let image = if needs_sort && !gpu_sorts {
                // Sorted on the host as it is gathered (see `host_gather`).
                let start = Instant::now();
                let (counts, keys, values) = host_gather(&plan, k, &band, stride, true);
                stats.upload_s += start.elapsed().as_secs_f64();
                stats.staged_bytes += stream_bytes(&counts, &keys, &values);
                stats.input_samples += keys.len() as u64;
                let start = Instant::now();
                let image = build_image(
                    ctx,
                    gl_options.layout,
                    gl_options.block_size,
                    ascending,
                    &counts,
                    &keys,
                    &values,
                    stride,
                    false,
                )?;
                stats.build_s += start.elapsed().as_secs_f64();
                image
            } else if k < plan.inputs.len() {
                let gathered = gather_band(
                    ctx,
                    &plan,
                    k..k + 1,
                    &band,
                    gl_options.pixel_order,
                    stride,
                    false,
                    !(merges == 1 && keys_suffice(options, gl_options)),
                )?;
                stats.upload_s += gathered.staging_s;
                stats.staged_bytes += gathered.staged_bytes;
                stats.input_samples += gathered.stream.samples as u64;
                let _span = crate::timeline::span(|| format!("issue the build of input {k}"));
                let start = Instant::now();
                let image = build_from_stream(
                    ctx,
                    gl_options.layout,
                    gl_options.block_size,
                    ascending,
                    gathered.stream,
                    needs_sort,
                )?;
                stats.build_s += start.elapsed().as_secs_f64();
                image
            } else {
                // A single input merges with an empty second image.
                build_image(
                    ctx,
                    gl_options.layout,
                    gl_options.block_size,
                    ascending,
                    &vec![0; band.pixels()],
                    &[],
                    &[],
                    stride,
                    false,
                )?
            };
            if sync_timing {
                ctx.finish();
            }
            stats.input_bytes += image.bytes();
            images.push(image);
        }
        stats.output_samples = stats.input_samples;
        Ok(GpuMerger {
            ctx,
            plan,
            options: *options,
            gl_options: *gl_options,
            columns,
            band,
            images,
            stack: None,
            descending,
            resident: None,
            stats,
            sync_timing,
        })
    }

    /// [`Self::upload_band`] for a k-way merge: every input's stream gathered, padded to
    /// [`crate::vocab::kway_stride`] pixels and laid end to end, then built as one image (LL ascending);
    /// sorted on the GPU when any input needs it (a stable sort leaves sorted pixels as they are).
    fn upload_stack(
        ctx: &'a GlContext,
        plan: MergePlan<'i>,
        columns: ColumnSpec,
        band: Band,
        options: &MergeOptions,
        gl_options: &GlOptions,
        sync_timing: bool,
    ) -> Result<Self> {
        let stride = columns.stride();
        let mut stats = GpuStats::new(&ctx.info().renderer, gl_options);
        stats.kway = true;
        stats.bands = 1;
        stats.pixels = band.pixels() as u64;
        let inputs = plan.inputs.len();
        let sort = (0..inputs).any(|k| plan.sort.sorts(plan.inputs[k].state));
        let stream = if sort && !gl_options.sorts_on_gpu() {
            // Gathered and sorted on the host (see `host_gather`), padded to the slices.
            let start = Instant::now();
            let padding = kway_stride(band.pixels()) - band.pixels();
            let (mut counts, mut keys, mut values) = (Vec::new(), Vec::new(), Vec::new());
            for k in 0..inputs {
                let needs_sort = plan.sort.sorts(plan.inputs[k].state);
                let (c, f, v) = host_gather(&plan, k, &band, stride, needs_sort);
                counts.extend(c);
                counts.extend(std::iter::repeat_n(0, padding));
                keys.extend(f);
                values.extend(v);
            }
            stats.upload_s += start.elapsed().as_secs_f64();
            stats.staged_bytes += stream_bytes(&counts, &keys, &values);
            stats.input_samples = keys.len() as u64;
            upload_stream(ctx, &counts, &keys, &values, stride)?
        } else {
            let gathered = gather_band(
                ctx,
                &plan,
                0..inputs,
                &band,
                gl_options.pixel_order,
                stride,
                true,
                !keys_suffice(options, gl_options),
            )?;
            stats.upload_s += gathered.staging_s;
            stats.staged_bytes += gathered.staged_bytes;
            stats.input_samples = gathered.stream.samples as u64;
            gathered.stream
        };
        let sort = sort && gl_options.sorts_on_gpu();
        let _span = crate::timeline::span(|| "issue the build".into());
        let start = Instant::now();
        // A stable sort leaves the inputs that are sorted already as they are.
        let image = build_from_stream(
            ctx,
            gl_options.layout,
            gl_options.block_size,
            true,
            stream,
            sort,
        )?;
        if sync_timing {
            ctx.finish();
        }
        stats.build_s += start.elapsed().as_secs_f64();
        stats.input_bytes += image.bytes();
        stats.output_samples = stats.input_samples;
        let stack = GpuStack::new(image, inputs, band.pixels())?;
        Ok(GpuMerger {
            ctx,
            plan,
            options: *options,
            gl_options: *gl_options,
            columns,
            band,
            images: Vec::new(),
            stack: Some(stack),
            descending: Vec::new(),
            resident: None,
            stats,
            sync_timing,
        })
    }

    /// Run the merge kernels on the resident inputs (again); returns the seconds they took.
    /// With the GPU tidying, a flat merge's flagged pixels are tidied and flattened from the last
    /// merge's lists (merged again into a linearised image when any pixel is flagged), and a
    /// tidy deep output is merged last into a linearised image and tidied in place.
    pub fn merge_resident(&mut self) -> Result<f64> {
        self.resident = None;
        if self.stack.is_some() {
            return self.merge_resident_kway();
        }
        let start = Instant::now();
        let merges = self.descending.len();
        let flat = matches!(self.options.output, OutputKind::Flat { .. });
        let gpu_tidies = self.gl_options.tidies_on_gpu();
        let volumes = self.volumes_possible();
        let long_lists = self.gl_options.long_lists;
        // How deep outputs (the lists a GPU tidy reads too) are written.
        let writes = self.gl_options.deep_writes_on(self.ctx);
        let mut merged: Option<GpuImage<'a>> = None;
        let mut merged_bytes = BufferBytes::default();
        let inputs_bytes: u64 = self.images.iter().map(|i| i.bytes().total()).sum();
        let mut peak = inputs_bytes;
        let mut deep_marks = None;
        self.stats.gpu_tidied_pixels = 0;
        self.stats.host_tidied_pixels = 0;
        for m in 0..merges {
            let spec = MergeSpec {
                method: self.gl_options.method,
                block_size: self.gl_options.block_size,
                descending: self.descending[m],
                rbm_blocks: self.gl_options.rbm_blocks,
            };
            let last = m + 1 == merges;
            let a = merged.as_ref().unwrap_or(&self.images[0]);
            let b = &self.images[m + 1];
            if last && flat {
                let out = merge_flat_scheduled(self.ctx, a, b, spec, &self.columns, long_lists)?;
                if gpu_tidies {
                    if let Some(listed) = tidy::flagged_flat_pixels(self.ctx, &out, !volumes)? {
                        let lists = merge_deep_scheduled(
                            self.ctx,
                            a,
                            b,
                            Layout::Linearised,
                            spec,
                            &self.columns,
                            long_lists,
                            // The GPU tidy reads the lists' values.
                            true,
                            writes,
                        )?;
                        peak = peak.max(
                            inputs_bytes
                                + lists.bytes().total()
                                + merged.as_ref().map_or(0, |i| i.bytes().total()),
                        );
                        let host = tidy::tidy_flat_in_place(
                            self.ctx,
                            &lists,
                            &out,
                            &listed,
                            &self.columns,
                        )?;
                        self.stats.gpu_tidied_pixels += (listed.count - host) as u64;
                        self.stats.host_tidied_pixels += host as u64;
                    }
                }
                self.resident = Some(Resident::Flat(out));
            } else {
                // A tidy deep output is tidied from a linearised list (count → scan → emit).
                let tidy_here = last && self.options.tidy && gpu_tidies;
                let layout = if tidy_here {
                    Layout::Linearised
                } else {
                    self.gl_options.layout
                };
                let written = if tidy_here {
                    layout
                } else {
                    writes.written_layout(layout)
                };
                self.stats.deep_writes = Some(writes.effective(layout));
                // The last merge is read back by its keys unless the GPU tidies it (which reads
                // the values): its values would be written for nothing.
                let with_values = !(last && keys_suffice(&self.options, &self.gl_options));
                let mut out = merge_deep_scheduled(
                    self.ctx,
                    a,
                    b,
                    written,
                    spec,
                    &self.columns,
                    long_lists,
                    with_values,
                    writes,
                )?;
                out = relayout(self.ctx, out, layout, spec.block_size, &self.columns)?;
                let mut bytes = out.bytes();
                if tidy_here {
                    let tidied = tidy::tidy_deep(self.ctx, out, &self.columns)?;
                    bytes += tidied.image.bytes();
                    self.stats.gpu_tidied_pixels +=
                        (tidied.tidied_pixels - tidied.host_pixels) as u64;
                    self.stats.host_tidied_pixels += tidied.host_pixels as u64;
                    self.stats.output_samples = tidied.image.samples as u64;
                    deep_marks = Some(tidied.marks);
                    out = tidied.image;
                }
                peak = peak.max(
                    inputs_bytes + bytes.total() + merged.as_ref().map_or(0, |i| i.bytes().total()),
                );
                merged_bytes += bytes;
                merged = Some(out);
            }
        }
        if !flat {
            self.resident = merged.map(|image| Resident::Deep(image, deep_marks));
        }
        if self.sync_timing {
            self.ctx.finish();
        }
        let seconds = start.elapsed().as_secs_f64();
        self.stats.merge_s = seconds;
        self.stats.merged_bytes = merged_bytes;
        self.stats.peak_bytes = peak;
        Ok(seconds)
    }

    /// Whether some input has a ZBack channel. Without one every sample is a point (the gather
    /// makes ZBack = Z), no pixel of a flat merge can need a tidy, and the merge's count of
    /// flagged pixels is not read back: a read that would wait for the GPU in every band.
    fn volumes_possible(&self) -> bool {
        self.plan.depth.iter().any(|(_, zback)| zback.is_some())
    }

    /// [`Self::merge_resident`] for a k-way merge: one `merge_kway.comp` dispatch into the flat
    /// composite or the deep image (linearised when the GPU tidies it), and for flat output with
    /// flagged pixels a second one into a linearised image that `tidy.comp` tidies from.
    fn merge_resident_kway(&mut self) -> Result<f64> {
        let start = Instant::now();
        let stack = self.stack.as_ref().expect("a k-way merge has its stack");
        let flat = matches!(self.options.output, OutputKind::Flat { .. });
        let gpu_tidies = self.gl_options.tidies_on_gpu();
        let volumes = self.volumes_possible();
        let block = self.gl_options.block_size;
        // How deep outputs (the lists a GPU tidy reads too) are written.
        let writes = self.gl_options.deep_writes_on(self.ctx);
        let inputs_bytes = stack.image.bytes().total();
        let mut peak = inputs_bytes;
        let mut merged_bytes = BufferBytes::default();
        self.stats.gpu_tidied_pixels = 0;
        self.stats.host_tidied_pixels = 0;
        if flat {
            let out = merge_flat_kway(self.ctx, stack, block, &self.columns)?;
            if gpu_tidies {
                if let Some(listed) = tidy::flagged_flat_pixels(self.ctx, &out, !volumes)? {
                    let lists = merge_deep_kway(
                        self.ctx,
                        stack,
                        Layout::Linearised,
                        block,
                        &self.columns,
                        true,
                        writes,
                    )?;
                    peak = peak.max(inputs_bytes + lists.bytes().total());
                    let host =
                        tidy::tidy_flat_in_place(self.ctx, &lists, &out, &listed, &self.columns)?;
                    self.stats.gpu_tidied_pixels += (listed.count - host) as u64;
                    self.stats.host_tidied_pixels += host as u64;
                }
            }
            self.resident = Some(Resident::Flat(out));
        } else {
            let tidy_here = self.options.tidy && gpu_tidies;
            let layout = if tidy_here {
                Layout::Linearised
            } else {
                self.gl_options.layout
            };
            let written = if tidy_here {
                layout
            } else {
                writes.written_layout(layout)
            };
            self.stats.deep_writes = Some(writes.effective(layout));
            // Read back by its keys unless the GPU tidies it (as in the pairwise chain).
            let with_values = !keys_suffice(&self.options, &self.gl_options);
            let mut out = merge_deep_kway(
                self.ctx,
                stack,
                written,
                block,
                &self.columns,
                with_values,
                writes,
            )?;
            out = relayout(self.ctx, out, layout, block, &self.columns)?;
            let mut bytes = out.bytes();
            let mut marks = None;
            if tidy_here {
                let tidied = tidy::tidy_deep(self.ctx, out, &self.columns)?;
                bytes += tidied.image.bytes();
                self.stats.gpu_tidied_pixels += (tidied.tidied_pixels - tidied.host_pixels) as u64;
                self.stats.host_tidied_pixels += tidied.host_pixels as u64;
                self.stats.output_samples = tidied.image.samples as u64;
                marks = Some(tidied.marks);
                out = tidied.image;
            }
            peak = peak.max(inputs_bytes + bytes.total());
            merged_bytes += bytes;
            self.resident = Some(Resident::Deep(out, marks));
        }
        if self.sync_timing {
            self.ctx.finish();
        }
        let seconds = start.elapsed().as_secs_f64();
        self.stats.merge_s = seconds;
        self.stats.merged_bytes = merged_bytes;
        self.stats.peak_bytes = peak;
        Ok(seconds)
    }

    /// Read the result back (merging first if `merge_resident` was not called).
    pub fn finish(mut self) -> Result<(MergeOutput, GpuStats)> {
        let mut out = Accumulated::new(&self.plan, &self.options, self.columns.stride());
        self.read_band(&mut out)?;
        let start = Instant::now();
        let output = out.assemble(&self.plan, &self.options, &mut self.stats);
        let assembled = start.elapsed().as_secs_f64();
        self.stats.readback_s += assembled;
        self.stats.assemble_s += assembled;
        Ok((output, self.stats))
    }

    /// Read the band back into `out`, waiting for it.
    pub(super) fn read_band(&mut self, out: &mut Accumulated) -> Result<()> {
        let pending = self.start_readback()?;
        finish_band_readback(
            self.ctx,
            &self.band,
            &self.columns,
            &mut self.stats,
            pending,
            out,
        )
    }

    /// Issue the band's readbacks (merging first if `merge_resident` was not called): copies
    /// into mapped memory behind a fence, which [`ReadbackTail::finish`] waits for.
    pub(super) fn start_readback(&mut self) -> Result<BandReadback<'a>> {
        let _span = crate::timeline::span(|| "issue the merge and readback".into());
        if self.resident.is_none() {
            self.merge_resident()?;
        }
        let start = Instant::now();
        let pixels = self.band.pixels();
        let ctx = self.ctx;
        let pending = match self.resident.as_ref().expect("merged") {
            Resident::Flat(flat) => {
                let stride = self.columns.stride();
                self.stats.readback_bytes += flat.bytes();
                self.stats.readback_form = "composite";
                ctx.timed("readback", flat.bytes(), || -> Result<_> {
                    Ok(BandReadback::Flat {
                        values: ctx.read_ahead(&flat.values, 0, pixels * stride * 4)?,
                        front: ctx.read_ahead(&flat.front, 0, pixels * 16)?,
                    })
                })?
            }
            Resident::Deep(image, None) if self.deep_readback_of(image) != DeepReadback::Image => {
                let inputs: Vec<usize> =
                    self.plan.inputs.iter().map(|i| i.sample_count()).collect();
                let packing = SourcePacking::for_inputs(&inputs);
                // Packed (and run) before the timed readback: timer queries do not nest.
                let (sources, bad) = pack_sources(ctx, image, packing)?;
                if self.deep_readback_of(image) == DeepReadback::Runs {
                    let runs = source_runs(ctx, &sources, image.samples, packing)?;
                    drop(sources);
                    let words = packing.run_words();
                    // The offsets, the count and `bad` here; the records as the finish reads
                    // them.
                    self.stats.readback_bytes += (pixels + 3) as u64 * 4;
                    self.stats.readback_form = match words {
                        2 => "runs, 2 words a run",
                        _ => "runs, 3 words a run",
                    };
                    let (count, records) = if ctx.transfer_path() == TransferPath::Calls {
                        let count = runs.rank.read_range::<u32>(image.samples, 1)[0] as usize;
                        // A count past the samples is the finish's error; the read stays inside.
                        let room = count.min(image.samples);
                        let records = ctx.read_ahead(&runs.records, 0, room * words * 4)?;
                        (RunCount::Read(count), records)
                    } else {
                        let room = image.samples.div_ceil(2);
                        let count = ctx.read_ahead(&runs.rank, image.samples * 4, 4)?;
                        let records = ctx.read_ahead(&runs.records, 0, room * words * 4)?;
                        let on_gpu = runs.records;
                        (
                            RunCount::Pending {
                                count,
                                room,
                                on_gpu,
                            },
                            records,
                        )
                    };
                    let bytes = ((pixels + 1) * 4) as u64;
                    ctx.timed("readback", bytes, || -> Result<_> {
                        Ok(BandReadback::Runs {
                            packing,
                            samples: image.samples,
                            offsets: ctx.read_ahead(&image.offsets, 0, (pixels + 1) * 4)?,
                            count,
                            records,
                            bad: ctx.read_ahead(&bad, 0, 4)?,
                        })
                    })?
                } else {
                    let bytes = (pixels + 1 + image.samples * packing.words()) as u64 * 4;
                    self.stats.readback_bytes += bytes;
                    self.stats.readback_form = match packing.words() {
                        1 => "sources, 1 word a sample",
                        _ => "sources, 2 words a sample",
                    };
                    ctx.timed("readback", bytes, || -> Result<_> {
                        // The sources first: the larger readback takes the larger free
                        // buffer (fields are evaluated in the order written).
                        Ok(BandReadback::Sources {
                            packing,
                            sources: ctx.read_ahead(
                                &sources,
                                0,
                                image.samples * packing.words() * 4,
                            )?,
                            offsets: ctx.read_ahead(&image.offsets, 0, (pixels + 1) * 4)?,
                            bad: ctx.read_ahead(&bad, 0, 4)?,
                        })
                    })?
                }
            }
            Resident::Deep(image, marks) => {
                let with_values = marks.is_some();
                let bytes = image.bytes().total()
                    - if with_values {
                        0
                    } else {
                        image.values.bytes as u64
                    };
                self.stats.readback_bytes += bytes;
                self.stats.readback_form = "image";
                ctx.timed("readback", bytes, || -> Result<_> {
                    Ok(BandReadback::Deep {
                        image: Box::new(image.read_ahead(with_values)?),
                        marks: marks
                            .as_ref()
                            .map(|m| ctx.read_ahead(m, 0, pixels * 4))
                            .transpose()?,
                    })
                })?
            }
        };
        self.stats.readback_s += start.elapsed().as_secs_f64();
        Ok(pending)
    }

    /// What of the merged deep `image` comes back: the image where it has values or the host
    /// tidies (which needs the depths), else what [`GlOptions::deep_readback`] asks for (its
    /// packed sources, their runs, or the image), with the runs only where the GPU's pixel
    /// order is the window's (a run in the GPU's order could span pixels the window parts).
    fn deep_readback_of(&self, image: &GpuImage) -> DeepReadback {
        if image.with_values || self.options.tidy {
            return DeepReadback::Image;
        }
        match self.gl_options.deep_readback_on(self.ctx) {
            DeepReadback::Runs if !self.band.in_window_order => DeepReadback::Sources,
            readback => readback,
        }
    }

    /// What finishing the band's readback needs, without the inputs or the GPU images: the
    /// readback holds the bytes, and the images' buffers go back to the pool behind release
    /// fences, so the next band can be issued while this one is on its way back.
    pub(super) fn into_tail(mut self) -> ReadbackTail<'a> {
        // How the band travels, for the merge's statistics (summing bands keeps the last's).
        self.stats.transfer = self.ctx.transfer_path().name();
        self.stats.buffers = self.ctx.buffer_storage().name();
        ReadbackTail {
            ctx: self.ctx,
            band: self.band,
            columns: self.columns,
            stats: self.stats,
        }
    }
}

/// A band whose readback is issued and whose merger is gone ([`GpuMerger::into_tail`]).
pub(super) struct ReadbackTail<'a> {
    ctx: &'a GlContext,
    band: Band,
    columns: ColumnSpec,
    pub(super) stats: GpuStats,
}

impl<'a> ReadbackTail<'a> {
    /// Wait for the readbacks and put the band into `out`.
    pub(super) fn finish(
        &mut self,
        pending: BandReadback<'a>,
        out: &mut Accumulated,
    ) -> Result<()> {
        finish_band_readback(
            self.ctx,
            &self.band,
            &self.columns,
            &mut self.stats,
            pending,
            out,
        )
    }
}

/// The error for a merged image read back from `ctx` that is not consistent (`why`): a driver
/// or synchronisation fault, never a panic or an endless walk.
fn inconsistent_image(ctx: &GlContext, why: String) -> Error {
    Error::Gl(format!(
        "the GPU returned an inconsistent merged image ({why}) on {}; `deepmerge gpu-info --verify` checks this device",
        ctx.info().renderer
    ))
}

/// [`inconsistent_image`] where `strays` sample references read back name none of the inputs'
/// samples (`what` says which: "{strays} {what}").
fn refuse_strays(ctx: &GlContext, strays: u64, what: &str) -> Result<()> {
    match strays {
        0 => Ok(()),
        _ => Err(inconsistent_image(ctx, format!("{strays} {what}"))),
    }
}

/// The offsets of a deep output read back by its sources or their runs, once `sources.comp`'s
/// count of inconsistent pixels (`bad`) is 0 and the offsets of the band's `pixels` start at 0
/// and rise to the end.
fn finish_checked_offsets(
    ctx: &GlContext,
    offsets: PendingRead,
    bad: PendingRead,
    pixels: usize,
) -> Result<Vec<u32>> {
    let bad: Vec<u32> = ctx.finish_read(bad)?;
    let offsets: Vec<u32> = ctx.finish_read(offsets)?;
    if bad[0] != 0 {
        let why = format!("{} pixels' lists disagree with their counts", bad[0]);
        return Err(inconsistent_image(ctx, why));
    }
    check_offsets(&offsets, pixels).map_err(|why| inconsistent_image(ctx, why))?;
    if offsets[0] != 0 {
        return Err(inconsistent_image(ctx, "its offsets start past 0".into()));
    }
    Ok(offsets)
}

/// Wait for the readbacks of `band` ([`GpuMerger::start_readback`]) and put it into `out`.
fn finish_band_readback(
    ctx: &GlContext,
    band: &Band,
    columns: &ColumnSpec,
    stats: &mut GpuStats,
    pending: BandReadback<'_>,
    out: &mut Accumulated,
) -> Result<()> {
    let _span = crate::timeline::span(|| "wait for and assemble the readback".into());
    let start = Instant::now();
    let pixels = band.pixels();
    let base = band.row0 * band.width;
    let stride = columns.stride();
    let waited_before = ctx.transfer_stats().readback_wait_s;
    match pending {
        BandReadback::Flat { values, front } => {
            let band_values = &mut out.flat_values[base * stride..(base + pixels) * stride];
            let band_front = &mut out.flat_front[base..base + pixels];
            let inputs = &out.inputs;
            let strays = if band.in_window_order {
                // The GPU's order is the window's: straight out of mapped memory into place, then
                // every front record checked. (An H100 host's 16-thread flat merge spent 4-12 ms
                // a band of its GL thread here, copying into vectors and again into the window.)
                ctx.finish_read_into(values, band_values)?;
                ctx.finish_read_into(front, band_front)?;
                let checking = Instant::now();
                let strays = band_front
                    .par_iter()
                    .filter(|front| !inputs.names_front(front))
                    .count();
                stats.assemble_s += checking.elapsed().as_secs_f64();
                strays as u64
            } else {
                let values: Vec<f32> = ctx.finish_read(values)?;
                let front: Vec<[u32; 4]> = ctx.finish_read(front)?;
                // Each window pixel of the band takes its values from where the GPU's order put
                // them: a gather, so pieces of the band's pixels go in parallel.
                let assembling = Instant::now();
                let inverse = band.inverse_perm();
                let strays = AtomicU64::new(0);
                band_values
                    .par_chunks_mut(PIECE_PIXELS * stride)
                    .zip(band_front.par_chunks_mut(PIECE_PIXELS))
                    .zip(inverse.par_chunks(PIECE_PIXELS))
                    .for_each(|((values_out, front_out), inverse)| {
                        let mut stray = 0;
                        for (k, &p) in inverse.iter().enumerate() {
                            let p = p as usize;
                            values_out[k * stride..(k + 1) * stride]
                                .copy_from_slice(&values[p * stride..(p + 1) * stride]);
                            front_out[k] = front[p];
                            stray += u64::from(!inputs.names_front(&front[p]));
                        }
                        strays.fetch_add(stray, Ordering::Relaxed);
                    });
                stats.assemble_s += assembling.elapsed().as_secs_f64();
                strays.into_inner()
            };
            let what = "pixels' front samples are none of the inputs'";
            refuse_strays(ctx, strays, what)?;
        }
        BandReadback::Deep { image, marks } => {
            let built = image.finish(ctx)?;
            let marks: Vec<u32> = match marks {
                Some(m) => ctx.finish_read(m)?,
                None => Vec::new(),
            };
            built.check().map_err(|why| inconsistent_image(ctx, why))?;
            let inverse = band.inverse_perm();
            let first_sample = out.deep_samples.len();
            out.deep_samples.reserve(built.offsets[pixels] as usize);
            out.deep_counts.reserve(pixels);
            for &p in &inverse {
                let p = p as usize;
                let at = out.deep_samples.len();
                built.extend_with_pixel(p, &mut out.deep_samples);
                let n = out.deep_samples.len() - at;
                out.deep_counts.push(n as u32);
                // A pixel the GPU tidied brings its new values (rows of `stride`).
                if marks.get(p).is_some_and(|&m| m != 0) {
                    let first = built.offsets[p] as usize;
                    out.deep_tidied.push((
                        at,
                        built.values[first * stride..(first + n) * stride].to_vec(),
                    ));
                }
            }
            let inputs = &out.inputs;
            let strays = out.deep_samples[first_sample..]
                .par_iter()
                .filter(|f| !inputs.names(f.input, f.index as u64))
                .count();
            refuse_strays(ctx, strays as u64, "of its samples are none of the inputs'")?;
        }
        BandReadback::Sources {
            packing,
            offsets,
            sources,
            bad,
        } => {
            let offsets = finish_checked_offsets(ctx, offsets, bad, pixels)?;
            let words = packing.words();
            let sources: Vec<u32> = ctx.finish_read(sources)?;
            if sources.len() != offsets[pixels] as usize * words {
                return Err(inconsistent_image(ctx, "its sources are short".into()));
            }
            // Window order: each pixel's count, then pieces of pixels unpacked in parallel
            // into their places.
            let assembling = Instant::now();
            let inverse = band.inverse_perm();
            let range = |p: u32| offsets[p as usize] as usize..offsets[p as usize + 1] as usize;
            let first_count = out.deep_counts.len();
            out.deep_counts
                .extend(inverse.iter().map(|&p| range(p).len() as u32));
            let counts = &out.deep_counts[first_count..];
            // Each piece's samples as runs of consecutive values of one input
            // (`composite::source_runs`: 20 samples a run on the 1080p pair), which the
            // assembly copies, every sample's reference checked by its run's.
            let inputs = &out.inputs;
            let strays = AtomicU64::new(0);
            let pieces: Vec<Vec<SourceRun>> = inverse
                .par_chunks(PIECE_PIXELS)
                .map(|inverse| {
                    let mut runs = Vec::new();
                    push_source_runs(
                        &mut runs,
                        inverse.iter().flat_map(|&p| {
                            let range = range(p);
                            sources[range.start * words..range.end * words]
                                .chunks_exact(words)
                                .map(|packed| {
                                    let (input, index) = packing.unpack(packed);
                                    (input, index as u64)
                                })
                        }),
                    );
                    strays.fetch_add(inputs.strays_in_runs(&runs), Ordering::Relaxed);
                    runs
                })
                .collect();
            debug_assert_eq!(
                pieces.iter().map(|runs| samples_in(runs)).sum::<usize>(),
                counts.iter().map(|&n| n as usize).sum::<usize>()
            );
            out.deep_source_runs.extend(pieces);
            stats.assemble_s += assembling.elapsed().as_secs_f64();
            let what = "of its sources are none of the inputs' samples";
            refuse_strays(ctx, strays.into_inner(), what)?;
        }
        BandReadback::Runs {
            packing,
            samples,
            offsets,
            count,
            records,
            bad,
        } => {
            let offsets = finish_checked_offsets(ctx, offsets, bad, pixels)?;
            // The runs tile the merged samples, which the offsets must end at: the last run
            // ends there, and the records' room was made for them.
            if offsets[pixels] as usize != samples {
                let why = format!(
                    "its offsets end at {}, not at its {samples} samples",
                    offsets[pixels]
                );
                return Err(inconsistent_image(ctx, why));
            }
            let words = packing.run_words();
            let runs_past = |count: usize| {
                let why = format!("{count} runs of sources for {samples} samples");
                Err(inconsistent_image(ctx, why))
            };
            let (count, records) = match count {
                RunCount::Read(count) => {
                    if count > samples {
                        return runs_past(count);
                    }
                    (count, ctx.finish_read_prefix(records, count * words)?)
                }
                RunCount::Pending {
                    count,
                    room,
                    on_gpu,
                } => {
                    let count = ctx.finish_read::<u32>(count)?[0] as usize;
                    if count > samples {
                        return runs_past(count);
                    }
                    if count <= room {
                        (count, ctx.finish_read_prefix(records, count * words)?)
                    } else {
                        ctx.finish_read_prefix::<u32>(records, 0)?;
                        stats.runs_read_whole_bands += 1;
                        (count, on_gpu.read_range::<u32>(0, count * words))
                    }
                }
            };
            if (count == 0) != (samples == 0) {
                return runs_past(count);
            }
            if records.len() != count * words {
                return Err(inconsistent_image(ctx, "its runs are short".into()));
            }
            stats.readback_bytes += records.len() as u64 * 4;
            // The GPU's pixel order is the window's (`deep_readback_of`,
            // `Band::in_window_order`): counts as they are, and runs in order. A run ends where
            // the next begins; every run is checked to begin after the one before and stay
            // inside the band, and every sample it names against the inputs.
            let assembling = Instant::now();
            out.deep_counts
                .extend(offsets.windows(2).map(|pair| pair[1] - pair[0]));
            let first = |r: usize| records[r * words] as usize;
            let end = |r: usize| if r + 1 < count { first(r + 1) } else { samples };
            if count > 0 && first(0) != 0 {
                return Err(inconsistent_image(ctx, "its first run starts late".into()));
            }
            let inputs = &out.inputs;
            let strays = AtomicU64::new(0);
            let disordered = AtomicU64::new(0);
            let pieces: Vec<Vec<SourceRun>> = (0..count.div_ceil(RUN_PIECE))
                .into_par_iter()
                .map(|piece| {
                    let runs: Vec<SourceRun> = (piece * RUN_PIECE
                        ..((piece + 1) * RUN_PIECE).min(count))
                        .filter_map(|r| {
                            let (start, end) = (first(r), end(r));
                            if end <= start || end > samples {
                                disordered.fetch_add(1, Ordering::Relaxed);
                                return None;
                            }
                            let packed = &records[r * words + 1..(r + 1) * words];
                            let (input, index) = packing.unpack(packed);
                            Some(SourceRun {
                                start: index as u64,
                                input,
                                len: (end - start) as u32,
                            })
                        })
                        .collect();
                    strays.fetch_add(inputs.strays_in_runs(&runs), Ordering::Relaxed);
                    runs
                })
                .collect();
            let disordered = disordered.into_inner();
            if disordered != 0 {
                let why = format!("{disordered} of its runs do not follow the one before");
                return Err(inconsistent_image(ctx, why));
            }
            debug_assert_eq!(
                pieces.iter().map(|runs| samples_in(runs)).sum::<usize>(),
                samples
            );
            out.deep_source_runs.extend(pieces);
            stats.assemble_s += assembling.elapsed().as_secs_f64();
            let what = "of its runs' samples are none of the inputs'";
            refuse_strays(ctx, strays.into_inner(), what)?;
        }
    }
    stats.readback_wait_s += ctx.transfer_stats().readback_wait_s - waited_before;
    stats.readback_s += start.elapsed().as_secs_f64();
    Ok(())
}
