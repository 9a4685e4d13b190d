//! Strict mode (`gpu::strict`), which every GL test runs in: llvmpipe made as strict as a GPU.
//! - The hazard checker fails the buffer pool as it was before release fences (a buffer handed
//!   to its next user while a dispatch issued before its release may still read it: the wrong
//!   pixels of chained merges on an NVIDIA H100), on llvmpipe, where no output comparison shows
//!   it, and passes the same merges with the fences, whose outputs equal the reference.
//! - Poison: buffers whose caller did not ask for zeros start as NaN and 0xFFFFFFFF words.
//! - GL errors and high- or medium-severity `KHR_debug` messages of the types that say something
//!   is wrong are failures (performance notes are not).
//!
//! Each test makes its own strict context (not the shared one of `gpu_common::with_gl`), so
//! what it finds is its own.

mod gpu_common;

use deepmerge::composite::{MergeOptions, MergeStrategy, OutputKind};
use deepmerge::deep::{Bounds, DeepImage};
use deepmerge::gpu::{merge_images_gl, GlContext, Layout, MergeMethod, PixelOrder};
use glow::HasContext;
use gpu_common::{assert_merge_matches, Reference, Stages, Synth};

fn strict_context() -> GlContext {
    let ctx = GlContext::new_with(true).unwrap_or_else(|e| {
        panic!("a GL context is required (apt-get install libegl1 libgl1-mesa-dri): {e}")
    });
    assert!(ctx.is_strict());
    ctx
}

/// Two overlapping messy inputs with long lists and volumes, like the hairball's first input.
fn inputs() -> Vec<DeepImage> {
    let window = Bounds {
        x0: 0,
        y0: 0,
        x1: 30,
        y1: 12,
    };
    let mut first = Synth::new(window, 40, 7).with_volumes();
    first.messy = true;
    vec![
        first.build(),
        Synth::new(window, 6, 8).with_volumes().build(),
    ]
}

fn cases() -> Vec<(MergeOptions, Layout)> {
    let mut out = Vec::new();
    for strategy in MergeStrategy::ALL {
        for output in [OutputKind::Flat { z: true }, OutputKind::Deep] {
            for layout in [Layout::LinkedList, Layout::Linearised] {
                let options = MergeOptions {
                    strategy,
                    output,
                    sort: deepmerge::composite::SortPolicy::Always,
                    ..Default::default()
                };
                out.push((options, layout));
            }
        }
    }
    out
}

#[test]
fn the_checker_fails_the_unfenced_pool_and_passes_the_fenced_one() {
    let ctx = strict_context();
    let images = inputs();
    let refs: Vec<&DeepImage> = images.iter().collect();
    // As the pool was before release fences: every reuse of a buffer a dispatch read is a
    // hazard, and the checker names both uses.
    ctx.use_release_fences(false);
    let mut failures = Vec::new();
    for (options, layout) in cases() {
        let gl = Stages::Host.cell(layout, MergeMethod::Stepwise, 4, PixelOrder::RowMajor);
        let result = merge_images_gl(&ctx, &refs, &options, &gl)
            .map(|_| ())
            .and_then(|_| ctx.strict_report());
        if let Err(e) = result {
            let text = e.to_string();
            assert!(text.contains("hazard: pool take of buffer"), "{text}");
            assert!(text.contains("is not known finished"), "{text}");
            failures.push(text);
        }
    }
    assert_eq!(failures.len(), cases().len(), "every merge reuses a buffer");
    assert!(
        failures
            .iter()
            .any(|f| f.contains("while its use by dispatch of")),
        "some buffer was taken again while a dispatch may still read it: {failures:#?}"
    );
    // With the fences every merge passes, and matches the reference. The buffers released
    // unfenced above are safe again only once the GPU has finished.
    ctx.use_release_fences(true);
    ctx.finish();
    let before = ctx.fence_stats();
    for (options, layout) in cases() {
        let what = format!("{:?} {:?} {layout:?}", options.strategy, options.output);
        let gl = Stages::Host.cell(layout, MergeMethod::Stepwise, 4, PixelOrder::RowMajor);
        let (got, _) =
            merge_images_gl(&ctx, &refs, &options, &gl).unwrap_or_else(|e| panic!("{what}: {e}"));
        ctx.strict_report()
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let reference = Reference::new(&refs, &options);
        assert_merge_matches(&got, &reference, Stages::Host, &what);
    }
    let after = ctx.fence_stats();
    assert!(after.fences > before.fences, "releases made fences");
    // llvmpipe has finished every dispatch by the time a buffer is taken again, so no reuse
    // needed the GPU to wait; on a GPU some do.
    assert!(
        after.reuses_done + after.reuses_waited > before.reuses_done + before.reuses_waited,
        "buffers were reused under their fences"
    );
}

#[test]
fn buffers_nobody_asked_zeros_of_start_as_poison() {
    let ctx = strict_context();
    let scratch = ctx.scratch(64).unwrap();
    let words: Vec<u32> = scratch.read(16);
    assert!(words.contains(&0x7fc0_0000), "{words:x?}");
    assert!(words.contains(&0xffff_ffff), "{words:x?}");
    assert!(words.iter().all(|&w| w == 0x7fc0_0000 || w == 0xffff_ffff));
    drop(scratch);
    // The same storage again from the pool, asked for zeros: zeros.
    let zeroed = ctx.zeroed(64).unwrap();
    assert_eq!(zeroed.read::<u32>(16), vec![0; 16]);
    drop(zeroed);
    // An upload shorter than its buffer leaves poison after the data.
    let uploaded = ctx.upload(&[1u32, 2, 3]).unwrap();
    let words: Vec<u32> = uploaded.read(4);
    assert_eq!(&words[..3], &[1, 2, 3]);
    assert_eq!(words[3], 0xffff_ffff);
    ctx.strict_report().unwrap();
}

#[test]
fn gl_errors_and_debug_messages_fail() {
    let ctx = strict_context();
    // SAFETY: an invalid enum on purpose: GL records GL_INVALID_ENUM and does nothing.
    unsafe { ctx.gl.bind_buffer(0x1234, None) };
    let error = ctx.strict_report().unwrap_err().to_string();
    assert!(error.contains("GL error 0x0500"), "{error}");
    ctx.strict_report().expect("reported once");
    // A debug context is asked for in strict mode; where the driver gives one, its high and
    // medium messages fail (llvmpipe gives one).
    if ctx.gl.supports_debug() {
        // SAFETY: an application message, as a driver would send one.
        unsafe {
            ctx.gl.debug_message_insert(
                glow::DEBUG_SOURCE_APPLICATION,
                glow::DEBUG_TYPE_ERROR,
                7,
                glow::DEBUG_SEVERITY_HIGH,
                "a made-up driver complaint",
            )
        };
        let error = ctx.strict_report().unwrap_err().to_string();
        assert!(error.contains("a made-up driver complaint"), "{error}");
        // Low severity is not a failure.
        unsafe {
            ctx.gl.debug_message_insert(
                glow::DEBUG_SOURCE_APPLICATION,
                glow::DEBUG_TYPE_OTHER,
                8,
                glow::DEBUG_SEVERITY_LOW,
                "a remark",
            )
        };
        ctx.strict_report().unwrap();
        // Nor is a performance note, whatever its severity: NVIDIA sends one at medium
        // severity whenever it moves a buffer between video and host memory.
        unsafe {
            ctx.gl.debug_message_insert(
                glow::DEBUG_SOURCE_APPLICATION,
                glow::DEBUG_TYPE_PERFORMANCE,
                131186,
                glow::DEBUG_SEVERITY_MEDIUM,
                "Buffer performance warning: a buffer is being moved",
            )
        };
        ctx.strict_report().unwrap();
        // Undefined behaviour at medium severity is a failure.
        unsafe {
            ctx.gl.debug_message_insert(
                glow::DEBUG_SOURCE_APPLICATION,
                glow::DEBUG_TYPE_UNDEFINED_BEHAVIOR,
                9,
                glow::DEBUG_SEVERITY_MEDIUM,
                "an undefined read",
            )
        };
        let error = ctx.strict_report().unwrap_err().to_string();
        assert!(error.contains("an undefined read"), "{error}");
    } else {
        assert!(!ctx.info().software, "llvmpipe offers KHR_debug");
    }
}

#[test]
fn the_environment_switches_strict_mode_and_a_plain_context_checks_nothing() {
    let plain = GlContext::new_with(false).unwrap();
    assert!(!plain.is_strict());
    // SAFETY: as above; outside strict mode the engine's next check finds it, not a report.
    unsafe { plain.gl.bind_buffer(0x1234, None) };
    plain.strict_report().unwrap();
    assert_eq!(deepmerge::gpu::strict::STRICT_ENV, "DEEPMERGE_GL_STRICT");
}
