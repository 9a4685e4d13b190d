//! `deepmerge bench`: the paper's Tables 1-4 (Archer, Leach and van Schyndel 2018) measured in
//! one run on the procedural scenes of [`crate::scene`], each timing beside the bandwidth floor
//! and a peer measured in the same run (docs/architecture.md, "Performance model").
//!
//! - Table 1: merge two inputs and composite to a flat image.
//! - Table 2: merge two inputs and keep the merged deep image.
//! - Table 3: merge four inputs pairwise, (0 + 1) + (2 + 3), compositing the last merge.
//! - Table 4: memory of the two inputs per engine / layout.
//! - Table 5: N = 2, 4, 8 inputs merged in one pass (k-way) or by a pairwise chain, CPU and GL
//!   ([`kway_table`], `kway.rs`).
//!
//! Columns: every [`BenchColumn`] (the CPU engine; the GL engine, one column per layout x method
//! in the paper's order plus BIA RBM in raster-tile order; `oiiotool` end to end), then one floor
//! per [`BandwidthProbe`] (host memcpy, GL copy kernel). Each cell is the
//! median of `repeats` runs after one warm-up run, in ms and as worst / cell for its row.
//! An optional end-to-end table times whole command lines (read EXR files, merge, write) of
//! `deepmerge` against `oiiotool` on real files, for docs/benchmarks.md.
//!
//! `deepmerge bench` and `cargo bench --bench paper_tables` share one front end: the options
//! [`BenchArgs`] and [`run_front_end`] (`args.rs`). `--tidy-gate` runs [`run_tidy_gate`] instead
//! of the tables.

mod args;
mod column;
mod floor;
mod gl;
mod kway;
mod table;
mod tidy_gate;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;
use std::rc::Rc;
use std::time::{Duration, Instant};

pub use crate::vocab::Layout;
pub use args::{parse_harness_args, render_front_end, run_front_end, BenchArgs};
pub use column::{
    csr_bytes, run_operation, BenchCase, BenchColumn, CaseFiles, CpuColumn, OiiotoolColumn,
    Operation,
};
pub use floor::{
    bytes_per_sample, bytes_read, layout_model_bytes, traffic_bytes, BandwidthProbe, CpuMemcpyProbe,
};
pub use gl::{
    gl_column_names, gl_copy_bandwidth, gl_engines, open_gl_context, GlColumn, GlCopyProbe,
    TILED_COLUMN,
};
pub use kway::kway_table;
pub use table::{significant, Cell, Table, TableRow, Unit};
pub use tidy_gate::run_tidy_gate;

use crate::composite::{merge_images, MergeOptions, MergeOutput, OutputKind};
use crate::deep::DeepImage;
use crate::error::{Error, Result};
use crate::exr::{read_deep, write_deep, write_flat, Codec, FlatType, ReadOptions};
use crate::gpu::GlContext;
use crate::info::{sample_stats, COMPLEXITY_BINS};
use crate::scene;

/// Where the `oiiotool` peer comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerSetting {
    /// The `oiiotool` on PATH, if there is one (else the column says "not installed").
    Detect,
    /// This program.
    Path(PathBuf),
    /// Leave the peer out.
    Off,
}

/// What to measure.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// Scenes (rows), by name.
    pub scenes: Vec<String>,
    /// Scene width in pixels.
    pub width: usize,
    /// Scene height in pixels.
    pub height: usize,
    /// Scene seed.
    pub seed: u64,
    /// Timed runs per cell (the median is reported), after one untimed warm-up run.
    pub repeats: usize,
    /// The `oiiotool` peer.
    pub oiiotool: PeerSetting,
    /// Deep EXR files for the end-to-end table (e.g. Balls, Leaves, Trunks); empty: no table.
    pub e2e_inputs: Vec<PathBuf>,
    /// The `deepmerge` executable for the end-to-end table (the CLI passes
    /// `std::env::current_exe()`); `None` times the same pipeline in-process instead.
    pub deepmerge_exe: Option<PathBuf>,
    /// Folder for scene files and outputs; `None`: a temporary folder, removed afterwards.
    pub work_dir: Option<PathBuf>,
    /// Bytes the memcpy probe copies (each way).
    pub copy_bytes: usize,
    /// Print progress to stderr.
    pub progress: bool,
    /// Time the GL engine (one column per layout x method). Without a usable context the GL
    /// columns stay, saying why they are empty.
    pub gl: bool,
    /// Register block size of the GL engine's RBM merges and BIA layout.
    pub block_size: u32,
    /// Add the BIA RBM column in raster-tile pixel order ([`TILED_COLUMN`]).
    pub tiled_order: bool,
    /// Add one RBM column per layout with constant-index shifting register blocks
    /// ([`crate::gpu::RbmBlocks::Shifted`]; the paper's eight columns index them).
    pub rbm_shifted: bool,
    /// Add LA, IA and BIA stepwise columns with the deep output written each of these ways
    /// (Tables 2 and 3; [`crate::gpu::resident::DeepWrites`]); the paper's columns write directly.
    pub deep_writes: Vec<crate::gpu::resident::DeepWrites>,
    /// Profile one more, untimed, run of every GL cell of Tables 1 and 2 with timer queries and
    /// print the per-stage table ([`stage_table`]).
    pub stages: bool,
    /// Run Table 5 alone (k-way against the chain), not Tables 1-4.
    pub only_kway: bool,
    /// Input counts of Table 5 (k-way against the chain, [`kway_table`]); empty: no Table 5.
    pub kway_inputs: Vec<usize>,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            scenes: scene::SCENE_NAMES.iter().map(|s| s.to_string()).collect(),
            width: 1920,
            height: 1080,
            seed: 1,
            repeats: 5,
            oiiotool: PeerSetting::Detect,
            e2e_inputs: Vec::new(),
            deepmerge_exe: None,
            work_dir: None,
            copy_bytes: 256 << 20,
            progress: true,
            gl: true,
            block_size: 8,
            tiled_order: true,
            rbm_shifted: false,
            deep_writes: Vec::new(),
            stages: false,
            only_kway: false,
            kway_inputs: vec![2, 4, 8],
        }
    }
}

/// The engines of a run, and the columns of engines that could not run (with the reason).
pub struct EngineSet {
    /// Engines to time, one column each.
    pub engines: Vec<Box<dyn BenchColumn>>,
    /// Column label and reason for each absent engine (e.g. `oiiotool e2e`, `not installed`).
    pub absent: Vec<(String, String)>,
    /// Header lines about the engines (versions, renderer).
    pub about: Vec<String>,
}

/// The GL context of a run: `None` when GL is off, else the context or why there is none.
pub type GlSetup = Option<std::result::Result<Rc<GlContext>, String>>;

/// Open the run's GL context when the config asks for GL.
pub fn open_gl(config: &BenchConfig) -> GlSetup {
    config.gl.then(open_gl_context)
}

/// The engines `run` uses: the CPU engine, the GL engine's columns, then `oiiotool` when
/// installed.
pub fn default_engines(config: &BenchConfig, gl: &GlSetup) -> EngineSet {
    let mut set = EngineSet {
        engines: vec![Box::new(CpuColumn)],
        absent: Vec::new(),
        about: vec![format!(
            "cpu: composite::merge_images on host memory, {} rayon threads",
            rayon::current_num_threads()
        )],
    };
    let mut gl_columns = gl_column_names();
    if config.tiled_order {
        gl_columns.push(TILED_COLUMN.to_string());
    }
    match gl {
        None => set.about.push("gl: off (no GL columns)".into()),
        Some(Ok(ctx)) => {
            let info = ctx.info();
            set.about.push(format!(
                "gl: GL_RENDERER {} ({}, {}), block size {}; inputs uploaded and built untimed, \
                 merges timed on resident data after glFinish; a deep output's last merge \
                 writes its keys alone (the engine copies values from the inputs by key on \
                 the host), while the floor counts keys and values",
                info.renderer, info.vendor, info.version, config.block_size
            ));
            for engine in gl_engines(ctx, config) {
                set.engines.push(Box::new(engine));
            }
        }
        Some(Err(why)) => {
            set.about.push(format!("gl: no usable context: {why}"));
            for column in gl_columns {
                set.absent
                    .push((column, "no GL context (see header)".into()));
            }
        }
    }
    let oiiotool = match &config.oiiotool {
        PeerSetting::Off => None,
        PeerSetting::Detect => Some(OiiotoolColumn::detect()),
        PeerSetting::Path(p) => Some(OiiotoolColumn::probe(p)),
    };
    match oiiotool {
        None => {}
        Some(Some((program, version))) => {
            set.about.push(format!(
                "oiiotool: {} {version}, end to end (process start, EXR read, merge, EXR write)",
                program.display()
            ));
            set.engines.push(Box::new(OiiotoolColumn::new(program)));
        }
        Some(None) => {
            set.about.push("oiiotool: not installed".into());
            set.absent
                .push(("oiiotool e2e".into(), "not installed".into()));
        }
    }
    set
}

/// The floors `run` uses: host memcpy, and the GL copy kernel when there is a context.
pub fn default_probes(config: &BenchConfig, gl: &GlSetup) -> Vec<Box<dyn BandwidthProbe>> {
    let mut probes: Vec<Box<dyn BandwidthProbe>> = vec![Box::new(CpuMemcpyProbe {
        bytes: config.copy_bytes,
        runs: 5,
    })];
    if let Some(Ok(ctx)) = gl {
        probes.push(Box::new(GlCopyProbe::new(
            ctx.clone(),
            config.copy_bytes,
            5,
        )));
    }
    probes
}

/// Everything one run measured.
#[derive(Clone, Debug)]
pub struct BenchReport {
    /// Lines that head the output: device, renderer, sizes, bandwidth, peers.
    pub header: Vec<String>,
    /// The scenes' inputs: sample counts and depth-complexity spread.
    pub inputs: Table,
    /// Tables 1-4, and Table 5 (k-way against the chain) when asked for.
    pub tables: Vec<Table>,
    /// Whole command lines on real files, when asked for.
    pub end_to_end: Option<Table>,
}

impl BenchReport {
    /// Plain text, tables aligned.
    pub fn to_text(&self) -> String {
        self.render("", Table::to_text)
    }

    /// Markdown (for docs/benchmarks.md).
    pub fn to_markdown(&self) -> String {
        self.render("- ", Table::to_markdown)
    }

    /// The header lines (each after `bullet`), then every table as `table` renders it.
    fn render(&self, bullet: &str, table: fn(&Table) -> String) -> String {
        let mut out = String::new();
        for line in &self.header {
            let _ = writeln!(out, "{bullet}{line}");
        }
        for t in std::iter::once(&self.inputs)
            .chain(&self.tables)
            .chain(&self.end_to_end)
        {
            out.push('\n');
            out.push_str(&table(t));
        }
        out
    }
}

/// Run the bench with the default engines and floors.
pub fn run(config: &BenchConfig) -> Result<BenchReport> {
    let gl = open_gl(config);
    if config.only_kway {
        return Ok(BenchReport {
            header: vec![
                "deepmerge bench: Table 5 only (k-way against the pairwise chain)".to_string(),
                format!("host: {}", describe_host()),
                match &gl {
                    Some(Ok(ctx)) => {
                        let info = ctx.info();
                        format!(
                            "gl: GL_RENDERER {} ({}, {})",
                            info.renderer, info.vendor, info.version
                        )
                    }
                    Some(Err(why)) => format!("gl: no usable context: {why}"),
                    None => "gl: off".to_string(),
                },
            ],
            inputs: inputs_table(config, Vec::new(), "generated in"),
            tables: vec![kway_table(config, &gl)?],
            end_to_end: None,
        });
    }
    let engines = default_engines(config, &gl);
    let probes = default_probes(config, &gl);
    let mut report = run_with(config, engines, probes)?;
    if !config.kway_inputs.is_empty() {
        report.tables.push(kway_table(config, &gl)?);
    }
    Ok(report)
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

const MIB: f64 = (1u64 << 20) as f64;

/// A temporary or given work folder; a temporary one is removed when this is dropped.
enum WorkDir {
    Temp(tempfile::TempDir),
    Given(PathBuf),
}

impl WorkDir {
    fn path(&self) -> PathBuf {
        match self {
            WorkDir::Temp(t) => t.path().to_path_buf(),
            WorkDir::Given(p) => p.clone(),
        }
    }
}

/// Run the bench with these engines and floors.
pub fn run_with(
    config: &BenchConfig,
    mut set: EngineSet,
    mut probes: Vec<Box<dyn BandwidthProbe>>,
) -> Result<BenchReport> {
    if config.scenes.is_empty() || config.repeats == 0 {
        return Err(Error::Usage(
            "bench needs at least one scene and one repeat".into(),
        ));
    }
    let work = match &config.work_dir {
        Some(p) => {
            std::fs::create_dir_all(p).map_err(|e| Error::create_folder(p, e))?;
            WorkDir::Given(p.clone())
        }
        None => WorkDir::Temp(
            tempfile::Builder::new()
                .prefix("deepmerge-bench-")
                .tempdir()
                .map_err(|e| Error::Usage(format!("cannot make a temporary folder: {e}")))?,
        ),
    };
    let progress = |what: &str| progress(config, what);

    // Bandwidth first, before the scenes take memory.
    let mut bandwidths = Vec::new();
    for probe in probes.iter_mut() {
        progress(&format!("measuring {}", probe.name()));
        bandwidths.push((probe.name(), probe.copy_bandwidth()?));
    }
    let probe_details: Vec<String> = probes.iter().filter_map(|p| p.details()).collect();

    let mut header = vec![
        "deepmerge bench: the paper's Tables 1-4 (Archer, Leach and van Schyndel 2018)".to_string(),
        format!("host: {}", describe_host()),
        format!(
            "scenes: {}x{} pixels, seed {}, 2 inputs (4 for Table 3); median of {} runs after 1 warm-up",
            config.width, config.height, config.seed, config.repeats
        ),
    ];
    header.extend(set.about.iter().cloned());
    for (name, bw) in &bandwidths {
        header.push(format!(
            "{name}: copy bandwidth {:.2} GB/s (bytes read + written per second)",
            bw / 1e9
        ));
    }
    header.extend(probe_details);

    let needs_files = set.engines.iter().any(|e| e.needs_files());
    let engine_columns: Vec<String> = set
        .engines
        .iter()
        .map(|e| e.name())
        .chain(set.absent.iter().map(|(n, _)| n.clone()))
        .collect();
    let mut time_rows: [Vec<TableRow>; 3] = Default::default();
    let mut stage_rows: Vec<(String, crate::gpu::GpuProfile)> = Vec::new();
    let mut memory_rows = Vec::new();
    let mut input_rows = Vec::new();

    for name in &config.scenes {
        let start = Instant::now();
        let pair = generate_scene(name, config, 2)?;
        let quad = scene::generate_inputs(name, config.width, config.height, config.seed, 4)?;
        let generated = start.elapsed();
        let files = if needs_files {
            let dir = work.path();
            let write = |images: &[DeepImage], tag: &str| -> Result<Vec<PathBuf>> {
                let paths = scene::scene_paths(&dir.join(format!("{name}{tag}")), images.len());
                for (image, path) in images.iter().zip(&paths) {
                    write_deep(path, image, Codec::Zips)?;
                }
                Ok(paths)
            };
            Some(CaseFiles {
                pair: write(&pair, "")?,
                quad: write(&quad, "4")?,
            })
        } else {
            None
        };
        input_rows.push(describe_inputs(name, &pair, generated));
        let case = BenchCase {
            scene: name.clone(),
            pair,
            quad,
            files,
            work_dir: work.path(),
        };

        let mut cells: [Vec<Cell>; 3] = Default::default();
        let mut memory = Vec::new();
        for engine in set.engines.iter_mut() {
            let label = engine.name();
            engine.prepare(&case)?;
            for (k, op) in Operation::ALL.into_iter().enumerate() {
                if !engine.times(op) {
                    cells[k].push(Cell::Text("-".into()));
                    continue;
                }
                progress(&format!("{name}: {label} {}", op.name()));
                cells[k].push(match engine.time_operation(op, &case, config.repeats) {
                    Ok(times) => Cell::Value(ms(median(times))),
                    Err(e) => Cell::Text(format!("failed: {e}")),
                });
                if let Some(profile) = engine.take_stage_profile() {
                    if op != Operation::Pairwise4 {
                        stage_rows.push((format!("{name} T{} {label}", k + 1), profile));
                    }
                }
            }
            memory.push(match engine.memory_bytes(&case) {
                Some(b) => Cell::Value(b as f64 / MIB),
                None => Cell::Text("n/a".into()),
            });
            engine.release();
        }
        for (_, why) in &set.absent {
            for row in cells.iter_mut() {
                row.push(Cell::Text(why.clone()));
            }
            memory.push(Cell::Text(why.clone()));
        }
        let traffic = traffic_bytes(&case.pair, &case.quad);
        for (k, row) in cells.iter_mut().enumerate() {
            for (_, bw) in &bandwidths {
                row.push(Cell::Value(traffic[k] as f64 / bw * 1e3));
            }
        }
        for layout in Layout::ALL {
            let bytes: u64 = case
                .pair
                .iter()
                .map(|i| layout_model_bytes(i, layout))
                .sum();
            memory.push(Cell::Value(bytes as f64 / MIB));
        }
        for (k, row) in cells.into_iter().enumerate() {
            time_rows[k].push(TableRow {
                label: name.clone(),
                cells: row,
            });
        }
        memory_rows.push(TableRow {
            label: name.clone(),
            cells: memory,
        });
    }

    let floor_columns: Vec<String> = bandwidths.iter().map(|(n, _)| n.clone()).collect();
    let time_columns: Vec<String> = engine_columns
        .iter()
        .chain(&floor_columns)
        .cloned()
        .collect();
    let mut time_notes = vec![
        "cells: median ms (worst cell of the row / this cell); floor = (bytes read + written) / copy bandwidth".to_string(),
        "cpu: in host memory, no file I/O; oiiotool e2e: whole command (process start, EXR decode, merge, EXR encode)".to_string(),
        "GL LL/LA/IA/BIA x S/RBM: merge kernels only, inputs resident (upload and layout build untimed), clock stopped after glFinish; Table 3 adds its three merges' times".to_string(),
        format!("{TILED_COLUMN}: BIA RBM with pixels in 8x4 raster tiles (one 32-pixel group per tile) instead of row-major"),
    ];
    if !config.deep_writes.is_empty() {
        time_notes.push(
            "... relayout / staged:N: the deep output written into IA and relaid out, or through N bytes of shared memory a workgroup (larger groups write directly); the other columns write straight into the layout; not timed for flat output (-)".to_string(),
        );
    }
    let [composite, save_deep, pairwise] = time_rows;
    let table = |title: &str, rows: Vec<TableRow>| Table {
        title: title.to_string(),
        unit: Unit::Millis,
        columns: time_columns.clone(),
        row_header: "scene".into(),
        rows,
        notes: time_notes.clone(),
    };
    let mut memory_columns = engine_columns.clone();
    memory_columns.extend(Layout::ALL.iter().map(|l| format!("{} (model)", l.name())));
    let tables = vec![
        table(
            "Table 1: merge two deep images, compositing during the merge",
            composite,
        ),
        table(
            "Table 2: merge two deep images, saving the result as a deep image",
            save_deep,
        ),
        table(
            "Table 3: merge four deep images by iterated pairwise merging, (0+1)+(2+3), then composite",
            pairwise,
        ),
        Table {
            title: "Table 4: memory of the two input deep images".into(),
            unit: Unit::MiB,
            columns: memory_columns,
            row_header: "scene".into(),
            rows: memory_rows,
            notes: vec![
                "cells: MiB (largest of the row / this cell)".into(),
                "cpu: CSR as held (u64 offsets + planes); oiiotool: not measurable from outside".into(),
                "GL columns: measured, the bytes of the buffers the GL engine allocated for the two inputs (GpuStats::input_bytes: 16-byte keys, f32 composited values, offsets, min counts or LL heads and next pointers); S and RBM share a layout, so they agree".into(),
                "(model): cross-check, the layout formulas (docs/architecture.md) with 4-byte indices and the files' bytes per sample, G = 32; the GL engine stores 16-byte keys plus f32 values instead, hence its larger figures".into(),
            ],
        },
    ];
    let gl_copy = bandwidths
        .iter()
        .find(|(n, _)| n.contains("gl copy"))
        .map(|(_, b)| *b);
    let stages = (!stage_rows.is_empty()).then(|| stage_table(stage_rows, gl_copy));
    let inputs = inputs_table(config, input_rows, "generated in (2 + 4 inputs)");
    let end_to_end = if config.e2e_inputs.is_empty() {
        None
    } else {
        Some(end_to_end_table(config, &work.path(), &set)?)
    };
    Ok(BenchReport {
        header,
        inputs,
        tables: tables.into_iter().chain(stages).collect(),
        end_to_end,
    })
}

/// The per-stage GPU times of Tables 1 and 2's GL cells (one untimed profiled run each): ms per
/// stage that ran, the GPU total, and the merge stage's GB/s and share of the GL copy floor.
fn stage_table(rows: Vec<(String, crate::gpu::GpuProfile)>, gl_copy: Option<f64>) -> Table {
    let stages: Vec<&str> = crate::gpu::STAGES
        .into_iter()
        .filter(|s| rows.iter().any(|(_, p)| p.stage(s).is_some()))
        .collect();
    let mut columns: Vec<String> = stages.iter().map(|s| format!("{s} ms")).collect();
    columns.extend(["GPU total ms", "merge GB/s", "merge / copy floor"].map(String::from));
    let rows = rows
        .into_iter()
        .map(|(label, profile)| {
            let mut cells: Vec<Cell> = stages
                .iter()
                .map(|s| match profile.stage(s) {
                    Some(t) => Cell::Text(format!("{:.3}", t.gpu_s * 1e3)),
                    None => Cell::Text("-".into()),
                })
                .collect();
            cells.push(Cell::Text(format!("{:.3}", profile.total_s() * 1e3)));
            let merge = profile.stage("merge").and_then(|m| m.bandwidth());
            cells.push(Cell::Text(
                merge.map_or("-".into(), |b| format!("{:.1}", b / 1e9)),
            ));
            cells.push(Cell::Text(match (merge, gl_copy) {
                (Some(b), Some(c)) => format!("{:.1}%", 100.0 * b / c),
                _ => "-".into(),
            }));
            TableRow { label, cells }
        })
        .collect();
    Table {
        title: "GPU stages of Tables 1 and 2 (timer queries, one untimed run per cell)".into(),
        unit: Unit::Text,
        columns,
        row_header: "scene, table, column".into(),
        rows,
        notes: vec![
            "ms: GPU time per stage from glQueryCounter(GL_TIMESTAMP) pairs around each dispatch, upload and readback".into(),
            "merge GB/s: the bytes of the buffers the merge reads and writes (inputs' keys, values, offsets; output) over its GPU time; copy floor: the GL copy kernel in the same run".into(),
        ],
    }
}

/// The scenes table from [`describe_inputs`] rows; `generated` heads the generation-time column.
fn inputs_table(config: &BenchConfig, rows: Vec<TableRow>, generated: &str) -> Table {
    Table {
        title: format!(
            "Scenes: the two inputs at {}x{}, and their merge's depth complexity",
            config.width, config.height
        ),
        unit: Unit::Text,
        columns: vec![
            "samples (in 0 + in 1)".into(),
            "max/pixel (in 0, in 1, merged)".into(),
            "merged pixels <=16 / 16-64 / 64-128 / 128-512 / >512".into(),
            generated.into(),
        ],
        row_header: "scene".into(),
        rows,
        notes: vec!["complexity bins as the paper's Fig. 8 (blue, green, yellow, red)".into()],
    }
}

/// The files' stems joined by ` + ` (e.g. `Balls + Leaves`), a row label for merged files.
fn files_label(paths: &[PathBuf]) -> String {
    let stems: Vec<String> = paths
        .iter()
        .map(|p| {
            p.file_stem()
                .map_or_else(|| p.display().to_string(), |s| s.to_string_lossy().into())
        })
        .collect();
    stems.join(" + ")
}

/// The inputs row: sample counts, per-pixel maxima and the merged depth-complexity spread.
/// One progress line on stderr, when the configuration asks for them.
fn progress(config: &BenchConfig, what: &str) {
    if config.progress {
        eprintln!("bench: {what}");
    }
}

/// Scene `name` at the configured size and seed, as `inputs` deep images (reported on stderr).
fn generate_scene(name: &str, config: &BenchConfig, inputs: usize) -> Result<Vec<DeepImage>> {
    progress(
        config,
        &format!("generating {name} {}x{}", config.width, config.height),
    );
    scene::generate_inputs(name, config.width, config.height, config.seed, inputs)
}

fn describe_inputs(name: &str, pair: &[DeepImage], generated: Duration) -> TableRow {
    let merged_counts: Vec<u32> = pair[0]
        .counts()
        .iter()
        .zip(pair[1].counts())
        .map(|(a, b)| a + b)
        .collect();
    let mut histogram = [0usize; 5];
    for &n in &merged_counts {
        let bin = COMPLEXITY_BINS
            .iter()
            .position(|&(_, hi)| n as usize <= hi)
            .unwrap_or(4);
        histogram[bin] += 1;
    }
    let pixels = merged_counts.len().max(1) as f64;
    let spread: Vec<String> = histogram
        .iter()
        .map(|&n| format!("{:.1}%", 100.0 * n as f64 / pixels))
        .collect();
    let (s0, s1) = (sample_stats(&pair[0]), sample_stats(&pair[1]));
    let merged_max = merged_counts.iter().max().copied().unwrap_or(0);
    TableRow {
        label: name.to_string(),
        cells: vec![
            Cell::Text(format!("{} + {}", s0.total, s1.total)),
            Cell::Text(format!("{}, {}, {}", s0.max, s1.max, merged_max)),
            Cell::Text(spread.join(" / ")),
            Cell::Text(format!("{} ms", significant(ms(generated)))),
        ],
    }
}

/// Whole command lines on real files: `deepmerge` (or its pipeline in-process) and `oiiotool`.
fn end_to_end_table(
    config: &BenchConfig,
    work: &std::path::Path,
    set: &EngineSet,
) -> Result<Table> {
    let inputs = &config.e2e_inputs;
    if inputs.len() < 2 {
        return Err(Error::Usage(
            "the end-to-end table needs at least two deep EXR files".into(),
        ));
    }
    let label = files_label(inputs);
    let repeat = |run: &mut dyn FnMut() -> Result<Duration>| -> Cell {
        let result = (|| {
            run()?;
            let times = (0..config.repeats)
                .map(|_| run())
                .collect::<Result<Vec<_>>>()?;
            Ok::<_, Error>(median(times))
        })();
        match result {
            Ok(t) => Cell::Value(ms(t)),
            Err(e) => Cell::Text(format!("failed: {e}")),
        }
    };
    let ours_out = work.join("e2e-deepmerge.exr");
    let mut columns = Vec::new();
    let mut cells = Vec::new();
    match &config.deepmerge_exe {
        Some(exe) => {
            // Both backends through the same binary and command line, so the columns differ only
            // in the merge engine (the GL one also pays for its context and shader compiles).
            for backend in ["cpu", "gl"] {
                let cell = repeat(&mut || {
                    let start = Instant::now();
                    let out = Command::new(exe)
                        .args(inputs)
                        .args(["--backend", backend, "-o"])
                        .arg(&ours_out)
                        .output()
                        .map_err(|e| Error::Usage(format!("cannot run {}: {e}", exe.display())))?;
                    let time = start.elapsed();
                    if !out.status.success() {
                        return Err(Error::Usage(
                            String::from_utf8_lossy(&out.stderr).trim().to_string(),
                        ));
                    }
                    Ok(time)
                });
                columns.push(format!("deepmerge --backend {backend} (process)"));
                cells.push(cell);
            }
        }
        None => {
            let cell = repeat(&mut || {
                let start = Instant::now();
                let images = inputs
                    .iter()
                    .map(|p| read_deep(p, &ReadOptions::default()))
                    .collect::<Result<Vec<_>>>()?;
                let refs: Vec<&DeepImage> = images.iter().collect();
                let out = merge_images(
                    &refs,
                    &MergeOptions {
                        output: OutputKind::Flat { z: false },
                        ..MergeOptions::default()
                    },
                )?;
                if let MergeOutput::Flat(flat) = out {
                    write_flat(&ours_out, &flat, FlatType::Half)?;
                }
                Ok(start.elapsed())
            });
            columns.push("deepmerge cpu pipeline (in-process)".into());
            cells.push(cell);
            columns.push("deepmerge --backend gl (process)".into());
            cells.push(Cell::Text("needs the deepmerge binary".into()));
        }
    }
    let oiiotool = set.engines.iter().any(|e| e.name() == "oiiotool e2e");
    columns.push("oiiotool".into());
    if oiiotool {
        let program = match &config.oiiotool {
            PeerSetting::Path(p) => p.clone(),
            _ => PathBuf::from("oiiotool"),
        };
        let out_path = work.join("e2e-oiiotool.exr");
        cells.push(repeat(&mut || {
            // a b --deepmerge c --deepmerge ... --flatten
            let mut command = Command::new(&program);
            command.arg(&inputs[0]);
            for input in &inputs[1..] {
                command.arg(input).arg("--deepmerge");
            }
            command.arg("--flatten").arg("-o").arg(&out_path);
            let start = Instant::now();
            let out = command
                .output()
                .map_err(|e| Error::Usage(format!("cannot run oiiotool: {e}")))?;
            let time = start.elapsed();
            if !out.status.success() {
                return Err(Error::Usage(
                    String::from_utf8_lossy(&out.stderr).trim().to_string(),
                ));
            }
            Ok(time)
        }));
    } else if config.oiiotool == PeerSetting::Off {
        cells.push(Cell::Text("off".into()));
    } else {
        cells.push(Cell::Text("not installed".into()));
    }
    Ok(Table {
        title: format!("End to end: {label} -> flat EXR (read, merge, composite, write)"),
        unit: Unit::Millis,
        columns,
        row_header: "inputs".into(),
        rows: vec![TableRow {
            label,
            cells,
        }],
        notes: vec![format!(
            "median of {} runs after 1 warm-up; all write a half RGBA flat EXR; whole processes (start, EXR read, merge, EXR write)",
            config.repeats
        )],
    })
}

/// CPU model, threads and memory of this machine, from /proc where it exists.
pub fn describe_host() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or_else(
            || std::env::consts::ARCH.to_string(),
            |(_, m)| m.trim().to_string(),
        );
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|l| l.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or_else(String::new, |kb| {
            format!(", {:.0} GiB RAM", kb / (1u64 << 20) as f64)
        });
    format!(
        "{model}, {} hardware threads{memory}",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    )
}
