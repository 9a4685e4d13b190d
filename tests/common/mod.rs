//! Shared helpers for the integration tests: corpus paths, the tests' Python environment (made
//! under `target/` on first use, see [`test_venv`]), the independent reader (PyPI OpenEXR
//! through `tests/independent/dump_deep.py`), the peers (`oiiotool`), the CLI binary, small
//! synthetic images.
//!
//! The peers are required, never optional: a test that needs one fails, naming the package to
//! install, when it is missing (CI installs them), so a missing tool cannot pass for a pass.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use deepmerge::deep::{Bounds, Channel, DeepImage, DeepState, Plane, SampleType};
use deepmerge::exr::{read_deep, PartSelector, ReadOptions};
use deepmerge::scene::SceneRng;
use half::f16;

/// A file of the committed corpus.
pub fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(rel)
}

/// Read part `part` of a corpus file with our reader.
pub fn read(path: &Path, part: usize) -> DeepImage {
    let options = ReadOptions {
        part: PartSelector::Index(part),
        ..ReadOptions::default()
    };
    read_deep(path, &options).unwrap_or_else(|e| panic!("{e}"))
}

/// `oiiotool` (OpenImageIO's command-line tool), the peer the tests compare with. Fails the test
/// with the package to install when it is not on the PATH.
pub fn oiiotool() -> Command {
    require_tool(
        "oiiotool",
        &["--version"],
        "oiiotool is required by this test (CI installs it): apt-get install openimageio-tools",
    );
    Command::new("oiiotool")
}

/// The tests' own Python: a virtual environment under the target directory
/// (`target/test-venv`) with exactly the packages pinned in `tests/requirements.txt`, made on
/// first use so that `cargo test --release` needs nothing installed by hand but `python3` with
/// its `venv` module. Fails the test, naming the `apt-get` line, when those are missing.
pub fn test_python() -> Command {
    let mut command = Command::new(test_venv().join("bin/python"));
    // The module's GL engine in strict mode, as the CLI's in these tests.
    command.env("DEEPMERGE_GL_STRICT", "1");
    command
}

/// A program installed in the test environment's `bin/` (e.g. `openjd` from `openjd-cli`).
pub fn venv_tool(name: &str) -> Command {
    Command::new(test_venv().join("bin").join(name))
}

/// The test environment's directory, made (once per machine, whatever the number of test
/// processes) when missing or when `tests/requirements.txt` changed.
///
/// Test binaries run in parallel threads and, under other runners, in parallel processes: a
/// `OnceLock` makes one thread per process do the work, and an exclusive lock on
/// `test-venv.lock` makes one process at a time. The marker `.requirements` is written last,
/// holding the requirements it was made from, so a run killed half-way is rebuilt, not trusted.
pub fn test_venv() -> PathBuf {
    static VENV: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    VENV.get_or_init(make_test_venv)
        .clone()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn make_test_venv() -> Result<PathBuf, String> {
    const APT: &str = "apt-get install python3 python3-venv";
    // CARGO_TARGET_TMPDIR is <target>/tmp: the venv lives beside it, so it follows a custom
    // CARGO_TARGET_DIR and `cargo clean` removes it.
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target/tmp has a parent")
        .to_path_buf();
    let venv = target.join("test-venv");
    let requirements = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/requirements.txt");
    let wanted = std::fs::read_to_string(&requirements).map_err(|e| e.to_string())?;
    let marker = venv.join(".requirements");
    let ready = || std::fs::read_to_string(&marker).is_ok_and(|have| have == wanted);
    if ready() {
        return Ok(venv);
    }
    std::fs::create_dir_all(&target).map_err(|e| e.to_string())?;
    let lock = std::fs::File::create(target.join("test-venv.lock")).map_err(|e| e.to_string())?;
    lock.lock()
        .map_err(|e| format!("locking test-venv.lock: {e}"))?;
    // Another process may have made it while this one waited for the lock.
    if ready() {
        return Ok(venv);
    }
    eprintln!(
        "tests: making the Python test environment {} (once)",
        venv.display()
    );
    if venv.exists() {
        std::fs::remove_dir_all(&venv).map_err(|e| e.to_string())?;
    }
    let run = |cmd: &mut Command, what: &str| -> Result<(), String> {
        match cmd.output() {
            Ok(out) if out.status.success() => Ok(()),
            Ok(out) => Err(format!(
                "{what} failed ({}); the tests need python3 with venv: {APT}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )),
            Err(e) => Err(format!(
                "cannot run python3 ({e}); the tests need it: {APT}"
            )),
        }
    };
    run(
        Command::new("python3").args(["-m", "venv"]).arg(&venv),
        "python3 -m venv",
    )?;
    run(
        Command::new(venv.join("bin/python"))
            .args([
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                // A fresh CI machine fetches from PyPI: ride out a slow or dropped connection.
                "--retries",
                "10",
                "--timeout",
                "60",
                "-r",
            ])
            .arg(&requirements),
        "pip install -r tests/requirements.txt (PyPI must be reachable)",
    )?;
    std::fs::write(&marker, &wanted).map_err(|e| e.to_string())?;
    Ok(venv)
}

/// Panic with `help` unless `program args` runs and succeeds.
fn require_tool(program: &str, args: &[&str], help: &str) {
    match Command::new(program).args(args).output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!(
            "{help}\n`{program} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => panic!("{help}\n(cannot run {program}: {e})"),
    }
}

/// What the independent reader decoded.
pub struct Dump {
    pub width: usize,
    pub height: usize,
    /// (name, type code: 0 uint, 1 half, 2 float, 255 unknown)
    pub channels: Vec<(String, u32)>,
    pub counts: Vec<u32>,
    /// Raw little-endian bytes of every channel's values.
    pub values: Vec<Vec<u8>>,
}

/// Decode `path` part `part` with PyPI OpenEXR. Fails the test (never skips) if the test
/// environment cannot be made.
pub fn independent_dump(path: &Path, part: usize) -> Dump {
    let out = tempfile::NamedTempFile::new().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/independent/dump_deep.py");
    let status = test_python()
        .arg(&script)
        .arg(path)
        .arg(part.to_string())
        .arg(out.path())
        .output()
        .expect("python3 runs");
    assert!(
        status.status.success(),
        "independent reader failed on {}: {}",
        path.display(),
        String::from_utf8_lossy(&status.stderr)
    );
    let bytes = std::fs::read(out.path()).unwrap();
    let mut at = 0;
    let u32_at = |at: &mut usize| {
        let v = u32::from_le_bytes(bytes[*at..*at + 4].try_into().unwrap());
        *at += 4;
        v
    };
    let width = u32_at(&mut at) as usize;
    let height = u32_at(&mut at) as usize;
    let n = u32_at(&mut at) as usize;
    let mut channels = Vec::new();
    for _ in 0..n {
        let len = u32_at(&mut at) as usize;
        let name = String::from_utf8(bytes[at..at + len].to_vec()).unwrap();
        at += len;
        let kind = u32_at(&mut at);
        channels.push((name, kind));
    }
    let counts: Vec<u32> = (0..width * height).map(|_| u32_at(&mut at)).collect();
    let total: usize = counts.iter().map(|&c| c as usize).sum();
    let mut values = Vec::new();
    for (_, kind) in &channels {
        let size = if *kind == 1 { 2 } else { 4 };
        let len = if *kind == 255 { 0 } else { total * size };
        values.push(bytes[at..at + len].to_vec());
        at += len;
    }
    Dump {
        width,
        height,
        channels,
        counts,
        values,
    }
}

/// Assert that our decode equals the independent one, sample for sample and bit for bit.
pub fn assert_matches_dump(ours: &DeepImage, dump: &Dump, what: &str) {
    assert_eq!(ours.data_window.width(), dump.width, "{what}: width");
    assert_eq!(ours.data_window.height(), dump.height, "{what}: height");
    assert_eq!(ours.counts(), dump.counts, "{what}: sample counts");
    assert_eq!(ours.channels.len(), dump.channels.len(), "{what}: channels");
    for (k, (name, kind)) in dump.channels.iter().enumerate() {
        let c = &ours.channels[k];
        assert_eq!(&c.name, name, "{what}: channel order");
        if *kind != 255 {
            assert_eq!(c.sample_type.code() as u32, *kind, "{what}: type of {name}");
        }
        let mut bytes = Vec::new();
        ours.planes[k].write_le(0..ours.sample_count(), &mut bytes);
        if *kind != 255 {
            assert!(bytes == dump.values[k], "{what}: values of {name} differ");
        } else {
            assert!(bytes.is_empty(), "{what}: {name} should have no samples");
        }
    }
}

/// The CLI binary, its GL engine in strict mode (`DEEPMERGE_GL_STRICT`: hazards, poison and GL
/// errors fail the command, as they would show on a GPU).
pub fn deepmerge() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_deepmerge"));
    command.env("DEEPMERGE_GL_STRICT", "1");
    command
}

/// The procedural powerplant pair at `size` (`deepmerge scene powerplant --seed 3`), written
/// as `<prefix>_0.exr` and `<prefix>_1.exr`; returns their paths.
pub fn powerplant_pair(prefix: &Path, size: &str) -> (String, String) {
    let made = Command::new(env!("CARGO_BIN_EXE_deepmerge"))
        .args(["scene", "powerplant", "--size", size, "--seed", "3", "-o"])
        .arg(prefix)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    (
        format!("{}_0.exr", prefix.display()),
        format!("{}_1.exr", prefix.display()),
    )
}

/// Run the CLI, returning (success, stdout, stderr).
pub fn run(args: &[&str]) -> (bool, String, String) {
    let out = deepmerge().args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A small synthetic deep image with half colour and float Z: pixel i gets `count(i)` samples at
/// depths derived from `seed`, sorted; values vary so that mistakes show.
pub fn synthetic(window: Bounds, seed: u32, count: impl Fn(usize) -> u32) -> DeepImage {
    let channels = vec![
        Channel::new("A", SampleType::F16),
        Channel::new("B", SampleType::F16),
        Channel::new("G", SampleType::F16),
        Channel::new("R", SampleType::F16),
        Channel::new("Z", SampleType::F32),
    ];
    let counts: Vec<u32> = (0..window.area()).map(&count).collect();
    let total: usize = counts.iter().map(|&c| c as usize).sum();
    // The scene generator's random numbers: one generator for the crate and all its tests.
    let mut rng = SceneRng::new(seed as u64, "tests");
    let mut next = move || rng.below(10_000) as f32 / 10_000.0;
    let mut a = Vec::with_capacity(total);
    let mut z = Vec::with_capacity(total);
    for &c in &counts {
        let mut depth = 1.0 + next() * 10.0;
        for _ in 0..c {
            a.push(f16::from_f32(0.05 + 0.5 * next()));
            depth += 0.01 + next();
            z.push(depth);
        }
    }
    let colour = |k: f32| -> Plane {
        Plane::F16(
            a.iter()
                .enumerate()
                .map(|(i, al)| f16::from_f32(al.to_f32() * ((i as f32 * k).sin() * 0.5 + 0.5)))
                .collect(),
        )
    };
    let planes = vec![
        Plane::F16(a.clone()),
        colour(0.37),
        colour(0.11),
        colour(0.73),
        Plane::F32(z),
    ];
    DeepImage::from_counts(window, window, channels, &counts, planes, DeepState::Sorted).unwrap()
}

/// `image` with every depth moved back by `shift` (a copy whose volumes interleave with the
/// original's when `shift` is smaller than their depth) and red swapped with blue (RA with BA),
/// so that which copy is in front shows in the colour.
pub fn shifted(image: &DeepImage, shift: f32) -> DeepImage {
    let mut out = image.clone();
    for name in ["Z", "ZBack"] {
        if let Plane::F32(v) = &mut out.planes[image.channel_index(name).unwrap()] {
            v.iter_mut().for_each(|z| *z += shift);
        }
    }
    for (x, y) in [("R", "B"), ("RA", "BA")] {
        let (i, j) = (
            image.channel_index(x).unwrap(),
            image.channel_index(y).unwrap(),
        );
        out.planes.swap(i, j);
    }
    out
}

/// `image` turned into points (ZBack = Z) after [`shifted`]: points that land inside the
/// original's volumes.
pub fn shifted_points(image: &DeepImage, shift: f32) -> DeepImage {
    let mut out = shifted(image, shift);
    let z = out.planes[image.channel_index("Z").unwrap()].clone();
    out.planes[image.channel_index("ZBack").unwrap()] = z;
    out
}

/// Half the thinnest volume of `image`: a shift that makes every volume of a copy overlap its
/// original by half.
pub fn interleaving_shift(image: &DeepImage) -> f32 {
    let plane = |name: &str| {
        let c = image.channel_index(name).unwrap();
        (0..image.sample_count())
            .map(|i| image.planes[c].get_f32(i))
            .collect::<Vec<f32>>()
    };
    let (z, zb) = (plane("Z"), plane("ZBack"));
    z.iter()
        .zip(&zb)
        .filter(|(a, b)| b > a)
        .map(|(a, b)| b - a)
        .fold(f32::INFINITY, f32::min)
        / 2.0
}

// ---------------------------------------------------------------------------------------------
// Hand-built pixels (A, B, G, R, Z, ZBack, all f32)

/// The channels of a hand-built image, in the order it stores them.
pub const SAMPLE_CHANNELS: [&str; 6] = ["A", "B", "G", "R", "Z", "ZBack"];

/// One hand-written sample: depth, alpha and premultiplied colour.
#[derive(Clone, Copy, Debug)]
pub struct S {
    pub z: f32,
    pub zback: f32,
    pub a: f32,
    pub rgb: [f32; 3],
}

/// A point sample.
pub fn point(z: f32, a: f32, rgb: [f32; 3]) -> S {
    S {
        z,
        zback: z,
        a,
        rgb,
    }
}

/// A volume sample over [z, zback).
pub fn volume(z: f32, zback: f32, a: f32, rgb: [f32; 3]) -> S {
    S { z, zback, a, rgb }
}

/// An image whose pixels hold `pixels[p]` (row-major, `width` wide), channels A,B,G,R,Z,ZBack f32.
pub fn image(width: usize, pixels: &[Vec<S>], state: DeepState) -> DeepImage {
    let window = Bounds::from_origin_size(0, 0, width, pixels.len() / width);
    let names = SAMPLE_CHANNELS;
    let channels: Vec<Channel> = names
        .iter()
        .map(|n| Channel::new(*n, SampleType::F32))
        .collect();
    let all: Vec<&S> = pixels.iter().flatten().collect();
    let planes = names
        .iter()
        .map(|n| {
            Plane::F32(
                all.iter()
                    .map(|s| match *n {
                        "A" => s.a,
                        "B" => s.rgb[2],
                        "G" => s.rgb[1],
                        "R" => s.rgb[0],
                        "Z" => s.z,
                        _ => s.zback,
                    })
                    .collect(),
            )
        })
        .collect();
    let counts: Vec<u32> = pixels.iter().map(|p| p.len() as u32).collect();
    DeepImage::from_counts(window, window, channels, &counts, planes, state).unwrap()
}

/// A 1x1 sorted image of `samples`.
pub fn pixel_image(samples: &[S]) -> DeepImage {
    image(1, &[samples.to_vec()], DeepState::Sorted)
}
