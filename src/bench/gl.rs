//! The GL engine in the bench: one [`GlColumn`] column per layout x method in the paper's order
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
use crate::gpu::{
    GlContext, GlOptions, GpuMerger, GpuProfile, Layout, MergeMethod, PixelOrder, RbmBlocks,
};

use super::column::{BenchCase, BenchColumn, Operation};
use super::floor::BandwidthProbe;
use crate::gpu::resident::DeepWrites;

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

/// The GL engines: the paper's eight columns with `block_size` (RBM with indexed blocks, as in
/// the paper and in every earlier table, whatever the merge default is), then (when `shifted`) the four
/// RBM columns with constant-index shifting blocks ([`RbmBlocks::Shifted`]), then LA, IA and BIA
/// stepwise for each of `deep_writes` (where it changes anything), then (when `tiled`) BIA RBM
/// in the raster-tile pixel order; each profiling its stages when `stages`.
pub fn gl_engines(ctx: &Rc<GlContext>, config: &super::BenchConfig) -> Vec<GlColumn> {
    let block_size = config.block_size;
    let mut options: Vec<GlOptions> = paper_configurations()
        .into_iter()
        .map(|(layout, method)| GlOptions {
            layout,
            method,
            block_size,
            rbm_blocks: RbmBlocks::Indexed,
            ..GlOptions::default()
        })
        .collect();
    if config.rbm_shifted {
        options.extend(Layout::ALL.map(|layout| GlOptions {
            layout,
            method: MergeMethod::RegisterBlock,
            block_size,
            rbm_blocks: RbmBlocks::Shifted,
            ..GlOptions::default()
        }));
    }
    for &deep_writes in &config.deep_writes {
        for layout in [
            Layout::Linearised,
            Layout::Interleaved,
            Layout::BlockedInterleaved,
        ] {
            // A way that changes nothing in this layout (relayout of IA) is the paper's column.
            if deep_writes.effective(layout) == DeepWrites::Direct {
                continue;
            }
            options.push(GlOptions {
                layout,
                method: MergeMethod::Stepwise,
                block_size,
                deep_writes,
                ..GlOptions::default()
            });
        }
    }
    if config.tiled_order {
        options.push(GlOptions {
            layout: Layout::BlockedInterleaved,
            method: MergeMethod::RegisterBlock,
            block_size,
            pixel_order: PixelOrder::Tiled,
            rbm_blocks: RbmBlocks::Indexed,
            ..GlOptions::default()
        });
    }
    options
        .into_iter()
        .map(|o| GlColumn::new(ctx.clone(), o).with_stage_profile(config.stages))
        .collect()
}

/// One GL configuration as a bench column.
pub struct GlColumn {
    ctx: Rc<GlContext>,
    options: GlOptions,
    /// Bytes of the two inputs' buffers, known once Table 1's merge has run for the case.
    input_bytes: Option<u64>,
    /// Whether to profile one more, untimed, run of each resident merge stage by stage.
    profile: bool,
    /// That run's per-stage GPU times (the last merge of an operation).
    last_profile: std::cell::RefCell<Option<GpuProfile>>,
}

impl GlColumn {
    /// A column for `options` on `ctx`.
    pub fn new(ctx: Rc<GlContext>, options: GlOptions) -> Self {
        GlColumn {
            ctx,
            options,
            input_bytes: None,
            profile: false,
            last_profile: Default::default(),
        }
    }

    /// Also profile one untimed run of every resident merge with timer queries, stage by stage
    /// ([`BenchColumn::take_stage_profile`]).
    pub fn with_stage_profile(mut self, on: bool) -> Self {
        self.profile = on;
        self
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
        if self.profile {
            // Untimed, after the timed runs, so the queries cannot touch the timings.
            ctx.profile_stages(true);
            let run = merger.merge_resident();
            let profile = ctx.take_profile();
            ctx.profile_stages(false);
            run?;
            *self.last_profile.borrow_mut() = Some(profile);
        }
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

impl BenchColumn for GlColumn {
    fn name(&self) -> String {
        let mut base = format!(
            "{} {}",
            self.options.layout.name(),
            self.options.method.name()
        );
        if self.options.method == MergeMethod::RegisterBlock
            && self.options.rbm_blocks == RbmBlocks::Shifted
        {
            base.push_str(" shift");
        }
        if self.options.deep_writes != DeepWrites::Direct {
            base = format!("{base} {}", self.options.deep_writes.name());
        }
        match self.options.pixel_order {
            PixelOrder::RowMajor => base,
            PixelOrder::Tiled => format!("{base} tiles"),
        }
    }

    fn times(&self, operation: Operation) -> bool {
        operation != Operation::Composite || self.options.deep_writes == DeepWrites::Direct
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
                let (merger, times) =
                    self.time_resident(&self.ctx, &inputs, OutputKind::Deep, repeats)?;
                // Table 4 for a column that times no flat merge (deep writes alone).
                if self.input_bytes.is_none() {
                    self.input_bytes = Some(merger.finish()?.1.input_bytes.total());
                }
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
        self.last_profile.take();
    }

    fn take_stage_profile(&mut self) -> Option<GpuProfile> {
        self.last_profile.take()
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
    // The kernel as every stage is timed: timer queries (`gpu::copy_bandwidth`).
    let kernel = crate::gpu::copy_bandwidth(ctx, bytes, repeats)?;
    let gl = &ctx.gl;
    let src = ctx.zeroed(bytes)?;
    let dst = ctx.zeroed(bytes)?;
    ctx.finish();
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
    ctx.finish();
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
