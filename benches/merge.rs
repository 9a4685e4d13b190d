//! Criterion benches of the merge engines on the procedural scenes: for each scene, groups
//! `composite/<scene>`, `save_deep/<scene>` and `pairwise4/<scene>` (the paper's Tables 1-3),
//! one function per engine column. Small scenes (240x135) and few samples so that `cargo bench`
//! finishes in a few minutes on two cores; `deepmerge bench` is the full-size, paper-style run.
//!
//! Engines time themselves (`iter_custom`), so a GPU engine can exclude its untimed set-up and
//! wait for completion before stopping its clock, exactly as in `deepmerge bench`.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use deepmerge::bench::{run_operation, BenchCase, CpuEngine, MergeEngine, Operation};
use deepmerge::scene::{self, SCENE_NAMES};

const WIDTH: usize = 240;
const HEIGHT: usize = 135;
const SEED: u64 = 1;

/// The engines, one criterion function each.
fn engines() -> Vec<Box<dyn MergeEngine>> {
    // GL ENGINE PLUGS IN HERE: push one engine per layout x method, named as the paper's columns
    // ("LL S", "LL RBM", ..., "BIA RBM"), built from the same constructor `bench::default_engines`
    // uses. Groups and scenes stay as they are, so the reports line up column for column.
    vec![Box::new(CpuEngine)]
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
                        (0..iters)
                            .map(|_| {
                                run_operation(engine.as_mut(), operation, &case).expect("merge")
                            })
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
