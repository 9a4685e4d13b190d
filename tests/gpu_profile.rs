//! Per-stage GPU timing with timer queries (`gpu::profile`): a profiled merge records every
//! stage it ran with a GPU time and the bytes it moved, profiling changes no output, nothing is
//! recorded while it is off, the copy floor is measured the same way, and `--stats` prints the
//! stage table. On llvmpipe (CI) the timestamps are real; GL_TIME_ELAPSED would read 0 there.

mod gpu_common;
mod timeline_spans;

use std::process::Command;

use deepmerge::composite::{MergeOptions, MergeStrategy, OutputKind};
use deepmerge::deep::Bounds;
use deepmerge::gpu::{copy_bandwidth, merge_images_gl, GlOptions, Layout, MergeMethod};
use gpu_common::{with_gl, Synth};

#[test]
fn a_profiled_merge_times_every_stage_it_ran_and_changes_nothing() {
    with_gl(|ctx| {
        let a = Synth::new(Bounds::from_origin_size(0, 0, 45, 9), 40, 1).build();
        let b = Synth::new(Bounds::from_origin_size(7, 3, 37, 11), 21, 2).build();
        let options = MergeOptions {
            output: OutputKind::Deep,
            strategy: MergeStrategy::Chain,
            ..Default::default()
        };
        let gl = GlOptions {
            layout: Layout::Interleaved,
            method: MergeMethod::RegisterBlock,
            ..Default::default()
        };
        let (plain, _) = merge_images_gl(ctx, &[&a, &b], &options, &gl).unwrap();
        // Off: nothing is recorded.
        assert!(ctx.take_profile().stages.is_empty());

        ctx.profile_stages(true);
        let (profiled, _) = merge_images_gl(ctx, &[&a, &b], &options, &gl).unwrap();
        let profile = ctx.take_profile();
        ctx.profile_stages(false);
        assert_eq!(plain, profiled, "profiling must not change the output");

        // A chained deep merge into IA uploads, zero-fills, scans, builds, counts, merges and
        // reads back.
        for stage in [
            "upload", "fill", "count", "scan", "build", "merge", "readback",
        ] {
            let s = profile
                .stage(stage)
                .unwrap_or_else(|| panic!("no {stage} stage in {profile}"));
            assert!(s.calls > 0 && s.bytes > 0, "{stage}: {s:?}");
        }
        let merge = profile.stage("merge").unwrap();
        assert!(merge.gpu_s > 0.0, "the merge took no GPU time: {profile}");
        // Two inputs' keys (16 B per sample) at least pass through the merge.
        let samples = (a.sample_count() + b.sample_count()) as u64;
        assert!(merge.bytes >= 2 * 16 * samples, "{merge:?}");
        assert!(profile.total_s() >= merge.gpu_s);
        // Taken once: a second take is empty.
        assert!(ctx.take_profile().stages.is_empty());
    });
}

#[test]
fn the_copy_floor_is_timed_on_the_gpu_and_keeps_a_running_profile() {
    with_gl(|ctx| {
        ctx.profile_stages(true);
        let a = Synth::new(Bounds::from_origin_size(0, 0, 33, 5), 8, 3).build();
        let gl = GlOptions::default();
        merge_images_gl(ctx, &[&a, &a], &MergeOptions::default(), &gl).unwrap();
        let bandwidth = copy_bandwidth(ctx, 1 << 20, 3).unwrap();
        assert!(bandwidth.is_finite() && bandwidth > 0.0, "{bandwidth}");
        let profile = ctx.take_profile();
        ctx.profile_stages(false);
        assert!(profile.stage("merge").is_some(), "{profile}");
        assert!(
            profile.stage("copy").is_none(),
            "the floor's copies must not land in the merge's profile: {profile}"
        );
    });
}

/// `deepmerge Balls.exr Leaves.exr -o flat.exr --backend gl EXTRA` with `env` set: its stderr,
/// the run having succeeded.
fn gl_merge_of_the_bundled_pair(extra: &[&str], env: &[(&str, &str)]) -> String {
    let dir = env!("CARGO_MANIFEST_DIR");
    let out = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_deepmerge"))
        .args([
            &format!("{dir}/tests/data/openexr-images/Balls.exr"),
            &format!("{dir}/tests/data/openexr-images/Leaves.exr"),
            "-o",
            out.path().join("flat.exr").to_str().unwrap(),
            "--backend",
            "gl",
        ])
        .args(extra)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    stderr
}

#[test]
fn stats_prints_the_stage_table() {
    let stderr = gl_merge_of_the_bundled_pair(&["--stats"], &[]);
    assert!(stderr.contains("GPU stages (timer queries"), "{stderr}");
    let merge_line = stderr
        .lines()
        .find(|l| l.trim_start().starts_with("merge ") && l.contains('%'))
        .unwrap_or_else(|| panic!("no merge stage line with a share of the copy floor: {stderr}"));
    let ms: f64 = merge_line
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert!(ms > 0.0, "{merge_line}");
}

/// `DEEPMERGE_TIMELINE=1` with the GL engine: the context is made on a helper thread while the
/// merging thread opens the inputs, and made current on the merging thread before the first
/// band's inputs are staged and its merge issued there; with overlapped bands (a GPU's default)
/// it is made current before the first band is handed over, while the reader decodes it. The
/// context is dropped last.
#[test]
fn timeline_shows_the_gl_engine_start_up_and_its_band_stages() {
    for overlap in ["0", "1"] {
        let stderr = gl_merge_of_the_bundled_pair(
            &[],
            &[
                ("DEEPMERGE_TIMELINE", "1"),
                ("DEEPMERGE_GL_OVERLAP", overlap),
            ],
        );
        check_gl_timeline(&stderr, overlap == "1");
    }
}

/// The checks of [`timeline_shows_the_gl_engine_start_up_and_its_band_stages`] on one run's
/// stderr.
fn check_gl_timeline(stderr: &str, overlapped: bool) {
    // The span lines after the header: (thread, what).
    let spans: Vec<(String, String)> = timeline_spans::spans(stderr)
        .into_iter()
        .map(|span| (span.thread, span.what))
        .collect();
    let at = |thread: &str, what: &str| {
        spans
            .iter()
            .position(|(t, w)| t == thread && w.starts_with(what))
            .unwrap_or_else(|| panic!("no {thread} span {what}: {stderr}"))
    };
    at("gl-start", "GL context");
    at("main", "open the inputs");
    let staged = at("main", "stage inputs");
    assert!(at("reader", "decode rows ") < staged, "{stderr}");
    assert!(
        at("main", "make the GL context current") < staged,
        "{stderr}"
    );
    assert!(
        staged < at("main", "issue the merge and readback"),
        "{stderr}"
    );
    let current = at("main", "make the GL context current");
    let first_merge = at("main", "merge rows ");
    assert_eq!(current < first_merge, overlapped, "{stderr}");
    at("main", "compile ");
    at("writer", "encode rows ");
    assert_eq!(
        at("main", "GL context dropped"),
        spans.len() - 1,
        "{stderr}"
    );
}
