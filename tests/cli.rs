//! The command line end to end: info reports, option checks, deep output.
//!
//! GL runs state where the sort and tidy stages run (`--gpu-stages gpu|host`) and compare at the
//! tolerance that follows (`gpu_common::assert_merge_matches`), except the README command and
//! the backend choice, which test the defaults on purpose and hold on llvmpipe and on a GPU.

mod common;
mod gpu_common;
use common::*;
use deepmerge::composite::{MergeOptions, MergeOutput, OutputKind};
use gpu_common::{assert_merge_matches, Reference, Stages};

#[test]
fn info_reports_parts_windows_channels_and_complexity() {
    let file = data("openexr-images/Stereo-Trunks-multipart.exr");
    let (ok, out, err) = run(&["info", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains("2 part(s)"), "{out}");
    assert!(
        out.contains("part 1 \"rgba.right\": deep scanline"),
        "{out}"
    );
    assert!(
        out.contains("data window: (0,266)-(1882,1079) 1883x814"),
        "{out}"
    );
    assert!(
        out.contains("channels: A (half), B (half), G (half), R (half), Z (float)"),
        "{out}"
    );
    assert!(
        out.contains("samples: 193453 total, max 2 per pixel"),
        "{out}"
    );
    assert!(
        out.contains("depth complexity (pixels): <=16: 1532762, 16-64: 0"),
        "{out}"
    );
    let tiled = data("oiio/deepalpha.exr");
    let (ok, out, _) = run(&["info", tiled.to_str().unwrap()]);
    assert!(ok);
    assert!(
        out.contains("deep tiled") && out.contains("tiles: 64x64"),
        "{out}"
    );
    assert!(out.contains("max 22 per pixel"), "{out}");
    let flat = data("openexr-images/composited.exr");
    let (ok, out, _) = run(&["info", flat.to_str().unwrap()]);
    assert!(ok && out.contains("flat scanline"), "{out}");
}

#[test]
fn options_that_do_not_apply_are_refused_not_ignored() {
    let a = data("openexr-images/Balls.exr");
    let b = data("openexr-images/Trunks.exr");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.exr");
    let base = [
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ];
    for (extra, expect) in [
        (
            &["--backend", "cpu", "--layout", "bia"][..],
            "--layout chooses how the GPU merges; it does not apply to --backend cpu",
        ),
        (
            &["--backend", "cpu", "--gpu-stages", "gpu", "--stats"][..],
            "--gpu-stages, --stats choose how the GPU merges; they do not apply to --backend cpu",
        ),
        (
            &["--backend", "cpu", "--deep", "--flat-z"][..],
            "--flat-z applies to flat output, not --deep",
        ),
        (
            &["--backend", "cpu", "--tidy"][..],
            "--tidy applies to deep output; add --deep",
        ),
        (
            &["--backend", "cpu", "--no-deep-state"][..],
            "--no-deep-state applies to deep output; add --deep",
        ),
        (
            &["--backend", "cpu", "--drop-hidden"][..],
            "--drop-hidden applies to deep output; add --deep",
        ),
        (
            &["--backend", "cpu", "--channels", "R,G,b"][..],
            "no input has a channel \"b\" (the inputs' channels: A, B, G, R, Z)",
        ),
        (
            &["--backend", "cpu", "--channels", "r,g,b,a"][..],
            "no input has a channel \"r\"",
        ),
        (
            &["--backend", "cpu", "--deep", "--compression", "zip"][..],
            "OpenEXR accepts none, rle, zips and zstd for deep parts",
        ),
        (
            &["--backend", "cpu", "--zstd-level", "3"][..],
            "--zstd-level applies to --compression zstd",
        ),
        (
            &[
                "--backend",
                "cpu",
                "--compression",
                "zstd",
                "--zstd-level",
                "23",
            ][..],
            "--zstd-level must be 1 to 22, not 23",
        ),
        // The old spelling is an alias: the refusal names the option by its name.
        (
            &["--backend", "cpu", "--max-memory", "0"][..],
            "--memory-budget: a memory size must be positive",
        ),
        (
            &["--backend", "cpu", "--memory-budget", "0"][..],
            "--memory-budget: a memory size must be positive",
        ),
        (
            &["--backend", "cpu", "--memory-budget", "lots"][..],
            "--memory-budget: a memory size is a number of GiB or a number with a unit",
        ),
    ] {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        let (ok, _, err) = run(&args);
        assert!(!ok, "{extra:?} should be refused");
        assert!(err.contains(expect), "{extra:?}: {err}");
        assert!(!out.exists());
    }
    // One input is a flatten now (tests/ops.rs compares it with `deepmerge flatten`).
    let (ok, _, err) = run(&[a.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert!(ok && out.exists(), "one input flattens: {err}");
}

#[test]
fn deep_output_from_the_cli_reads_back_with_every_sample() {
    let a = data("openexr-images/Balls.exr");
    let b = data("openexr-images/Trunks.exr");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("deep.exr");
    let (ok, _, err) = run(&[
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--backend",
        "cpu",
        "--deep",
        "--compression",
        "rle",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let merged = read(&out, 0);
    assert_eq!(merged.sample_count(), 162_877 + 49_152);
    assert_eq!(
        merged.data_window,
        read(&a, 0).data_window.union(&read(&b, 0).data_window)
    );
    // Balls and Trunks each hold pixels with two samples at one Z: by OpenEXR's definition
    // (strictly increasing (Z, ZBack)) such a pixel is not sorted, so nothing is claimed.
    let (ok, info, _) = run(&["info", out.to_str().unwrap()]);
    assert!(ok && info.contains("deep image state: messy"), "{info}");
}

#[test]
fn gl_backend_gives_the_cpu_result_through_the_readme_command() {
    let a = data("openexr-images/Balls.exr");
    let b = data("openexr-images/Trunks.exr");
    let dir = tempfile::tempdir().unwrap();
    let gl = dir.path().join("gl.exr");
    let cpu = dir.path().join("cpu.exr");
    // The documented usage (docs/cli.md): auto backend, BIA layout, register-block merging, the
    // default stages on purpose (the host's on llvmpipe, the GPU's on hardware). The files hold no
    // volumes, so there is nothing to tidy and sorting is exact: the same bytes either way.
    let (ok, _, err) = run(&[
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--layout",
        "bia",
        "--rbm",
        "-o",
        gl.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    // A merge prints only what the user needs: the engine's line waits for --runstats.
    assert!(err.is_empty(), "says nothing by default: {err}");
    let (ok, _, err) = run(&[
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--layout",
        "bia",
        "--rbm",
        "--runstats",
        "-o",
        gl.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(err.contains("with OpenGL on"), "says which engine: {err}");
    let (ok, _, err) = run(&[
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--backend",
        "cpu",
        "-o",
        cpu.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert_eq!(err, "", "the CPU engine asked for says nothing: {err}");
    // `auto` with --runstats says which engine it picked and why.
    let (ok, _, err) = run(&[
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--runstats",
        "-o",
        cpu.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let first = err.lines().next().unwrap_or_default();
    assert_eq!(
        first,
        format!(
            "deepmerge: merging 2 inputs on the CPU engine{}",
            deepmerge::backend::AUTO_PICKS_CPU
        ),
        "auto names its engine and why: {err}"
    );
    assert_eq!(std::fs::read(&gl).unwrap(), std::fs::read(&cpu).unwrap());
    // --stats prints the memory per buffer (the paper's Table 4). The inputs are unsorted
    // ("messy"): `--gpu-stages gpu` sorts them with `sort.comp`, exactly.
    let (ok, _, err) = run(&[
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--backend",
        "gl",
        "--layout",
        "ll",
        "--stepwise",
        "--gpu-stages",
        "gpu",
        "--stats",
        "-o",
        gl.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    // Two inputs merge in one k-way pass by default, which the stats and the announce say.
    assert!(err.contains("LL k-way") && err.contains("next"), "{err}");
    assert_eq!(std::fs::read(&gl).unwrap(), std::fs::read(&cpu).unwrap());
}

/// `--merge-strategy kway|chain`: three inputs give the same bytes whichever way they merge,
/// on both engines, deep and flat; a strategy that does not exist is a usage error.
#[test]
fn merge_strategies_give_the_same_files_on_both_engines() {
    let inputs = ["Balls.exr", "Leaves.exr", "Trunks.exr"].map(|f| {
        data(&format!("openexr-images/{f}"))
            .to_str()
            .unwrap()
            .to_string()
    });
    let dir = tempfile::tempdir().unwrap();
    for output in [&[][..], &["--deep"][..]] {
        let mut files = Vec::new();
        for backend in ["cpu", "gl"] {
            for strategy in ["kway", "chain"] {
                let out = dir
                    .path()
                    .join(format!("{backend}-{strategy}-{}.exr", output.len()));
                let mut args: Vec<&str> = inputs.iter().map(String::as_str).collect();
                args.extend([
                    "--backend",
                    backend,
                    "--merge-strategy",
                    strategy,
                    "-q",
                    "-o",
                ]);
                args.push(out.to_str().unwrap());
                args.extend(output);
                let (ok, _, err) = run(&args);
                assert!(ok, "{backend} {strategy}: {err}");
                files.push((
                    format!("{backend} {strategy}"),
                    std::fs::read(&out).unwrap(),
                ));
            }
        }
        for (name, bytes) in &files[1..] {
            assert!(
                bytes == &files[0].1,
                "{name} differs from {} {output:?}",
                files[0].0
            );
        }
    }
    let (ok, _, err) = run(&[
        &inputs[0],
        &inputs[1],
        "--merge-strategy",
        "tree",
        "-o",
        dir.path().join("x.exr").to_str().unwrap(),
    ]);
    assert!(!ok && err.contains("--merge-strategy"), "{err}");
}

#[test]
fn gpu_info_names_the_renderer_and_limits() {
    let (ok, out, err) = run(&["gpu-info"]);
    assert!(
        ok,
        "GL must be available (Mesa llvmpipe): apt-get install libegl1 libgl1-mesa-dri\n{err}"
    );
    assert!(out.contains("renderer:"), "{out}");
    assert!(out.contains("max shader storage block:"), "{out}");
}

#[test]
fn holdout_subcommand_writes_a_deep_result() {
    let input = data("oiio/input-crop.deep.exr");
    let hold = data("oiio/holdout-crop.deep.exr");
    let dir = tempfile::tempdir().unwrap();
    for (extra, name) in [(None, "held.exr"), (Some("--cull"), "culled.exr")] {
        let out = dir.path().join(name);
        let mut args = vec![
            "holdout",
            input.to_str().unwrap(),
            hold.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ];
        args.extend(extra);
        let (ok, _, err) = run(&args);
        assert!(ok, "{err}");
        let held = read(&out, 0);
        let original = read(&input, 0);
        assert_eq!(held.data_window, original.data_window);
        assert!(
            held.sample_count() < original.sample_count(),
            "{name}: the holdout removes samples"
        );
    }
    let (ok, _, err) = run(&[
        "holdout",
        input.to_str().unwrap(),
        hold.to_str().unwrap(),
        "-o",
        input.to_str().unwrap(),
    ]);
    assert!(!ok && err.contains("output path is also an input"), "{err}");
}

#[test]
fn sort_flags_conflict() {
    let a = data("openexr-images/Balls.exr");
    let (ok, _, err) = run(&[
        a.to_str().unwrap(),
        a.to_str().unwrap(),
        "--sort",
        "--assume-sorted",
        "-o",
        "/tmp/never.exr",
    ]);
    assert!(!ok && err.contains("cannot be used with"), "{err}");
}

#[test]
fn scene_and_heatmap_subcommands_write_files() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("planes");
    let (ok, out, err) = run(&[
        "scene",
        "planes",
        "--size",
        "67x35",
        "--seed",
        "3",
        "--inputs",
        "4",
        "-o",
        prefix.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert_eq!(out.lines().count(), 4, "{out}");
    let first = dir.path().join("planes_0.exr");
    let image = read(&first, 0);
    assert_eq!(image.data_window.width(), 67);
    assert!(image.sample_count() > 0);
    let png = dir.path().join("heat.png");
    let (ok, _, err) = run(&[
        "heatmap",
        first.to_str().unwrap(),
        "-o",
        png.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    let (ok, _, err) = run(&["scene", "nosuch", "-o", prefix.to_str().unwrap()]);
    assert!(!ok && err.contains("possible values"), "{err}");
}

#[test]
fn measurement_settings_are_checked_whatever_the_engine_and_misspelt_ones_are_named() {
    let a = data("openexr-images/Balls.exr");
    let b = data("openexr-images/Trunks.exr");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.exr");
    let flat = dir.path().join("flat.exr");
    let (a, b, out, flat) = (
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        out.to_str().unwrap(),
        flat.to_str().unwrap(),
    );
    let merge = [a, b, "--backend", "cpu", "-o", out];
    // The exit code and stderr of the CLI run with `args` and the variables `env`.
    let with = |args: &[&str], env: &[(&str, &str)]| {
        let mut command = deepmerge();
        command.args(args).envs(env.iter().copied());
        let run = command.output().unwrap();
        (
            run.status.code(),
            String::from_utf8_lossy(&run.stderr).into_owned(),
        )
    };
    // A GL setting's bad value is refused by name under the CPU engine too, before any file
    // is written (a GL context would have refused it; the CPU engine never makes one).
    for (name, value, says) in [
        ("DEEPMERGE_GL_TRANSFER", "bogus", "use mapped or calls"),
        ("DEEPMERGE_GL_BAND_CAP", "lots", "from 1M to 16G"),
        ("DEEPMERGE_AUTO_GL_MIN_BYTES", "lots", "number of bytes"),
    ] {
        let (code, err) = with(&merge, &[(name, value)]);
        assert_eq!(code, Some(2), "{name}={value}: {err}");
        assert!(
            err.contains(&format!("{name}={value}")) && err.contains(says),
            "{name}={value}: {err}"
        );
        assert!(
            !std::path::Path::new(out).exists(),
            "{name}={value} wrote an output"
        );
    }
    // A name deepmerge does not read is most likely a slip: one warning naming the nearest
    // setting, and the run goes on with the same bytes as without it.
    let slip = [("DEEPMERGE_GL_TRANSFR", "calls")];
    assert_eq!(with(&merge, &[]), (Some(0), String::new()));
    let plain = std::fs::read(out).unwrap();
    let (code, err) = with(&merge, &slip);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        err.trim_end(),
        "deepmerge: warning: DEEPMERGE_GL_TRANSFR is not a setting deepmerge reads (did you \
         mean DEEPMERGE_GL_TRANSFER?); it is ignored"
    );
    assert!(std::fs::read(out).unwrap() == plain);
    // `-q` is nothing but errors, on the merge and on a subcommand.
    assert_eq!(
        with(&[&merge[..], &["-q"]].concat(), &slip),
        (Some(0), String::new())
    );
    let flatten = ["flatten", a, "-q", "-o", flat];
    assert_eq!(with(&flatten, &slip), (Some(0), String::new()));
}

#[test]
fn backend_choice_without_gl_and_with_software_gl() {
    let a = data("openexr-images/Balls.exr");
    let b = data("openexr-images/Trunks.exr");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.exr");
    let args = [
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ];
    // No EGL vendor at all: `--backend gl` is a clear error.
    let no_gl = |extra: &[&str]| {
        deepmerge()
            .args(args)
            .args(extra)
            .env(
                "__EGL_VENDOR_LIBRARY_FILENAMES",
                "/nonexistent/egl_vendor.json",
            )
            .output()
            .unwrap()
    };
    let forced = no_gl(&["--backend", "gl"]);
    let err = String::from_utf8_lossy(&forced.stderr);
    assert!(!forced.status.success());
    assert!(
        err.contains("OpenGL: no EGL devices") && err.contains("libgl1-mesa-dri"),
        "{err}"
    );
    assert!(!out.exists());
    // `auto` runs on the CPU without asking EGL anything, so a machine without GL merges.
    let auto = no_gl(&[]);
    let err = String::from_utf8_lossy(&auto.stderr);
    assert!(auto.status.success(), "{err}");
    // The default on purpose: `auto` picks the CPU engine (measured faster end to end on
    // llvmpipe and on an H100) and, being the default, says nothing on stderr.
    assert_eq!(err, "", "the default engine needs no line");
    std::fs::remove_file(&out).unwrap();
    let (ok, _, err) = run(&args);
    assert!(ok, "{err}");
    assert_eq!(err, "", "the default engine needs no line");
}

#[test]
fn gpu_stages_place_the_deep_tidy_from_the_cli() {
    // A volumetric file merged with itself: every volume meets its twin over the same interval,
    // so `--tidy` merges them. `--gpu-stages gpu` makes the GL backend tidy on the GPU even on
    // llvmpipe (within the stage's f32 tolerance of the reference where it tidied), `host` on
    // the host even on a GPU (bit-identical); the CPU engine is the reference itself.
    let a = data("oiio/input-crop.deep.exr");
    let dir = tempfile::tempdir().unwrap();
    let path = a.to_str().unwrap();
    let input = read(&a, 0);
    let options = MergeOptions {
        output: OutputKind::Deep,
        tidy: true,
        ..Default::default()
    };
    let reference = Reference::new(&[&input, &input], &options);
    let tidied = reference.tidied_pixels();
    assert!(tidied > 100, "{tidied} pixels to tidy");
    let merge = |backend: &[&str], name: &str| {
        let out = dir.path().join(name);
        let (ok, _, err) = run(&[
            &[path, path, "--deep", "--tidy", "-o", out.to_str().unwrap()][..],
            backend,
        ]
        .concat());
        assert!(ok, "{name}: {err}");
        (MergeOutput::Deep(read(&out, 0)), err)
    };
    let (cpu, _) = merge(&["--backend", "cpu"], "cpu.exr");
    assert_merge_matches(&cpu, &reference, Stages::Host, "CPU engine");
    for stages in Stages::BOTH {
        let (gl, err) = merge(
            &[&["--backend", "gl", "--stats"][..], &stages.cli()[..]].concat(),
            "gl.exr",
        );
        let (on_gpu, on_host) = tidied_counts(&err);
        match stages {
            Stages::Gpu => assert!(on_gpu > 100 && on_host == 0, "{err}"),
            Stages::Host => assert!(on_gpu == 0 && on_host == tidied as u64, "{err}"),
        }
        assert_merge_matches(&gl, &reference, stages, &format!("{stages:?} stages"));
    }
    // Bad value: clap names the choices.
    let (ok, _, err) = run(&[path, path, "--gpu-stages", "fast", "-o", "x.exr"]);
    assert!(!ok && err.contains("auto") && err.contains("host"), "{err}");
}

/// The pixels `--stats` says were tidied on the GPU and on the host.
fn tidied_counts(stats: &str) -> (u64, u64) {
    let after = |key: &str| -> u64 {
        stats
            .split(key)
            .nth(1)
            .and_then(|s| s.split([' ', ')']).find(|w| !w.is_empty()))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("--stats names the pixels tidied ({key}): {stats}"))
    };
    let on_gpu = after("tidied: ");
    let on_host = after("on the GPU, ");
    (on_gpu, on_host)
}

/// Issue 27's one options model, as a new user meets it: every command takes the output
/// options that apply and refuses the others with exit 2, a PNG takes no EXR option, the same
/// mistake gets the same exit code everywhere, and stderr holds only what a user needs.
#[test]
fn one_options_model_for_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let p = |name: &str| d.join(name).display().to_string();
    let balls = data("openexr-images/Balls.exr").display().to_string();
    let trunks = data("openexr-images/Trunks.exr").display().to_string();
    let code = |args: &[&str]| {
        let out = common::deepmerge().args(args).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // A PNG preview refuses every EXR option, on the merge as on the operations.
    for extra in [
        &["--compression", "rle"][..],
        &["--zstd-level", "3", "--compression", "zstd"],
        &["--flat-z"],
        &["--flat-type", "float"],
        &["--metadata", "none"],
    ] {
        let png = p("x.png");
        let (c, err) = code(&[&[balls.as_str(), trunks.as_str(), "-o", &png][..], extra].concat());
        assert_eq!(c, Some(2), "{extra:?}: {err}");
        assert!(err.contains("not a PNG preview"), "{extra:?}: {err}");
        let (c, err) = code(&[&["flatten", balls.as_str(), "-o", &png][..], extra].concat());
        assert_eq!(c, Some(2), "flatten {extra:?}: {err}");
        assert!(!d.join("x.png").exists());
    }
    // flatten takes --compression and --metadata, with the bytes of the merge of one input.
    let (c, err) = code(&[
        "flatten",
        &balls,
        "--compression",
        "rle",
        "--metadata",
        "none",
        "-o",
        &p("f.exr"),
    ]);
    assert_eq!(c, Some(0), "{err}");
    assert_eq!(err, "", "a flatten says nothing");
    let (c, err) = code(&[
        &balls,
        "--compression",
        "rle",
        "--metadata",
        "none",
        "-o",
        &p("m.exr"),
    ]);
    assert_eq!(c, Some(0), "{err}");
    assert_eq!(err, "", "a merge on the default engine says nothing");
    assert!(std::fs::read(p("f.exr")).unwrap() == std::fs::read(p("m.exr")).unwrap());
    let plain = p("plain.exr");
    assert_eq!(code(&["flatten", &balls, "-o", &plain]).0, Some(0));
    assert!(std::fs::read(&plain).unwrap() != std::fs::read(p("f.exr")).unwrap());
    // A channel no input has is a usage error (2) everywhere, naming the file.
    let multi = data("openexr/multivariate.deep.exr").display().to_string();
    for args in [
        vec![balls.as_str(), "--channels", "nope", "-o", "o1.exr"],
        vec!["idselect", multi.as_str(), "--id", "nope=1", "-o", "o2.exr"],
    ] {
        let mut args = args.clone();
        let last = args.len() - 1;
        let out = p(args[last]);
        args[last] = &out;
        let (c, err) = code(&args);
        assert_eq!(c, Some(2), "{args:?}: {err}");
        assert!(err.contains("nope"), "{err}");
    }
}
