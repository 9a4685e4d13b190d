//! The GL merge of whole deep images: cut the union window into row bands that fit the GL limits,
//! gather each input's band into a pixel-ordered stream on the host, build every input on the
//! GPU, merge them pairwise with the deep intermediate staying resident, read the band back and
//! assemble the output exactly as `composite::merge_images` would.
//!
//! Inputs that need sorting (`MergeOptions::sort`, e.g. no `deepImageState`) are sorted per
//! pixel by the GPU stage `sort.comp` between upload and build, or on the host while the stream
//! is gathered where that is faster (a software rasteriser; `GlOptions::sort_on_gpu`); both are
//! stable, so the tie rule holds.
//!
//! Pixels where volumes overlap (`composite::tidy::needs_tidy`) are tidied on the GPU (within
//! 1e-5 of the f64 reference), or by the host with the `composite` functions where that is
//! faster (a software rasteriser; `GlOptions::tidy_on_gpu`), bit-identical to the CPU engine:
//! - flat: the last merge flags them; they are listed on the GPU (`compact.comp`), the last pair
//!   is merged again into a linearised image (only when something is flagged) and `tidy.comp`
//!   flattens the listed pixels from it, writing into the flat composite in place;
//! - deep with `tidy`: the last merge writes a linearised image, which `tidy::tidy_deep` turns
//!   into the tidied image on the GPU (gate, list, count, scan, emit); the host only reads it
//!   back, taking the new values of the pixels it marks.

use std::time::Instant;

use glow::HasContext;

use super::engine::{
    build_image, merge_deep, merge_flat, ColumnSpec, GpuFlat, GpuImage, MergeSpec,
};
use super::stats::{BufferBytes, GpuStats};
use super::{tidy, GlContext, GlOptions, GpuBuffer};
use crate::composite::tidy::{needs_tidy, tidy_pixel};
use crate::composite::{
    depth_less, flatten_pixel, CompositeKind, MergeOptions, MergeOutput, MergePlan, OutputKind,
    PixelSamples, Sample,
};
use crate::cpu::{Fragment, Layout, MAX_BLOCK_SIZE};
use crate::deep::{ChannelRole, DeepImage, FlatChannel, FlatImage, FlatValues, Plane};
use crate::error::{Error, Result};

/// A run of rows of the union window, with its pixel order.
#[derive(Clone, Debug)]
struct Band {
    /// First row, relative to the window.
    row0: usize,
    rows: usize,
    width: usize,
    /// Layout pixel p → row-major index inside the band.
    perm: Vec<u32>,
}

impl Band {
    fn new(row0: usize, rows: usize, width: usize, options: &GlOptions) -> Band {
        Band {
            row0,
            rows,
            width,
            perm: options.pixel_order.permutation(width, rows),
        }
    }

    fn pixels(&self) -> usize {
        self.width * self.rows
    }
}

/// What is resident after the merges: the flat composite or the merged deep image (with, when
/// the GPU tidied it, per pixel 1 where the walk made new values).
enum Resident<'a> {
    Flat(GpuFlat<'a>),
    Deep(GpuImage<'a>, Option<GpuBuffer<'a>>),
}

/// A merge with its inputs resident on the GPU: build once, merge many (for benches), finish.
pub struct GpuMerger<'a, 'i> {
    ctx: &'a GlContext,
    plan: MergePlan<'i>,
    options: MergeOptions,
    gl_options: GlOptions,
    columns: ColumnSpec,
    band: Band,
    /// Built inputs; with a single input, an empty second image follows it.
    images: Vec<GpuImage<'a>>,
    /// Per merge, whether it walks the lists back to front.
    descending: Vec<bool>,
    resident: Option<Resident<'a>>,
    stats: GpuStats,
}

/// Check options, plan the merge.
fn prepare<'i>(
    inputs: &[&'i DeepImage],
    gl_options: &GlOptions,
) -> Result<(MergePlan<'i>, ColumnSpec)> {
    if !(1..=MAX_BLOCK_SIZE).contains(&gl_options.block_size) {
        return Err(Error::Usage(format!(
            "block size {} is outside 1..={MAX_BLOCK_SIZE}",
            gl_options.block_size
        )));
    }
    for image in inputs {
        image.check_depths()?;
        if image.sample_count() > u32::MAX as usize {
            return Err(Error::Usage(
                "an input has more than 2^32 samples; the GL engine indexes samples with u32"
                    .into(),
            ));
        }
    }
    let plan = MergePlan::new(inputs)?;
    let columns = ColumnSpec {
        alpha_of: plan
            .composite
            .kinds
            .iter()
            .map(|k| match k {
                CompositeKind::Alpha => None,
                CompositeKind::Colour { alpha } => Some(*alpha),
            })
            .collect(),
    };
    Ok((plan, columns))
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

/// Whether overlapping volumes are tidied by `tidy.comp` on the GPU, or by the host (see
/// `GlOptions::tidy_on_gpu`).
fn gpu_tidies(ctx: &GlContext, gl_options: &GlOptions) -> bool {
    gl_options.tidy_on_gpu.unwrap_or(!ctx.info().software)
}

/// Samples of each row of the window over all inputs.
fn row_samples(plan: &MergePlan) -> Vec<u64> {
    let window = plan.window;
    let mut rows = vec![0u64; window.height()];
    for image in &plan.inputs {
        let dw = image.data_window;
        let w = dw.width();
        for rel in 0..dw.height() {
            let y = dw.y0 as i64 + rel as i64 - window.y0 as i64;
            rows[y as usize] += image.offsets[(rel + 1) * w] - image.offsets[rel * w];
        }
    }
    rows
}

/// Cut the window into bands whose merged buffers fit `limit` bytes each, when the output may
/// hold `growth` times the merged samples (a tidy splits volumes: at most 2x, as a pixel of n
/// samples has at most 2n boundaries and every tidied sample starts at one).
fn plan_bands(
    plan: &MergePlan,
    gl_options: &GlOptions,
    limit: u64,
    stride: usize,
    growth: u64,
) -> Result<Vec<Band>> {
    let per_sample = growth * 16u64.max(4 * stride as u64);
    let width = plan.window.width();
    let mut bands = Vec::new();
    let mut row0 = 0;
    let mut total = 0u64;
    let rows = row_samples(plan);
    for (y, &n) in rows.iter().enumerate() {
        if (n + 1) * per_sample > limit {
            return Err(Error::Gl(format!(
                "row {} holds {n} samples, more than one GPU buffer of {limit} bytes can take",
                plan.window.y0 as i64 + y as i64
            )));
        }
        if y > row0 && (total + n + 1) * per_sample > limit {
            bands.push(Band::new(row0, y - row0, width, gl_options));
            row0 = y;
            total = 0;
        }
        total += n;
    }
    bands.push(Band::new(row0, rows.len() - row0, width, gl_options));
    Ok(bands)
}

/// Input `k`'s samples in `band`, pixel by pixel in layout order: counts, keys, values.
fn gather_stream(
    plan: &MergePlan,
    k: usize,
    band: &Band,
    stride: usize,
    sort_on_host: bool,
) -> (Vec<u32>, Vec<Fragment>, Vec<f32>) {
    let image = plan.inputs[k];
    let window = plan.window;
    let (z, zback) = plan.depth[k];
    let sources = &plan.sources[k];
    let mut counts = Vec::with_capacity(band.pixels());
    let mut keys = Vec::new();
    let mut values = Vec::new();
    let mut order: Vec<usize> = Vec::new();
    for &q in &band.perm {
        let x = window.x0 + (q as usize % band.width) as i32;
        let y = window.y0 + (band.row0 + q as usize / band.width) as i32;
        let Some(p) = image.pixel_index(x, y) else {
            counts.push(0);
            continue;
        };
        let range = image.range(p);
        counts.push(range.len() as u32);
        let key = |index: usize| {
            let zf = z.map_or(0.0, |c| image.planes[c].get_f32(index));
            let zb = zback.map_or(zf, |c| image.planes[c].get_f32(index));
            Fragment {
                z: zf,
                zback: if zb > zf { zb } else { zf },
                input: k as u32,
                index: index as u32,
            }
        };
        order.clear();
        order.extend(range);
        if sort_on_host {
            // Sorted here, stably, so equal depths keep file order (the GPU stage does the same).
            order.sort_by(|&i, &j| {
                let (a, b) = (key(i), key(j));
                if a.depth_less(&b) {
                    std::cmp::Ordering::Less
                } else if b.depth_less(&a) {
                    std::cmp::Ordering::Greater
                } else {
                    std::cmp::Ordering::Equal
                }
            });
        }
        for &index in &order {
            keys.push(key(index));
            for c in 0..stride {
                values.push(match sources.get(c).copied().flatten() {
                    Some(ch) => image.planes[ch].get_f32(index),
                    None => 0.0,
                });
            }
        }
    }
    (counts, keys, values)
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
        let (plan, columns) = prepare(inputs, gl_options)?;
        let band = Band::new(0, plan.window.height(), plan.window.width(), gl_options);
        Self::upload_band(ctx, plan, columns, band, options, gl_options)
    }

    fn upload_band(
        ctx: &'a GlContext,
        mut plan: MergePlan<'i>,
        columns: ColumnSpec,
        band: Band,
        options: &MergeOptions,
        gl_options: &GlOptions,
    ) -> Result<Self> {
        plan.sort = options.sort;
        let merges = plan.inputs.len().saturating_sub(1).max(1);
        let descending = merge_directions(merges, gl_options.layout);
        let stride = columns.stride();
        let mut stats = GpuStats {
            renderer: ctx.info().renderer.clone(),
            layout: gl_options.layout,
            method: gl_options.method,
            block_size: gl_options.block_size,
            bands: 1,
            pixels: band.pixels() as u64,
            input_samples: 0,
            output_samples: 0,
            host_tidied_pixels: 0,
            gpu_tidied_pixels: 0,
            input_bytes: BufferBytes::default(),
            merged_bytes: BufferBytes::default(),
            peak_bytes: 0,
            upload_s: 0.0,
            build_s: 0.0,
            merge_s: 0.0,
            readback_s: 0.0,
        };
        let mut images = Vec::new();
        let gpu_sorts = gl_options.sort_on_gpu.unwrap_or(!ctx.info().software);
        for k in 0..plan.inputs.len().max(2) {
            let start = Instant::now();
            let needs_sort = k < plan.inputs.len() && plan.sort.sorts(plan.inputs[k].state);
            let (counts, keys, values) = if k < plan.inputs.len() {
                gather_stream(&plan, k, &band, stride, needs_sort && !gpu_sorts)
            } else {
                (vec![0; band.pixels()], Vec::new(), Vec::new())
            };
            stats.upload_s += start.elapsed().as_secs_f64();
            let start = Instant::now();
            // Input 0 is read by merge 0, input k by merge k - 1: build lists the way it walks.
            let ascending = !descending[k.saturating_sub(1)];
            let image = build_image(
                ctx,
                gl_options.layout,
                gl_options.block_size,
                ascending,
                &counts,
                &keys,
                &values,
                stride,
                needs_sort && gpu_sorts,
            )?;
            // SAFETY: a plain finish on the current context, for honest timing.
            unsafe { ctx.gl.finish() };
            stats.build_s += start.elapsed().as_secs_f64();
            stats.input_samples += keys.len() as u64;
            stats.input_bytes.add(&image.bytes());
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
            descending,
            resident: None,
            stats,
        })
    }

    /// Run the merge kernels on the resident inputs (again); returns the seconds they took.
    /// With the GPU tidying, a flat merge's flagged pixels are tidied and flattened from the last
    /// merge's lists (merged again into a linearised image when any pixel is flagged), and a
    /// tidy deep output is merged last into a linearised image and tidied in place.
    pub fn merge_resident(&mut self) -> Result<f64> {
        self.resident = None;
        let start = Instant::now();
        let merges = self.descending.len();
        let flat = matches!(self.options.output, OutputKind::Flat { .. });
        let gpu_tidies = gpu_tidies(self.ctx, &self.gl_options);
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
            };
            let last = m + 1 == merges;
            let a = merged.as_ref().unwrap_or(&self.images[0]);
            let b = &self.images[m + 1];
            if last && flat {
                let out = merge_flat(self.ctx, a, b, spec, &self.columns)?;
                if gpu_tidies {
                    if let Some(listed) = tidy::flagged_flat_pixels(self.ctx, &out)? {
                        let lists =
                            merge_deep(self.ctx, a, b, Layout::Linearised, spec, &self.columns)?;
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
                let mut out = merge_deep(self.ctx, a, b, layout, spec, &self.columns)?;
                let mut bytes = out.bytes();
                if tidy_here {
                    let tidied = tidy::tidy_deep(self.ctx, out, &self.columns)?;
                    bytes.add(&tidied.image.bytes());
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
                merged_bytes.add(&bytes);
                merged = Some(out);
            }
        }
        if !flat {
            self.resident = merged.map(|image| Resident::Deep(image, deep_marks));
        }
        // SAFETY: a plain finish on the current context, for honest timing.
        unsafe { self.ctx.gl.finish() };
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
        self.stats.readback_s += start.elapsed().as_secs_f64();
        Ok((output, self.stats))
    }

    fn read_band(&mut self, out: &mut Accumulated) -> Result<()> {
        if self.resident.is_none() {
            self.merge_resident()?;
        }
        let start = Instant::now();
        let pixels = self.band.pixels();
        let base = self.band.row0 * self.band.width;
        match self.resident.as_ref().expect("merged") {
            Resident::Flat(flat) => {
                let stride = self.columns.stride();
                let values: Vec<f32> = flat.values.read(pixels * stride);
                let front: Vec<[u32; 4]> = flat.front.read(pixels);
                for (p, &q) in self.band.perm.iter().enumerate() {
                    let i = base + q as usize;
                    out.flat_values[i * stride..(i + 1) * stride]
                        .copy_from_slice(&values[p * stride..(p + 1) * stride]);
                    out.flat_front[i] = front[p];
                }
            }
            Resident::Deep(image, marks) => {
                let built = image.read_back(marks.is_some());
                let marks: Vec<u32> = marks.as_ref().map_or(Vec::new(), |m| m.read(pixels));
                let stride = self.columns.stride();
                let mut inverse = vec![0u32; pixels];
                for (p, &q) in self.band.perm.iter().enumerate() {
                    inverse[q as usize] = p as u32;
                }
                for &p in &inverse {
                    let p = p as usize;
                    let fragments = built.pixel(p);
                    out.deep_counts.push(fragments.len() as u32);
                    // A pixel the GPU tidied brings its new values (rows of `stride`).
                    if marks.get(p).is_some_and(|&m| m != 0) {
                        let first = built.offsets[p] as usize;
                        out.deep_tidied.push((
                            out.deep_samples.len(),
                            built.values[first * stride..(first + fragments.len()) * stride]
                                .to_vec(),
                        ));
                    }
                    out.deep_samples.extend(fragments);
                }
            }
        }
        self.stats.readback_s += start.elapsed().as_secs_f64();
        Ok(())
    }
}

/// The output gathered band by band, row-major over the window.
struct Accumulated {
    flat_values: Vec<f32>,
    flat_front: Vec<[u32; 4]>,
    deep_counts: Vec<u32>,
    deep_samples: Vec<Fragment>,
    /// Pixels the GPU tidied: (position of their first sample in `deep_samples`, `stride`
    /// values per sample).
    deep_tidied: Vec<(usize, Vec<f32>)>,
    stride: usize,
}

impl Accumulated {
    fn new(plan: &MergePlan, options: &MergeOptions, stride: usize) -> Self {
        let pixels = plan.window.area();
        let flat = matches!(options.output, OutputKind::Flat { .. });
        Accumulated {
            flat_values: if flat {
                vec![0.0; pixels * stride]
            } else {
                Vec::new()
            },
            flat_front: if flat {
                vec![[0; 4]; pixels]
            } else {
                Vec::new()
            },
            deep_counts: Vec::new(),
            deep_samples: Vec::new(),
            deep_tidied: Vec::new(),
            stride,
        }
    }

    fn assemble(
        self,
        plan: &MergePlan,
        options: &MergeOptions,
        stats: &mut GpuStats,
    ) -> MergeOutput {
        match options.output {
            OutputKind::Flat { z } => MergeOutput::Flat(self.assemble_flat(plan, z, stats)),
            OutputKind::Deep => MergeOutput::Deep(self.assemble_deep(plan, options.tidy, stats)),
        }
    }

    fn assemble_flat(mut self, plan: &MergePlan, with_z: bool, stats: &mut GpuStats) -> FlatImage {
        let window = plan.window;
        let columns = plan.composite.len();
        let stride = self.stride;
        let ids: Vec<&crate::deep::Channel> = plan
            .deep_channels
            .iter()
            .filter(|c| c.role == ChannelRole::Id)
            .collect();
        let pixels = window.area();
        let mut id_values = vec![vec![0u32; pixels]; ids.len()];
        let mut z_values = vec![0f32; pixels];
        let mut samples = Vec::new();
        let mut pixel = PixelSamples::new(columns);
        for i in 0..pixels {
            let mut front = self.flat_front[i];
            if front[3] & 2 != 0 {
                // Volumes overlap here: tidy and flatten on the host with the reference.
                stats.host_tidied_pixels += 1;
                let (x, y) = window.coords_of(i);
                plan.ordered_samples(x, y, &mut samples);
                pixel.gather(&samples, &plan.inputs, &plan.sources);
                if needs_tidy(&pixel.samples) {
                    tidy_pixel(&mut pixel, &plan.composite);
                }
                let flat = flatten_pixel(&pixel, &plan.composite);
                self.flat_values[i * stride..i * stride + columns].copy_from_slice(&flat.values);
                front = match flat.front.map(|s| pixel.samples[s]) {
                    Some(s) => [s.input, s.index as u32, s.z.to_bits(), 1],
                    None => [0; 4],
                };
            }
            if front[3] & 1 != 0 {
                let image = plan.inputs[front[0] as usize];
                let index = front[1] as usize;
                for (k, c) in ids.iter().enumerate() {
                    id_values[k][i] =
                        image
                            .channel_index(&c.name)
                            .map_or(0, |ch| match &image.planes[ch] {
                                Plane::U32(v) => v[index],
                                other => other.get_f32(index) as u32,
                            });
                }
                z_values[i] = f32::from_bits(front[2]);
            }
        }
        let mut channels: Vec<FlatChannel> = plan
            .composite
            .names
            .iter()
            .enumerate()
            .map(|(k, name)| FlatChannel {
                name: name.clone(),
                values: FlatValues::F32(
                    (0..pixels)
                        .map(|i| self.flat_values[i * stride + k])
                        .collect(),
                ),
            })
            .collect();
        for (c, values) in ids.iter().zip(id_values) {
            channels.push(FlatChannel {
                name: c.name.clone(),
                values: FlatValues::U32(values),
            });
        }
        if with_z {
            channels.push(FlatChannel {
                name: "Z".into(),
                values: FlatValues::F32(z_values),
            });
        }
        channels.sort_by(|a, b| a.name.cmp(&b.name));
        FlatImage {
            display_window: plan.display_window,
            data_window: window,
            channels,
        }
    }

    fn assemble_deep(self, plan: &MergePlan, tidy: bool, stats: &mut GpuStats) -> DeepImage {
        let window = plan.window;
        let stride = self.stride;
        let columns = plan.composite.len();
        let mut counts = Vec::with_capacity(self.deep_counts.len());
        let mut samples: Vec<Sample> = Vec::with_capacity(self.deep_samples.len());
        // Values of samples that tidying made, by position in `samples`.
        let mut tidied: Vec<(usize, Vec<f32>)> = Vec::new();
        let mut start = 0usize;
        let mut pixel = PixelSamples::new(columns);
        let mut ordered = Vec::new();
        let mut gpu_tidied = self.deep_tidied.iter().peekable();
        for (i, &n) in self.deep_counts.iter().enumerate() {
            let list = &self.deep_samples[start..start + n as usize];
            let tidied_here = match gpu_tidied.peek() {
                Some((at, _)) if *at == start && n > 0 => gpu_tidied.next(),
                _ => None,
            };
            start += n as usize;
            let first = samples.len();
            samples.extend(list.iter().map(|f| Sample {
                z: f.z,
                zback: f.zback,
                input: f.input,
                index: f.index as u64,
            }));
            debug_assert!(samples[first..]
                .windows(2)
                .all(|w| !depth_less((w[1].z, w[1].zback), (w[0].z, w[0].zback))));
            if let Some((_, rows)) = tidied_here {
                // Tidied on the GPU: every sample takes its new values.
                for s in 0..n as usize {
                    tidied.push((first + s, rows[s * stride..(s + 1) * stride].to_vec()));
                }
                counts.push(n);
            } else if tidy && needs_tidy(&samples[first..]) {
                stats.host_tidied_pixels += 1;
                samples.truncate(first);
                let (x, y) = window.coords_of(i);
                plan.ordered_samples(x, y, &mut ordered);
                pixel.gather(&ordered, &plan.inputs, &plan.sources);
                tidy_pixel(&mut pixel, &plan.composite);
                for s in 0..pixel.len() {
                    tidied.push((samples.len(), pixel.row(s).to_vec()));
                    samples.push(pixel.samples[s]);
                }
                counts.push(pixel.len() as u32);
            } else {
                counts.push(n);
            }
        }
        let planes = plan
            .deep_channels
            .iter()
            .map(|channel| {
                let mut plane = Plane::with_capacity(channel.sample_type, samples.len());
                let sources = plan.channel_sources(channel);
                let mut next_tidied = tidied.iter().peekable();
                for (position, sample) in samples.iter().enumerate() {
                    let values = match next_tidied.peek() {
                        Some((at, values)) if *at == position => {
                            next_tidied.next();
                            Some(values.as_slice())
                        }
                        _ => None,
                    };
                    plan.push_value(&mut plane, &sources, sample, values);
                }
                plane
            })
            .collect();
        plan.merged_image(&counts, planes, tidy)
    }
}

/// Merge `inputs` with the GL engine: same result as `composite::merge_images` (see the module
/// docs for what the host still does), plus statistics.
pub fn merge_images_gl(
    ctx: &GlContext,
    inputs: &[&DeepImage],
    options: &MergeOptions,
    gl_options: &GlOptions,
) -> Result<(MergeOutput, GpuStats)> {
    let (mut plan, columns) = prepare(inputs, gl_options)?;
    plan.sort = options.sort;
    let stride = columns.stride();
    let mut limit = ctx.info().max_ssbo_bytes;
    if gl_options.band_budget_bytes > 0 {
        limit = limit.min(gl_options.band_budget_bytes);
    }
    // A tidy deep output built on the GPU may hold up to twice the merged samples.
    let growth =
        if options.tidy && options.output == OutputKind::Deep && gpu_tidies(ctx, gl_options) {
            2
        } else {
            1
        };
    let bands = plan_bands(&plan, gl_options, limit, stride, growth)?;
    let mut out = Accumulated::new(&plan, options, stride);
    let mut total: Option<GpuStats> = None;
    let band_count = bands.len();
    for band in bands {
        // Each band re-plans cheaply (the plan is a few small vectors) and owns its merger.
        let band_plan = MergePlan::new(inputs)?;
        let mut merger =
            GpuMerger::upload_band(ctx, band_plan, columns.clone(), band, options, gl_options)?;
        merger.read_band(&mut out)?;
        let stats = merger.stats;
        total = Some(match total {
            None => stats,
            Some(mut t) => {
                t.pixels += stats.pixels;
                t.input_samples += stats.input_samples;
                t.output_samples += stats.output_samples;
                t.gpu_tidied_pixels += stats.gpu_tidied_pixels;
                t.host_tidied_pixels += stats.host_tidied_pixels;
                t.input_bytes.add(&stats.input_bytes);
                t.merged_bytes.add(&stats.merged_bytes);
                t.peak_bytes = t.peak_bytes.max(stats.peak_bytes);
                t.upload_s += stats.upload_s;
                t.build_s += stats.build_s;
                t.merge_s += stats.merge_s;
                t.readback_s += stats.readback_s;
                t
            }
        });
    }
    let mut stats = total.expect("at least one band");
    stats.bands = band_count;
    let start = Instant::now();
    let output = out.assemble(&plan, options, &mut stats);
    stats.readback_s += start.elapsed().as_secs_f64();
    Ok((output, stats))
}
