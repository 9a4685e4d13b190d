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
        self.merge_fails(&[&good, bad], &[bad], extra, expect);
    }

    /// Merge `inputs`; the run must fail with `expect` in an error that is the only line on
    /// stderr and names every file of `named`, and leave no output and no temporary file.
    fn merge_fails(&self, inputs: &[&Path], named: &[&Path], extra: &[&str], expect: &str) {
        let before: Vec<Vec<u8>> = inputs.iter().map(|p| std::fs::read(p).unwrap()).collect();
        let out = self.out();
        let mut args: Vec<&str> = inputs.iter().map(|p| p.to_str().unwrap()).collect();
        args.extend_from_slice(&["--backend", "cpu"]);
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-o", out.to_str().unwrap()]);
        let (ok, _, err) = run(&args);
        assert!(!ok, "should fail: {err}");
        assert!(err.contains(expect), "expected {expect:?} in {err:?}");
        for bad in named {
            assert!(
                err.contains(&bad.display().to_string()),
                "error names {}: {err}",
                bad.display()
            );
        }
        assert_one_line_error(&err);
        assert!(!out.exists(), "no output after a failure");
        let leftovers: Vec<_> = std::fs::read_dir(self.dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
        for (input, before) in inputs.iter().zip(&before) {
            assert_eq!(&std::fs::read(input).unwrap(), before, "input untouched");
        }
    }
}

/// A failure's stderr is exactly one line, the error, and no panic.
fn assert_one_line_error(err: &str) {
    assert!(err.ends_with('\n'), "ends its line: {err:?}");
    assert_eq!(err.lines().count(), 1, "one line: {err:?}");
    assert!(err.starts_with("deepmerge: error: "), "{err:?}");
    assert!(!err.contains("panicked"), "{err}");
}

/// The value bytes of `attribute` (its name, type name and size skipped) in a header.
fn attribute_at(bytes: &[u8], name: &str, type_name: &str) -> usize {
    let key = format!("{name}\0{type_name}\0");
    let key = key.as_bytes();
    bytes.windows(key.len()).position(|w| w == key).unwrap() + key.len() + 4
}

/// A small deep file stored raw (NONE), so its chunk bytes can be edited, and the byte position
/// of its first chunk: the first offset-table entry points just past the table.
fn raw_deep_file() -> (Vec<u8>, usize) {
    let window = Bounds::from_origin_size(0, 0, 4, 3);
    let image = synthetic(window, 5, |p| (p % 3 + 1) as u32);
    let bytes = encode_deep(&image, Codec::None).unwrap();
    let chunk = first_chunk(&bytes, window.height());
    (bytes, chunk)
}

/// The byte position of the first chunk of a file of `chunks` chunks: the first offset-table
/// entry points just past the table.
fn first_chunk(bytes: &[u8], chunks: usize) -> usize {
    let table_at = (8..bytes.len() - 8)
        .find(|&i| {
            u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap()) == (i + 8 * chunks) as u64
        })
        .unwrap();
    table_at + 8 * chunks
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
    // Claim the matching unpacked size: 2e9 samples of 4 halves + a float. The table agrees
    // with the claim, but the chunk's few stored bytes cannot hold it.
    let claimed: u64 = 2_000_000_000 * 12;
    bytes[chunk + 20..chunk + 28].copy_from_slice(&claimed.to_le_bytes());
    let bad = case.file("absurd.exr", &bytes);
    case.fails(&bad, &[], "cannot unpack to the 24000000000 bytes claimed");
    // The limit is configurable, and applies to real files too.
    let balls = data("openexr-images/Balls.exr");
    let (ok, _, err) = run(&["info", balls.to_str().unwrap(), "--max-memory", "0.005"]);
    assert!(!ok);
    assert!(
        err.contains("Balls.exr: its 162877 samples would need"),
        "{err}"
    );
    assert!(
        err.contains("over the memory budget of 5.1 MiB (raise it with --max-memory)"),
        "{err}"
    );
}

#[test]
fn unsupported_compressions_are_named() {
    let case = Case::new();
    let (mut bytes, _) = raw_deep_file();
    let key = b"compression\0compression\0";
    let at = bytes.windows(key.len()).position(|w| w == key).unwrap() + key.len() + 4;
    bytes[at] = 4; // PIZ: not allowed for deep data
    let bad = case.file("piz.exr", &bytes);
    case.fails(
        &bad,
        &[],
        "PIZ compression is not supported for deep parts (deep data is stored in NONE, RLE, ZIPS or ZSTD)",
    );
    for (id, name) in [(10, "HTJ2K256"), (11, "HTJ2K32"), (12, "LJ2K"), (9, "DWAB")] {
        bytes[at] = id;
        let bad = case.file(&format!("{name}.exr"), &bytes);
        case.fails(
            &bad,
            &[],
            &format!("{name} compression is not supported for deep parts"),
        );
    }
    bytes[at] = 200; // not a compression at all (yet)
    let bad = case.file("unknown.exr", &bytes);
    case.fails(
        &bad,
        &[],
        "unknown compression id 200 (OpenEXR 3.5 defines ids 0 to 13)",
    );
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

#[test]
fn a_window_whose_size_overflows_is_refused_before_allocating() {
    let case = Case::new();
    let (bytes, _) = raw_deep_file();
    let at = attribute_at(&bytes, "dataWindow", "box2i");
    // About 2^30 x 2^29 pixels, and the largest window the header parser takes (coordinates
    // within +-(2^30 - 3), about what OpenEXR allows), whose size times 12 bytes wrapped a u64 and
    // passed the old check: the window's tables alone are over any budget.
    const MAX: i32 = (1 << 30) - 3;
    for (name, window, expect) in [
        (
            "huge.exr",
            [0, 0, MAX, (1 << 29) - 1],
            "its data window of 1073741822 x 536870912 pixels would need",
        ),
        (
            "wrapping.exr",
            [-MAX, -MAX, MAX, MAX],
            "its data window of 2147483643 x 2147483643 pixels would need",
        ),
    ] {
        let mut bytes = bytes.clone();
        for (k, v) in window.into_iter().enumerate() {
            put_i32(&mut bytes, at + 4 * k, v);
        }
        let bad = case.file(name, &bytes);
        case.fails(&bad, &[], expect);
    }
}

#[test]
fn a_chunk_claiming_more_than_its_packed_bytes_can_hold_is_refused() {
    // RLE unpacks at most 64 bytes per packed byte: a consistent table and unpacked size of
    // 2e9 samples over a few packed bytes is refused before its planes are allocated.
    let case = Case::new();
    let window = Bounds::from_origin_size(0, 0, 4, 3);
    let image = synthetic(window, 5, |_| 1);
    let mut bytes = encode_deep(&image, Codec::Rle).unwrap();
    let chunk = first_chunk(&bytes, window.height());
    let claimed: u64 = 2_000_000_000 * 12;
    bytes[chunk + 20..chunk + 28].copy_from_slice(&claimed.to_le_bytes());
    let bad = case.file("rle-claims.exr", &bytes);
    case.fails(
        &bad,
        &[],
        "of rle cannot unpack to the 24000000000 bytes claimed",
    );
}

/// Write `image` as `name` in `case` (ZIPS).
fn write(case: &Case, name: &str, image: &deepmerge::deep::DeepImage) -> PathBuf {
    case.file(name, &encode_deep(image, Codec::Zips).unwrap())
}

#[test]
fn an_output_window_over_the_budget_is_refused_naming_the_inputs() {
    // Two valid 4 x 4 files, one at the origin and one 2^28 rows down: the union window is a
    // billion pixels, which neither output fits in 8 GiB.
    let case = Case::new();
    let near = synthetic(Bounds::from_origin_size(0, 0, 4, 4), 1, |_| 2);
    let far = synthetic(Bounds::from_origin_size(0, 1 << 28, 4, 4), 2, |_| 2);
    let (near, far) = (
        write(&case, "near.exr", &near),
        write(&case, "far.exr", &far),
    );
    let window = "merged data window (0, 0)-(3, 268435459), 4 x 268435460 pixels, for";
    case.merge_fails(&[&near, &far], &[&near, &far], &[], window);
    case.merge_fails(
        &[&near, &far],
        &[&near, &far],
        &["--deep"],
        "for deep output",
    );
    // The same merge fits when the windows are close.
    let close = synthetic(Bounds::from_origin_size(0, 64, 4, 4), 2, |_| 2);
    let close = write(&case, "close.exr", &close);
    let out = case.out();
    let (ok, _, err) = run(&[
        near.to_str().unwrap(),
        close.to_str().unwrap(),
        "--backend",
        "cpu",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
}

/// `image` with one more channel `name` of `sample_type`, all zeros, in name order.
fn with_channel(
    image: &deepmerge::deep::DeepImage,
    name: &str,
    sample_type: deepmerge::deep::SampleType,
) -> deepmerge::deep::DeepImage {
    let mut out = image.clone();
    let at = out.channels.partition_point(|c| c.name.as_str() < name);
    out.channels
        .insert(at, deepmerge::deep::Channel::new(name, sample_type));
    out.planes
        .insert(at, Plane::zeros(sample_type, image.sample_count()));
    out
}

#[test]
fn a_channel_both_integer_and_float_names_both_inputs() {
    use deepmerge::deep::SampleType;
    let case = Case::new();
    let base = synthetic(Bounds::from_origin_size(0, 0, 4, 3), 3, |_| 1);
    let ints = write(
        &case,
        "ids.exr",
        &with_channel(&base, "id", SampleType::U32),
    );
    let floats = write(
        &case,
        "floats.exr",
        &with_channel(&base, "id", SampleType::F32),
    );
    case.merge_fails(
        &[&floats, &ints],
        &[&floats, &ints],
        &[],
        &format!(
            "channel id is an integer channel in {} and a float channel in {}",
            ints.display(),
            floats.display()
        ),
    );
}

#[test]
fn a_flat_merge_of_depth_only_inputs_says_why_not() {
    // Without alpha or colour nothing contributes to a composite: refused with the reason,
    // while the deep merge of the same inputs is meaningful and works.
    let case = Case::new();
    let mut only_z = synthetic(Bounds::from_origin_size(0, 0, 4, 3), 4, |_| 2);
    let z = only_z.channel_index("Z").unwrap();
    only_z.channels = vec![only_z.channels[z].clone()];
    only_z.planes = vec![only_z.planes[z].clone()];
    let a = write(&case, "za.exr", &only_z);
    let b = write(&case, "zb.exr", &only_z);
    for extra in [&[][..], &["--flat-z"][..]] {
        case.merge_fails(
            &[&a, &b],
            &[&a, &b],
            extra,
            "hold no colour or alpha channel, only depth or ids",
        );
    }
    let out = case.out();
    let (ok, _, err) = run(&[
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--deep",
        "--backend",
        "cpu",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
}

#[test]
fn corrupt_zlib_data_is_one_line() {
    let case = Case::new();
    let window = Bounds::from_origin_size(0, 0, 16, 2);
    let mut image = synthetic(window, 6, |_| 8);
    // Constant values, so that the sample data is deflated rather than stored raw.
    for plane in &mut image.planes {
        *plane = Plane::zeros(plane.sample_type(), image.offsets[window.area()] as usize);
    }
    let mut bytes = encode_deep(&image, Codec::Zips).unwrap();
    let chunk = first_chunk(&bytes, window.height());
    let size = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
    let (packed_table, packed, unpacked) = (size(chunk + 4), size(chunk + 12), size(chunk + 20));
    assert!(packed < unpacked, "the sample data is deflated");
    // Break the zlib header's check bits: the inflater refuses the stream.
    bytes[chunk + 28 + packed_table + 1] ^= 0x01;
    let bad = case.file("zlib.exr", &bytes);
    case.fails(&bad, &[], "zlib data is corrupt (bad zlib header)");
}

/// Every file in `tests/data/hostile/` (inputs that once broke the reader, see its README) fails
/// with one line naming it; the table must list them all, so a new file cannot go untested.
#[test]
fn regression_files_in_tests_data_hostile_fail_on_one_line() {
    let expected = [
        (
            "window-wraps.exr",
            "its data window of 2147483643 x 2147483643 pixels would need 128.00 GiB, over the memory budget",
        ),
        (
            "zlib-checksum.exr",
            "sample-count table: zlib data is corrupt (Adler-32 checksum mismatch)",
        ),
    ];
    let dir = data("hostile");
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".exr"))
        .collect();
    on_disk.sort();
    // Valid files built to exhaust the merge must succeed instead; `tests/hostile.rs` runs them.
    let merge_fine = ["overlapping-volumes.exr"];
    let mut listed: Vec<String> = expected.iter().map(|(n, _)| n.to_string()).collect();
    listed.extend(merge_fine.iter().map(|n| n.to_string()));
    listed.sort();
    assert_eq!(on_disk, listed, "every regression file has an expectation");
    let case = Case::new();
    for (name, expect) in expected {
        case.fails(&dir.join(name), &[], expect);
    }
}
