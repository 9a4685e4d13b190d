//! Bad input gets one clear line naming the file and the problem, a non-zero exit, and no output
//! file; inputs are never touched.

mod common;
use std::path::{Path, PathBuf};

use common::*;
use deepmerge::deep::{Bounds, Plane};
use deepmerge::exr::{encode_deep, Codec};

struct Case {
    dir: tempfile::TempDir,
}

impl Case {
    fn new() -> Self {
        Case {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn file(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }
    fn out(&self) -> PathBuf {
        self.dir.path().join("out.exr")
    }
    /// Merge `bad` with a good file; the run must fail with `expect` in its one-line error
    /// naming `bad`, and leave no output and no temporary file.
    fn fails(&self, bad: &Path, extra: &[&str], expect: &str) {
        let good = data("openexr-images/Trunks.exr");
        let before = std::fs::read(bad).unwrap();
        let out = self.out();
        let mut args = vec![
            good.to_str().unwrap(),
            bad.to_str().unwrap(),
            "--backend",
            "cpu",
        ];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-o", out.to_str().unwrap()]);
        let (ok, _, err) = run(&args);
        assert!(!ok, "should fail: {err}");
        assert!(err.contains(expect), "expected {expect:?} in {err:?}");
        assert!(
            err.contains(&bad.display().to_string()),
            "error names the file: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(!out.exists(), "no output after a failure");
        let leftovers: Vec<_> = std::fs::read_dir(self.dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
        assert_eq!(std::fs::read(bad).unwrap(), before, "input untouched");
    }
}

/// A small deep file stored raw (NONE), so its chunk bytes can be edited, and the byte position
/// of its first chunk: the first offset-table entry points just past the table.
fn raw_deep_file() -> (Vec<u8>, usize) {
    let window = Bounds::from_origin_size(0, 0, 4, 3);
    let image = synthetic(window, 5, |p| (p % 3 + 1) as u32);
    let bytes = encode_deep(&image, Codec::None).unwrap();
    let chunks = window.height();
    let table_at = (8..bytes.len() - 8)
        .find(|&i| {
            u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap()) == (i + 8 * chunks) as u64
        })
        .unwrap();
    (bytes, table_at + 8 * chunks)
}

fn put_i32(bytes: &mut [u8], at: usize, v: i32) {
    bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn truncated_file() {
    let case = Case::new();
    let whole = std::fs::read(data("openexr-images/Balls.exr")).unwrap();
    let bad = case.file("truncated.exr", &whole[..whole.len() / 2]);
    case.fails(&bad, &[], "truncated");
    let bad = case.file("header-only.exr", &whole[..300]);
    case.fails(&bad, &[], "truncated");
}

#[test]
fn wrong_magic_and_empty_file() {
    let case = Case::new();
    let bad = case.file("text.exr", b"this is not an image at all");
    case.fails(&bad, &[], "not an OpenEXR file (wrong magic number)");
    let bad = case.file("empty.exr", b"");
    case.fails(&bad, &[], "too short");
}

#[test]
fn flat_exr_given_where_deep_is_expected_is_refused() {
    let case = Case::new();
    let flat = std::fs::read(data("openexr-images/composited.exr")).unwrap();
    let bad = case.file("flat.exr", &flat);
    case.fails(&bad, &[], "is a flat (non-deep) EXR");
}

#[test]
fn decreasing_sample_count_table() {
    let case = Case::new();
    let (mut bytes, chunk) = raw_deep_file();
    // Chunk: y, three u64 sizes, then the cumulative table (raw). Make it decrease.
    let table = chunk + 4 + 24;
    put_i32(&mut bytes, table + 4, 0);
    let bad = case.file("decreasing.exr", &bytes);
    case.fails(&bad, &[], "corrupt sample-count table");
}

#[test]
fn sample_count_table_larger_than_its_chunk() {
    let case = Case::new();
    let (mut bytes, chunk) = raw_deep_file();
    let table = chunk + 4 + 24;
    put_i32(&mut bytes, table + 12, 1000);
    let bad = case.file("too-many.exr", &bytes);
    case.fails(&bad, &[], "corrupt sample-count table");
}

#[test]
fn absurd_counts_are_refused_before_allocating() {
    let case = Case::new();
    let (mut bytes, chunk) = raw_deep_file();
    let table = chunk + 4 + 24;
    for k in 0..4 {
        put_i32(&mut bytes, table + 4 * k, 2_000_000_000);
    }
    // Claim the matching unpacked size: 2e9 samples of 4 halves + a float.
    let claimed: u64 = 2_000_000_000 * 12;
    bytes[chunk + 20..chunk + 28].copy_from_slice(&claimed.to_le_bytes());
    let bad = case.file("absurd.exr", &bytes);
    case.fails(&bad, &[], "over the memory limit of 8.00 GiB");
    // The limit is configurable, and applies to real files too.
    let balls = data("openexr-images/Balls.exr");
    let (ok, _, err) = run(&["info", balls.to_str().unwrap(), "--max-memory", "0.005"]);
    assert!(!ok);
    assert!(
        err.contains("Balls.exr: its 162877 samples would need"),
        "{err}"
    );
    assert!(err.contains("over the memory limit of 5.1 MiB"), "{err}");
}

#[test]
fn unknown_compression() {
    let case = Case::new();
    let (mut bytes, _) = raw_deep_file();
    let key = b"compression\0compression\0";
    let at = bytes.windows(key.len()).position(|w| w == key).unwrap() + key.len() + 4;
    bytes[at] = 4; // PIZ: not allowed for deep data
    let bad = case.file("piz.exr", &bytes);
    case.fails(&bad, &[], "not allowed for deep data");
    bytes[at] = 200; // not a compression at all
    let bad = case.file("unknown.exr", &bytes);
    case.fails(&bad, &[], "cannot parse the EXR header");
}

#[test]
fn nan_depth_is_refused_and_infinite_depth_is_accepted() {
    let case = Case::new();
    let window = Bounds::from_origin_size(0, 0, 4, 3);
    let mut image = synthetic(window, 9, |_| 2);
    let z = image.channel_index("Z").unwrap();
    let Plane::F32(values) = &mut image.planes[z] else {
        panic!("Z is float")
    };
    values[5] = f32::INFINITY;
    let inf = case.file("inf.exr", &encode_deep(&image, Codec::Zips).unwrap());
    let out = case.out();
    let good = data("openexr-images/Trunks.exr");
    let (ok, _, err) = run(&[
        good.to_str().unwrap(),
        inf.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--backend",
        "cpu",
    ]);
    assert!(ok, "infinite depth is a depth: {err}");
    std::fs::remove_file(&out).unwrap();
    let Plane::F32(values) = &mut image.planes[z] else {
        panic!("Z is float")
    };
    values[3] = f32::NAN;
    let bad = case.file("nan.exr", &encode_deep(&image, Codec::Zips).unwrap());
    case.fails(&bad, &[], "channel Z is NaN at pixel (1, 0) sample 1");
}

#[test]
fn output_equal_to_an_input_is_refused() {
    let case = Case::new();
    let input = case.file(
        "in.exr",
        &std::fs::read(data("openexr-images/Trunks.exr")).unwrap(),
    );
    let other = data("openexr-images/Balls.exr");
    let before = std::fs::read(&input).unwrap();
    // Spelled differently, same file.
    let spelled = case.dir.path().join(".").join("in.exr");
    let (ok, _, err) = run(&[
        other.to_str().unwrap(),
        input.to_str().unwrap(),
        "--backend",
        "cpu",
        "-o",
        spelled.to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(err.contains("output path is also an input"), "{err}");
    assert_eq!(std::fs::read(&input).unwrap(), before);
}

#[test]
fn missing_input_file() {
    let case = Case::new();
    let missing = case.dir.path().join("nope.exr");
    let good = data("openexr-images/Trunks.exr");
    let out = case.out();
    let (ok, _, err) = run(&[
        good.to_str().unwrap(),
        missing.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--backend",
        "cpu",
    ]);
    assert!(!ok);
    assert!(err.contains("nope.exr: cannot read"), "{err}");
    assert!(!out.exists());
}
