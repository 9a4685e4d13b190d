//! Host transfers (`gpu::mapped`) and overlapped bands, in strict mode: the mapped path
//! (parallel host writes into persistently mapped staging, GPU copies, fenced readbacks) and the
//! calls path (`glBufferSubData`, `glGetBufferSubData`) give the reference merge's bytes, with
//! and without bands overlapping (the next band's work issued before the last band is read
//! back), in every layout and output, k-way and chained, with staging rounds and readback
//! chunks cut small so that every band takes many of them. The hazard checker sees every host
//! write into and read out of mapped memory, so a missing fence wait fails here on llvmpipe.

// MergeOptions is built with `..Default::default()` even where every field is named today.
#![allow(clippy::needless_update)]

mod common;
mod gpu_common;

use deepmerge::composite::{MergeOptions, MergeStrategy};
use deepmerge::deep::{Bounds, Channel, DeepImage, DeepState, Plane, SampleType};
use deepmerge::gpu::{GlContext, GlOptions, Layout, TransferPath};
use gpu_common::{assert_gl_matches_reference, outputs, real, with_gl, Stages, Synth};

/// Run `job` with `path` and rounds of `round_bytes`, the planes copied as on a GPU (not read in
/// place, as llvmpipe's defaults do: these tests are of the copies), then put the context's
/// defaults back.
fn with_transfer<R>(
    ctx: &GlContext,
    path: TransferPath,
    round_bytes: Option<usize>,
    job: impl FnOnce() -> R,
) -> R {
    let before = ctx.transfer_path();
    let pinned = ctx.pinned_planes();
    ctx.set_transfer_path(path)
        .expect("llvmpipe has buffer storage (GL 4.5)");
    ctx.set_transfer_round_bytes(round_bytes);
    ctx.set_pinned_planes(false);
    let result = job();
    ctx.set_pinned_planes(pinned);
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
    // Each variable is read when a context is made; the parses of its value are checked here
    // (setting the variable in this process would race the shared context's making).
    use deepmerge::gpu::mapped::overlap_from;
    let e = TransferPath::from_setting(Some("dma"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("DEEPMERGE_GL_TRANSFER=dma") && e.contains("use mapped or calls"),
        "{e}"
    );
    assert_eq!(
        TransferPath::from_setting(Some("calls")).unwrap(),
        Some(TransferPath::Calls)
    );
    assert_eq!(TransferPath::from_setting(None).unwrap(), None);
    assert_eq!(TransferPath::from_setting(Some("")).unwrap(), None);
    let e = overlap_from(Some("yes")).unwrap_err().to_string();
    assert!(
        e.contains("DEEPMERGE_GL_OVERLAP=yes") && e.contains("use 1 or 0"),
        "{e}"
    );
    assert_eq!(overlap_from(Some("0")).unwrap(), Some(false));
}

/// A streamed file-to-file merge with overlapped bands (`DEEPMERGE_GL_OVERLAP=1`): each band's
/// GPU work is issued before the band before it is read back and assembled, across the
/// streamed bands (`stream::DeferredWork`), with empty bands between the inputs (which go
/// straight to the writer, after the band held). The bytes are the CPU engine's, in every
/// output and with pruning, and `--stats` counts the bands issued ahead.
#[test]
fn streamed_bands_overlap_across_bands_and_keep_the_cpu_bytes() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("streamed-overlap");
    std::fs::create_dir_all(&dir).unwrap();
    // Rows 0-29 and 60-89: the rows between are bands no input holds a sample in.
    let a = Synth::new(Bounds::from_origin_size(0, 0, 41, 30), 10, 31)
        .with_volumes()
        .build();
    let b = Synth::new(Bounds::from_origin_size(3, 60, 37, 30), 7, 32).build();
    let c = Synth::new(Bounds::from_origin_size(0, 20, 41, 50), 5, 33).build();
    let paths: Vec<String> = [("a", &a), ("b", &b), ("c", &c)]
        .iter()
        .map(|(name, image)| {
            let path = dir.join(format!("{name}.exr"));
            deepmerge::exr::write_deep(&path, image, deepmerge::exr::Codec::Zips).unwrap();
            path.to_str().unwrap().to_string()
        })
        .collect();
    let run = |backend: &str, extra: &[&str], out: &str| -> String {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_deepmerge"))
            .args(&paths)
            .args(["--backend", backend, "--band-rows", "4", "-o", out])
            .args(extra)
            .env("DEEPMERGE_GL_STRICT", "1")
            .env("DEEPMERGE_GL_OVERLAP", "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "{backend} {extra:?}: {stderr}");
        stderr
    };
    for extra in [
        &[][..],
        &["--deep"][..],
        &["--deep", "--tidy"][..],
        &["--deep", "--drop-transparent"][..],
        &["--merge-strategy", "chain"][..],
    ] {
        let (gl_out, cpu_out) = (dir.join("gl.exr"), dir.join("cpu.exr"));
        let mut with_stats = extra.to_vec();
        with_stats.push("--stats");
        let stats = run("gl", &with_stats, gl_out.to_str().unwrap());
        run("cpu", extra, cpu_out.to_str().unwrap());
        assert!(
            std::fs::read(&gl_out).unwrap() == std::fs::read(&cpu_out).unwrap(),
            "{extra:?}: the GL output differs from the CPU engine's"
        );
        // "K of N bands issued before the band before was read back": every band after the
        // first of each run of bands with samples.
        let line = stats
            .lines()
            .find(|l| l.starts_with("host waited:"))
            .unwrap_or_else(|| panic!("{extra:?}: no host waited line: {stats}"));
        let counts: Vec<usize> = line
            .split("; ")
            .nth(1)
            .unwrap()
            .split(' ')
            .filter_map(|w| w.parse().ok())
            .collect();
        let (ahead, bands) = (counts[0], counts[1]);
        assert!(
            bands >= 10 && ahead >= bands - 4 && ahead < bands,
            "{extra:?}: {line}"
        );
    }
}

#[test]
fn unknown_measurement_settings_in_the_environment_are_named() {
    use deepmerge::gpu::mapped::{
        copy_threads_from, deep_readback_from, deep_writes_from, pairwise_from, pinned_from,
        staging_bytes_from,
    };
    use deepmerge::gpu::resident::{DeepReadback, DeepWrites};
    use deepmerge::gpu::BufferStorage;
    let e = BufferStorage::from_setting(Some("shared"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("DEEPMERGE_GL_BUFFERS=shared") && e.contains("use immutable or mutable"),
        "{e}"
    );
    assert_eq!(
        BufferStorage::from_setting(Some("mutable")).unwrap(),
        Some(BufferStorage::Mutable)
    );
    let e = pinned_from(Some("yes")).unwrap_err().to_string();
    assert!(
        e.contains("DEEPMERGE_GL_PINNED=yes") && e.contains("use 1 or 0"),
        "{e}"
    );
    assert_eq!(pinned_from(Some("0")).unwrap(), Some(false));
    assert_eq!(pinned_from(None).unwrap(), None);
    let e = pairwise_from(Some("yes")).unwrap_err().to_string();
    assert!(e.contains("DEEPMERGE_GL_PAIRWISE=yes"), "{e}");
    assert_eq!(pairwise_from(Some("0")).unwrap(), Some(false));
    let e = deep_writes_from(Some("sideways")).unwrap_err().to_string();
    assert!(
        e.contains("DEEPMERGE_GL_DEEP_WRITES=sideways")
            && e.contains("use direct, relayout, staged or staged:<size>"),
        "{e}"
    );
    assert_eq!(
        deep_writes_from(Some("relayout")).unwrap(),
        Some(DeepWrites::Relayout)
    );
    assert_eq!(
        deep_writes_from(Some("staged")).unwrap(),
        Some(DeepWrites::Staged {
            group_bytes: DeepWrites::STAGED_GROUP_BYTES
        })
    );
    assert_eq!(
        deep_writes_from(Some("staged:8K")).unwrap(),
        Some(DeepWrites::Staged { group_bytes: 8192 })
    );
    assert_eq!(
        deep_writes_from(Some("staged:4096")).unwrap(),
        Some(DeepWrites::Staged { group_bytes: 4096 })
    );
    for bad in ["staged:1M", "staged:12", "staged:lots", "staged:"] {
        let e = deep_writes_from(Some(bad)).unwrap_err().to_string();
        assert!(
            e.contains(&format!("DEEPMERGE_GL_DEEP_WRITES={bad}")) && e.contains("256 to 64K"),
            "{e}"
        );
    }
    let e = deep_readback_from(Some("keys")).unwrap_err().to_string();
    assert!(
        e.contains("DEEPMERGE_GL_DEEP_READBACK=keys") && e.contains("use sources or runs or image"),
        "{e}"
    );
    assert_eq!(
        deep_readback_from(Some("image")).unwrap(),
        Some(DeepReadback::Image)
    );
    assert_eq!(
        deep_readback_from(Some("runs")).unwrap(),
        Some(DeepReadback::Runs)
    );
    assert_eq!(deep_readback_from(None).unwrap(), None);
    assert_eq!(staging_bytes_from(Some("16M")).unwrap(), Some(16 << 20));
    assert_eq!(
        staging_bytes_from(Some("16777216")).unwrap(),
        Some(16 << 20)
    );
    assert_eq!(staging_bytes_from(Some("")).unwrap(), None);
    for bad in ["lots", "4K", "2G", "1"] {
        let e = staging_bytes_from(Some(bad)).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("DEEPMERGE_GL_STAGING={bad}: ")),
            "{e}"
        );
    }
    {
        use deepmerge::gpu::reader_staging::{reader_staging_from, ReaderStagingSize};
        assert_eq!(
            reader_staging_from(Some("1")).unwrap(),
            Some(ReaderStagingSize::TwoBands)
        );
        assert_eq!(
            reader_staging_from(Some("64M")).unwrap(),
            Some(ReaderStagingSize::Bytes(64 << 20))
        );
        assert_eq!(reader_staging_from(Some("0")).unwrap(), None);
        assert_eq!(reader_staging_from(None).unwrap(), None);
        for bad in ["512K", "32G", "yes"] {
            let e = reader_staging_from(Some(bad)).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("DEEPMERGE_GL_READER_STAGING={bad}: ")),
                "{e}"
            );
        }
    }
    assert_eq!(copy_threads_from(Some("0")).unwrap(), Some(0));
    assert_eq!(copy_threads_from(Some(" 16 ")).unwrap(), Some(16));
    assert_eq!(copy_threads_from(None).unwrap(), None);
    for bad in ["65", "-1", "all"] {
        let e = copy_threads_from(Some(bad)).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("DEEPMERGE_GL_COPY_THREADS={bad}: ")),
            "{e}"
        );
    }
}

/// The staging copies and readback copies on the mapped path with no copy threads (the GL
/// thread alone) and with a few: the CPU engine's bytes, flat and deep, in strict mode, over
/// stagings larger than one parallel piece; a bad count is refused by name before any work.
#[test]
fn copies_on_the_gl_thread_alone_or_on_a_few_threads_keep_the_cpu_bytes() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("copy-threads");
    std::fs::create_dir_all(&dir).unwrap();
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/openexr-images");
    let inputs = [data.join("Leaves.exr"), data.join("Trunks.exr")];
    let run = |backend: &str, threads: &str, extra: &[&str], out: &std::path::Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_deepmerge"))
            .args(&inputs)
            .args(["--backend", backend, "-q", "-o"])
            .arg(out)
            .args(extra)
            .env("DEEPMERGE_GL_STRICT", "1")
            .env("DEEPMERGE_GL_TRANSFER", "mapped")
            .env("DEEPMERGE_GL_COPY_THREADS", threads)
            .output()
            .unwrap()
    };
    for extra in [&[][..], &["--deep"][..]] {
        let cpu = dir.join("cpu.exr");
        assert!(run("cpu", "", extra, &cpu).status.success());
        for threads in ["0", "3"] {
            let gl = dir.join(format!("gl-{threads}.exr"));
            let output = run("gl", threads, extra, &gl);
            assert!(
                output.status.success(),
                "{threads} threads {extra:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            assert!(
                std::fs::read(&gl).unwrap() == std::fs::read(&cpu).unwrap(),
                "{threads} copy threads {extra:?}: the GL output differs from the CPU engine's"
            );
        }
    }
    let bad = dir.join("bad.exr");
    let output = run("gl", "lots", &[], &bad);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("DEEPMERGE_GL_COPY_THREADS=lots"),
        "{stderr}"
    );
    assert!(!bad.exists());
}

/// Overlapped streamed bands hold one band more on the host, which the band plan counts: under
/// a small `--memory-budget` the overlapped run cuts more bands and peaks no higher than the
/// run that finishes each band first (on llvmpipe the GPU's buffers are host memory too).
#[test]
fn overlapped_streamed_bands_stay_within_the_memory_budget() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("overlap-budget");
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = common::powerplant_pair(&dir.join("pp"), "640x360");
    let run = |overlap: &str| -> (f64, usize, usize) {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_deepmerge"))
            .args([&a, &b])
            .args(["--backend", "gl", "--deep", "--memory-budget", "0.0625"])
            .args(["--runstats", "--stats", "-o"])
            .arg(dir.join(format!("out{overlap}.exr")))
            .env("DEEPMERGE_GL_OVERLAP", overlap)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "{err}");
        let figure = |prefix: &str| -> String {
            err.lines()
                .find(|l| l.trim_start().starts_with(prefix))
                .unwrap_or_else(|| panic!("no {prefix} line: {err}"))
                .to_string()
        };
        let peak: f64 = figure("peak memory")
            .split_whitespace()
            .find_map(|w| w.parse().ok())
            .unwrap();
        let counts: Vec<usize> = figure("host waited:")
            .split("; ")
            .nth(1)
            .unwrap()
            .split(' ')
            .filter_map(|w| w.parse().ok())
            .collect();
        (peak, counts[0], counts[1])
    };
    let (serial_peak, serial_ahead, serial_bands) = run("0");
    let (overlap_peak, ahead, bands) = run("1");
    assert_eq!(serial_ahead, 0);
    assert_eq!(
        ahead,
        bands - 1,
        "every band after the first is issued ahead"
    );
    assert!(
        bands > serial_bands,
        "the plan counts the band held: {bands} bands against {serial_bands}"
    );
    // Peak resident memory of two processes: malloc arenas and thread timing move it by 2-3%
    // (233-240 MiB here), so the bound leaves room; a second band's buffers held at once (up
    // to the 64 MiB budget) would still exceed it.
    assert!(
        overlap_peak <= serial_peak * 1.15,
        "peak {overlap_peak:.1} MiB overlapped against {serial_peak:.1} MiB"
    );
    assert!(
        std::fs::read(dir.join("out1.exr")).unwrap()
            == std::fs::read(dir.join("out0.exr")).unwrap()
    );
}

#[test]
fn a_deep_output_stages_and_merges_the_keys_alone() {
    // A deep output the GPU does not tidy is read back by its keys (the host copies values from
    // the inputs by key): only the depth planes are staged, no values are gathered, built or
    // merged, and the output is the reference's, k-way and pairwise (a chain of two), every
    // layout. A chain of three keeps the values its first merge's output is merged with.
    with_gl(|ctx| {
        let a = real("Balls.exr");
        let b = real("Leaves.exr");
        for strategy in [MergeStrategy::KWay, MergeStrategy::Chain] {
            let deep = MergeOptions {
                output: deepmerge::composite::OutputKind::Deep,
                strategy,
                ..Default::default()
            };
            let flat = MergeOptions {
                strategy,
                ..Default::default()
            };
            for layout in Layout::ALL {
                // The device's stages: on the GPU, the gather (and the sort these inputs need).
                let gl = GlOptions {
                    layout,
                    ..Default::default()
                };
                let what = format!("{} {strategy:?}", layout.name());
                let keys = assert_gl_matches_reference(ctx, &[&a, &b], &deep, &gl, &what);
                let all = assert_gl_matches_reference(ctx, &[&a, &b], &flat, &gl, &what);
                assert_eq!(keys.input_bytes.values, 0, "{what}: input values built");
                assert_eq!(keys.merged_bytes.values, 0, "{what}: merged values written");
                assert!(
                    all.input_bytes.values > 0,
                    "{what}: flat merges need values"
                );
                // Staged: copied, or (a software rasteriser's default) read in place.
                let staged = |s: &deepmerge::gpu::GpuStats| s.staged_bytes + s.pinned_bytes;
                assert!(
                    staged(&keys) < staged(&all),
                    "{what}: {} bytes staged for keys, {} with values",
                    staged(&keys),
                    staged(&all)
                );
                if strategy == MergeStrategy::Chain {
                    let three = assert_gl_matches_reference(ctx, &[&a, &b, &a], &deep, &gl, &what);
                    assert!(three.input_bytes.values > 0, "{what}: a chain of three");
                }
            }
        }
    });
}

/// Staging by the reader (`DEEPMERGE_GL_READER_STAGING=1`): the reader's threads copy each
/// decoded band's planes into mapped blocks and the GPU copies them on from there. In strict
/// mode, over blocks far smaller than a band's planes (so planes span blocks), flat and deep,
/// chained, tidied: the CPU engine's bytes, with most of the staged bytes staged by the reader
/// where it hands each band over (`DEEPMERGE_READ_AHEAD=0`), some where it decodes ahead.
/// Inputs that pruning rewrites, and the calls path, are staged as before (nothing by the
/// reader), with the same bytes; a bad value is refused by name.
#[test]
fn planes_staged_by_the_reader_keep_the_cpu_bytes() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("reader-staging");
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = common::powerplant_pair(&dir.join("pp"), "320x180");
    let run = |backend: &str,
               setting: &str,
               transfer: &str,
               read_ahead: &str,
               extra: &[&str],
               out: &str| {
        // `mapped-lax`: the mapped path out of strict mode, where the host may find a fence
        // signalled without waiting on it (blocks go back to the reader as soon as that).
        let (transfer, strict) = match transfer.strip_suffix("-lax") {
            Some(path) => (path, "0"),
            None => (transfer, "1"),
        };
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_deepmerge"))
            .args([&a, &b])
            .args(["--backend", backend, "--band-rows", "24", "-o", out])
            .args(if backend == "gl" {
                &["--stats"][..]
            } else {
                &[]
            })
            .args(extra)
            .env("DEEPMERGE_GL_STRICT", strict)
            .env("DEEPMERGE_GL_DEFAULTS", "hardware")
            .env("DEEPMERGE_GL_TRANSFER", transfer)
            .env("DEEPMERGE_GL_STAGING", "64K")
            .env("DEEPMERGE_GL_READER_STAGING", setting)
            .env("DEEPMERGE_READ_AHEAD", read_ahead)
            .output()
            .unwrap();
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    // "host staging: S MiB in ...; R MiB of it staged by the reader's threads": (S, R).
    let staged = |stats: &str| -> (f64, f64) {
        let line = stats
            .lines()
            .find(|l| l.starts_with("host staging:"))
            .unwrap_or_else(|| panic!("no host staging line: {stats}"));
        let mib = |text: &str| -> f64 {
            text.split_whitespace()
                .find_map(|w| w.parse().ok())
                .unwrap_or(0.0)
        };
        let (all, reader) = line.split_once(';').unwrap_or((line, ""));
        (mib(all.trim_start_matches("host staging:")), mib(reader))
    };
    // (options, transfer path, DEEPMERGE_GL_READER_STAGING, DEEPMERGE_READ_AHEAD, the share the
    // reader stages at least and at most). Where the reader decodes ahead (the default), bands
    // beyond the two its blocks hold are staged as before, how many depending on how far
    // ahead it ran: the cases that bound the share from below hand each band over instead.
    type Case = (
        &'static [&'static str],
        &'static str,
        &'static str,
        &'static str,
        f64,
        f64,
    );
    let cases: [Case; 12] = [
        (&[], "mapped", "1", "0", 0.5, 1.0),
        (&[], "mapped-lax", "1", "0", 0.5, 1.0),
        (&[], "mapped-lax", "1M", "0", 0.01, 0.9),
        (&["--deep"], "mapped", "1", "0", 0.5, 1.0),
        (&["--deep", "--tidy"], "mapped", "1", "0", 0.5, 1.0),
        (&["--merge-strategy", "chain"], "mapped", "1", "0", 0.5, 1.0),
        // At most 1 MiB pinned, in blocks of 64 KiB: the planes that fit, the rest as before.
        (&[], "mapped", "1M", "0", 0.01, 0.9),
        (&[], "mapped", "1", "1", 0.01, 1.0),
        (&["--deep"], "mapped-lax", "1", "1", 0.01, 1.0),
        (
            &["--deep", "--drop-transparent"],
            "mapped",
            "1",
            "1",
            0.0,
            0.0,
        ),
        (&[], "calls", "1", "1", 0.0, 0.0),
        (&[], "mapped", "0", "1", 0.0, 0.0),
    ];
    for (extra, transfer, setting, read_ahead, least, most) in cases {
        let (gl_out, cpu_out) = (dir.join("gl.exr"), dir.join("cpu.exr"));
        let gl_path = gl_out.to_str().unwrap();
        let (ok, stats) = run("gl", setting, transfer, read_ahead, extra, gl_path);
        assert!(ok, "{extra:?} {transfer}: {stats}");
        let (ok, err) = run("cpu", "", transfer, "1", extra, cpu_out.to_str().unwrap());
        assert!(ok, "{err}");
        assert!(
            std::fs::read(&gl_out).unwrap() == std::fs::read(&cpu_out).unwrap(),
            "{extra:?} {transfer} {setting}: the GL output differs from the CPU engine's"
        );
        // Bands decoded before the context is current are staged by the merging thread; so are
        // the offsets and slot tables, always.
        let (all, reader) = staged(&stats);
        assert!(
            all > 0.0
                && reader >= least * all
                && reader <= most * all
                && (least > 0.0) == (reader > 0.0),
            "{extra:?} {transfer} {setting} {read_ahead}: {reader} of {all} MiB staged by the reader: {stats}"
        );
    }
    let bad = dir.join("bad.exr");
    let (ok, stderr) = run("gl", "yes", "mapped", "1", &[], bad.to_str().unwrap());
    assert!(
        !ok && stderr.contains("DEEPMERGE_GL_READER_STAGING=yes"),
        "{stderr}"
    );
    assert!(!bad.exists());
}

/// A streamed merge's first band is often its largest: the smaller bands after it read back
/// through the mapped buffers it left free, not buffers made for each (on an H200 host the
/// later bands of a flat merge made eight, 1.3-4 ms each on the merging thread).
#[test]
fn a_smaller_merge_after_a_larger_one_reads_back_through_its_free_buffers() {
    with_gl(|ctx| {
        with_transfer(ctx, TransferPath::Mapped, Some(16 << 20), || {
            // No mapped buffer another test left free on this context.
            ctx.release_pooled();
            let merge = |width, height, seed| {
                let window = Bounds::from_origin_size(0, 0, width, height);
                let a = Synth::new(window, 2, seed).build();
                let b = Synth::new(window, 2, seed + 1).build();
                let what = format!("{width}x{height}");
                let gl = GlOptions::default();
                assert_gl_matches_reference(ctx, &[&a, &b], &MergeOptions::default(), &gl, &what)
            };
            // The composite's two readbacks (values and fronts) take 3 MiB each...
            let first = merge(512, 384, 1);
            assert!(first.mapped_allocations >= 2, "{first:?}");
            // ...and the next merge's 1.2 MiB, more than twice smaller, fit in them.
            let second = merge(256, 300, 3);
            assert_eq!(second.mapped_allocations, 0, "{second:?}");
            // A small readback (64 KiB) keeps to buffers at most twice its size: a 3 MiB one
            // stays free for the larger readback that may follow.
            let small = merge(64, 64, 5);
            assert!(small.mapped_allocations >= 2, "{small:?}");
        })
    });
}

/// `rows` rows of 4096 pixels, the first `sparse` of one sample each, the rest of two (RGBA, Z).
fn rows_of(rows: usize, sparse: usize, seed: u32) -> DeepImage {
    let width = 4096;
    let window = Bounds::from_origin_size(0, 0, width, rows);
    let counts: Vec<u32> = (0..width * rows)
        .map(|p| if p / width < sparse { 1 } else { 2 })
        .collect();
    let samples = counts.iter().map(|&n| n as usize).sum::<usize>();
    let half_plane = |k: u32| {
        Plane::F16(
            (0..samples)
                .map(|s| half::f16::from_f32(0.2 + ((s as u32 + seed + k) % 5) as f32 / 10.0))
                .collect(),
        )
    };
    let planes = vec![
        half_plane(0),
        half_plane(1),
        half_plane(2),
        half_plane(3),
        Plane::F32(
            (0..samples)
                .map(|s| ((s as u32 * 7 + seed) % 13) as f32)
                .collect(),
        ),
    ];
    let channels = ["A", "B", "G", "R"]
        .into_iter()
        .map(|name| Channel::new(name, SampleType::F16))
        .chain([Channel::new("Z", SampleType::F32)])
        .collect();
    DeepImage::from_counts(window, window, channels, &counts, planes, DeepState::Sorted)
        .expect("the image builds")
}

/// With bands overlapped, the second band's readbacks are issued while the first band's
/// buffers are taken; after that, the two bands' buffers serve every band, so a merge whose
/// first band is its largest makes two bands' worth of readback buffers (four for a flat merge:
/// values and fronts), not more as its bands shrink (with every readback kept to buffers at
/// most twice its size, this merge made eight mapped buffers where it now makes six).
#[test]
fn overlapped_bands_smaller_than_the_first_make_no_readback_buffers_of_their_own() {
    with_gl(|ctx| {
        with_transfer(ctx, TransferPath::Mapped, Some(16 << 20), || {
            ctx.release_pooled();
            // Two inputs of 34 sparse rows (128 KiB of samples a row) and 48 dense ones (256
            // KiB), in bands of at most 4.2 MiB each, two resident: the first band is 33 rows
            // (2.1 MiB of composite read back twice), the later ones 16-17 (1-1.1 MiB).
            let a = rows_of(82, 34, 1);
            let b = rows_of(82, 34, 2);
            let gl = GlOptions {
                overlap_bands: Some(true),
                band_budget_bytes: 2 * (42 << 20) / 10,
                ..Default::default()
            };
            let stats = assert_gl_matches_reference(
                ctx,
                &[&a, &b],
                &MergeOptions::default(),
                &gl,
                "overlapped bands",
            );
            assert!(stats.bands >= 4, "{stats:?}");
            assert!(stats.overlapped_bands > 0, "{stats:?}");
            // Four readback buffers and the two staging buffers.
            assert_eq!(stats.mapped_allocations, 4 + 2, "{stats:?}");
        })
    });
}

/// `DEEPMERGE_GL_BAND_CAP` bounds the GL engine's bands on a GPU by the host's threads (the
/// hardware weighs fewer page faults against more rounds of dispatches): more bands, the same
/// bytes, flat and deep; a bad value is refused by name, on a software rasteriser too, before
/// any output is written.
#[test]
fn a_band_cap_per_thread_cuts_more_bands_with_the_same_bytes() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("gl-band-cap");
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = common::powerplant_pair(&dir.join("pp"), "640x360");
    let run = |cap: &str, defaults: &str, extra: &[&str], out: &str| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_deepmerge"))
            .args([&a, &b])
            .args(["--backend", "gl", "--runstats", "-o"])
            .arg(dir.join(out))
            .args(extra)
            .env("DEEPMERGE_GL_STRICT", "1")
            .env("DEEPMERGE_GL_DEFAULTS", defaults)
            .env("DEEPMERGE_GL_BAND_CAP", cap)
            .env("RAYON_NUM_THREADS", "2")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&output.stderr).into_owned();
        let bands = err
            .lines()
            .find(|l| l.trim_start().starts_with("bands"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse::<usize>().ok());
        (output.status.success(), bands, err)
    };
    for extra in [&[][..], &["--deep"][..]] {
        let (ok, whole, err) = run("", "hardware", extra, "whole.exr");
        assert!(ok, "{err}");
        // 4 MiB a thread, 2 threads: 8 MiB bands.
        let (ok, capped, err) = run("4M", "hardware", extra, "capped.exr");
        assert!(ok, "{err}");
        let (whole, capped) = (whole.unwrap(), capped.unwrap());
        assert!(capped > whole, "{extra:?}: {capped} bands against {whole}");
        assert!(
            std::fs::read(dir.join("capped.exr")).unwrap()
                == std::fs::read(dir.join("whole.exr")).unwrap(),
            "{extra:?}"
        );
    }
    let (ok, _, err) = run("lots", "software", &[], "bad.exr");
    assert!(
        !ok && err.contains("DEEPMERGE_GL_BAND_CAP=lots: ") && err.contains("1M to 16G"),
        "{err}"
    );
    assert!(!dir.join("bad.exr").exists());
}
