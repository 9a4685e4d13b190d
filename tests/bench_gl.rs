//! The bench harness with the GL engine, end to end on a tiny size: the four tables carry all
//! eight GL columns (plus the raster-tile one) with measured values, Table 5 k-way against the
//! chain for 2, 4 and 8 inputs, the GL copy floor and the
//! renderer in the header, and the end-to-end table times `deepmerge --backend gl`. Its front
//! end is checked from both doors: `deepmerge bench` as a process, and the `paper_tables` target's
//! parse of the same arguments; and `--tidy-gate` times its three mergers.
//!
//! GL is required here (CI has Mesa llvmpipe): a missing context fails the test rather than
//! skipping it. Timings are never asserted, only that they were measured.
//!
//! The GL columns run with the default sort and tidy stages on purpose (the host's on llvmpipe,
//! the GPU's on hardware): the bench times what a user gets, and no output is compared here, so
//! the assertions hold wherever the stages run (tests/gpu_merge.rs checks both places).

use std::process::Command;

use deepmerge::bench::{
    self, gl_column_names, parse_harness_args, BenchConfig, Cell, PeerSetting, TILED_COLUMN,
};
use deepmerge::scene::{self, SCENE_NAMES};

#[test]
fn bench_with_gl_engines_reports_every_gl_column_in_four_tables() {
    let dir = tempfile::tempdir().unwrap();
    let e2e = scene::write_scene("planes", 24, 16, 2, 2, &dir.path().join("e2e")).unwrap();
    let config = BenchConfig {
        width: 24,
        height: 16,
        repeats: 1,
        copy_bytes: 1 << 20,
        oiiotool: PeerSetting::Off,
        e2e_inputs: e2e,
        deepmerge_exe: Some(env!("CARGO_BIN_EXE_deepmerge").into()),
        work_dir: Some(dir.path().join("work")),
        progress: false,
        ..BenchConfig::default()
    };
    let report = bench::run(&config).unwrap();
    assert!(
        report.header.iter().any(|l| l.contains("GL_RENDERER")),
        "no GL context: {:#?}",
        report.header
    );
    let gl_columns = gl_column_names();
    assert_eq!(
        gl_columns,
        ["LL S", "LL RBM", "LA S", "LA RBM", "IA S", "IA RBM", "BIA S", "BIA RBM"]
    );
    assert_eq!(report.tables.len(), 5);
    for table in &report.tables[..4] {
        assert_eq!(table.rows.len(), SCENE_NAMES.len());
        let cpu = table.columns.iter().position(|c| c == "cpu").unwrap();
        // The paper's order, right after the CPU engine, then the raster-tile comparison.
        for (k, name) in gl_columns.iter().enumerate() {
            assert_eq!(&table.columns[cpu + 1 + k], name, "{}", table.title);
        }
        assert_eq!(table.columns[cpu + 9], TILED_COLUMN);
        for row in &table.rows {
            assert_eq!(row.cells.len(), table.columns.len());
            for c in cpu + 1..=cpu + 9 {
                assert!(
                    matches!(row.cells[c], Cell::Value(v) if v > 0.0),
                    "{} {} {}: {:?}",
                    table.title,
                    row.label,
                    table.columns[c],
                    row.cells[c]
                );
            }
        }
    }
    for table in &report.tables[..3] {
        assert!(table.columns.iter().any(|c| c == "floor (cpu memcpy)"));
        assert_eq!(table.columns.last().unwrap(), "floor (gl copy)");
    }
    // Table 4 is measured per layout: stepwise and RBM share a layout, so their bytes agree.
    let memory = &report.tables[3];
    for row in &memory.rows {
        for pair in 0..4 {
            assert_eq!(row.cells[1 + 2 * pair], row.cells[2 + 2 * pair], "{row:?}");
        }
    }
    // Table 5: k-way against the chain for 2, 4 and 8 inputs, every cell measured.
    let kway = &report.tables[4];
    assert!(kway.title.starts_with("Table 5:"), "{}", kway.title);
    assert_eq!(kway.rows.len(), 3 * SCENE_NAMES.len());
    assert_eq!(kway.rows[2].label, format!("{}, 8 inputs", SCENE_NAMES[0]));
    assert_eq!(&kway.columns[..2], ["cpu chain", "cpu k-way"]);
    for layout in deepmerge::gpu::Layout::ALL.map(|l| l.name()) {
        for column in [
            format!("{layout} S chain"),
            format!("{layout} RBM chain"),
            format!("{layout} k-way"),
        ] {
            assert!(
                kway.columns.contains(&column),
                "{column}: {:?}",
                kway.columns
            );
        }
    }
    let timed = kway.columns.len() - 2;
    for row in &kway.rows {
        for c in 0..timed {
            assert!(
                matches!(row.cells[c], Cell::Value(v) if v > 0.0),
                "{} {}: {:?}",
                row.label,
                kway.columns[c],
                row.cells[c]
            );
        }
        for c in timed..kway.columns.len() {
            assert!(
                matches!(&row.cells[c], Cell::Text(t) if t.ends_with('x')),
                "{row:?}"
            );
        }
    }
    let e2e = report.end_to_end.as_ref().expect("end-to-end table");
    let gl = e2e
        .columns
        .iter()
        .position(|c| c == "deepmerge --backend gl (process)")
        .expect("GL backend column");
    assert!(matches!(e2e.rows[0].cells[gl], Cell::Value(_)), "{e2e:?}");
}

/// Options that move every part of the front end away from its defaults, as both doors get them.
const FRONT_END_ARGS: [&str; 11] = [
    "--size",
    "24x16",
    "--repeats",
    "1",
    "--scenes",
    "planes,atrium",
    "--no-oiiotool",
    "--no-tiles",
    "--block-size",
    "4",
    "--markdown",
];

#[test]
fn deepmerge_bench_and_the_paper_tables_target_take_the_same_options() {
    // The bench target's door: cargo appends --bench.
    let harness = parse_harness_args(
        std::iter::once("paper_tables")
            .chain(FRONT_END_ARGS)
            .chain(["--bench"])
            .map(String::from),
    )
    .unwrap();
    let config = harness.config(None);
    assert_eq!(config.scenes, ["planes", "atrium"]);
    assert_eq!((config.width, config.height, config.repeats), (24, 16, 1));
    assert!(harness.markdown && !config.tiled_order);

    // The CLI's door, as a process: the same options reach the same tables.
    let out = Command::new(env!("CARGO_BIN_EXE_deepmerge"))
        .arg("bench")
        .args(FRONT_END_ARGS)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains("- scenes: 24x16 pixels, seed 1"),
        "{stdout}"
    );
    assert!(stdout.contains("block size 4"), "{stdout}");
    for n in 1..=4 {
        assert!(stdout.contains(&format!("**Table {n}:")), "{stdout}");
    }
    let table_1 = stdout
        .lines()
        .skip_while(|l| !l.starts_with("**Table 1:"))
        .filter(|l| l.starts_with("| "))
        .take(4)
        .collect::<Vec<_>>();
    assert!(
        table_1[0].starts_with("| scene | cpu | LL S |"),
        "{table_1:?}"
    );
    assert!(!table_1[0].contains(TILED_COLUMN) && !table_1[0].contains("oiiotool"));
    assert!(table_1[2].starts_with("| planes |") && table_1[3].starts_with("| atrium |"));
}

#[test]
fn tidy_gate_times_gpu_and_host_tidy_on_points_only_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let files = scene::write_scene("atrium", 24, 16, 3, 2, &dir.path().join("files")).unwrap();
    let config = BenchConfig {
        scenes: vec!["planes".into()],
        width: 24,
        height: 16,
        repeats: 2,
        e2e_inputs: files,
        progress: false,
        ..BenchConfig::default()
    };
    let report = bench::run_tidy_gate(&config).unwrap();
    assert!(
        report.header.iter().any(|l| l.contains("GL_RENDERER")),
        "{:#?}",
        report.header
    );
    let [gate] = &report.tables[..] else {
        panic!("one table: {:?}", report.tables)
    };
    let labels: Vec<&str> = gate.rows.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(labels, ["planes", "files_0 + files_1"]);
    for row in &gate.rows {
        for cell in &row.cells[..3] {
            assert!(matches!(cell, Cell::Value(v) if *v > 0.0), "{row:?}");
        }
        // The scenes hold only points: nothing to tidy, which is the case the gate is for.
        assert_eq!(row.cells[5], Cell::Text("0".into()), "{row:?}");
    }
    let without_gl = BenchConfig {
        gl: false,
        ..config
    };
    assert!(bench::run_tidy_gate(&without_gl).is_err());
}
