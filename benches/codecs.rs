//! ZSTD against ZIPS and ZIP, in one run: the size, write time and read time of each file of a
//! set in each codec, as ratios to ZIPS, and the end-to-end merge time of ZSTD inputs against
//! the same inputs in ZIPS (docs/benchmarks.md, "ZSTD against ZIPS and ZIP").
//!
//! `cargo bench --bench codecs` measures the corpus deep files the tests merge
//! (`tests/data/openexr-images/{Balls,Leaves,Trunks}.exr`) and the first input of each
//! 1920x1080 scene (`powerplant`, `atrium`, `hairball`, as `deepmerge scene` makes them); FILE
//! arguments replace the corpus files, `--scenes none` drops the scenes (`--help` for the rest).
//!
//! For each file, the deep image is written with each deep codec (ZIPS, ZSTD at OpenEXR's
//! level and at level 1; ZIP is not among them, since OpenEXR reads no deep ZIP), and its flat
//! composite (the default flat output, half RGBA) with each flat codec (ZIPS, ZIP, ZSTD). Write
//! is encode + write to a file through the program's own writer (temporary file, fsync,
//! rename); read is read + decode of that file by the program's own reader (the file is then in
//! the page cache, as it is for every codec). Each is the median of `--repeats` runs, and
//! every codec's read-back is checked against the ZIPS one (untimed). End to end: the corpus
//! files merged together, and the first scene's pair, file to file with the streamed CPU merge
//! (deep output in ZIPS, then flat output in ZIP, the defaults), from ZIPS copies and from ZSTD
//! copies of the same images. Prints Markdown tables, ratios against ZIPS of the same run.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Parser;
use deepmerge::composite::{merge_images, MergeOptions, MergeOutput, OutputKind};
use deepmerge::deep::{DeepImage, FlatImage, Plane};
use deepmerge::exr::{
    read_deep, write_deep, write_flat_with, Codec, FlatSource, FlatWriteOptions, PartSelector,
    ReadOptions, DEFAULT_MAX_MEMORY, ZSTD_DEFAULT_LEVEL,
};
use deepmerge::stream::{merge_files, MergeEngine, StreamOptions};

/// ILM's figures for ZSTD against ZIPS on 2.5 TB of production deep scanline renders
/// (size, write time, read time), which the summary sets ours beside.
const ILM_ZSTD_OVER_ZIPS: (f64, f64, f64) = (0.671, 0.661, 0.771);

/// The deep codecs measured, ZIPS (the reference) first.
const DEEP_CODECS: [Codec; 3] = [
    Codec::Zips,
    Codec::Zstd {
        level: ZSTD_DEFAULT_LEVEL,
    },
    Codec::Zstd { level: 1 },
];

/// The flat codecs measured, ZIPS (the reference) first.
const FLAT_CODECS: [Codec; 3] = [
    Codec::Zips,
    Codec::Zip,
    Codec::Zstd {
        level: ZSTD_DEFAULT_LEVEL,
    },
];

#[derive(Parser)]
#[command(about = "ZSTD against ZIPS and ZIP: size, write and read time, end-to-end merge")]
struct Args {
    /// Deep EXR files to measure, merged together end to end [default: the corpus's Balls,
    /// Leaves and Trunks].
    files: Vec<PathBuf>,
    /// Scenes whose first input is measured; the first one's pair is merged end to end
    /// (`none` for no scenes).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "powerplant,atrium,hairball"
    )]
    scenes: Vec<String>,
    /// Size of the scenes, WIDTHxHEIGHT.
    #[arg(long, default_value = "1920x1080")]
    size: String,
    /// Seed of the scenes (as `deepmerge scene --seed`).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Runs per measurement; the median is reported.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Where the files are written [default: a temporary directory].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

/// One file of the set: its name in the tables and its deep image.
struct Input {
    name: String,
    image: DeepImage,
}

/// One codec's measurements of one image.
#[derive(Clone, Copy)]
struct Measured {
    bytes: u64,
    write: Duration,
    read: Duration,
}

/// The sums over a group of files, for the summary: ZIPS's and another codec's.
#[derive(Default, Clone, Copy)]
struct Totals {
    zips: (u64, f64, f64),
    other: (u64, f64, f64),
}

impl Totals {
    fn add(&mut self, zips: Measured, other: Measured) {
        let add = |t: &mut (u64, f64, f64), m: Measured| {
            t.0 += m.bytes;
            t.1 += m.write.as_secs_f64();
            t.2 += m.read.as_secs_f64();
        };
        add(&mut self.zips, zips);
        add(&mut self.other, other);
    }

    /// Size, write time and read time against ZIPS, summed over the group.
    fn ratios(&self) -> (f64, f64, f64) {
        (
            self.other.0 as f64 / self.zips.0 as f64,
            self.other.1 / self.zips.1,
            self.other.2 / self.zips.2,
        )
    }
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// The median time of `repeats` runs of `run`.
fn timed(repeats: usize, mut run: impl FnMut()) -> Duration {
    median(
        (0..repeats)
            .map(|_| {
                let start = Instant::now();
                run();
                start.elapsed()
            })
            .collect(),
    )
}

fn codec_name(codec: Codec) -> String {
    match codec {
        Codec::Zstd { level } => format!("zstd {level}"),
        other => other.name().to_string(),
    }
}

fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).expect("a written file").len()
}

/// Write `image` with each deep codec and read it back; ZIPS first.
fn measure_deep(image: &DeepImage, dir: &Path, repeats: usize) -> Vec<(Codec, Measured)> {
    let path = dir.join("deep.exr");
    DEEP_CODECS
        .iter()
        .map(|&codec| {
            let write = timed(repeats, || {
                write_deep(&path, image, codec).expect("deep write")
            });
            let mut back = None;
            let read = timed(repeats, || {
                back = Some(read_deep(&path, &ReadOptions::default()).expect("deep read"));
            });
            let back = back.expect("read at least once");
            assert!(
                back.offsets == image.offsets && back.planes == image.planes,
                "{codec:?} does not read back what was written"
            );
            let bytes = file_size(&path);
            (codec, Measured { bytes, write, read })
        })
        .collect()
}

/// Read the whole flat file at `path` with the program's flat reader.
fn read_flat(path: &Path) -> Vec<Plane> {
    let mut source =
        FlatSource::open(path, &PartSelector::FirstDeep, DEFAULT_MAX_MEMORY).expect("flat open");
    let window = source.window;
    source
        .take_rows(window.y0..=window.y1)
        .expect("flat read")
        .planes
}

/// Write `flat` with each flat codec and read it back; ZIPS first.
fn measure_flat(flat: &FlatImage, dir: &Path, repeats: usize) -> Vec<(Codec, Measured)> {
    let path = dir.join("flat.exr");
    let mut reference: Option<Vec<Plane>> = None;
    FLAT_CODECS
        .iter()
        .map(|&codec| {
            let options = FlatWriteOptions {
                codec,
                ..FlatWriteOptions::default()
            };
            let write = timed(repeats, || {
                write_flat_with(&path, flat, &options).expect("flat write")
            });
            let mut back = None;
            let read = timed(repeats, || back = Some(read_flat(&path)));
            let back = back.expect("read at least once");
            let reference = reference.get_or_insert_with(|| back.clone());
            assert!(
                *reference == back,
                "{codec:?} reads back other pixels than ZIPS"
            );
            let bytes = file_size(&path);
            (codec, Measured { bytes, write, read })
        })
        .collect()
}

/// The flat composite of `image` (the merge's default flat output).
fn flatten(image: &DeepImage) -> FlatImage {
    match merge_images(&[image], &MergeOptions::default()).expect("flatten") {
        MergeOutput::Flat(flat) => flat,
        MergeOutput::Deep(_) => unreachable!("a flat merge gives a flat image"),
    }
}

fn table_header() {
    println!("| input | codec | size (MiB) | size / ZIPS | write (ms) | write / ZIPS | read (ms) | read / ZIPS |");
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |");
}

fn table_rows(name: &str, rows: &[(Codec, Measured)]) {
    let zips = rows[0].1;
    for (codec, m) in rows {
        println!(
            "| {name} | {} | {:.2} | {:.3} | {:.1} | {:.2} | {:.1} | {:.2} |",
            codec_name(*codec),
            m.bytes as f64 / (1 << 20) as f64,
            m.bytes as f64 / zips.bytes as f64,
            m.write.as_secs_f64() * 1e3,
            m.write.as_secs_f64() / zips.write.as_secs_f64(),
            m.read.as_secs_f64() * 1e3,
            m.read.as_secs_f64() / zips.read.as_secs_f64(),
        );
    }
}

/// A group of files measured together (the corpus, or the scenes), with its summary sums.
struct Group {
    label: String,
    deep: Totals,
    flat_zstd: Totals,
    flat_zip: Totals,
}

fn measure_group(label: &str, inputs: &[Input], dir: &Path, repeats: usize) -> Group {
    let mut group = Group {
        label: label.to_string(),
        deep: Totals::default(),
        flat_zstd: Totals::default(),
        flat_zip: Totals::default(),
    };
    println!("\n### {label}: deep output\n");
    println!("| input | samples |\n| --- | ---: |");
    for input in inputs {
        println!("| {} | {} |", input.name, input.image.sample_count());
    }
    println!();
    table_header();
    let mut flats = Vec::with_capacity(inputs.len());
    for input in inputs {
        let rows = measure_deep(&input.image, dir, repeats);
        table_rows(&input.name, &rows);
        let zstd = rows
            .iter()
            .find(|(c, _)| *c == DEEP_CODECS[1])
            .expect("zstd measured")
            .1;
        group.deep.add(rows[0].1, zstd);
        flats.push(flatten(&input.image));
    }
    println!("\n### {label}: flat output (the composite, half RGBA)\n");
    table_header();
    for (input, flat) in inputs.iter().zip(&flats) {
        let rows = measure_flat(flat, dir, repeats);
        table_rows(&input.name, &rows);
        let of = |codec: Codec| rows.iter().find(|(c, _)| *c == codec).expect("measured").1;
        group.flat_zip.add(rows[0].1, of(Codec::Zip));
        group.flat_zstd.add(
            rows[0].1,
            of(Codec::Zstd {
                level: ZSTD_DEFAULT_LEVEL,
            }),
        );
    }
    group
}

/// The streamed CPU merge of `images`, from ZIPS files and from ZSTD files of them: the median
/// time of each, deep output then flat output.
fn end_to_end(label: &str, images: &[&DeepImage], dir: &Path, repeats: usize) {
    let copies: Vec<Vec<PathBuf>> = [
        Codec::Zips,
        Codec::Zstd {
            level: ZSTD_DEFAULT_LEVEL,
        },
    ]
    .iter()
    .map(|&codec| {
        images
            .iter()
            .enumerate()
            .map(|(i, image)| {
                let path = dir.join(format!("e2e-{}-{i}.exr", codec.name()));
                write_deep(&path, image, codec).expect("input copy");
                path
            })
            .collect()
    })
    .collect();
    for output in [OutputKind::Deep, OutputKind::Flat { z: false }] {
        let options = StreamOptions {
            merge: MergeOptions {
                output,
                ..MergeOptions::default()
            },
            ..StreamOptions::default()
        };
        let out = dir.join("e2e-out.exr");
        let times: Vec<Duration> = copies
            .iter()
            .map(|paths| {
                timed(repeats, || {
                    merge_files(paths, &out, &options, MergeEngine::Cpu, None).expect("merge");
                })
            })
            .collect();
        let kind = match output {
            OutputKind::Deep => "deep (ZIPS)",
            OutputKind::Flat { .. } => "flat (ZIP)",
        };
        println!(
            "| {label} | {kind} | {:.1} | {:.1} | {:.2} |",
            times[0].as_secs_f64() * 1e3,
            times[1].as_secs_f64() * 1e3,
            times[1].as_secs_f64() / times[0].as_secs_f64()
        );
    }
}

fn corpus_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/openexr-images");
    ["Balls", "Leaves", "Trunks"]
        .iter()
        .map(|n| dir.join(format!("{n}.exr")))
        .collect()
}

fn main() {
    let args = Args::parse();
    assert!(args.repeats > 0, "--repeats must be at least 1");
    let started = Instant::now();
    let temp = tempfile::tempdir().expect("a temporary directory");
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| temp.path().to_path_buf());
    let files = if args.files.is_empty() {
        corpus_files()
    } else {
        args.files.clone()
    };
    let scenes: Vec<String> = args
        .scenes
        .iter()
        .filter(|s| s.as_str() != "none")
        .cloned()
        .collect();
    let (width, height) = deepmerge::scene::parse_size(&args.size).expect("--size");

    println!(
        "Median of {} runs; ratios against ZIPS in the same run. ILM (production deep scanline \
         renders): ZSTD {:.3}x the size, {:.3}x the write time, {:.3}x the read time of ZIPS.",
        args.repeats, ILM_ZSTD_OVER_ZIPS.0, ILM_ZSTD_OVER_ZIPS.1, ILM_ZSTD_OVER_ZIPS.2
    );
    let corpus: Vec<Input> = files
        .iter()
        .map(|f| Input {
            name: f.file_name().unwrap().to_string_lossy().into_owned(),
            image: read_deep(f, &ReadOptions::default())
                .unwrap_or_else(|e| panic!("{}: {e}", f.display())),
        })
        .collect();
    let mut groups = vec![measure_group("Files", &corpus, &dir, args.repeats)];

    // The scenes: each one's pair is made, its first input measured; the first scene's pair
    // is kept for the end-to-end merge.
    let mut pair: Option<(String, Vec<DeepImage>)> = None;
    let mut scene_inputs = Vec::new();
    for scene in &scenes {
        let mut images = deepmerge::scene::generate(scene, width, height, args.seed)
            .unwrap_or_else(|e| panic!("scene {scene}: {e}"));
        scene_inputs.push(Input {
            name: format!("{scene}_0 {width}x{height}"),
            image: images[0].clone(),
        });
        if pair.is_none() {
            pair = Some((scene.clone(), std::mem::take(&mut images)));
        }
    }
    if !scene_inputs.is_empty() {
        groups.push(measure_group(
            &format!("Scenes at {width}x{height}"),
            &scene_inputs,
            &dir,
            args.repeats,
        ));
    }
    drop(scene_inputs);

    println!(
        "\n### Summary: ZSTD {ZSTD_DEFAULT_LEVEL} (and ZIP) against ZIPS, summed over each group\n"
    );
    println!("| group | output | codec | size / ZIPS | write / ZIPS | read / ZIPS |");
    println!("| --- | --- | --- | ---: | ---: | ---: |");
    for group in &groups {
        for (output, codec, totals) in [
            ("deep", "zstd", group.deep),
            ("flat", "zstd", group.flat_zstd),
            ("flat", "zip", group.flat_zip),
        ] {
            let (size, write, read) = totals.ratios();
            println!(
                "| {} | {output} | {codec} | {size:.3} | {write:.2} | {read:.2} |",
                group.label
            );
        }
    }
    let (size, write, read) = ILM_ZSTD_OVER_ZIPS;
    println!("| ILM, production renders | deep | zstd | {size:.3} | {write:.3} | {read:.3} |");

    println!("\n### End to end: streamed CPU merge, file to file\n");
    println!(
        "| inputs | output | merge (ms), ZIPS inputs | merge (ms), ZSTD inputs | ZSTD / ZIPS |"
    );
    println!("| --- | --- | ---: | ---: | ---: |");
    if corpus.len() >= 2 {
        let names: Vec<&str> = corpus
            .iter()
            .map(|i| i.name.trim_end_matches(".exr"))
            .collect();
        let images: Vec<&DeepImage> = corpus.iter().map(|i| &i.image).collect();
        end_to_end(&names.join(" + "), &images, &dir, args.repeats);
    }
    drop(corpus);
    if let Some((scene, images)) = &pair {
        let images: Vec<&DeepImage> = images.iter().collect();
        let label = format!("{scene} pair {width}x{height}");
        end_to_end(&label, &images, &dir, args.repeats);
    }
    eprintln!("codecs bench: {:.0} s", started.elapsed().as_secs_f64());
}
