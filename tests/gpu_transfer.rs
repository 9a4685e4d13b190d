//! Host transfers (`gpu::mapped`) and overlapped bands, in strict mode: the mapped path
//! (parallel host writes into persistently mapped staging, GPU copies, fenced readbacks) and the
//! calls path (`glBufferSubData`, `glGetBufferSubData`) give the reference merge's bytes, with
//! and without bands overlapping (the next band's work issued before the last band is read
//! back), in every layout and output, k-way and chained, with staging rounds and readback
//! chunks cut small so that every band takes many of them. The hazard checker sees every host
//! write into and read out of mapped memory, so a missing fence wait fails here on llvmpipe.

// MergeOptions is built with `..Default::default()` even where every field is named today.
#![allow(clippy::needless_update)]

mod gpu_common;

use deepmerge::composite::{MergeOptions, MergeStrategy};
use deepmerge::deep::Bounds;
use deepmerge::gpu::{GlContext, GlOptions, Layout, TransferPath};
use gpu_common::{assert_gl_matches_reference, outputs, real, with_gl, Stages, Synth};

/// Run `job` with `path` and rounds of `round_bytes`, then put the context's defaults back.
fn with_transfer<R>(
    ctx: &GlContext,
    path: TransferPath,
    round_bytes: Option<usize>,
    job: impl FnOnce() -> R,
) -> R {
    let before = ctx.transfer_path();
    ctx.set_transfer_path(path)
        .expect("llvmpipe has buffer storage (GL 4.5)");
    ctx.set_transfer_round_bytes(round_bytes);
    let result = job();
    ctx.set_transfer_round_bytes(None);
    ctx.set_transfer_path(before).expect("the default path");
    result
}

#[test]
fn the_context_asks_for_the_highest_version_and_maps_buffers_on_hardware_only() {
    with_gl(|ctx| {
        let info = ctx.info();
        assert!(
            info.version.starts_with("4.5") || info.version.starts_with("4.6"),
            "a 4.3 request would have capped the version: {}",
            info.version
        );
        assert!(info.buffer_storage, "{info}");
        // A software rasteriser's buffers are host memory: mapping would only add a copy.
        let expected = if info.software {
            TransferPath::Calls
        } else {
            TransferPath::Mapped
        };
        assert_eq!(ctx.transfer_path(), expected, "{info}");
    });
}

#[test]
fn both_paths_with_and_without_overlap_give_the_reference_bytes() {
    with_gl(|ctx| {
        let a = Synth::new(Bounds::from_origin_size(0, 0, 70, 40), 12, 8).build();
        let b = Synth::new(Bounds::from_origin_size(5, 3, 64, 40), 12, 9).build();
        for path in [TransferPath::Mapped, TransferPath::Calls] {
            // 4 KiB rounds: every band stages and reads back in several rounds and chunks.
            with_transfer(ctx, path, Some(4096), || {
                for layout in Layout::ALL {
                    for options in outputs() {
                        for strategy in [MergeStrategy::KWay, MergeStrategy::Chain] {
                            for overlap in [false, true] {
                                let gl = Stages::Host.on(GlOptions {
                                    layout,
                                    band_budget_bytes: 64 << 10,
                                    overlap_bands: Some(overlap),
                                    ..Default::default()
                                });
                                let options = MergeOptions {
                                    strategy,
                                    ..options
                                };
                                let what = format!(
                                    "{} {} {strategy:?} overlap {overlap}",
                                    path.name(),
                                    layout.name()
                                );
                                let before = ctx.transfer_stats();
                                let stats = assert_gl_matches_reference(
                                    ctx,
                                    &[&a, &b, &a],
                                    &options,
                                    &gl,
                                    &what,
                                );
                                assert!(stats.bands >= 4, "{what}: only {} bands", stats.bands);
                                assert_eq!(stats.transfer, path.name(), "{what}");
                                let overlapped = if overlap { stats.bands - 1 } else { 0 };
                                assert_eq!(stats.overlapped_bands, overlapped, "{what}");
                                let after = ctx.transfer_stats();
                                if path == TransferPath::Mapped {
                                    assert!(
                                        after.staging_rounds - before.staging_rounds
                                            > stats.bands as u64 * 3,
                                        "{what}: staging was not cut into rounds: {after:?}"
                                    );
                                    assert!(
                                        after.reads_ahead > before.reads_ahead,
                                        "{what}: {after:?}"
                                    );
                                } else {
                                    assert_eq!(after.staging_rounds, before.staging_rounds);
                                    assert_eq!(after.reads_ahead, before.reads_ahead);
                                }
                            }
                        }
                    }
                }
            })
        }
    });
}

#[test]
fn real_files_overlapped_on_the_mapped_path_with_the_gpu_stages() {
    with_gl(|ctx| {
        let a = real("Balls.exr");
        let b = real("Leaves.exr");
        with_transfer(ctx, TransferPath::Mapped, None, || {
            for options in outputs() {
                let gl = Stages::Gpu.on(GlOptions {
                    band_budget_bytes: 1 << 20,
                    overlap_bands: Some(true),
                    ..Default::default()
                });
                let stats =
                    assert_gl_matches_reference(ctx, &[&a, &b], &options, &gl, "Balls + Leaves");
                assert!(stats.bands >= 2, "only {} bands", stats.bands);
                assert_eq!(stats.overlapped_bands, stats.bands - 1);
            }
        })
    });
}

#[test]
fn unknown_transfer_and_overlap_settings_in_the_environment_are_named() {
    // The variable is read when a context is made; the parse is checked on its own here (a
    // second context in this binary would leave the shared one's thread).
    std::env::set_var("DEEPMERGE_GL_TRANSFER", "dma");
    let e = TransferPath::from_env().unwrap_err().to_string();
    std::env::remove_var("DEEPMERGE_GL_TRANSFER");
    assert!(
        e.contains("DEEPMERGE_GL_TRANSFER=dma") && e.contains("mapped or calls"),
        "{e}"
    );
    std::env::set_var("DEEPMERGE_GL_OVERLAP", "yes");
    let e = deepmerge::gpu::mapped::overlap_from_env()
        .unwrap_err()
        .to_string();
    std::env::set_var("DEEPMERGE_GL_OVERLAP", "0");
    let off = deepmerge::gpu::mapped::overlap_from_env().unwrap();
    std::env::remove_var("DEEPMERGE_GL_OVERLAP");
    assert!(
        e.contains("DEEPMERGE_GL_OVERLAP=yes is neither 0 nor 1"),
        "{e}"
    );
    assert_eq!(off, Some(false));
}
