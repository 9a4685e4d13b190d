//! Hostile inputs and faults at the command line (issue 11): inputs that are valid but built to
//! exhaust the merge, and runs that are interrupted or cannot write their output.
//!
//! Each run here is a child process under resource limits (`ulimit -v` address space,
//! `ulimit -t` CPU seconds), so that a regression shows as a failed run rather than as a test
//! machine out of memory or a test that never ends.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;
use deepmerge::exr::{decode_deep, encode_deep, Codec, ReadOptions};

/// `tests/data/hostile/overlapping-volumes.exr`: one pixel of this many volumes.
const OVERLAPPING_VOLUMES: usize = 1 << 20;

/// Distinct depths the overlapping volumes start and end at.
const OVERLAPPING_DEPTHS: u32 = 256;

/// Every overlapping volume's alpha, and its unpremultiplied colour.
const OVERLAPPING_ALPHA: f32 = 1e-6;
const OVERLAPPING_COLOUR: [f32; 3] = [0.5, 0.25, 0.75];

/// The overlapping-volumes image: 2^20 volumes in one pixel, [z, zback) with z and zback drawn
/// from 256 depths, sorted. Cutting every volume at every boundary strictly inside it (as the
/// tidy once did) makes about 2^20 x 85 pieces; the sweep keeps one record per boundary.
fn overlapping_volumes() -> deepmerge::deep::DeepImage {
    let mut rng = deepmerge::scene::SceneRng::new(11, "overlapping-volumes");
    let mut depths: Vec<(f32, f32)> = (0..OVERLAPPING_VOLUMES)
        .map(|_| {
            let z = rng.below(OVERLAPPING_DEPTHS as usize - 1) as u32;
            let zback = z + 1 + rng.below((OVERLAPPING_DEPTHS - 1 - z) as usize) as u32;
            (z as f32, zback as f32)
        })
        .collect();
    depths.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let a = OVERLAPPING_ALPHA;
    let rgb = OVERLAPPING_COLOUR.map(|c| c * a);
    let samples: Vec<S> = depths
        .iter()
        .map(|&(z, zback)| volume(z, zback, a, rgb))
        .collect();
    pixel_image(&samples)
}

fn hostile(name: &str) -> PathBuf {
    data("hostile").join(name)
}

/// The committed file holds what [`overlapping_volumes`] makes (compared decoded, so a change of
/// deflate encoder does not matter), so the README's description of it holds;
/// `DEEPMERGE_REGENERATE_HOSTILE=1` rewrites it (ZIP).
#[test]
fn overlapping_volumes_file_is_what_its_generator_makes() {
    let expected = overlapping_volumes();
    let path = hostile("overlapping-volumes.exr");
    if std::env::var_os("DEEPMERGE_REGENERATE_HOSTILE").is_some() {
        std::fs::write(&path, encode_deep(&expected, Codec::Zip).unwrap()).unwrap();
    }
    let stored = decode_deep(&std::fs::read(&path).unwrap(), &ReadOptions::default()).unwrap();
    assert!(
        stored == expected,
        "{} differs from its generator",
        path.display()
    );
}

/// A pixel of 2^20 samples merged with Balls on the GL engine gives the CPU engine's bytes, flat
/// and deep. llvmpipe ends an invocation's loops after 65535 iterations in all, and the merge
/// kernels loop over a pixel's samples in one invocation: there the band is merged on the host
/// (`gpu::loop_cap`), as `--stats` says; before, the flat pixel came out empty and a deep one
/// with wrong depths, with no error. On a GPU the kernels merge it.
#[test]
fn a_pixel_longer_than_llvmpipes_loops_merges_on_gl_to_the_cpu_engines_bytes() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hostile-long-pixel");
    std::fs::create_dir_all(&dir).unwrap();
    let volumes = hostile("overlapping-volumes.exr");
    let balls = data("openexr-images").join("Balls.exr");
    for output in [&[][..], &["--deep"][..]] {
        let run = |backend: &str| -> (Vec<u8>, String) {
            let out = dir.join(format!("{backend}{}.exr", output.len()));
            let run = deepmerge()
                .args([&volumes, &balls])
                .args(["--backend", backend])
                .args(if backend == "gl" {
                    &["--stats"][..]
                } else {
                    &[]
                })
                .args(output)
                .arg("-o")
                .arg(&out)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&run.stderr).into_owned();
            assert!(run.status.success(), "{backend} {output:?}: {err}");
            (std::fs::read(&out).unwrap(), err)
        };
        let (cpu, _) = run("cpu");
        let (gl, stats) = run("gl");
        assert!(
            gl == cpu,
            "{output:?}: the GL engine's bytes differ from the CPU engine's"
        );
        let on_llvmpipe = stats.contains("llvmpipe");
        assert_eq!(
            stats.contains("merged on the host: a pixel longer than"),
            on_llvmpipe,
            "{output:?}: {stats}"
        );
    }
}

/// Run the CLI with `args` in a shell that first applies `limits` (`ulimit` arguments, e.g.
/// `-v 2097152`), on two worker threads and two malloc arenas so that the address-space limit
/// measures the merge, not how many cores the machine has.
fn run_limited(limits: &[&str], args: &[&Path]) -> Output {
    let mut script = String::new();
    for limit in limits {
        script.push_str(&format!("ulimit {limit} || exit 99; "));
    }
    script.push_str("exec \"$0\" \"$@\"");
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_deepmerge"))
        .args(args)
        .env("RAYON_NUM_THREADS", "2")
        .env("MALLOC_ARENA_MAX", "2")
        .output()
        .unwrap()
}

/// Issue 11 item 4: 2^21 overlapping volumes in one pixel (the file merged with itself) flatten
/// within 2 GiB of address space and two minutes of CPU (about a second and 0.6 GB here; the
/// piece-building tidy needed about 180 million pieces, over 6 GB), and the result is the closed
/// form: every volume has the same unpremultiplied colour, so the pixel's alpha is
/// 1 − (1 − a)^n and its colour that colour times the alpha, however the volumes are cut.
#[test]
fn overlapping_volumes_flatten_in_linear_memory_to_the_closed_form() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("flat.exr");
    let input = hostile("overlapping-volumes.exr");
    let flat_float = Path::new("--flat-type=float");
    let cpu = Path::new("--backend=cpu");
    let output = run_limited(
        &["-v 2097152", "-t 120"],
        &[&input, &input, flat_float, cpu, Path::new("-o"), &out],
    );
    assert!(
        output.status.success(),
        "{:?}: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let n = 2.0 * OVERLAPPING_VOLUMES as f64;
    let alpha = -(n * (-(OVERLAPPING_ALPHA as f64)).ln_1p()).exp_m1();
    let image = exr::prelude::read_all_flat_layers_from_file(&out).unwrap();
    let layer = &image.layer_data[0];
    let value = |name: &str| {
        let channel = layer
            .channel_data
            .list
            .iter()
            .find(|c| c.name.to_string() == name)
            .unwrap_or_else(|| panic!("channel {name}"));
        channel.sample_data.value_by_flat_index(0).to_f32() as f64
    };
    assert!(
        (value("A") - alpha).abs() < 1e-4,
        "A {} vs {alpha}",
        value("A")
    );
    for (name, colour) in ["R", "G", "B"].into_iter().zip(OVERLAPPING_COLOUR) {
        let want = colour as f64 * alpha;
        assert!(
            (value(name) - want).abs() < 1e-4,
            "{name} {} vs {want}",
            value(name)
        );
    }
}

/// Send `number` to `child`.
fn signal(child: &std::process::Child, number: i32) {
    // SAFETY: kill(2) on the pid of a child this test spawned and has not yet waited for.
    let sent = unsafe { libc::kill(child.id() as libc::pid_t, number) };
    assert_eq!(
        sent,
        0,
        "kill {number}: {}",
        std::io::Error::last_os_error()
    );
}

/// Files in `dir` whose name ends in `.tmp` (the writer's temporary files).
fn temp_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".tmp"))
        .collect()
}

/// A deep merge whose output is a few MB: two copies of a real deep file.
fn big_merge_args(out: &Path) -> Vec<PathBuf> {
    let input = data("openexr-images/Trunks.exr");
    let mut args: Vec<PathBuf> = vec![input.clone(), input];
    for a in ["--deep", "--backend=cpu", "-q", "-o"] {
        args.push(a.into());
    }
    args.push(out.to_path_buf());
    args
}

/// Issue 11 item 7: a write that fails part way (here the file-size limit, `ulimit -f`, which
/// fails the write with EFBIG as a full disk fails it with ENOSPC) ends the run with one
/// stderr line naming the output, and leaves neither the output nor a temporary file. Without
/// the SIGXFSZ handler the process would be killed by the signal instead.
#[test]
fn a_write_past_the_file_size_limit_fails_on_one_line_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("merged.exr");
    let args = big_merge_args(&out);
    let args: Vec<&Path> = args.iter().map(|p| p.as_path()).collect();
    // 64 blocks: 32 KiB in POSIX sh's 512-byte blocks (64 KiB where blocks are 1024 bytes),
    // far below the output.
    let output = run_limited(&["-f 64"], &args);
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{:?}: {err}", output.status);
    assert_eq!(err.lines().count(), 1, "one line: {err:?}");
    assert!(err.starts_with("deepmerge: error: "), "{err}");
    assert!(
        err.contains(&out.display().to_string()),
        "names the output: {err}"
    );
    assert!(err.contains("File too large"), "{err}");
    assert!(!out.exists(), "no partial output");
    assert_eq!(temp_files(dir.path()), Vec::<PathBuf>::new());
}

/// Issue 11 item 7: SIGINT, SIGTERM and SIGHUP while the output's temporary file exists remove
/// it and end the run as the signal would (a shell reports 130, 143, 129). The test hook makes
/// the run pause right after creating the file, so the signal is known to land then.
#[test]
fn terminating_signals_remove_the_temporary_file() {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    for (name, number) in [
        ("INT", libc::SIGINT),
        ("TERM", libc::SIGTERM),
        ("HUP", libc::SIGHUP),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("merged.exr");
        let mut command = deepmerge();
        command
            .args(big_merge_args(&out))
            .env(deepmerge::cleanup::PAUSE_AFTER_TEMP_ENV, "60000")
            .stderr(std::process::Stdio::piped());
        // The run must see the signal's default disposition, whatever this test inherited
        // (under `nohup` SIGHUP arrives ignored, and an ignored signal stays ignored).
        // SAFETY: between fork and exec only async-signal-safe `signal` calls are made.
        unsafe {
            command.pre_exec(|| {
                for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                    libc::signal(s, libc::SIG_DFL);
                }
                Ok(())
            });
        }
        let mut child = command.spawn().unwrap();
        let start = std::time::Instant::now();
        while temp_files(dir.path()).is_empty() {
            assert!(
                start.elapsed().as_secs() < 120,
                "SIG{name}: no temporary file appeared"
            );
            assert!(
                child.try_wait().unwrap().is_none(),
                "SIG{name}: run ended early"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        signal(&child, number);
        let output = child.wait_with_output().unwrap();
        assert_eq!(
            output.status.signal(),
            Some(number),
            "SIG{name}: {:?} {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(temp_files(dir.path()), Vec::<PathBuf>::new(), "SIG{name}");
        assert!(!out.exists(), "SIG{name}: no output");
    }
}

/// A signal the parent made the run ignore (as `nohup` does SIGHUP) stays ignored: the run
/// goes on and writes its output.
#[test]
fn a_signal_ignored_by_the_parent_stays_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("merged.exr");
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("trap '' HUP; exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_deepmerge"))
        .args(big_merge_args(&out))
        // Long enough for this thread's polling to see the temporary file on a loaded machine.
        .env(deepmerge::cleanup::PAUSE_AFTER_TEMP_ENV, "4000")
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while temp_files(dir.path()).is_empty() {
        assert!(
            start.elapsed().as_secs() < 120,
            "no temporary file appeared"
        );
        assert!(child.try_wait().unwrap().is_none(), "run ended early");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    signal(&child, libc::SIGHUP);
    assert!(child.wait().unwrap().success());
    assert!(out.exists());
    assert_eq!(temp_files(dir.path()), Vec::<PathBuf>::new());
}
