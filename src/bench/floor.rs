//! The bandwidth floor (docs/architecture.md, "Performance model"): merging is memory-bound, so no
//! engine can beat (bytes read + bytes written) / copy bandwidth, with the bandwidth measured on
//! the same device in the same run. Also the memory model of the GPU layouts for Table 4.
//!
//! Traffic model, the same for every engine so the floor is one number per cell: each input is
//! read once (its samples, `bytes_per_sample` each, plus a 4-byte count or offset per pixel); a
//! flat result writes 16 bytes per pixel (RGBA as f32); a deep result writes its samples plus a
//! 4-byte offset per pixel. A pairwise merge of four adds up its three merges.

use std::time::{Duration, Instant};

use rayon::prelude::*;

use crate::deep::DeepImage;
use crate::error::Result;
use crate::vocab::Layout;

/// Bytes written per pixel by a flat composite (RGBA as f32).
pub const FLAT_BYTES_PER_PIXEL: u64 = 16;
/// Bytes of a per-pixel count, offset or list head on the GPU.
pub const INDEX_BYTES: u64 = 4;

/// A way to measure copy bandwidth on some device: the floor's denominator.
pub trait BandwidthProbe {
    /// Label of the floor column, e.g. `floor (cpu memcpy)`.
    fn name(&self) -> String;
    /// Bytes read plus bytes written per second by a plain copy.
    fn copy_bandwidth(&mut self) -> Result<f64>;
    /// Anything else the last measurement found worth a header line (e.g. a second copy path).
    fn details(&self) -> Option<String> {
        None
    }
}

/// Host memory copy bandwidth: a parallel `copy_from_slice` of a buffer far larger than the
/// caches, over as many threads as the CPU engine uses (rayon's pool); best of a few runs.
pub struct CpuMemcpyProbe {
    /// Bytes copied per run (each direction).
    pub bytes: usize,
    /// Runs; the fastest counts.
    pub runs: usize,
}

impl Default for CpuMemcpyProbe {
    fn default() -> Self {
        CpuMemcpyProbe {
            bytes: 256 << 20,
            runs: 5,
        }
    }
}

impl BandwidthProbe for CpuMemcpyProbe {
    fn name(&self) -> String {
        "floor (cpu memcpy)".into()
    }

    fn copy_bandwidth(&mut self) -> Result<f64> {
        let words = self.bytes / 8;
        // Distinct non-zero contents, so no page is the shared zero page when read.
        let source: Vec<u64> = (0..words as u64).into_par_iter().collect();
        let mut target: Vec<u64> = vec![1; words];
        let chunk = (words / rayon::current_num_threads().max(1) / 4).max(1 << 16);
        let mut best = Duration::MAX;
        for _ in 0..self.runs.max(1) {
            let start = Instant::now();
            target
                .par_chunks_mut(chunk)
                .zip(source.par_chunks(chunk))
                .for_each(|(t, s)| t.copy_from_slice(s));
            best = best.min(start.elapsed());
        }
        std::hint::black_box(&target);
        Ok(2.0 * (words * 8) as f64 / best.as_secs_f64().max(1e-9))
    }
}

/// Bytes one merge reads from its inputs.
pub fn bytes_read(inputs: &[&DeepImage]) -> u64 {
    inputs
        .iter()
        .map(|i| {
            i.sample_count() as u64 * bytes_per_sample(i) + i.pixel_count() as u64 * INDEX_BYTES
        })
        .sum()
}

/// Bytes of one sample across all channels.
pub fn bytes_per_sample(image: &DeepImage) -> u64 {
    image
        .channels
        .iter()
        .map(|c| c.sample_type.size() as u64)
        .sum()
}

/// Samples per pixel of the merge of `inputs` (they share one window in the scenes; for other
/// windows this counts the union's pixels once).
fn merged_samples(inputs: &[&DeepImage]) -> u64 {
    inputs.iter().map(|i| i.sample_count() as u64).sum()
}

/// Bytes moved by each of the bench's operations on `pair` (two inputs) and `quad` (four).
pub fn traffic_bytes(pair: &[DeepImage], quad: &[DeepImage]) -> [u64; 3] {
    let p: Vec<&DeepImage> = pair.iter().collect();
    let pixels = p[0].pixel_count() as u64;
    let bps = bytes_per_sample(p[0]);
    let flat_out = pixels * FLAT_BYTES_PER_PIXEL;
    let deep_out = |inputs: &[&DeepImage]| merged_samples(inputs) * bps + pixels * INDEX_BYTES;
    let composite = bytes_read(&p) + flat_out;
    let save_deep = bytes_read(&p) + deep_out(&p);
    let q: Vec<&DeepImage> = quad.iter().collect();
    // (0 + 1) and (2 + 3) are read and written deep, then read again by the last merge.
    let pairwise = bytes_read(&q) + 2 * (deep_out(&q[0..2]) + deep_out(&q[2..4])) + flat_out;
    [composite, save_deep, pairwise]
}

/// Predicted GPU bytes of `image` in `layout`, from the layout's definition (docs/architecture.md,
/// "GPU layouts"): 4-byte indices and the image's own bytes per sample. IA and BIA store no
/// padding, so they differ from LA only by the per-group minimum counts. A prediction, not a
/// measurement: the GL engine reports its real buffer sizes through
/// [`super::BenchColumn::memory_bytes`].
pub fn layout_model_bytes(image: &DeepImage, layout: Layout) -> u64 {
    layout.model_bytes(
        image.pixel_count() as u64,
        image.sample_count() as u64,
        bytes_per_sample(image),
    )
}
