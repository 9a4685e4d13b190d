//! `--backend auto`'s GL context, started on a helper thread while the run opens its inputs
//! (`StartingGl::start_or_cpu`): a GPU that then gives no context, or a context that comes from
//! a software rasteriser, leaves the merge on the CPU engine with the CPU engine's bytes and the
//! reason in the status line, on both streamed paths (bands overlapped on the GPU or merged one
//! at a time); `--backend gl` with the same failure is an error naming it. On a GPU (or under
//! `DEEPMERGE_GL_DEFAULTS=hardware`, the GL tests' second pass) the same start runs the merge on
//! the GL engine, with the CPU engine's bytes.

mod timeline_spans;

use deepmerge::backend::EngineChoice;
use deepmerge::composite::{MergeOptions, OutputKind};
use deepmerge::gpu::{GlOptions, StartingGl};
use deepmerge::stream::{merge_files, MergeEngine, StreamOptions};
use std::path::PathBuf;

/// The bundled pair (two real files with overlapping samples).
fn inputs() -> Vec<PathBuf> {
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/openexr-images");
    ["Balls.exr", "Leaves.exr"]
        .iter()
        .map(|f| PathBuf::from(data).join(f))
        .collect()
}

/// Flat and deep output, in bands of 40 rows (a dozen bands of the pair).
fn option_sets() -> Vec<StreamOptions> {
    [OutputKind::Flat { z: false }, OutputKind::Deep]
        .into_iter()
        .map(|output| StreamOptions {
            band_rows: Some(40),
            merge: MergeOptions {
                output,
                ..Default::default()
            },
            ..Default::default()
        })
        .collect()
}

/// The CPU engine's output bytes for `options`.
fn cpu_bytes(options: &StreamOptions, dir: &std::path::Path) -> Vec<u8> {
    let out = dir.join("cpu.exr");
    merge_files(&inputs(), &out, options, MergeEngine::Cpu, None).unwrap();
    std::fs::read(out).unwrap()
}

#[test]
fn auto_whose_gpu_gives_no_context_merges_on_the_cpu_engine() {
    let dir = tempfile::tempdir().unwrap();
    for options in option_sets() {
        let expected = cpu_bytes(&options, dir.path());
        // Overlapped bands (a GPU's default, which a failed start looks like) and one band at a
        // time: the two streamed paths.
        for overlap in [true, false] {
            let what = format!("{:?}, overlap {overlap}", options.merge.output);
            let starting = StartingGl::failing("the driver refused the device", true).unwrap();
            let choice = EngineChoice::gl_starting_because(starting, " (auto: measured)".into());
            assert!(choice.is_gl(), "{what}: GL until a merge needs the context");
            let gl = GlOptions {
                overlap_bands: Some(overlap),
                ..Default::default()
            };
            let out = dir.path().join("auto.exr");
            let report = merge_files(&inputs(), &out, &options, choice.merging(gl), None)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(report.gpu_stats.is_none(), "{what}: no GPU work");
            assert!(
                std::fs::read(&out).unwrap() == expected,
                "{what}: the output differs from the CPU engine's"
            );
            // The status line's words: the CPU engine, and why.
            assert!(!choice.is_gl(), "{what}");
            assert_eq!(choice.name(), "cpu", "{what}");
            assert!(choice.context().is_none(), "{what}");
            assert!(choice.started_context().unwrap().is_none(), "{what}");
            assert_eq!(choice.gl_reason(), "", "{what}");
            assert_eq!(
                choice.cpu_reason(),
                " (deep output, but the GPU gave no GL context (OpenGL: the driver refused the \
                 device); on a GPU the GL engine would run)",
                "{what}"
            );
        }
    }
}

#[test]
fn asked_for_gl_a_gpu_that_gives_no_context_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let options = &option_sets()[1];
    let starting = StartingGl::failing("the driver refused the device", false).unwrap();
    let choice = EngineChoice::gl_starting(starting);
    let out = dir.path().join("gl.exr");
    let engine = choice.merging(GlOptions::default());
    let error =
        merge_files(&inputs(), &out, options, engine, None).expect_err("no context, no GL merge");
    assert!(
        error.to_string().contains("the driver refused the device"),
        "{error}"
    );
    assert!(!out.exists(), "a failed merge leaves no output");
    assert!(choice.is_gl(), "--backend gl does not fall back");
}

#[test]
fn auto_with_gpu_options_and_no_context_says_what_asked_for_gl() {
    let dir = tempfile::tempdir().unwrap();
    let options = &option_sets()[0];
    // As `choose_engine_with` starts it for `--backend auto` with GPU options.
    let starting = StartingGl::failing("the driver refused the device", false)
        .unwrap()
        .needed_for("GPU options were given");
    let choice = EngineChoice::gl_starting(starting);
    let out = dir.path().join("auto-options.exr");
    let error = merge_files(
        &inputs(),
        &out,
        options,
        choice.merging(GlOptions::default()),
        None,
    )
    .expect_err("no context, no GL merge");
    assert!(
        error.to_string().contains(
            "GPU options were given but no GL context can be made (OpenGL: the driver refused \
             the device)"
        ),
        "{error}"
    );
    assert!(!out.exists(), "a failed merge leaves no output");
}

#[test]
fn auto_runs_on_a_gpus_context_and_leaves_a_software_rasterisers_for_the_cpu_engine() {
    let dir = tempfile::tempdir().unwrap();
    for options in option_sets() {
        let expected = cpu_bytes(&options, dir.path());
        let what = format!("{:?}", options.merge.output);
        let starting = StartingGl::start_or_cpu().unwrap();
        let choice = EngineChoice::gl_starting_because(starting, " (auto: measured)".into());
        let out = dir.path().join("auto.exr");
        let report = merge_files(
            &inputs(),
            &out,
            &options,
            choice.merging(GlOptions::default()),
            None,
        )
        .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(
            std::fs::read(&out).unwrap() == expected,
            "{what}: the output differs from the CPU engine's"
        );
        let ctx = choice.started_context().unwrap();
        match ctx {
            // A GPU (or llvmpipe taken for one, `DEEPMERGE_GL_DEFAULTS=hardware`): GL ran.
            Some(ctx) => {
                assert!(!ctx.info().software, "{what}");
                assert!(report.gpu_stats.is_some(), "{what}: GL ran the bands");
                assert_eq!(choice.name(), "gl", "{what}");
                assert_eq!(choice.gl_reason(), " (auto: measured)", "{what}");
            }
            None => {
                assert!(report.gpu_stats.is_none(), "{what}: no GPU work");
                assert_eq!(choice.name(), "cpu", "{what}");
                assert!(
                    choice.cpu_reason().starts_with(
                        " (deep output, but the GL context came from the software rasteriser llvmpipe"
                    ),
                    "{what}: {}",
                    choice.cpu_reason()
                );
            }
        }
    }
}

/// From the command line: where `auto` runs a deep merge on GL (a GPU, or llvmpipe under
/// `DEEPMERGE_GL_DEFAULTS=hardware`), its context is made on the `gl-start` helper while the
/// merging thread opens the inputs (`DEEPMERGE_TIMELINE`), as `--backend gl`'s is; on a software
/// rasteriser `auto` keeps the CPU engine and makes no context at all.
#[test]
fn auto_makes_its_context_beside_the_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = inputs();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_deepmerge"))
        .args(&inputs)
        .args(["--deep", "--runstats", "-o"])
        .arg(dir.path().join("auto.exr"))
        .env("DEEPMERGE_AUTO_GL_MIN_BYTES", "0")
        .env(
            "RAYON_NUM_THREADS",
            deepmerge::backend::AUTO_GL_MIN_THREADS.to_string(),
        )
        .env("DEEPMERGE_TIMELINE", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{err}");
    let timeline = timeline_spans::spans(&err);
    let spans = |thread: &str, what: &str| {
        timeline
            .iter()
            .filter(|span| span.thread == thread && span.what == what)
            .count()
    };
    // The spans are read right: one every run has.
    assert_eq!(spans("main", "open the inputs"), 1, "{err}");
    if err.starts_with("deepmerge: merging 2 inputs with OpenGL on") {
        assert!(err.lines().next().unwrap().contains("(auto: "), "{err}");
        assert_eq!(spans("gl-start", "GL context"), 1, "{err}");
        assert_eq!(spans("main", "GL context"), 0, "{err}");
        assert_eq!(spans("main", "make the GL context current"), 1, "{err}");
    } else {
        assert!(
            err.starts_with("deepmerge: merging 2 inputs on the CPU engine (deep output, but the only GL device is the software rasteriser"),
            "{err}"
        );
        assert_eq!(spans("gl-start", "GL context"), 0, "{err}");
        assert_eq!(spans("main", "GL context"), 0, "{err}");
    }
}
