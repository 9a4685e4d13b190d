//! What a GL merge cost: buffer bytes per layout (the paper's Table 4) and time per phase.

use std::fmt;
use std::ops::AddAssign;

use crate::vocab::{Layout, MergeMethod};

/// Bytes of one image's buffers, or a sum over images.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BufferBytes {
    /// Fragment keys (Z, ZBack, source reference), 16 bytes per slot.
    pub keys: u64,
    /// Composited values, 4 bytes per column per slot.
    pub values: u64,
    /// Per-pixel offsets (every layout keeps them; LL only for counting merged outputs).
    pub offsets: u64,
    /// IA/BIA per-group min counts, or LL heads.
    pub min_counts_or_heads: u64,
    /// LL next pointers.
    pub next: u64,
}

impl BufferBytes {
    /// All of them.
    pub fn total(&self) -> u64 {
        self.keys + self.values + self.offsets + self.min_counts_or_heads + self.next
    }
}

impl AddAssign for BufferBytes {
    /// Add another image's bytes.
    fn add_assign(&mut self, other: BufferBytes) {
        self.keys += other.keys;
        self.values += other.values;
        self.offsets += other.offsets;
        self.min_counts_or_heads += other.min_counts_or_heads;
        self.next += other.next;
    }
}

impl fmt::Display for BufferBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        write!(
            f,
            "{:.2} MiB (keys {:.2}, values {:.2}, offsets {:.2}, min counts/heads {:.2}, next {:.2})",
            mib(self.total()),
            mib(self.keys),
            mib(self.values),
            mib(self.offsets),
            mib(self.min_counts_or_heads),
            mib(self.next)
        )
    }
}

/// Statistics of one `merge_images_gl` call.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuStats {
    /// GL_RENDERER.
    pub renderer: String,
    /// Layout of every image.
    pub layout: Layout,
    /// Merge method.
    pub method: MergeMethod,
    /// Block size.
    pub block_size: u32,
    /// Whether the inputs merged in one k-way pass (`merge_kway.comp`, stepwise reads whatever
    /// [`Self::method`] says) rather than by a pairwise chain.
    pub kway: bool,
    /// Row bands the window was cut into.
    pub bands: usize,
    /// Times a band did not fit the GPU (out of memory, or over the storage-block limit) and
    /// the rest of the window was cut into bands of half the budget.
    pub band_retries: usize,
    /// Bands merged on the host by the CPU engine because a pixel's lists may be longer than a
    /// software rasteriser's loops run ([`super::loop_cap`]).
    pub host_bands: usize,
    /// Pixels of the output window.
    pub pixels: u64,
    /// Samples over all inputs.
    pub input_samples: u64,
    /// Samples of the last merge's output (= input samples).
    pub output_samples: u64,
    /// Pixels the host tidied (and flattened) because volumes overlap there: all of them on a
    /// software rasteriser (`GlOptions::tidies_on_gpu`), else only those too long for one pass of
    /// the GPU walk.
    pub host_tidied_pixels: u64,
    /// Pixels tidied (and flattened) on the GPU by `tidy.comp`.
    pub gpu_tidied_pixels: u64,
    /// Bytes of the inputs' built images, summed over bands.
    pub input_bytes: BufferBytes,
    /// Bytes of the merged images (intermediates and a deep output), summed over bands.
    pub merged_bytes: BufferBytes,
    /// Most bytes of images resident at once in any band.
    pub peak_bytes: u64,
    /// Seconds: staging the inputs' decoded planes on the host (copies into GL included).
    pub upload_s: f64,
    /// Bytes staged from the host (planes and per-pixel offsets).
    pub staged_bytes: u64,
    /// Seconds: GPU builds (scan, min counts, scatter).
    pub build_s: f64,
    /// Seconds: GPU merges (counting, scan and merge kernels).
    pub merge_s: f64,
    /// Seconds: reading back and assembling the output on the host.
    pub readback_s: f64,
    /// Seconds of `readback_s` spent assembling the output from what came back: each band put
    /// into window order (a flat band's values, a deep band's unpacked sources), then the flat
    /// image's channels with ids and Z, or the deep image's planes from the inputs. Host work,
    /// in parallel pieces; the rest of `readback_s` is waiting for the GPU and copying out.
    pub assemble_s: f64,
    /// Fences pooled buffers were released with (`gpu::fence`).
    pub release_fences: u64,
    /// Buffer reuses whose release fence had not signalled, so the GPU waited for it
    /// (`glWaitSync`): the synchronisation's cost shows here on a GPU (0 on llvmpipe).
    pub reuses_waited: u64,
    /// How host data reached the GPU and came back (`gpu::mapped`).
    pub transfer: &'static str,
    /// How the storage buffers were allocated (`mapped::BufferStorage::name`).
    pub buffers: &'static str,
    /// Bands whose GPU work was issued before the band before them was read back, so that the
    /// host staged one while the GPU worked on the other.
    pub overlapped_bands: usize,
    /// Host seconds spent waiting for a staging buffer to be free again (its copies done).
    pub staging_wait_s: f64,
    /// Host seconds spent waiting for readbacks (the GPU's work on the band, then the copy).
    pub readback_wait_s: f64,
    /// Mapped staging and readback buffers created (few: they are reused band after band).
    pub mapped_allocations: u64,
    /// Bytes of `staged_bytes` that the reader's threads had copied into mapped memory already
    /// (`DEEPMERGE_GL_READER_STAGING`), which the GPU copied on from there.
    pub reader_staged_bytes: u64,
    /// Bytes of decoded planes read in place by a software rasteriser, not in `staged_bytes`
    /// (`gpu::gather`).
    pub pinned_bytes: u64,
    /// Bands the reader found no free block for (staged by the merging thread), where the
    /// reader stages (`None` elsewhere): a streamed run's count, not a band's.
    pub reader_missed_bands: Option<u64>,
    /// Bytes the host took back from the GPU, summed over bands. A readback of runs through
    /// mapped memory counts the records it copied out, not the room the GPU copied them into.
    pub readback_bytes: u64,
    /// What came back: "composite" (flat output), "image" (a deep image in its layout),
    /// "sources, N word(s) a sample" or "runs, N words a run" (`GlOptions::deep_readback`).
    pub readback_form: &'static str,
    /// Bands whose runs of sources outgrew the room their readback was issued with, read whole
    /// from the GPU when the band finished (waiting for it; `DeepReadback::Runs`).
    pub runs_read_whole_bands: u64,
    /// How the deep output was written (`GlOptions::deep_writes`, or what
    /// `DEEPMERGE_GL_DEEP_WRITES` said); `None` for flat output.
    pub deep_writes: Option<super::resident::DeepWrites>,
}

impl GpuStats {
    /// Empty statistics of a merge with `options` on `renderer` (no bands yet).
    pub fn new(renderer: &str, options: &super::GlOptions) -> Self {
        GpuStats {
            renderer: renderer.to_string(),
            layout: options.layout,
            method: options.method,
            block_size: options.block_size,
            kway: false,
            bands: 0,
            band_retries: 0,
            host_bands: 0,
            pixels: 0,
            input_samples: 0,
            output_samples: 0,
            host_tidied_pixels: 0,
            gpu_tidied_pixels: 0,
            input_bytes: BufferBytes::default(),
            merged_bytes: BufferBytes::default(),
            peak_bytes: 0,
            upload_s: 0.0,
            staged_bytes: 0,
            build_s: 0.0,
            merge_s: 0.0,
            readback_s: 0.0,
            assemble_s: 0.0,
            release_fences: 0,
            reuses_waited: 0,
            transfer: "calls",
            buffers: "mutable",
            overlapped_bands: 0,
            staging_wait_s: 0.0,
            readback_wait_s: 0.0,
            mapped_allocations: 0,
            reader_staged_bytes: 0,
            pinned_bytes: 0,
            reader_missed_bands: None,
            readback_bytes: 0,
            readback_form: "nothing",
            runs_read_whole_bands: 0,
            deep_writes: None,
        }
    }
}

impl AddAssign for GpuStats {
    /// Fold in the statistics of another band of the same merge: counts, bytes and times add
    /// up, the peak is the larger of the two (bands run one after another).
    fn add_assign(&mut self, band: GpuStats) {
        // A band the CPU engine merged (`loop_cap`) made no transfers: the GL bands' words stay.
        let on_gl = band.bands > band.host_bands;
        self.kway |= band.kway;
        self.bands += band.bands;
        self.band_retries += band.band_retries;
        self.host_bands += band.host_bands;
        self.pixels += band.pixels;
        self.input_samples += band.input_samples;
        self.output_samples += band.output_samples;
        self.host_tidied_pixels += band.host_tidied_pixels;
        self.gpu_tidied_pixels += band.gpu_tidied_pixels;
        self.input_bytes += band.input_bytes;
        self.merged_bytes += band.merged_bytes;
        self.peak_bytes = self.peak_bytes.max(band.peak_bytes);
        self.upload_s += band.upload_s;
        self.staged_bytes += band.staged_bytes;
        self.build_s += band.build_s;
        self.merge_s += band.merge_s;
        self.readback_s += band.readback_s;
        self.assemble_s += band.assemble_s;
        self.release_fences += band.release_fences;
        self.reuses_waited += band.reuses_waited;
        if on_gl {
            self.transfer = band.transfer;
            self.buffers = band.buffers;
            self.readback_form = band.readback_form;
        }
        self.overlapped_bands += band.overlapped_bands;
        self.staging_wait_s += band.staging_wait_s;
        self.readback_wait_s += band.readback_wait_s;
        self.mapped_allocations += band.mapped_allocations;
        self.reader_staged_bytes += band.reader_staged_bytes;
        self.pinned_bytes += band.pinned_bytes;
        self.reader_missed_bands = band.reader_missed_bands.or(self.reader_missed_bands);
        self.readback_bytes += band.readback_bytes;
        self.runs_read_whole_bands += band.runs_read_whole_bands;
        self.deep_writes = band.deep_writes.or(self.deep_writes);
    }
}

impl fmt::Display for GpuStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "renderer:       {}", self.renderer)?;
        writeln!(
            f,
            "merge:          {} {} block {} in {} band(s){}{}{}",
            self.layout.name(),
            if self.kway {
                "k-way (stepwise)"
            } else {
                self.method.name()
            },
            self.block_size,
            self.bands,
            if self.band_retries > 0 {
                format!(" ({} retries with smaller bands)", self.band_retries)
            } else {
                String::new()
            },
            if self.host_bands > 0 {
                format!(
                    " ({} merged on the host: a pixel longer than the software rasteriser's loops run)",
                    self.host_bands
                )
            } else {
                String::new()
            },
            match self.deep_writes {
                Some(writes) => format!(", deep output written {}", writes.name()),
                None => String::new(),
            }
        )?;
        writeln!(
            f,
            "pixels:         {} ({} input samples; tidied: {} on the GPU, {} on the host)",
            self.pixels, self.input_samples, self.gpu_tidied_pixels, self.host_tidied_pixels
        )?;
        writeln!(f, "input images:   {}", self.input_bytes)?;
        writeln!(f, "merged images:  {}", self.merged_bytes)?;
        writeln!(
            f,
            "peak resident:  {:.2} MiB",
            self.peak_bytes as f64 / (1 << 20) as f64
        )?;
        writeln!(
            f,
            "time:           upload {:.3}s, build {:.3}s, merge {:.3}s, readback {:.3}s (assembling the output {:.3}s)",
            self.upload_s, self.build_s, self.merge_s, self.readback_s, self.assemble_s
        )?;
        writeln!(
            f,
            "read back:      {:.1} MiB ({}{})",
            self.readback_bytes as f64 / (1 << 20) as f64,
            self.readback_form,
            match self.runs_read_whole_bands {
                0 => String::new(),
                n => format!("; {n} band(s) had more runs than room and were read whole"),
            }
        )?;
        writeln!(
            f,
            "host staging:   {:.1} MiB in {:.3} s, {:.2} GB/s (decoded planes and offsets){}{}",
            self.staged_bytes as f64 / (1 << 20) as f64,
            self.upload_s,
            self.staged_bytes as f64 / self.upload_s.max(1e-9) / 1e9,
            if self.pinned_bytes > 0 {
                format!(
                    "; {:.1} MiB of decoded planes read in place, not copied",
                    self.pinned_bytes as f64 / (1 << 20) as f64
                )
            } else {
                String::new()
            },
            match self.reader_missed_bands {
                Some(missed) => format!(
                    "; {:.1} MiB of it staged by the reader's threads ({missed} band(s) found \
                     no free block)",
                    self.reader_staged_bytes as f64 / (1 << 20) as f64
                ),
                None => String::new(),
            }
        )?;
        writeln!(
            f,
            "host waited:    {:.3} s for readbacks, {:.3} s for staging buffers ({} transfers, {} mapped buffers made; {} of {} bands issued before the band before was read back)",
            self.readback_wait_s,
            self.staging_wait_s,
            self.transfer,
            self.mapped_allocations,
            self.overlapped_bands,
            self.bands
        )?;
        writeln!(
            f,
            "buffer reuse:   {} release fences, {} reuses waited on the GPU ({} storage buffers)",
            self.release_fences, self.reuses_waited, self.buffers
        )
    }
}
