//! `deepmerge bench --tidy-gate`: what the GPU tidy stages cost a flat merge whose pixels need no
//! tidying (issue 4). With the tidy on the GPU, every flat merge runs a mark + scan pass that
//! lists the pixels where volumes overlap and reads their count back, even when it finds none;
//! with the tidy on the host there is no such pass. This times both on the same resident inputs.
//!
//! Three mergers per row (tidy on the GPU, on the host, and on the host again as the A/A noise
//! floor) run interleaved, so a change of load on the shared machine hits all three, and each
//! reports its minimum: the gate's cost is a small constant, which minima show and medians blur.

use std::time::Instant;

use super::{
    describe_host, describe_inputs, files_label, generate_scene, inputs_table, progress,
    BenchConfig, BenchReport,
};
use super::{Cell, Table, TableRow, Unit};
use crate::composite::{MergeOptions, OutputKind};
use crate::deep::DeepImage;
use crate::error::{Error, Result};
use crate::exr::{read_deep, ReadOptions};
use crate::gpu::{GlContext, GlOptions, GpuMerger};

/// Time the tidy gate on the config's scenes (two inputs each) and, when given, on the merge of
/// its end-to-end files. Needs a GL context; ignores the peer and the raster-tile column.
pub fn run_tidy_gate(config: &BenchConfig) -> Result<BenchReport> {
    if !config.gl {
        return Err(Error::Usage(
            "--tidy-gate times the GL engine; it cannot run with --no-gl".into(),
        ));
    }
    if (config.scenes.is_empty() && config.e2e_inputs.is_empty()) || config.repeats == 0 {
        return Err(Error::Usage(
            "--tidy-gate needs a scene or input files, and one repeat".into(),
        ));
    }
    let ctx = GlContext::new()?;
    let progress = |what: &str| progress(config, what);
    let info = ctx.info();
    let mut header = vec![
        "deepmerge bench --tidy-gate: what the GPU tidy stages cost flat merges that need no tidying".to_string(),
        format!("host: {}", describe_host()),
        format!(
            "gl: GL_RENDERER {} ({}, {}); BIA RBM block {}, flat output, inputs uploaded and built untimed",
            info.renderer, info.vendor, info.version, config.block_size
        ),
        format!(
            "scenes: {}x{} pixels, seed {}, 2 inputs; minimum of {} interleaved runs after 1 warm-up",
            config.width, config.height, config.seed, config.repeats
        ),
    ];

    let mut rows = Vec::new();
    let mut input_rows = Vec::new();
    for name in &config.scenes {
        let start = Instant::now();
        let pair = generate_scene(name, config, 2)?;
        input_rows.push(describe_inputs(name, &pair, start.elapsed()));
        progress(&format!("{name}: tidy gate"));
        let inputs: Vec<&DeepImage> = pair.iter().collect();
        rows.push(gate_row(&ctx, name, &inputs, config));
    }
    if !config.e2e_inputs.is_empty() {
        let images = config
            .e2e_inputs
            .iter()
            .map(|path| read_deep(path, &ReadOptions::default()))
            .collect::<Result<Vec<_>>>()?;
        let label = files_label(&config.e2e_inputs);
        let samples: Vec<String> = images
            .iter()
            .map(|i| i.sample_count().to_string())
            .collect();
        header.push(format!("files: {label}, {} samples", samples.join(" + ")));
        progress(&format!("{label}: tidy gate"));
        let inputs: Vec<&DeepImage> = images.iter().collect();
        rows.push(gate_row(&ctx, &label, &inputs, config));
    }

    let inputs = inputs_table(config, input_rows, "generated in");
    let gate = Table {
        title: "Tidy gate: flat merge with the tidy stages on the GPU against on the host".into(),
        unit: Unit::Millis,
        columns: [
            "tidy on GPU",
            "tidy on host",
            "host again (A/A)",
            "GPU / host",
            "host again / host",
            "pixels tidied",
        ]
        .map(String::from)
        .to_vec(),
        row_header: "inputs".into(),
        rows,
        notes: vec![
            format!(
                "cells: minimum ms of {} runs of GpuMerger::merge_resident (worst cell of the row / this cell), clock stopped after glFinish",
                config.repeats
            ),
            "tidy on GPU: GlOptions::tidy_on_gpu forced on, so the merge lists the flagged pixels (mark + scan) and reads their count back; tidy on host: no extra pass".into(),
            "the gate costs what GPU / host exceeds the A/A spread (host again / host) by; within that spread it is noise".into(),
            "pixels tidied: by the GPU run; 0 where the inputs hold only points (the scenes), the case the gate is for; where it is not 0 the GPU column also tidies them, while the host tidies after the clock stops".into(),
        ],
    };
    Ok(BenchReport {
        header,
        inputs,
        tables: vec![gate],
        end_to_end: None,
    })
}

/// One row of the gate table; a merge that fails (e.g. inputs too large for one storage
/// buffer) fills the row with the reason instead of ending the run.
fn gate_row(ctx: &GlContext, label: &str, inputs: &[&DeepImage], config: &BenchConfig) -> TableRow {
    let cells = match gate_times(ctx, inputs, config) {
        Ok(([gpu, host, again], tidied)) => vec![
            Cell::Value(gpu * 1e3),
            Cell::Value(host * 1e3),
            Cell::Value(again * 1e3),
            Cell::Text(format!("{:.3}", gpu / host)),
            Cell::Text(format!("{:.3}", again / host)),
            Cell::Text(tidied.to_string()),
        ],
        Err(e) => vec![Cell::Text(format!("failed: {e}")); 6],
    };
    TableRow {
        label: label.to_string(),
        cells,
    }
}

/// Minimum merge seconds with the tidy on the GPU, on the host and on the host again, runs
/// interleaved; and the pixels the GPU run tidied.
fn gate_times(
    ctx: &GlContext,
    inputs: &[&DeepImage],
    config: &BenchConfig,
) -> Result<([f64; 3], u64)> {
    let mut mergers = [true, false, false]
        .into_iter()
        .map(|on_gpu| warm_merger(ctx, inputs, config.block_size, on_gpu))
        .collect::<Result<Vec<_>>>()?;
    let mut best = [f64::INFINITY; 3];
    for _ in 0..config.repeats {
        for (best, merger) in best.iter_mut().zip(mergers.iter_mut()) {
            *best = best.min(merger.merge_resident()?);
        }
    }
    let (_, stats) = mergers.swap_remove(0).finish()?;
    Ok((best, stats.gpu_tidied_pixels + stats.host_tidied_pixels))
}

/// A merger with the inputs resident and one untimed merge done (it compiles the programs).
fn warm_merger<'a, 'i>(
    ctx: &'a GlContext,
    inputs: &[&'i DeepImage],
    block_size: u32,
    tidy_on_gpu: bool,
) -> Result<GpuMerger<'a, 'i>> {
    let options = MergeOptions {
        output: OutputKind::Flat { z: false },
        ..MergeOptions::default()
    };
    let gl = GlOptions {
        block_size,
        tidy_on_gpu: Some(tidy_on_gpu),
        ..GlOptions::default()
    };
    let mut merger = GpuMerger::upload(ctx, inputs, &options, &gl)?;
    merger.merge_resident()?;
    Ok(merger)
}
