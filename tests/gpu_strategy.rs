//! The GL engine's choice of kernel for a k-way merge of two inputs
//! (`GlOptions::pairwise_long_pairs`): with long lists (a mean of `PAIRWISE_MEAN_SAMPLES` or more
//! per pixel and input) it runs the pairwise kernel, which Table 5 on an H100 measured faster
//! there, and the k-way kernel otherwise. Either way the bytes are the reference merge's.

// MergeOptions is built with `..Default::default()` even where every field is named today.
#![allow(clippy::needless_update)]

mod gpu_common;

use deepmerge::composite::{MergeOptions, MergeStrategy, OutputKind};
use deepmerge::deep::Bounds;
use deepmerge::gpu::{GlOptions, Layout, PAIRWISE_MEAN_SAMPLES};
use gpu_common::{assert_gl_matches_reference, with_gl, Stages, Synth};

fn outputs() -> [MergeOptions; 2] {
    [
        MergeOptions {
            output: OutputKind::Flat { z: true },
            strategy: MergeStrategy::KWay,
            ..Default::default()
        },
        MergeOptions {
            output: OutputKind::Deep,
            strategy: MergeStrategy::KWay,
            ..Default::default()
        },
    ]
}

#[test]
fn two_long_inputs_run_the_pairwise_kernel_and_short_ones_the_kway_kernel() {
    with_gl(|ctx| {
        let window = Bounds::from_origin_size(0, 0, 40, 12);
        // Up to 24 samples per pixel (a mean near 12), and up to 2 (a mean near 1).
        let long = [
            Synth::new(window, 24, 41).build(),
            Synth::new(window, 24, 42).build(),
        ];
        let short = [
            Synth::new(window, 2, 43).build(),
            Synth::new(window, 2, 44).build(),
        ];
        let mean = |pair: &[deepmerge::deep::DeepImage; 2]| {
            (pair[0].sample_count() + pair[1].sample_count()) as f64 / (2.0 * window.area() as f64)
        };
        assert!(mean(&long) >= PAIRWISE_MEAN_SAMPLES, "{}", mean(&long));
        assert!(mean(&short) < PAIRWISE_MEAN_SAMPLES, "{}", mean(&short));
        for (pair, long_lists) in [(&long, true), (&short, false)] {
            for choose in [Some(true), Some(false)] {
                for options in outputs() {
                    for layout in [Layout::Linearised, Layout::LinkedList] {
                        let gl = Stages::Host.on(GlOptions {
                            layout,
                            pairwise_long_pairs: choose,
                            ..Default::default()
                        });
                        let what = format!(
                            "long {long_lists} choose {choose:?} {:?} {}",
                            options.output,
                            layout.name()
                        );
                        let stats = assert_gl_matches_reference(
                            ctx,
                            &[&pair[0], &pair[1]],
                            &options,
                            &gl,
                            &what,
                        );
                        let pairwise = choose == Some(true) && long_lists;
                        assert_eq!(stats.kway, !pairwise, "{what}");
                    }
                }
            }
        }
        // Three inputs always take the k-way kernel.
        let gl = Stages::Host.on(GlOptions {
            pairwise_long_pairs: Some(true),
            ..Default::default()
        });
        let stats = assert_gl_matches_reference(
            ctx,
            &[&long[0], &long[1], &long[0]],
            &outputs()[0],
            &gl,
            "three long inputs",
        );
        assert!(stats.kway);
    });
}

#[test]
fn by_default_a_long_pair_takes_the_pairwise_kernel_on_hardware_only() {
    with_gl(|ctx| {
        // A mean of 24 samples per pixel and input: a long-list pair.
        let window = Bounds::from_origin_size(0, 0, 20, 6);
        let a = Synth::new(window, 24, 45).build();
        let b = Synth::new(window, 24, 46).build();
        let stats = assert_gl_matches_reference(
            ctx,
            &[&a, &b],
            &outputs()[0],
            &Stages::Host.on(GlOptions::default()),
            "defaults",
        );
        // A software rasteriser keeps the k-way kernel (the pairwise one was measured faster
        // for long lists on hardware only).
        assert_eq!(stats.kway, ctx.info().software, "{}", ctx.info());
    });
}

/// The status line of `--stats` names the kernel a two-input merge may take: the k-way one, or
/// also the pairwise one where lists are long (`DEEPMERGE_GL_PAIRWISE=1`, the default on
/// hardware), as the merge decides band by band.
#[test]
fn the_status_line_says_when_a_pair_may_take_the_pairwise_kernel() {
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/openexr-images");
    // Cargo makes the folder when it builds the tests; a GPU machine given the built binaries
    // has none.
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(dir).unwrap();
    let out = dir.join("status-line.exr");
    let status = |pairwise: &str| -> String {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_deepmerge"))
            .args([
                format!("{data}/Balls.exr"),
                format!("{data}/Leaves.exr"),
                "--backend".into(),
                "gl".into(),
                "--stats".into(),
                "-o".into(),
                out.to_str().unwrap().into(),
            ])
            .env("DEEPMERGE_GL_STRICT", "1")
            .env("DEEPMERGE_GL_PAIRWISE", pairwise)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "{err}");
        err.lines()
            .find(|l| l.starts_with("deepmerge: merging 2 inputs with OpenGL on"))
            .unwrap_or_else(|| panic!("no status line: {err}"))
            .to_string()
    };
    let kway = status("0");
    assert!(kway.ends_with("(LA k-way block 8)"), "{kway}");
    let either = status("1");
    assert!(
        either.ends_with("(LA k-way, or RBM where lists are long, block 8)"),
        "{either}"
    );
}

/// `--backend auto` runs a deep merge on the GL engine only on a GPU of its own, at
/// `AUTO_GL_MIN_THREADS` host threads or more and from input files of
/// `AUTO_GL_MIN_INPUT_BYTES` or more (where the H100 table has it faster; the bound is lifted
/// here by `DEEPMERGE_AUTO_GL_MIN_BYTES=0`, the bundled files being small), and says why in its
/// status line; a flat merge, fewer threads, small inputs or a software rasteriser keep the CPU
/// engine. Under `DEEPMERGE_GL_DEFAULTS=hardware` (the GL tests' second pass) llvmpipe counts as
/// a GPU, so the GL path runs here too. Either way the bytes are the CPU engine's.
#[test]
fn auto_runs_a_deep_merge_on_a_gpu_only_and_says_why() {
    let on_gpu = with_gl(|ctx| !ctx.info().software);
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/openexr-images");
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("auto-engine");
    std::fs::create_dir_all(&dir).unwrap();
    let run_bounded = |min_bytes: Option<&str>, threads: usize, extra: &[&str], out: &str| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_deepmerge"));
        command
            .args([format!("{data}/Balls.exr"), format!("{data}/Leaves.exr")])
            .args(extra)
            .args(["--runstats", "-o"])
            .arg(dir.join(out))
            .env("DEEPMERGE_GL_STRICT", "1")
            .env("RAYON_NUM_THREADS", threads.to_string())
            .env_remove("DEEPMERGE_AUTO_GL_MIN_BYTES");
        if let Some(bytes) = min_bytes {
            command.env("DEEPMERGE_AUTO_GL_MIN_BYTES", bytes);
        }
        let output = command.output().unwrap();
        let err = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "{err}");
        err.lines().next().unwrap_or_default().to_string()
    };
    let run =
        |threads: usize, extra: &[&str], out: &str| run_bounded(Some("0"), threads, extra, out);
    let min = deepmerge::backend::AUTO_GL_MIN_THREADS;
    let deep = run(min, &["--deep"], "auto-deep.exr");
    if on_gpu {
        assert!(
            deep.starts_with("deepmerge: merging 2 inputs with OpenGL on")
                && deep.ends_with(&format!(
                    "(auto: deep output on {min} host threads with a GPU, where the GL engine measured faster end to end)"
                )),
            "{deep}"
        );
    } else {
        assert!(
            deep.starts_with(
                "deepmerge: merging 2 inputs on the CPU engine (deep output, but the only GL device is the software rasteriser"
            ),
            "{deep}"
        );
    }
    run(min, &["--deep", "--backend", "cpu"], "cpu-deep.exr");
    assert!(
        std::fs::read(dir.join("auto-deep.exr")).unwrap()
            == std::fs::read(dir.join("cpu-deep.exr")).unwrap(),
        "auto's deep output is the CPU engine's bytes"
    );
    let few = run(min - 1, &["--deep"], "few.exr");
    assert!(
        few.starts_with(&format!(
            "deepmerge: merging 2 inputs on the CPU engine (deep output on {} host threads",
            min - 1
        )),
        "{few}"
    );
    let flat = run(min, &[], "flat.exr");
    assert_eq!(
        flat,
        format!(
            "deepmerge: merging 2 inputs on the CPU engine{}",
            deepmerge::backend::AUTO_PICKS_CPU
        )
    );
    // The default bound: 4 MiB of bundled input files stay on the CPU engine, GPU or not.
    let small = run_bounded(None, min, &["--deep"], "small.exr");
    assert!(
        small.starts_with(
            "deepmerge: merging 2 inputs on the CPU engine (deep output of 4 MiB of input files, under the 256 MiB from which the GL engine runs"
        ),
        "{small}"
    );
    // A plain number is bytes: one byte less than the inputs keeps GL's path (the software
    // rasteriser's reason, or GL itself), one more the size's reason.
    let inputs: u64 = ["Balls.exr", "Leaves.exr"]
        .iter()
        .map(|f| std::fs::metadata(format!("{data}/{f}")).unwrap().len())
        .sum();
    let under = run_bounded(
        Some(&(inputs + 1).to_string()),
        min,
        &["--deep"],
        "under.exr",
    );
    assert!(
        under.contains("(deep output of 4 MiB of input files"),
        "{under}"
    );
    let over = run_bounded(
        Some(&(inputs - 1).to_string()),
        min,
        &["--deep"],
        "over.exr",
    );
    assert!(!over.contains("of input files"), "{over}");
    // A bound that is no size is refused, naming the variable.
    let mut bad = std::process::Command::new(env!("CARGO_BIN_EXE_deepmerge"));
    let bad = bad
        .args([format!("{data}/Balls.exr"), format!("{data}/Leaves.exr")])
        .args(["--deep", "-o"])
        .arg(dir.join("bad.exr"))
        .env("RAYON_NUM_THREADS", min.to_string())
        .env("DEEPMERGE_AUTO_GL_MIN_BYTES", "lots")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success(), "{err}");
    assert!(err.contains("DEEPMERGE_AUTO_GL_MIN_BYTES=lots"), "{err}");
}
