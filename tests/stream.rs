//! The streamed merge (`deepmerge::stream`) against the whole-image merge: read every input
//! whole, merge once, write once, and compare with the band-by-band pipeline for several band
//! heights (1, 7, 16 and 23, which divides none of the heights), for scanline, tiled and mixed
//! inputs with different data windows and a DECREASING_Y file. Deep output must be the same
//! samples (read back and compared image to image) and the same bytes; flat output the same
//! bytes, hence the same bits. Then the memory: a child process merging an image 4x larger
//! must stay under a small budget with a peak that barely grows.

mod common;
mod timeline_spans;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{data, powerplant_pair};
use deepmerge::composite::{
    merge_images, merge_images_over, MergeOptions, MergeOutput, OutputKind,
};
use deepmerge::deep::{Bounds, DeepImage};
use deepmerge::exr::{
    encode_deep_with, read_deep, write_deep_with, write_flat_with, Codec, DeepWriteOptions,
    FlatType, FlatWriteOptions, ReadOptions,
};
use deepmerge::exr::{ChannelSelection, ChunkSource, PartSelector};
use deepmerge::stream::pipeline::{stream_bands_deferred, AfterDecode, DeferredWork};
use deepmerge::stream::{merge_files, Band, BandOutput, MergeEngine, OutputFormat, StreamOptions};

const BAND_HEIGHTS: [usize; 4] = [1, 7, 16, 23];

/// The whole-image reference: every input read whole, merged once, written once.
fn whole_image(inputs: &[PathBuf], options: &StreamOptions, out: &Path) {
    let images: Vec<DeepImage> = inputs
        .iter()
        .map(|p| read_deep(p, &ReadOptions::default()).unwrap())
        .collect();
    let refs: Vec<&DeepImage> = images.iter().collect();
    match merge_images(&refs, &options.merge).unwrap() {
        MergeOutput::Flat(flat) => write_flat_with(out, &flat, &options.flat_write).unwrap(),
        MergeOutput::Deep(deep) => write_deep_with(out, &deep, &options.deep_write).unwrap(),
    }
}

fn streamed(inputs: &[PathBuf], options: &StreamOptions, out: &Path) {
    merge_files(inputs, out, options, MergeEngine::Cpu, None).unwrap_or_else(|e| panic!("{e}"));
}

/// Every band height (and the budget's own plan) gives the whole-image output.
fn check_streams_like_whole(inputs: &[PathBuf], base: &StreamOptions) {
    let dir = tempfile::tempdir().unwrap();
    let reference = dir.path().join("whole.exr");
    whole_image(inputs, base, &reference);
    let expected = std::fs::read(&reference).unwrap();
    let deep = base.merge.output == OutputKind::Deep;
    let expected_image = deep.then(|| read_deep(&reference, &ReadOptions::default()).unwrap());
    let heights = BAND_HEIGHTS.iter().map(|&h| Some(h)).chain([None]);
    for band_rows in heights {
        let options = StreamOptions {
            band_rows,
            ..base.clone()
        };
        let out = dir.path().join(format!("streamed-{band_rows:?}.exr"));
        streamed(inputs, &options, &out);
        if let Some(expected_image) = &expected_image {
            let got = read_deep(&out, &ReadOptions::default()).unwrap();
            assert!(
                &got == expected_image,
                "deep output differs with bands of {band_rows:?} rows"
            );
        }
        let got = std::fs::read(&out).unwrap();
        assert!(
            got == expected,
            "output bytes differ with bands of {band_rows:?} rows ({} vs {} bytes)",
            got.len(),
            expected.len()
        );
    }
}

fn flat() -> StreamOptions {
    StreamOptions::default()
}

fn deep(codec: Codec) -> StreamOptions {
    StreamOptions {
        merge: MergeOptions {
            output: OutputKind::Deep,
            ..MergeOptions::default()
        },
        deep_write: DeepWriteOptions {
            codec,
            ..DeepWriteOptions::default()
        },
        ..StreamOptions::default()
    }
}

fn scanline_inputs() -> Vec<PathBuf> {
    ["Balls", "Leaves", "Trunks"]
        .iter()
        .map(|n| data(&format!("openexr-images/{n}.exr")))
        .collect()
}

/// `image` written with ZIP (16-line chunks) in DECREASING_Y order: the chunks lie in the file
/// bottom first, the offset table still indexed by block, `lineOrder` = 1.
fn decreasing_file(image: &DeepImage, path: &Path) {
    let options = DeepWriteOptions {
        codec: Codec::Zip,
        write_state: true,
        ..DeepWriteOptions::default()
    };
    let bytes = encode_deep_with(image, &options).unwrap();
    let chunks = image.data_window.height().div_ceil(16);
    let name = b"lineOrder\0lineOrder\0";
    let attr = bytes
        .windows(name.len())
        .position(|w| w == name)
        .expect("lineOrder attribute");
    let table_at = {
        // The table is the last header byte's successor: find it from the first chunk offset,
        // which points just past the table.
        let mut at = attr;
        loop {
            let first = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
            if first == at + 8 * chunks {
                break at;
            }
            at += 1;
        }
    };
    let offsets: Vec<usize> = (0..chunks)
        .map(|i| u64::from_le_bytes(bytes[table_at + 8 * i..][..8].try_into().unwrap()) as usize)
        .chain([bytes.len()])
        .collect();
    let mut out = bytes[..table_at + 8 * chunks].to_vec();
    out[attr + name.len() + 4] = 1;
    let mut new_offsets = vec![0usize; chunks];
    for i in (0..chunks).rev() {
        new_offsets[i] = out.len();
        out.extend_from_slice(&bytes[offsets[i]..offsets[i + 1]]);
    }
    for (i, o) in new_offsets.iter().enumerate() {
        out[table_at + 8 * i..][..8].copy_from_slice(&(*o as u64).to_le_bytes());
    }
    std::fs::write(path, out).unwrap();
}

/// A DECREASING_Y copy of Trunks, and the tiled Balls variants with Leaves: tiles, scanlines
/// of 1 and 16 lines, increasing and decreasing order, four different data windows.
fn mixed_inputs(dir: &Path) -> Vec<PathBuf> {
    let trunks = read_deep(&data("openexr-images/Trunks.exr"), &ReadOptions::default()).unwrap();
    let decreasing = dir.join("trunks-decreasing.exr");
    decreasing_file(&trunks, &decreasing);
    let info = deepmerge::exr::read_parts_info(&decreasing).unwrap();
    assert_eq!(info[0].line_order, "Decreasing");
    assert!(read_deep(&decreasing, &ReadOptions::default()).unwrap() == trunks);
    vec![
        data("variants/Balls_deeptile17x13_none.exr"),
        data("openexr-images/Leaves.exr"),
        decreasing,
    ]
}

#[test]
fn scanline_inputs_stream_like_the_whole_image_flat() {
    check_streams_like_whole(&scanline_inputs(), &flat());
}

#[test]
fn scanline_inputs_stream_like_the_whole_image_deep() {
    // ZIP output: bands that end inside a 16-line output chunk.
    check_streams_like_whole(&scanline_inputs(), &deep(Codec::Zip));
    check_streams_like_whole(&scanline_inputs(), &deep(Codec::Zips));
}

#[test]
fn tiled_inputs_stream_like_the_whole_image() {
    let inputs = vec![
        data("variants/Balls_deeptile32x16_rle.exr"),
        data("variants/Balls_deeptile64_zips.exr"),
    ];
    check_streams_like_whole(&inputs, &flat());
    check_streams_like_whole(&inputs, &deep(Codec::Zip));
}

#[test]
fn mixed_and_decreasing_inputs_stream_like_the_whole_image() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = mixed_inputs(dir.path());
    let flat_z = StreamOptions {
        merge: MergeOptions {
            output: OutputKind::Flat { z: true },
            ..MergeOptions::default()
        },
        flat_write: FlatWriteOptions {
            flat_type: FlatType::Float,
            ..FlatWriteOptions::default()
        },
        ..StreamOptions::default()
    };
    check_streams_like_whole(&inputs, &flat_z);
    check_streams_like_whole(&inputs, &deep(Codec::Zip));
    let tidy = StreamOptions {
        merge: MergeOptions {
            tidy: true,
            ..deep(Codec::Zips).merge
        },
        ..deep(Codec::Zips)
    };
    check_streams_like_whole(&inputs, &tidy);
}

#[test]
fn the_gl_engine_streams_like_the_cpu_whole_image() {
    let ctx = deepmerge::gpu::GlContext::new_with(true).unwrap_or_else(|e| {
        panic!("a GL context is required (apt-get install libegl1 libgl1-mesa-dri): {e}")
    });
    let dir = tempfile::tempdir().unwrap();
    let inputs = mixed_inputs(dir.path());
    for base in [flat(), deep(Codec::Zip)] {
        let reference = dir.path().join("whole.exr");
        whole_image(&inputs, &base, &reference);
        let options = StreamOptions {
            band_rows: Some(23),
            ..base.clone()
        };
        let out = dir.path().join("gl.exr");
        let gl = deepmerge::gpu::GlOptions::default();
        merge_files(&inputs, &out, &options, MergeEngine::Gl(&ctx, gl), None)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            std::fs::read(&out).unwrap() == std::fs::read(&reference).unwrap(),
            "GL streamed output differs from the CPU whole-image output"
        );
    }
}

#[test]
fn channels_keeps_only_the_named_channels_and_what_they_need() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = scanline_inputs();
    let options = StreamOptions {
        channels: Some(ChannelSelection::parse("R").unwrap()),
        ..deep(Codec::Zips)
    };
    let out = dir.path().join("r.exr");
    streamed(&inputs, &options, &out);
    let got = read_deep(&out, &ReadOptions::default()).unwrap();
    let names: Vec<&str> = got.channels.iter().map(|c| c.name.as_str()).collect();
    // R needs its alpha; Z orders the samples; G and B are gone.
    assert_eq!(names, ["A", "R", "Z"], "{names:?}");
    // The kept channels hold what a full merge holds for them.
    let full_out = dir.path().join("full.exr");
    streamed(&inputs, &deep(Codec::Zips), &full_out);
    let full = read_deep(&full_out, &ReadOptions::default()).unwrap();
    assert_eq!(got.offsets, full.offsets);
    for name in names {
        let a = &got.planes[got.channel_index(name).unwrap()];
        let b = &full.planes[full.channel_index(name).unwrap()];
        assert!(a == b, "channel {name} differs");
    }
}

/// The stderr of `deepmerge ARGS --runstats` in a child process, which must succeed.
fn runstats<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_deepmerge"))
        .args(args)
        .arg("--runstats")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    err
}

/// Peak resident set (VmHWM) of `deepmerge ARGS` in a child process, from `--runstats`.
fn peak_rss_mib(args: &[&str]) -> f64 {
    let err = runstats(args);
    let line = err
        .lines()
        .find(|l| l.contains("peak memory"))
        .unwrap_or_else(|| panic!("no peak memory in {err}"));
    line.split_whitespace()
        .find_map(|w| w.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no figure in {line}"))
}

#[test]
fn peak_memory_stays_under_a_small_budget_while_the_image_grows_4x() {
    let dir = tempfile::tempdir().unwrap();
    let mut peaks = Vec::new();
    for size in ["640x180", "1280x360"] {
        let (a, b) = powerplant_pair(&dir.path().join(format!("pp{size}")), size);
        let out = dir.path().join(format!("out{size}.exr"));
        let peak = peak_rss_mib(&[
            &a,
            &b,
            "--backend",
            "cpu",
            "--deep",
            "--memory-budget",
            "0.0625",
            "-o",
            out.to_str().unwrap(),
        ]);
        peaks.push(peak);
    }
    let (small, large) = (peaks[0], peaks[1]);
    assert!(
        large <= 96.0,
        "peak {large:.1} MiB with a 64 MiB budget at 1280x360"
    );
    assert!(
        large <= small * 1.5,
        "peak grew from {small:.1} to {large:.1} MiB while the image grew 4x"
    );
}

#[test]
fn only_a_row_over_its_share_of_the_budget_is_refused_naming_file_row_and_budget() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = powerplant_pair(&dir.path().join("pp"), "320x90");
    let out = dir.path().join("out.exr");
    let merge = |budget: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_deepmerge"))
            .args([
                &a,
                &b,
                "--deep",
                "--backend",
                "cpu",
                "--memory-budget",
                budget,
                "-o",
            ])
            .arg(&out)
            .output()
            .unwrap()
    };
    // 64 KiB: the densest rows need more than a third of it.
    let refused = merge("0.00006");
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("pp_") && err.contains(": row "), "{err}");
    assert!(err.contains("memory budget of"), "{err}");
    assert!(!out.exists());
    // 4 MiB: thin bands, but it merges, to the same bytes as a generous budget.
    assert!(merge("0.004").status.success());
    let thin = std::fs::read(&out).unwrap();
    assert!(merge("1").status.success());
    assert!(thin == std::fs::read(&out).unwrap());
}

/// Inputs none of which covers the union window: bands where only a narrow input (or none)
/// has rows must still span the whole union, and rows no input covers are empty (flat: zero).
#[test]
fn windows_that_only_overlap_stream_like_the_whole_image() {
    use deepmerge::deep::Bounds;
    let dir = tempfile::tempdir().unwrap();
    let top = common::synthetic(Bounds::from_origin_size(0, 0, 21, 41), 1, |i| {
        (i % 4) as u32
    });
    let bottom = common::synthetic(Bounds::from_origin_size(10, 25, 36, 46), 2, |i| {
        (i % 3) as u32
    });
    // A third input far below the others: rows between them belong to no input.
    let far = common::synthetic(Bounds::from_origin_size(5, 90, 8, 5), 3, |_| 2);
    let top_path = dir.path().join("top.exr");
    std::fs::write(
        &top_path,
        deepmerge::exr::encode_deep(&top, Codec::Zip).unwrap(),
    )
    .unwrap();
    let bottom_path = dir.path().join("bottom-decreasing.exr");
    decreasing_file(&bottom, &bottom_path);
    let far_path = dir.path().join("far.exr");
    std::fs::write(
        &far_path,
        deepmerge::exr::encode_deep(&far, Codec::Rle).unwrap(),
    )
    .unwrap();
    let inputs = vec![top_path, bottom_path, far_path];
    check_streams_like_whole(&inputs, &flat());
    check_streams_like_whole(&inputs, &deep(Codec::Zip));
}

/// The count tables the planner's pass keeps for decoding stay within their share of the budget
/// (a sixteenth): past it, a chunk's table is read and inflated again when the chunk is decoded.
/// Either way the rows handed out are the file's, as the whole-image reader reads them.
#[test]
fn count_tables_past_their_share_of_the_budget_are_read_again_with_the_same_rows() {
    use deepmerge::exr::ChunkSource;
    use deepmerge::exr::PartSelector;

    let path = data("openexr-images/Balls.exr");
    let whole = read_deep(&path, &ReadOptions::default()).unwrap();
    let open = |budget: u64| {
        let mut source = ChunkSource::open(&path, &PartSelector::FirstDeep, budget).unwrap();
        source.count_rows(budget).unwrap();
        source
    };
    let all = open(1 << 30);
    let every_table = all.kept_bytes();
    assert!(every_table > 0, "Balls.exr has samples");
    // A share of half the tables.
    let some = open(every_table * 16 / 2);
    assert!(
        some.kept_bytes() > 0 && some.kept_bytes() <= every_table / 2,
        "kept {} of {every_table} bytes",
        some.kept_bytes()
    );
    for mut source in [all, some] {
        let window = source.window;
        let got = source.take_rows(window.y0..=window.y1).unwrap();
        assert!(got == whole, "rows differ from the whole-image reader's");
    }
}

/// `--runstats` names the bands the plan cut and the tallest: bands of one row make as many
/// bands as the window has rows, and one band of every row holds them all.
#[test]
fn runstats_names_the_bands_and_the_tallest() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.exr");
    let bands = |rows: &str| -> (usize, usize) {
        let mut args: Vec<std::ffi::OsString> =
            scanline_inputs().into_iter().map(Into::into).collect();
        for arg in ["--backend", "cpu", "--band-rows", rows, "-o"] {
            args.push(arg.into());
        }
        args.push(out.clone().into());
        let err = runstats(&args);
        let line = err
            .lines()
            .find(|l| l.trim_start().starts_with("bands"))
            .unwrap_or_else(|| panic!("no bands in {err}"));
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["bands", n, "(at", "most", tallest, "rows)"] => {
                (n.parse().unwrap(), tallest.parse().unwrap())
            }
            _ => panic!("unexpected line: {line}"),
        }
    };
    let (thin, one_row) = bands("1");
    assert_eq!(one_row, 1);
    assert!(thin > 1, "{thin} bands of one row");
    assert_eq!(bands("1000000"), (1, thin), "one band holds every row");
}

/// The spans of `DEEPMERGE_TIMELINE=1 deepmerge ARGS --runstats`: (start ms, took ms, thread,
/// what), and the whole stderr. Each span's CPU time is checked on the way: a number no larger
/// than the span's length (one thread runs at most all the while), with its page faults.
fn timeline<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> (Vec<(f64, f64, String, String)>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_deepmerge"))
        .args(args)
        .arg("--runstats")
        .env("DEEPMERGE_TIMELINE", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    let spans = timeline_spans::spans(&err)
        .into_iter()
        .map(|span| {
            let on_cpu = span.on_cpu.expect("on-cpu milliseconds");
            span.faults.expect("page faults");
            // Printed to 0.1 ms each.
            assert!(on_cpu <= span.took + 0.11, "{span:?}");
            (span.start, span.took, span.thread, span.what)
        })
        .collect();
    (spans, err)
}

/// The timeline shows each band decoded on the reader, merged on the merging thread and
/// encoded on the writer, in that order, and the band count `--runstats` gives; nothing is
/// printed without `DEEPMERGE_TIMELINE`.
#[test]
fn timeline_shows_each_band_pass_through_the_threads() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.exr");
    let mut args: Vec<std::ffi::OsString> = scanline_inputs().into_iter().map(Into::into).collect();
    for arg in ["--backend", "cpu", "--band-rows", "16", "-o"] {
        args.push(arg.into());
    }
    args.push(out.clone().into());
    let (spans, err) = timeline(&args);
    let bands: usize = err
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("bands"))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no bands in {err}"));
    let find = |thread: &str, what: &str| {
        spans
            .iter()
            .find(|s| s.2 == thread && s.3 == what)
            .unwrap_or_else(|| panic!("no {thread} span {what} in {err}"))
    };
    let decoded: Vec<&str> = spans
        .iter()
        .filter(|s| s.2 == "reader")
        .filter_map(|s| s.3.strip_prefix("decode rows "))
        .collect();
    assert!(bands > 1, "{err}");
    assert_eq!(decoded.len(), bands, "{err}");
    for rows in decoded {
        let decode = find("reader", &format!("decode rows {rows}"));
        let merge = find("main", &format!("merge rows {rows}"));
        let encode = find("writer", &format!("encode rows {rows}"));
        // Rounded to 0.1 ms as printed.
        assert!(merge.0 >= decode.0 + decode.1 - 0.11, "{rows}: {err}");
        assert!(encode.0 >= merge.0 + merge.1 - 0.11, "{rows}: {err}");
    }
    find("main", "open the inputs");
    find("writer", "finish the output file");
    assert!(err.contains("reader: busy "), "{err}");
    assert!(
        !runstats(&args).contains("timeline"),
        "printed without DEEPMERGE_TIMELINE"
    );
}

/// `(page faults, output bytes)` of a flat merge of `a` and `b` under a small budget (many
/// bands) with `env` set (a name with no value: removed).
fn faults_and_bytes(a: &str, b: &str, out: &Path, env: &[(&str, Option<&str>)]) -> (u64, Vec<u8>) {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_deepmerge"));
    command
        .args([a, b, "--backend", "cpu", "--memory-budget", "0.0625"])
        .arg("--runstats")
        .arg("-o")
        .arg(out)
        // The user's own glibc tuning, if any, is not this test's.
        .env_remove("GLIBC_TUNABLES")
        .env_remove("MALLOC_MMAP_THRESHOLD_")
        .env_remove("MALLOC_TRIM_THRESHOLD_");
    for (name, value) in env {
        match value {
            Some(v) => command.env(name, v),
            None => command.env_remove(name),
        };
    }
    let run = command.output().unwrap();
    let err = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(run.status.success(), "{env:?}: {err}");
    let line = err
        .lines()
        .find(|l| l.trim_start().starts_with("cpu time"))
        .unwrap_or_else(|| panic!("{env:?}: no cpu time in {err}"));
    let faults = line
        .rsplit("; ")
        .next()
        .and_then(|f| f.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{env:?}: no page faults in {line}"));
    (faults, std::fs::read(out).unwrap())
}

#[test]
fn freed_band_buffers_are_kept_for_the_next_band_unless_asked_not_to() {
    // The CLI keeps freed memory for the next band (src/memory_reuse.rs), by default: the same
    // bytes with fewer fresh pages from the kernel than glibc's own thresholds give, unless
    // DEEPMERGE_MALLOC=system or the user's own threshold says otherwise; an unknown setting
    // is refused, naming the variable.
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = powerplant_pair(&dir.path().join("pp"), "1280x360");
    let run = |name: &str, env: &[(&str, Option<&str>)]| {
        faults_and_bytes(&a, &b, &dir.path().join(format!("{name}.exr")), env)
    };
    let (default, default_bytes) = run("default", &[("DEEPMERGE_MALLOC", None)]);
    let (reuse, reused_bytes) = run("reuse", &[("DEEPMERGE_MALLOC", Some("reuse"))]);
    let (system, system_bytes) = run("system", &[("DEEPMERGE_MALLOC", Some("system"))]);
    let (users, users_bytes) = run(
        "users",
        &[
            ("DEEPMERGE_MALLOC", None),
            ("GLIBC_TUNABLES", Some("glibc.malloc.trim_threshold=131072")),
        ],
    );
    for bytes in [&reused_bytes, &system_bytes, &users_bytes] {
        assert!(*bytes == default_bytes, "the allocator changed the output");
    }
    // About 8,000 against 16,000 on the development machine; with the user's trim
    // threshold alone (which also fixes glibc's mapping threshold at 128 KiB) more than either.
    #[cfg(all(target_os = "linux", target_env = "gnu", target_pointer_width = "64"))]
    {
        let fewer = |kept: u64, given_back: u64| (kept as f64) < 0.85 * given_back as f64;
        assert!(
            fewer(default, system),
            "page faults: {default} by default, {system} system"
        );
        assert!(
            fewer(reuse, system),
            "page faults: {reuse} reuse, {system} system"
        );
        assert!(
            fewer(default, users),
            "page faults: {default} by default, {users} the user's"
        );
    }
    let _ = (default, reuse, system, users);
    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_deepmerge"))
        .args([&a, &b, "-o"])
        .arg(dir.path().join("x.exr"))
        .env("DEEPMERGE_MALLOC", "jemalloc")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{err}");
    assert!(
        err.contains("DEEPMERGE_MALLOC=jemalloc") && err.contains("reuse or system"),
        "{err}"
    );
    assert!(!dir.path().join("x.exr").exists());
}

/// The work of [`the_reader_decodes_ahead_while_the_merge_gets_ready_within_the_bands_planned`]:
/// it gets ready slowly (as a GL context being made does), holds `held` bands (the band issued
/// and the one before, as the GL engine's overlapped bands do), and notes how far ahead of it
/// the reader has decoded.
struct SlowToStart {
    held: usize,
    /// The band whose merge fails, if any.
    fails_at: Option<usize>,
    decoded: Arc<AtomicUsize>,
    decoded_in_prepare: usize,
    /// The most bands decoded beyond those already handed to the work, at any band.
    most_ahead: usize,
    bands_taken: usize,
    options: MergeOptions,
    window: Bounds,
    pending: VecDeque<(Band, MergeOutput)>,
}

impl DeferredWork for SlowToStart {
    fn prepare(&mut self) -> deepmerge::Result<()> {
        let alive = self.held + 2;
        let started = Instant::now();
        while self.decoded.load(Ordering::SeqCst) < alive && started.elapsed().as_secs() < 60 {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Long enough for the reader to decode a band more, were it let.
        std::thread::sleep(Duration::from_millis(300));
        self.decoded_in_prepare = self.decoded.load(Ordering::SeqCst);
        Ok(())
    }

    fn bands_held(&self) -> usize {
        self.held
    }

    fn after_decode(&self) -> Option<AfterDecode> {
        let decoded = self.decoded.clone();
        Some(Arc::new(move |_, _| {
            decoded.fetch_add(1, Ordering::SeqCst);
        }))
    }

    fn band(
        &mut self,
        band: Band,
        images: Vec<DeepImage>,
    ) -> deepmerge::Result<Vec<(Band, MergeOutput)>> {
        let ahead = self.decoded.load(Ordering::SeqCst) - self.bands_taken;
        self.most_ahead = self.most_ahead.max(ahead);
        self.bands_taken += 1;
        if self.fails_at == Some(self.bands_taken - 1) {
            return Err(deepmerge::Error::Usage(format!(
                "the work failed at band {}",
                self.bands_taken - 1
            )));
        }
        let refs: Vec<&DeepImage> = images.iter().collect();
        let window = Bounds {
            y0: *band.start(),
            y1: *band.end(),
            ..self.window
        };
        let merged = merge_images_over(&refs, &self.options, Some(window))?;
        self.pending.push_back((band, merged));
        let ready = self.pending.len().saturating_sub(self.held - 1);
        Ok(self.pending.drain(..ready).collect())
    }

    fn flush(&mut self) -> deepmerge::Result<Vec<(Band, MergeOutput)>> {
        Ok(self.pending.drain(..).collect())
    }
}

/// `inputs` streamed to `out` in bands of 8 rows through [`SlowToStart`] holding `held` bands
/// and failing at band `fails_at`: the run's result and the work.
fn slow_to_start(
    inputs: &[PathBuf],
    options: &StreamOptions,
    held: usize,
    fails_at: Option<usize>,
    out: &Path,
) -> (deepmerge::Result<()>, SlowToStart) {
    let sources: Vec<ChunkSource> = inputs
        .iter()
        .map(|p| {
            let mut source = ChunkSource::open(p, &PartSelector::FirstDeep, 1 << 30).unwrap();
            source.count_rows(1 << 30).unwrap();
            source
        })
        .collect();
    let window = sources[0].window;
    let bands: Vec<Band> = (window.y0..=window.y1)
        .step_by(8)
        .map(|y| y..=(y + 7).min(window.y1))
        .collect();
    assert_eq!(bands.len(), 12);
    // The first input's metadata, as the streamed merge keeps it.
    let (_, flat_write) = options.write_options_from(
        &sources[0].attributes,
        &[&sources[0].all_channels, &sources[1].all_channels],
    );
    let target = BandOutput {
        path: out,
        window,
        format: OutputFormat::Flat(&flat_write),
        empty_rows: None,
    };
    let mut work = SlowToStart {
        held,
        fails_at,
        decoded: Arc::default(),
        decoded_in_prepare: 0,
        most_ahead: 0,
        bands_taken: 0,
        options: options.merge,
        window,
        pending: VecDeque::new(),
    };
    let result = stream_bands_deferred(sources, bands, &target, None, &mut work);
    (result, work)
}

/// The plan budgets for three bands alive (four where the merge holds two): while the merge is
/// getting ready, the reader decodes that many bands and no more, and once the merge runs it is
/// never further ahead; the output is the streamed merge's, byte for byte. A merge that fails
/// while the reader waits for a band to be written ends the run with its error and no output.
#[test]
fn the_reader_decodes_ahead_while_the_merge_gets_ready_within_the_bands_planned() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = powerplant_pair(&dir.path().join("pp"), "160x96");
    let inputs = [PathBuf::from(&a), PathBuf::from(&b)];
    let options = StreamOptions {
        band_rows: Some(8),
        ..flat()
    };
    let reference = dir.path().join("reference.exr");
    streamed(&inputs, &options, &reference);
    let expected = std::fs::read(&reference).unwrap();
    for held in [1, 2] {
        let out = dir.path().join(format!("held{held}.exr"));
        let (result, work) = slow_to_start(&inputs, &options, held, None, &out);
        result.unwrap();
        let alive = held + 2;
        assert_eq!(work.decoded_in_prepare, alive, "held {held}");
        assert!(work.most_ahead <= alive, "held {held}: {}", work.most_ahead);
        assert_eq!(work.bands_taken, 12);
        assert!(std::fs::read(&out).unwrap() == expected, "held {held}");

        let failed = dir.path().join(format!("failed{held}.exr"));
        // On a thread of its own, so that a run that hangs fails the test.
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let (inputs, options, failed_out) = (inputs.clone(), options.clone(), failed.clone());
        std::thread::spawn(move || {
            let (result, work) = slow_to_start(&inputs, &options, held, Some(1), &failed_out);
            let _ = done_tx.send((result.map_err(|e| e.to_string()), work.bands_taken));
        });
        let (result, bands_taken) = done_rx
            .recv_timeout(Duration::from_secs(120))
            .expect("the failed run ended");
        let e = result.unwrap_err();
        assert!(e.contains("the work failed at band 1"), "{e}");
        assert_eq!(bands_taken, 2);
        assert!(!failed.exists());
    }
}

/// `DEEPMERGE_READ_AHEAD=0` (the reader hands over each band when the merge takes it) gives the
/// same bytes; other values are refused by name.
#[test]
fn read_ahead_off_gives_the_same_bytes_and_bad_values_are_named() {
    use deepmerge::stream::pipeline::read_ahead_from;
    assert!(read_ahead_from(None).unwrap());
    assert!(read_ahead_from(Some("1")).unwrap());
    assert!(!read_ahead_from(Some("0")).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = powerplant_pair(&dir.path().join("pp"), "160x96");
    let mut outputs = Vec::new();
    for setting in ["1", "0", "yes"] {
        let out = dir.path().join(format!("out{setting}.exr"));
        let run = common::deepmerge()
            .args([&a, &b, "--band-rows", "8", "-o"])
            .arg(&out)
            .env("DEEPMERGE_READ_AHEAD", setting)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&run.stderr);
        if setting == "yes" {
            assert!(!run.status.success());
            assert!(
                err.contains("DEEPMERGE_READ_AHEAD=yes") && err.contains("use 1 or 0"),
                "{err}"
            );
            assert!(!out.exists());
        } else {
            assert!(run.status.success(), "{err}");
            outputs.push(std::fs::read(&out).unwrap());
        }
    }
    assert!(outputs[0] == outputs[1]);
    // Refused before any input is opened, for the merge and for `comp`: a missing input is not
    // what is said.
    let missing = dir.path().join("missing.exr");
    let script = dir.path().join("graph.toml");
    std::fs::write(
        &script,
        "[input.a]\npath = \"missing.exr\"\n[[output]]\nnode = \"a\"\npath = \"copy.exr\"\n",
    )
    .unwrap();
    let runs = [
        vec![
            missing.clone().into_os_string(),
            a.into(),
            "-o".into(),
            dir.path().join("o.exr").into(),
        ],
        vec!["comp".into(), script.into_os_string()],
    ];
    for args in runs {
        let run = common::deepmerge()
            .args(&args)
            .env("DEEPMERGE_READ_AHEAD", "yes")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&run.stderr);
        assert!(!run.status.success());
        assert!(
            err.contains("DEEPMERGE_READ_AHEAD=yes") && !err.contains("missing"),
            "{err}"
        );
    }
}
