//! Criterion benches of the merge engines on the procedural scenes: for each scene, groups
//! `composite/<scene>`, `save_deep/<scene>` and `pairwise4/<scene>` (the paper's Tables 1-3),
//! one function per engine column. Small scenes (240x135) and few samples so that `cargo bench`
//! finishes in a few minutes on two cores; `deepmerge bench` is the full-size, paper-style run.
//!
//! Engines time themselves (`iter_custom` over `BenchColumn::time_operation`), so the GL engine
//! uploads and builds its layout once per sample, untimed, and stops its clock after glFinish,
//! exactly as in the paper-style tables. The engines are `bench::default_engines` with the peer
//! off: the CPU engine, then LL S, LL RBM, ..., BIA RBM and BIA RBM tiles. Without a usable GL
//! context the GL functions are absent and the reason is printed first.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use deepmerge::bench::{self, BenchCase, BenchColumn, BenchConfig, Operation, PeerSetting};
use deepmerge::scene::{self, SCENE_NAMES};

const WIDTH: usize = 240;
const HEIGHT: usize = 135;
const SEED: u64 = 1;

/// The engines, one criterion function each.
fn engines() -> Vec<Box<dyn BenchColumn>> {
    let config = BenchConfig {
        oiiotool: PeerSetting::Off,
        ..BenchConfig::default()
    };
    let gl = bench::open_gl(&config);
    let set = bench::default_engines(&config, &gl);
    for line in &set.about {
        eprintln!("merge bench: {line}");
    }
    for (column, why) in &set.absent {
        eprintln!("merge bench: {column} absent: {why}");
    }
    set.engines
}

fn merge(c: &mut Criterion) {
    let mut engines = engines();
    let work_dir = std::env::temp_dir();
    for name in SCENE_NAMES {
        let case = BenchCase {
            scene: name.to_string(),
            pair: scene::generate_inputs(name, WIDTH, HEIGHT, SEED, 2).expect("scene"),
            quad: scene::generate_inputs(name, WIDTH, HEIGHT, SEED, 4).expect("scene"),
            files: None,
            work_dir: work_dir.clone(),
        };
        for engine in engines.iter_mut() {
            engine.prepare(&case).expect("prepare");
        }
        for operation in Operation::ALL {
            let mut group = c.benchmark_group(format!("{}/{name}", operation.name()));
            for engine in engines.iter_mut() {
                group.bench_function(engine.name(), |b| {
                    b.iter_custom(|iters| {
                        engine
                            .time_operation(operation, &case, iters as usize)
                            .expect("merge")
                            .into_iter()
                            .sum::<Duration>()
                    })
                });
            }
            group.finish();
        }
        for engine in engines.iter_mut() {
            engine.release();
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = merge
}
criterion_main!(benches);
