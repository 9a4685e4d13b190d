//! OpenEXR 3.5 files in and out: ZSTD (compression id 13) both ways against PyPI OpenEXR 3.5,
//! compressions deepmerge does not read named in one line, ZIP refused for deep output, every
//! flat output compression, and the first input's header attributes carried through.
//!
//! The ZSTD files are made here, by PyPI OpenEXR 3.5 (`tests/independent/openexr35.py`), from
//! the committed corpus; OpenEXR also reads back what deepmerge writes.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use deepmerge::exr::{encode_deep, read_deep, Codec, ReadOptions};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/independent/openexr35.py")
}

/// Run `openexr35.py ARGS` in the tests' Python; its stdout, or the test fails with its output.
fn openexr(args: &[&Path]) -> String {
    let out = test_python()
        .arg(script())
        .args(args)
        .output()
        .expect("python runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "openexr35.py {args:?} failed:\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// `src` rewritten by PyPI OpenEXR with `compression`, as `dir/name`.
fn recompressed(dir: &Path, src: &Path, name: &str, compression: &str) -> PathBuf {
    let dst = dir.join(name);
    openexr(&[Path::new("recompress"), src, &dst, Path::new(compression)]);
    dst
}

/// Our read of part `part`, with the state cleared (PyPI OpenEXR cannot copy `deepImageState`).
fn read_part(path: &Path, part: usize) -> deepmerge::deep::DeepImage {
    let mut image = read(path, part);
    image.state = deepmerge::deep::DeepState::Messy;
    image
}

fn cli(args: &[&str]) {
    let (ok, _, err) = run(args);
    assert!(ok, "deepmerge {args:?} failed: {err}");
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Every deep encoding of the corpus (scanline, tiled with clipped edge tiles, random tile
/// order, per-channel alpha, uint ids and half Z, multi-part) in ZSTD from OpenEXR reads as the
/// original does, with the whole-file reader and through the streaming merge.
#[test]
fn zstd_files_from_openexr_read_as_their_originals() {
    let dir = tempfile::tempdir().unwrap();
    for (rel, parts) in [
        ("openexr-images/Balls.exr", 1),
        ("variants/Balls_deeptile17x13_none.exr", 1),
        ("variants/Balls_deeptile32x16_rle.exr", 1),
        ("oiio/deepalpha.exr", 1),
        ("oiio/input-crop.deep.exr", 1),
        ("openexr/11.deep.exr", 1),
        ("openexr-images/Stereo-Trunks-multipart.exr", 2),
    ] {
        let original = data(rel);
        let name = rel.replace('/', "_");
        let zstd = recompressed(dir.path(), &original, &name, "zstd");
        let info = deepmerge::exr::read_parts_info(&zstd).unwrap();
        assert!(info.iter().all(|p| p.compression_id == 13), "{rel}");
        for part in 0..parts {
            let ours = read_part(&zstd, part);
            assert!(
                ours == read_part(&original, part),
                "{rel} part {part}: ZSTD decodes differently"
            );
            // And it is what OpenEXR itself reads in the ZSTD file.
            assert_matches_dump(&ours, &independent_dump(&zstd, part), rel);
        }
        // The streamed reader: a merge of the file with itself, ZSTD against the original.
        for deep in [false, true] {
            let mut outputs = Vec::new();
            for (input, tag) in [(&original, "orig"), (&zstd, "zstd")] {
                let out = dir.path().join(format!("{name}-{tag}-{deep}.exr"));
                // Without metadata: OpenEXR's rewrite of a header is not byte for byte the same.
                let mut args = vec![
                    s(input),
                    s(input),
                    "--metadata",
                    "none",
                    "--backend",
                    "cpu",
                    "-q",
                    "-o",
                    s(&out),
                ];
                if deep {
                    args.push("--deep");
                }
                cli(&args);
                outputs.push(read_merged(&out, deep));
            }
            assert!(outputs[0] == outputs[1], "{rel}: merge of ZSTD differs");
        }
    }
}

/// A merge's output: deep output decoded (its state cleared: PyPI OpenEXR drops a tidy input's
/// `deepImageState` when it rewrites it) and encoded raw, flat output's bytes.
fn read_merged(path: &Path, deep: bool) -> Vec<u8> {
    if deep {
        let mut image = read_deep(path, &ReadOptions::default()).unwrap();
        image.state = deepmerge::deep::DeepState::Messy;
        encode_deep(&image, Codec::None).unwrap()
    } else {
        std::fs::read(path).unwrap()
    }
}

/// The acceptance: ZSTD inputs from OpenEXR merge to exactly the bytes their ZIPS
/// originals merge to, flat and deep, on the CPU engine.
#[test]
fn zstd_inputs_merge_exactly_as_their_zips_originals() {
    assert_zstd_merges_as_zips(
        &["Balls", "Leaves", "Trunks"],
        &["--backend", "cpu"],
        &[&[], &["--deep"], &["--deep", "--tidy"]],
    );
}

/// The same on the GL engine, on a smaller pair (llvmpipe is slow): its band upload reads the
/// ZSTD inputs through the same streamed reader, so the outputs are the ZIPS inputs' bytes.
#[test]
fn zstd_inputs_merge_exactly_as_their_zips_originals_on_gl() {
    assert_zstd_merges_as_zips(
        &["Balls", "Trunks"],
        &["--backend", "gl"],
        &[&[], &["--deep"]],
    );
}

/// Merge the corpus files `names` (`openexr-images/NAME.exr`, ZIPS) and their ZSTD rewrites by
/// PyPI OpenEXR with `engine` and each of `option_sets`; the outputs must be the same bytes.
fn assert_zstd_merges_as_zips(names: &[&str], engine: &[&str], option_sets: &[&[&str]]) {
    let dir = tempfile::tempdir().unwrap();
    let originals: Vec<PathBuf> = names
        .iter()
        .map(|n| data(&format!("openexr-images/{n}.exr")))
        .collect();
    let zstd: Vec<PathBuf> = originals
        .iter()
        .zip(names)
        .map(|(p, n)| recompressed(dir.path(), p, &format!("{n}-zstd.exr"), "zstd"))
        .collect();
    for extra in option_sets {
        let mut outputs = Vec::new();
        for (inputs, tag) in [(&originals, "zips"), (&zstd, "zstd")] {
            let out = dir.path().join(format!("{tag}.exr"));
            let mut args: Vec<&str> = inputs.iter().map(|p| s(p)).collect();
            // Without metadata: OpenEXR's rewrite of a header is not byte for byte the same.
            args.extend(["--metadata", "none", "-q", "-o", s(&out)]);
            args.extend(engine);
            args.extend(*extra);
            cli(&args);
            outputs.push(std::fs::read(&out).unwrap());
        }
        assert!(
            outputs[0] == outputs[1],
            "{engine:?} {extra:?}: the outputs differ"
        );
    }
}

/// ZSTD output, deep and flat, at the default level and at both ends of the range, reads back
/// in OpenEXR to the values deepmerge wrote.
#[test]
fn zstd_output_reads_back_in_openexr() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = [
        data("openexr-images/Balls.exr"),
        data("openexr-images/Trunks.exr"),
    ];
    let ids = data("openexr/11.deep.exr");
    for (first, second, tag) in [
        (&inputs[0], &inputs[1], "balls"),
        (&ids, &ids, "ids"), // uint ids and half Z: 2- and 4-byte channels together
    ] {
        // Deep: what OpenEXR reads is what we read (the values we wrote), and the same as
        // the ZIPS output holds.
        let zips = dir.path().join(format!("{tag}-deep-zips.exr"));
        cli(&[
            s(first),
            s(second),
            "--deep",
            "--backend",
            "cpu",
            "-q",
            "-o",
            s(&zips),
        ]);
        for level in ["1", "5", "22"] {
            let out = dir.path().join(format!("{tag}-deep-zstd{level}.exr"));
            cli(&[
                s(first),
                s(second),
                "--deep",
                "--compression",
                "zstd",
                "--zstd-level",
                level,
                "--backend",
                "cpu",
                "-q",
                "-o",
                s(&out),
            ]);
            let ours = read(&out, 0);
            assert_matches_dump(&ours, &independent_dump(&out, 0), &format!("{tag} {level}"));
            assert_eq!(openexr(&[Path::new("same-pixels"), &zips, &out]), "same\n");
        }
        // Flat (half colour, float Z, uint ids): OpenEXR reads the same pixels as in ZIP.
        let zip = dir.path().join(format!("{tag}-flat-zip.exr"));
        let zstd = dir.path().join(format!("{tag}-flat-zstd.exr"));
        for (out, compression) in [(&zip, "zip"), (&zstd, "zstd")] {
            cli(&[
                s(first),
                s(second),
                "--flat-z",
                "--compression",
                compression,
                "--backend",
                "cpu",
                "-q",
                "-o",
                s(out),
            ]);
        }
        assert_eq!(openexr(&[Path::new("same-pixels"), &zip, &zstd]), "same\n");
        let header = openexr(&[Path::new("header"), &zstd, Path::new("0")]);
        assert!(
            header.contains("compression\tCompression\t<Compression.ZSTD_COMPRESSION: 13>"),
            "{header}"
        );
    }
}

/// The chunks deepmerge writes in ZSTD are the bytes OpenEXR 3.5 writes for the same image:
/// same preprocessing, same libzstd (1.5.7), same level.
#[test]
fn zstd_chunks_are_the_bytes_openexr_writes() {
    let dir = tempfile::tempdir().unwrap();
    let original = data("openexr-images/Balls.exr");
    let theirs = std::fs::read(recompressed(dir.path(), &original, "balls.exr", "zstd")).unwrap();
    let image = read(&original, 0);
    let ours = encode_deep(&image, Codec::Zstd { level: 5 }).unwrap();
    let (their_chunks, our_chunks) = (chunk_bytes(&theirs), chunk_bytes(&ours));
    assert_eq!(their_chunks.len(), our_chunks.len());
    assert!(
        their_chunks == our_chunks,
        "the chunks differ ({} vs {} bytes)",
        their_chunks.len(),
        our_chunks.len()
    );
}

/// The bytes of a single-part file after its header and offset table.
fn chunk_bytes(file: &[u8]) -> &[u8] {
    let mut at = 8;
    let mut chunk_count = None;
    loop {
        let name_end = at + file[at..].iter().position(|&b| b == 0).unwrap();
        if name_end == at {
            at += 1;
            break;
        }
        let type_end = name_end + 1 + file[name_end + 1..].iter().position(|&b| b == 0).unwrap();
        let size = i32::from_le_bytes(file[type_end + 1..type_end + 5].try_into().unwrap());
        let value = &file[type_end + 5..type_end + 5 + size as usize];
        if &file[at..name_end] == b"chunkCount" {
            chunk_count = Some(i32::from_le_bytes(value.try_into().unwrap()) as usize);
        }
        at = type_end + 5 + size as usize;
    }
    &file[at + 8 * chunk_count.expect("deep files state chunkCount")..]
}

/// Compressions deepmerge does not read, on deep parts made by OpenEXR itself, fail with one
/// line naming the file and the compression, never "invalid header".
#[test]
fn deep_parts_in_compressions_openexr_refuses_for_deep_are_named() {
    // OpenEXR will not write PIZ or HTJ2K deep parts at all; a ZIPS file with its compression
    // byte changed stands in (tests/bad_input.rs covers every id), and a real ZIPS file
    // relabelled HTJ2K must not be read as ZIPS.
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = std::fs::read(data("openexr-images/Trunks.exr")).unwrap();
    let key = b"compression\0compression\0";
    let at = bytes.windows(key.len()).position(|w| w == key).unwrap() + key.len() + 4;
    bytes[at] = 10;
    let bad = dir.path().join("htj2k.exr");
    std::fs::write(&bad, &bytes).unwrap();
    let out = dir.path().join("o.exr");
    let balls = data("openexr-images/Balls.exr");
    let (ok, _, err) = run(&[s(&balls), s(&bad), "--backend", "cpu", "-o", s(&out)]);
    assert!(!ok);
    assert_eq!(
        err,
        format!(
            "deepmerge: error: {}: HTJ2K256 compression is not supported for deep parts \
             (deep data is stored in NONE, RLE, ZIPS or ZSTD)\n",
            bad.display()
        )
    );
    assert!(!out.exists());
    // `info` still describes the header.
    let (ok, text, err) = run(&["info", s(&bad)]);
    assert!(ok, "{err}");
    assert!(
        text.contains("    compression: ht j2k 256 compression\n"),
        "{text}"
    );
    assert!(
        text.contains("    samples: not read: HTJ2K256 compression is not supported"),
        "{text}"
    );
}

/// `--deep --compression zip` (and the holdout's) is refused in one line: OpenEXR 3.5 and
/// oiiotool refuse such files. Deep ZIP files are still read.
#[test]
fn zip_is_refused_for_deep_output_and_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let a = data("oiio/input-crop.deep.exr");
    let b = data("oiio/holdout-crop.deep.exr");
    let out = dir.path().join("o.exr");
    for args in [
        vec![
            s(&a),
            s(&b),
            "--deep",
            "--compression",
            "zip",
            "-o",
            s(&out),
        ],
        vec![
            "holdout",
            s(&a),
            s(&b),
            "--compression",
            "zip",
            "-o",
            s(&out),
        ],
    ] {
        let (ok, _, err) = run(&args);
        assert!(!ok, "{args:?}");
        assert_eq!(
            err,
            "deepmerge: error: zip compression is not valid for deep output: OpenEXR accepts \
             none, rle, zips and zstd for deep parts (zip is for flat output)\n"
        );
        assert!(!out.exists());
    }
    let zip = dir.path().join("zip.exr");
    std::fs::write(&zip, encode_deep(&read(&a, 0), Codec::Zip).unwrap()).unwrap();
    cli(&[
        s(&zip),
        s(&b),
        "--deep",
        "--backend",
        "cpu",
        "-q",
        "-o",
        s(&out),
    ]);
}

/// Every flat output compression writes what OpenEXR reads as the same pixels, and says so in
/// its header; the default stays ZIP.
#[test]
fn flat_output_compressions_read_back_in_openexr() {
    let dir = tempfile::tempdir().unwrap();
    let a = data("openexr-images/Balls.exr");
    let b = data("openexr-images/Leaves.exr");
    let default = dir.path().join("default.exr");
    cli(&[s(&a), s(&b), "--backend", "cpu", "-q", "-o", s(&default)]);
    let header = openexr(&[Path::new("header"), &default, Path::new("0")]);
    assert!(
        header.contains("<Compression.ZIP_COMPRESSION: 3>"),
        "{header}"
    );
    for (compression, shown) in [
        ("none", "NO_COMPRESSION: 0"),
        ("rle", "RLE_COMPRESSION: 1"),
        ("zips", "ZIPS_COMPRESSION: 2"),
        ("zip", "ZIP_COMPRESSION: 3"),
        ("zstd", "ZSTD_COMPRESSION: 13"),
    ] {
        let out = dir.path().join(format!("{compression}.exr"));
        cli(&[
            s(&a),
            s(&b),
            "--compression",
            compression,
            "--backend",
            "cpu",
            "-q",
            "-o",
            s(&out),
        ]);
        assert_eq!(
            openexr(&[Path::new("same-pixels"), &default, &out]),
            "same\n"
        );
        let header = openexr(&[Path::new("header"), &out, Path::new("0")]);
        assert!(header.contains(shown), "{compression}: {header}");
    }
}
