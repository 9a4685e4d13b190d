//! Table 5: N inputs (2, 4 and 8 by default, [`BenchConfig::kway_inputs`]) merged to a flat
//! composite in one pass per pixel (`MergeStrategy::KWay`: a heap over the inputs' runs on the
//! CPU, `merge_kway.comp` on the GL engine) against the pairwise chain ((0 + 1) + 2 ...,
//! `MergeStrategy::Chain`), the paper's future work measured beside what it proposes today.
//!
//! Both give the same output bits (tests/gpu_merge.rs); only the time differs. Timing as in
//! Tables 1-3: the CPU engine on host memory; the GL engine with its inputs uploaded and built
//! once, untimed, each timed run a `GpuMerger::merge_resident` stopped after glFinish (for the
//! chain, all N - 1 merges with the intermediates resident; for k-way, one dispatch over the
//! inputs stacked into one image). GL columns: every layout, the chain stepwise (S) and with
//! register blocks (RBM), and k-way (which reads stepwise whatever the method).

use std::time::{Duration, Instant};

use super::{median, ms, progress, BenchConfig, Cell, GlSetup, Table, TableRow, Unit};
use crate::composite::{merge_images, MergeOptions, MergeStrategy, OutputKind};
use crate::deep::DeepImage;
use crate::error::{Error, Result};
use crate::gpu::{GlContext, GlOptions, GpuMerger, Layout, MergeMethod};
use crate::scene;

/// The GL configurations of the table, in column order: per layout, chain S, chain RBM, k-way.
fn gl_configurations() -> Vec<(Layout, MergeMethod, MergeStrategy)> {
    Layout::ALL
        .into_iter()
        .flat_map(|layout| {
            [
                (layout, MergeMethod::Stepwise, MergeStrategy::Chain),
                (layout, MergeMethod::RegisterBlock, MergeStrategy::Chain),
                (layout, MergeMethod::Stepwise, MergeStrategy::KWay),
            ]
        })
        .collect()
}

/// Column label of one GL configuration, e.g. `BIA RBM chain`, `BIA k-way`.
fn gl_label(layout: Layout, method: MergeMethod, strategy: MergeStrategy) -> String {
    match strategy {
        MergeStrategy::Chain => format!("{} {} chain", layout.name(), method.name()),
        MergeStrategy::KWay => format!("{} k-way", layout.name()),
    }
}

fn flat(strategy: MergeStrategy) -> MergeOptions {
    MergeOptions {
        output: OutputKind::Flat { z: false },
        strategy,
        ..MergeOptions::default()
    }
}

/// One warm-up run of each strategy, then `repeats` timed runs of each, alternating chain and
/// k-way (and which goes first) so that both see the same load (this machine's noise moves absolute times by tens of
/// percent within a minute); returns the medians (chain, k-way).
fn time_cpu(inputs: &[&DeepImage], repeats: usize) -> (Result<Duration>, Result<Duration>) {
    let mut times = [Vec::new(), Vec::new()];
    for run in 0..=repeats {
        // Which goes first alternates too: the second of a pair measured ~10% slower here even
        // where both ran the same code (two inputs), an order bias that this cancels.
        let order = if run % 2 == 0 { [0, 1] } else { [1, 0] };
        for k in order {
            let strategy = [MergeStrategy::Chain, MergeStrategy::KWay][k];
            let start = Instant::now();
            let out = match merge_images(inputs, &flat(strategy)) {
                Ok(out) => out,
                Err(e) => {
                    let text = e.to_string();
                    return (Err(e), Err(Error::Usage(text)));
                }
            };
            let time = start.elapsed();
            drop(out);
            if run > 0 {
                times[k].push(time);
            }
        }
    }
    let [chain, kway] = times;
    (Ok(median(chain)), Ok(median(kway)))
}

/// Upload and build untimed, one warm-up merge, then `repeats` timed resident merges.
fn time_gl(
    ctx: &GlContext,
    inputs: &[&DeepImage],
    gl: &GlOptions,
    strategy: MergeStrategy,
    repeats: usize,
) -> Result<Duration> {
    let mut merger = GpuMerger::upload(ctx, inputs, &flat(strategy), gl)?;
    merger.merge_resident()?;
    let times = (0..repeats)
        .map(|_| merger.merge_resident().map(Duration::from_secs_f64))
        .collect::<Result<Vec<_>>>()?;
    Ok(median(times))
}

fn cell(time: Result<Duration>) -> Cell {
    match time {
        Ok(t) => Cell::Value(ms(t)),
        Err(e) => Cell::Text(format!("failed: {e}")),
    }
}

/// `a / b` of two timed cells, as text (`-` when either has no value).
fn speedup(a: &Cell, b: &Cell) -> Cell {
    match (a, b) {
        (Cell::Value(a), Cell::Value(b)) if *b > 0.0 => Cell::Text(format!("{:.2}x", a / b)),
        _ => Cell::Text("-".into()),
    }
}

/// The fastest of some timed cells.
fn fastest<'c>(cells: impl Iterator<Item = &'c Cell>) -> Cell {
    cells
        .filter_map(|c| match c {
            Cell::Value(v) => Some(*v),
            Cell::Text(_) => None,
        })
        .reduce(f64::min)
        .map_or(Cell::Text("-".into()), Cell::Value)
}

/// Table 5 for every scene of `config` and every input count of
/// [`BenchConfig::kway_inputs`]; GL columns say why they are empty without a context.
pub fn kway_table(config: &BenchConfig, gl: &GlSetup) -> Result<Table> {
    let configurations = gl_configurations();
    let mut columns = vec!["cpu chain".to_string(), "cpu k-way".to_string()];
    if gl.is_some() {
        columns.extend(configurations.iter().map(|&(l, m, s)| gl_label(l, m, s)));
    }
    columns.push("cpu chain / k-way".into());
    if gl.is_some() {
        columns.push("GL best chain / best k-way".into());
    }
    let most = config.kway_inputs.iter().copied().max().unwrap_or(0);
    let mut rows = Vec::new();
    for name in &config.scenes {
        progress(
            config,
            &format!("generating {name} with {most} inputs for the k-way table"),
        );
        let images = scene::generate_inputs(name, config.width, config.height, config.seed, most)?;
        for &n in &config.kway_inputs {
            let inputs: Vec<&DeepImage> = images.iter().take(n).collect();
            progress(config, &format!("{name}: k-way table, {n} inputs"));
            let (chain, kway) = time_cpu(&inputs, config.repeats);
            let (cpu_chain, cpu_kway) = (cell(chain), cell(kway));
            let mut cells = vec![cpu_chain.clone(), cpu_kway.clone()];
            let mut gl_cells = Vec::new();
            match gl {
                None => {}
                Some(Err(_)) => {
                    gl_cells =
                        vec![Cell::Text("no GL context (see header)".into()); configurations.len()]
                }
                Some(Ok(ctx)) => {
                    for &(layout, method, strategy) in &configurations {
                        let options = GlOptions {
                            layout,
                            method,
                            block_size: config.block_size,
                            ..GlOptions::default()
                        };
                        gl_cells.push(cell(time_gl(
                            ctx,
                            &inputs,
                            &options,
                            strategy,
                            config.repeats,
                        )));
                    }
                }
            }
            cells.extend(gl_cells.iter().cloned());
            cells.push(speedup(&cpu_chain, &cpu_kway));
            if gl.is_some() {
                let of = |strategy| {
                    fastest(
                        gl_cells
                            .iter()
                            .zip(&configurations)
                            .filter(|(_, c)| c.2 == strategy)
                            .map(|(cell, _)| cell),
                    )
                };
                cells.push(speedup(&of(MergeStrategy::Chain), &of(MergeStrategy::KWay)));
            }
            rows.push(TableRow {
                label: format!("{name}, {n} inputs"),
                cells,
            });
        }
    }
    Ok(Table {
        title: "Table 5: merge N deep images in one pass (k-way) or by a pairwise chain, then composite"
            .into(),
        unit: Unit::Millis,
        columns,
        row_header: "scene, inputs".into(),
        rows,
        notes: vec![
            "cells: median ms (worst cell of the row / this cell); chain = ((0+1)+2)+..., k-way = all inputs in one pass per pixel; same output bits".into(),
            "cpu: composite::merge_images, heap over the inputs' runs (k-way) or one stable merge per input (chain)".into(),
            "GL: merge kernels only, inputs resident (upload and build untimed), clock stopped after glFinish; chain: its N-1 merges, intermediates resident; k-way: one merge_kway.comp dispatch, stepwise reads".into(),
            "last columns: time of the chain / time of k-way (above 1: k-way is faster); GL: fastest chain over layouts and methods against fastest k-way".into(),
        ],
    })
}
