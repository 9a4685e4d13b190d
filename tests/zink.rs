//! The GL engine on a second OpenGL: Mesa's zink (OpenGL on Vulkan) over lavapipe, on the CPU.
//!
//! llvmpipe runs every dispatch and copy inside the call that issues it, so a host read that
//! does not wait for the GPU still finds the right bytes there. zink records the work and hands
//! it to lavapipe's queue thread, as a GPU driver hands it to the GPU, so the same read finds
//! what was there before: with the readback's fence wait left out, llvmpipe still wrote the
//! right pixels and zink wrong ones (the first test shows it). Strict mode's hazard checker
//! catches what the engine tells it about; zink catches what it was never told.
//!
//! `gpu-info --verify` on zink is left to a run by hand (`LIBGL_ALWAYS_SOFTWARE=1
//! GALLIUM_DRIVER=zink DEEPMERGE_GL_DEFAULTS=hardware deepmerge gpu-info --verify`: 3024 of 3024
//! equal on 2026-11-27): it compiles hundreds of program variants, and zink compiling each
//! through SPIR-V for lavapipe took over 400 s with no shader cache, as on a fresh machine.
//!
//! Every test here runs on zink with a GPU's defaults (mapped transfers, overlapped bands):
//! this binary points Mesa at zink before anything makes a context, and the CLI it runs inherits
//! that. zink missing (Debian: mesa-vulkan-drivers and libvulkan1, which `tests/run` installs)
//! is a failure, not a skip.

mod common;

use std::path::Path;
use std::sync::Once;

use deepmerge::composite::{merge_images, MergeOptions, MergeStrategy, OutputKind};
use deepmerge::gpu::{merge_images_gl, GlContext, GlOptions, Layout, TransferPath};

/// Point Mesa's EGL at zink on lavapipe, with a GPU's defaults, for this whole process: once,
/// before any test makes a context or starts the CLI (each test calls it first).
fn on_zink() {
    static ZINK: Once = Once::new();
    ZINK.call_once(|| {
        // zink's window-system code wants a runtime directory even without a window.
        let runtime = std::env::temp_dir().join(format!("deepmerge-zink-{}", std::process::id()));
        std::fs::create_dir_all(&runtime).unwrap();
        std::env::set_var("XDG_RUNTIME_DIR", &runtime);
        // A software driver was asked for, so Mesa takes lavapipe's CPU device: zink passes it
        // over otherwise.
        std::env::set_var("LIBGL_ALWAYS_SOFTWARE", "1");
        std::env::set_var("GALLIUM_DRIVER", "zink");
        std::env::set_var("DEEPMERGE_GL_DEFAULTS", "hardware");
        std::env::remove_var("DEEPMERGE_GL_STRICT");
    });
}

fn zink_context() -> GlContext {
    on_zink();
    let ctx = GlContext::new_with(false).unwrap_or_else(|e| {
        panic!("zink is required (apt-get install mesa-vulkan-drivers libvulkan1): {e}")
    });
    assert!(
        ctx.info().renderer.starts_with("zink"),
        "Mesa gave {} where zink was asked for (apt-get install mesa-vulkan-drivers libvulkan1)",
        ctx.info().renderer
    );
    ctx
}

/// A readback read before its copy has finished: zink returns what the copy had not written yet
/// (wrong pixels, or an image the host refuses as inconsistent, never a panic); waiting again,
/// every merge equals the CPU engine's. This is what makes zink worth running: llvmpipe passes
/// the unwaited reads too.
#[test]
fn zink_shows_a_readback_read_before_its_copy_finished() {
    let ctx = zink_context();
    ctx.set_transfer_path(TransferPath::Mapped).unwrap();
    let real = |name: &str| common::read(&common::data(&format!("openexr-images/{name}")), 0);
    let (leaves, trunks) = (real("Leaves.exr"), real("Trunks.exr"));
    let inputs = [&leaves, &trunks];
    // Both outputs whole, with the default options.
    let whole = [OutputKind::Flat { z: true }, OutputKind::Deep].map(|output| {
        let options = MergeOptions {
            output,
            ..Default::default()
        };
        (options, GlOptions::default())
    });
    ctx.use_readback_waits(false);
    for (options, gl) in &whole {
        let output = options.output;
        let reference = merge_images(&inputs, options).unwrap();
        match merge_images_gl(&ctx, &inputs, options, gl) {
            Ok((got, _)) => assert!(
                got != reference,
                "{output:?}: unwaited readbacks gave the right pixels on zink"
            ),
            Err(e) => assert!(e.to_string().contains("inconsistent"), "{output:?}: {e}"),
        }
    }
    // Whatever stale bytes come back, in every layout and strategy and in small bands, the host
    // checks them before following a sample reference: wrong pixels or an error, never a panic
    // (a front sample naming input 181774 of 2 was an index out of bounds).
    for (options, gl) in small_band_cases() {
        if let Err(e) = merge_images_gl(&ctx, &inputs, &options, &gl) {
            let text = e.to_string();
            let what = format!("{:?} {:?}", gl.layout, options.strategy);
            assert!(text.contains("inconsistent"), "{what}: {text}");
        }
    }
    ctx.use_readback_waits(true);
    ctx.finish();
    // Waiting again: whole, and in every layout and strategy in 1 MiB bands (bands overlapped,
    // buffers and readbacks reused across them).
    for (options, gl) in whole.into_iter().chain(small_band_cases()) {
        let what = format!(
            "{:?} {:?} {:?}",
            gl.layout, options.strategy, options.output
        );
        let reference = merge_images(&inputs, &options).unwrap();
        let (got, _) =
            merge_images_gl(&ctx, &inputs, &options, &gl).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(got == reference, "{what}: zink differs from the CPU engine");
    }
}

/// Every layout and strategy, flat and deep, in 1 MiB bands (several bands of the real pair).
fn small_band_cases() -> Vec<(MergeOptions, GlOptions)> {
    let mut cases = Vec::new();
    for layout in Layout::ALL {
        for strategy in MergeStrategy::ALL {
            for output in [OutputKind::Flat { z: true }, OutputKind::Deep] {
                let options = MergeOptions {
                    output,
                    strategy,
                    ..Default::default()
                };
                let gl = GlOptions {
                    layout,
                    band_budget_bytes: 1 << 20,
                    ..GlOptions::default()
                };
                cases.push((options, gl));
            }
        }
    }
    cases
}

/// The CLI on zink writes the CPU engine's bytes: two and three real inputs, flat and deep, with
/// strict mode off (zink alone judges) and on.
#[test]
fn the_cli_on_zink_writes_the_cpu_engines_bytes() {
    on_zink();
    let dir = tempfile::tempdir().unwrap();
    let files = |names: &[&str]| -> Vec<String> {
        names
            .iter()
            .map(|n| {
                common::data(&format!("openexr-images/{n}"))
                    .display()
                    .to_string()
            })
            .collect()
    };
    let pairs = [
        files(&["Leaves.exr", "Trunks.exr"]),
        files(&["Balls.exr", "Leaves.exr", "Trunks.exr"]),
    ];
    let merge = |inputs: &[String], deep: bool, backend: &str, strict: bool, out: &Path| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_deepmerge"));
        command
            .args(inputs)
            .args(["--backend", backend, "-o"])
            .arg(out);
        if deep {
            command.arg("--deep");
        }
        if strict {
            command.env("DEEPMERGE_GL_STRICT", "1");
        }
        let done = command.output().unwrap();
        let stderr = String::from_utf8_lossy(&done.stderr).into_owned();
        assert!(done.status.success(), "{backend}: {stderr}");
        std::fs::read(out).unwrap_or_else(|e| panic!("{}: {e}", out.display()))
    };
    for (k, inputs) in pairs.iter().enumerate() {
        for deep in [false, true] {
            let cpu = merge(inputs, deep, "cpu", false, &dir.path().join("cpu.exr"));
            for strict in [false, true] {
                let gl = merge(inputs, deep, "gl", strict, &dir.path().join("gl.exr"));
                assert!(
                    gl == cpu,
                    "inputs {k}, deep {deep}, strict {strict}: zink's bytes differ"
                );
            }
        }
    }
}
