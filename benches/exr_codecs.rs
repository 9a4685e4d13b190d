//! Size, write time and read time of deep output in ZSTD against ZIPS and ZIP, and the
//! end-to-end merge time of ZSTD inputs against the same inputs in ZIPS, measured in one run
//! (docs/benchmarks.md, "OpenEXR 3.5 compressions").
//!
//! `cargo bench --bench exr_codecs -- FILE...`: every FILE (deep EXR) is read, then written
//! whole in memory with each codec (the median of `REPEATS` encodes) and read back (the median
//! of `REPEATS` decodes). With two or more files, they are also merged with the CLI's streamed
//! merge (CPU engine, deep output), once from ZIPS copies and once from ZSTD copies written by
//! this program, the median of `REPEATS` runs each. Prints a Markdown table.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use deepmerge::composite::{MergeOptions, OutputKind};
use deepmerge::exr::{decode_deep, encode_deep, read_deep, write_deep, Codec, ReadOptions};
use deepmerge::stream::{merge_files, MergeEngine, StreamOptions};

const REPEATS: usize = 3;

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

fn main() {
    let files: Vec<PathBuf> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .map(PathBuf::from)
        .collect();
    if files.is_empty() {
        eprintln!("usage: cargo bench --bench exr_codecs -- FILE...");
        return;
    }
    let codecs = [
        Codec::Zips,
        Codec::Zip,
        Codec::Zstd { level: 5 },
        Codec::Zstd { level: 1 },
    ];
    println!("| input | samples | codec | size (MiB) | size / ZIPS | write (ms) | write / ZIPS | read (ms) | read / ZIPS |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for file in &files {
        let image = read_deep(file, &ReadOptions::default()).expect("a deep input");
        let mut base: Option<(usize, Duration, Duration)> = None;
        for codec in codecs {
            let mut bytes = Vec::new();
            let write = median(
                (0..REPEATS)
                    .map(|_| {
                        let t = Instant::now();
                        bytes = encode_deep(&image, codec).unwrap();
                        t.elapsed()
                    })
                    .collect(),
            );
            let read = median(
                (0..REPEATS)
                    .map(|_| {
                        let t = Instant::now();
                        let back = decode_deep(&bytes, &ReadOptions::default()).unwrap();
                        let elapsed = t.elapsed();
                        assert!(back.planes == image.planes, "{codec:?} round trip");
                        elapsed
                    })
                    .collect(),
            );
            let (size0, write0, read0) = *base.get_or_insert((bytes.len(), write, read));
            let name = match codec {
                Codec::Zstd { level } => format!("zstd {level}"),
                other => other.name().to_string(),
            };
            println!(
                "| {} | {} | {name} | {:.2} | {:.3} | {} | {:.2} | {} | {:.2} |",
                file.file_name().unwrap().to_string_lossy(),
                image.sample_count(),
                bytes.len() as f64 / (1 << 20) as f64,
                bytes.len() as f64 / size0 as f64,
                ms(write),
                write.as_secs_f64() / write0.as_secs_f64(),
                ms(read),
                read.as_secs_f64() / read0.as_secs_f64(),
            );
        }
    }
    if files.len() < 2 {
        return;
    }
    // End to end: the same inputs as ZIPS and as ZSTD files, merged deep.
    let dir = tempfile::tempdir().unwrap();
    let mut copies: Vec<(Codec, Vec<PathBuf>)> = Vec::new();
    for codec in [Codec::Zips, Codec::Zstd { level: 5 }] {
        let paths = files
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let image = read_deep(f, &ReadOptions::default()).unwrap();
                let path = dir.path().join(format!("{}-{i}.exr", codec.name()));
                write_deep(&path, &image, codec).unwrap();
                path
            })
            .collect();
        copies.push((codec, paths));
    }
    let options = StreamOptions {
        merge: MergeOptions {
            output: OutputKind::Deep,
            ..MergeOptions::default()
        },
        ..StreamOptions::default()
    };
    println!();
    println!("| inputs | merge (ms), ZIPS inputs | merge (ms), ZSTD inputs | ZSTD / ZIPS |");
    println!("| --- | --- | --- | --- |");
    let times: Vec<Duration> = copies
        .iter()
        .map(|(_, paths)| {
            let out = dir.path().join("out.exr");
            median(
                (0..REPEATS)
                    .map(|_| {
                        let t = Instant::now();
                        merge_files(paths, &out, &options, MergeEngine::Cpu, None).unwrap();
                        t.elapsed()
                    })
                    .collect(),
            )
        })
        .collect();
    println!(
        "| {} files | {} | {} | {:.2} |",
        files.len(),
        ms(times[0]),
        ms(times[1]),
        times[1].as_secs_f64() / times[0].as_secs_f64()
    );
}
