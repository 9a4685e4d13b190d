//! The GL engine in the bench: one [`GlEngine`] column per layout x method in the paper's order
//! (LL S, LL RBM, LA S, LA RBM, IA S, IA RBM, BIA S, BIA RBM), an optional BIA RBM column in the
//! raster-tile pixel order, and the GL copy kernel as a bandwidth floor ([`GlCopyProbe`],
//! measured by [`gl_copy_bandwidth`]).
//!
//! Timing follows the paper: the inputs are uploaded and built in their layout once, untimed
//! (`GpuMerger::upload`), then every timed run is `GpuMerger::merge_resident`, which stops its
//! clock after `glFinish`. Table 4's bytes are the real buffer sizes the engine allocated for the
//! two inputs (`GpuStats::input_bytes`).
//!
//! Workaround for Table 3, (0 + 1) + (2 + 3): `GpuMerger` takes host images only, so the two
//! first merges' deep results come back to the host once (untimed) and are uploaded as the
//! inputs of the last merge. The time reported is the sum of the three merges' kernel times, each
//! on resident data, which is what the paper times; only the untimed round trip differs from a
//! fully resident pipeline.

use std::rc::Rc;
use std::time::Duration;

use glow::HasContext;

use crate::composite::{MergeOptions, MergeOutput, OutputKind};
use crate::deep::DeepImage;
use crate::error::{Error, Result};
use crate::gpu::program::Defines;
use crate::gpu::{GlContext, GlOptions, GpuBuffer, GpuMerger, Layout, MergeMethod, PixelOrder};

use super::engine::{BenchCase, MergeEngine, Operation};
use super::floor::BandwidthProbe;

/// Column labels of the paper's eight GL configurations, in its order.
pub fn gl_column_names() -> Vec<String> {
    paper_configurations()
        .into_iter()
        .map(|(layout, method)| format!("{} {}", layout.name(), method.name()))
        .collect()
}

/// Label of the raster-tile comparison column (BIA RBM with [`PixelOrder::Tiled`]).
pub const TILED_COLUMN: &str = "BIA RBM tiles";

/// (layout, method) for every layout of the paper, stepwise then RBM.
fn paper_configurations() -> Vec<(Layout, MergeMethod)> {
    Layout::ALL
        .into_iter()
        .flat_map(|layout| {
            [MergeMethod::Stepwise, MergeMethod::RegisterBlock].map(|method| (layout, method))
        })
        .collect()
}

/// Open the headless GL context the GL columns share, or say why there is none.
pub fn open_gl_context() -> std::result::Result<Rc<GlContext>, String> {
    GlContext::new().map(Rc::new).map_err(|e| e.to_string())
}

/// The GL engines: the paper's eight columns with `block_size`, then (when `tiled`) BIA RBM in
/// the raster-tile pixel order.
pub fn gl_engines(ctx: &Rc<GlContext>, block_size: u32, tiled: bool) -> Vec<GlEngine> {
    let mut engines: Vec<GlEngine> = paper_configurations()
        .into_iter()
        .map(|(layout, method)| {
            GlEngine::new(
                ctx.clone(),
                GlOptions {
                    layout,
                    method,
                    block_size,
                    pixel_order: PixelOrder::RowMajor,
                    ..GlOptions::default()
                },
            )
        })
        .collect();
    if tiled {
        engines.push(GlEngine::new(
            ctx.clone(),
            GlOptions {
                layout: Layout::BlockedInterleaved,
                method: MergeMethod::RegisterBlock,
                block_size,
                pixel_order: PixelOrder::Tiled,
                ..GlOptions::default()
            },
        ));
    }
    engines
}

/// One GL configuration as a bench column.
pub struct GlEngine {
    ctx: Rc<GlContext>,
    options: GlOptions,
    /// Bytes of the two inputs' buffers, known once Table 1's merge has run for the case.
    input_bytes: Option<u64>,
}

impl GlEngine {
    /// A column for `options` on `ctx`.
    pub fn new(ctx: Rc<GlContext>, options: GlOptions) -> Self {
        GlEngine {
            ctx,
            options,
            input_bytes: None,
        }
    }

    /// Upload `inputs` (untimed), one warm-up merge (compiles the programs), then `repeats`
    /// timed merges on the resident data. Returns the merger for reading the result back.
    fn time_resident<'a, 'i>(
        &self,
        ctx: &'a GlContext,
        inputs: &[&'i DeepImage],
        output: OutputKind,
        repeats: usize,
    ) -> Result<(GpuMerger<'a, 'i>, Vec<Duration>)> {
        let options = MergeOptions {
            output,
            ..MergeOptions::default()
        };
        let mut merger = GpuMerger::upload(ctx, inputs, &options, &self.options)?;
        merger.merge_resident()?;
        let times = (0..repeats)
            .map(|_| merger.merge_resident().map(Duration::from_secs_f64))
            .collect::<Result<Vec<_>>>()?;
        Ok((merger, times))
    }

    /// The deep result of merging `inputs`, and the timed runs of that merge.
    fn deep_merge(
        &self,
        inputs: &[&DeepImage],
        repeats: usize,
    ) -> Result<(DeepImage, Vec<Duration>)> {
        let (merger, times) = self.time_resident(&self.ctx, inputs, OutputKind::Deep, repeats)?;
        match merger.finish()?.0 {
            MergeOutput::Deep(image) => Ok((image, times)),
            MergeOutput::Flat(_) => Err(Error::Usage("deep merge gave a flat image".into())),
        }
    }

    fn time_one(&mut self, operation: Operation, case: &BenchCase) -> Result<Duration> {
        Ok(self.time_operation(operation, case, 1)?[0])
    }
}

impl MergeEngine for GlEngine {
    fn name(&self) -> String {
        let base = format!(
            "{} {}",
            self.options.layout.name(),
            self.options.method.name()
        );
        match self.options.pixel_order {
            PixelOrder::RowMajor => base,
            PixelOrder::Tiled => format!("{base} tiles"),
        }
    }

    fn time_operation(
        &mut self,
        operation: Operation,
        case: &BenchCase,
        repeats: usize,
    ) -> Result<Vec<Duration>> {
        match operation {
            Operation::Composite => {
                let inputs: Vec<&DeepImage> = case.pair.iter().collect();
                let (merger, times) =
                    self.time_resident(&self.ctx, &inputs, OutputKind::Flat { z: false }, repeats)?;
                let (_, stats) = merger.finish()?;
                self.input_bytes = Some(stats.input_bytes.total());
                Ok(times)
            }
            Operation::SaveDeep => {
                let inputs: Vec<&DeepImage> = case.pair.iter().collect();
                let (_, times) =
                    self.time_resident(&self.ctx, &inputs, OutputKind::Deep, repeats)?;
                Ok(times)
            }
            Operation::Pairwise4 => {
                let q: Vec<&DeepImage> = case.quad.iter().collect();
                let (left, left_times) = self.deep_merge(&q[0..2], repeats)?;
                let (right, right_times) = self.deep_merge(&q[2..4], repeats)?;
                let (_, last_times) = self.time_resident(
                    &self.ctx,
                    &[&left, &right],
                    OutputKind::Flat { z: false },
                    repeats,
                )?;
                Ok((0..repeats)
                    .map(|k| left_times[k] + right_times[k] + last_times[k])
                    .collect())
            }
        }
    }

    fn merge_flat(&mut self, case: &BenchCase) -> Result<Duration> {
        self.time_one(Operation::Composite, case)
    }

    fn merge_deep(&mut self, case: &BenchCase) -> Result<Duration> {
        self.time_one(Operation::SaveDeep, case)
    }

    fn merge_pairwise(&mut self, case: &BenchCase) -> Result<Duration> {
        self.time_one(Operation::Pairwise4, case)
    }

    fn memory_bytes(&self, _case: &BenchCase) -> Option<u64> {
        self.input_bytes
    }

    fn release(&mut self) {
        // Buffers are freed when each merger drops; only the per-case figure is reset.
        self.input_bytes = None;
    }
}

/// Time copying `bytes` between two buffers with a compute kernel and with
/// `glCopyBufferSubData`, `repeats` times each; returns (kernel, copy) bytes per second
/// (counting bytes read plus bytes written), the memory-bandwidth floor merges compare to.
///
/// Lives with the bench, not in `gpu`, because nothing but the floor uses it; it borrows the
/// engine's buffers, program cache and dispatch so the copy runs exactly as a merge stage would.
pub fn gl_copy_bandwidth(ctx: &GlContext, bytes: usize, repeats: usize) -> Result<(f64, f64)> {
    let bytes = bytes.max(16) / 16 * 16;
    ctx.check_fits(bytes, "the copy benchmark")?;
    let gl = &ctx.gl;
    let src = GpuBuffer::zeroed(gl, bytes)?;
    let dst = GpuBuffer::zeroed(gl, bytes)?;
    let program = ctx.use_stage("copy.comp", &Defines::default())?;
    let n = bytes / 16;
    ctx.uniform_u32(program, "u_n", n as u32);
    src.bind(0);
    dst.bind(1);
    // Warm-up: the first dispatch compiles the pipeline.
    ctx.dispatch(n, 64)?;
    // SAFETY: a plain synchronisation call on this context.
    unsafe { gl.finish() };
    let start = std::time::Instant::now();
    for _ in 0..repeats {
        ctx.dispatch(n, 64)?;
    }
    unsafe { gl.finish() };
    let kernel = (2 * bytes * repeats) as f64 / start.elapsed().as_secs_f64();
    let start = std::time::Instant::now();
    for _ in 0..repeats {
        // SAFETY: both ranges lie inside the buffers.
        unsafe {
            gl.bind_buffer(glow::COPY_READ_BUFFER, Some(src.buffer));
            gl.bind_buffer(glow::COPY_WRITE_BUFFER, Some(dst.buffer));
            gl.copy_buffer_sub_data(
                glow::COPY_READ_BUFFER,
                glow::COPY_WRITE_BUFFER,
                0,
                0,
                bytes as i32,
            );
        }
    }
    unsafe { gl.finish() };
    let copy = (2 * bytes * repeats) as f64 / start.elapsed().as_secs_f64();
    ctx.check("copy benchmark")?;
    Ok((kernel, copy))
}

/// The GL copy kernel (`glsl/copy.comp`) as a floor: the bandwidth a compute shader reaches
/// copying one buffer to another on the same device the GL columns run on.
pub struct GlCopyProbe {
    ctx: Rc<GlContext>,
    /// Bytes copied per run, clamped to what one storage buffer may hold.
    pub bytes: usize,
    /// Timed copies (the kernel's bandwidth is their total bytes over their total time).
    pub runs: usize,
    /// `glCopyBufferSubData` bandwidth from the last measurement, for the header.
    pub copy_buffer_bandwidth: Option<f64>,
}

impl GlCopyProbe {
    /// A probe on `ctx`.
    pub fn new(ctx: Rc<GlContext>, bytes: usize, runs: usize) -> Self {
        let max = usize::try_from(ctx.info().max_ssbo_bytes).unwrap_or(usize::MAX);
        GlCopyProbe {
            ctx,
            bytes: bytes.min(max),
            runs,
            copy_buffer_bandwidth: None,
        }
    }
}

impl BandwidthProbe for GlCopyProbe {
    fn name(&self) -> String {
        "floor (gl copy)".into()
    }

    fn copy_bandwidth(&mut self) -> Result<f64> {
        let (kernel, copy_buffer) = gl_copy_bandwidth(&self.ctx, self.bytes, self.runs.max(1))?;
        self.copy_buffer_bandwidth = Some(copy_buffer);
        Ok(kernel)
    }

    fn details(&self) -> Option<String> {
        self.copy_buffer_bandwidth.map(|b| {
            format!(
                "gl copy: compute-shader copy of {} MiB; glCopyBufferSubData reaches {:.2} GB/s",
                self.bytes >> 20,
                b / 1e9
            )
        })
    }
}
