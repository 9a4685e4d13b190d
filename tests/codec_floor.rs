//! The end-to-end measurement tools of the merge, as a user runs them: `--codec-floor` (the
//! decode half, the merge, the encode half, one line) on both engines and output kinds, and
//! `--gpu-memory`, which sizes the GL engine's bands on a GPU and is refused on the CPU engine.

mod common;

use std::path::Path;

use common::{data, run};

/// The bundled Balls and Leaves, as paths.
fn inputs() -> [String; 2] {
    ["Balls.exr", "Leaves.exr"].map(|f| {
        data(&format!("openexr-images/{f}"))
            .to_string_lossy()
            .into_owned()
    })
}

/// The seconds in `line` after `label` (`decode 0.123 s`).
fn seconds_after(line: &str, label: &str) -> f64 {
    let rest = &line[line
        .find(label)
        .unwrap_or_else(|| panic!("{label} in {line}"))
        + label.len()..];
    rest.split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn codec_floor_reports_both_halves_and_leaves_the_merge_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let [a, b] = inputs();
    for backend in ["cpu", "gl"] {
        for deep in [false, true] {
            let what = format!("{backend}, deep {deep}");
            let plain = dir.path().join(format!("plain-{backend}-{deep}.exr"));
            let floored = dir.path().join(format!("floor-{backend}-{deep}.exr"));
            let mut args = vec![a.as_str(), b.as_str(), "--backend", backend];
            if deep {
                args.push("--deep");
            }
            let plain_s = plain.to_string_lossy().into_owned();
            let (ok, _, err) = run(&[&args[..], &["-o", &plain_s]].concat());
            assert!(ok, "{what}: {err}");
            let floored_s = floored.to_string_lossy().into_owned();
            let (ok, _, err) = run(&[&args[..], &["-o", &floored_s, "--codec-floor"]].concat());
            assert!(ok, "{what}: {err}");
            let line = err
                .lines()
                .find(|l| l.starts_with("codec floor: "))
                .unwrap_or_else(|| panic!("{what}: no codec floor line in {err}"));
            let (decode, encode) = (
                seconds_after(line, "decode "),
                seconds_after(line, "encode "),
            );
            let floor = seconds_after(line, "= ");
            assert!(decode > 0.0 && encode > 0.0, "{what}: {line}");
            assert!((floor - decode - encode).abs() < 0.0015, "{what}: {line}");
            assert!(line.contains("x the floor"), "{what}: {line}");
            // How busy the threads were: shares of CPU time, each a percentage the work used.
            let busy = |label: &str| -> f64 {
                let at = line
                    .find(label)
                    .unwrap_or_else(|| panic!("{what}: {label} in {line}"));
                line[at + label.len()..]
                    .split('%')
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| panic!("{what}: a share after {label} in {line}"))
            };
            for share in [busy("busy: decode "), busy("%, merge ")] {
                assert!((0.0..400.0).contains(&share), "{what}: {line}");
            }
            // The measurement changes nothing about the output, and its scratch file is gone.
            assert_eq!(
                std::fs::read(&plain).unwrap(),
                std::fs::read(&floored).unwrap(),
                "{what}"
            );
            let left: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains("codec-floor"))
                .collect();
            assert!(left.is_empty(), "{what}: left behind {left:?}");
        }
    }
}

#[test]
fn codec_floor_refuses_a_png_preview_and_a_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let [a, b] = inputs();
    let png = dir.path().join("x.png");
    let (ok, _, err) = run(&[&a, &b, "-o", &png.to_string_lossy(), "--codec-floor"]);
    assert!(!ok);
    assert!(
        err.contains("--codec-floor") && err.contains("PNG"),
        "{err}"
    );
    let (ok, _, err) = run(&[
        &a,
        &b,
        "-o",
        "x.####.exr",
        "--frames",
        "1-2",
        "--codec-floor",
    ]);
    assert!(!ok);
    assert!(
        err.contains("--codec-floor") && err.contains("--frames"),
        "{err}"
    );
}

#[test]
fn gpu_memory_sizes_gl_and_is_refused_on_the_cpu_engine() {
    let dir = tempfile::tempdir().unwrap();
    let [a, b] = inputs();
    let out = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let (ok, _, err) = run(&[
        &a,
        &b,
        "--backend",
        "cpu",
        "--gpu-memory",
        "1G",
        "-o",
        &out("c.exr"),
    ]);
    assert!(!ok);
    assert!(
        err.contains("--gpu-memory") && err.contains("--backend cpu"),
        "{err}"
    );
    let (ok, _, err) = run(&[&a, &b, "--gpu-memory", "lots", "-o", &out("d.exr")]);
    assert!(!ok);
    assert!(err.contains("--gpu-memory"), "{err}");
    // A small GPU budget makes more, smaller GL bands: the same bytes as the CPU engine.
    let (ok, _, err) = run(&[&a, &b, "--backend", "cpu", "-o", &out("cpu.exr")]);
    assert!(ok, "{err}");
    let (ok, _, err) = run(&[
        &a,
        &b,
        "--gpu-memory",
        "512K",
        "--stats",
        "-o",
        &out("gl.exr"),
    ]);
    assert!(ok, "{err}");
    assert!(
        Path::new(&out("gl.exr")).exists() && err.contains("band(s)"),
        "{err}"
    );
    let bands: usize = err
        .lines()
        .find(|l| l.starts_with("merge:"))
        .and_then(|l| l.split(" in ").nth(1))
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no band count in {err}"));
    assert!(bands > 1, "512K of GPU memory should cut bands: {err}");
    assert_eq!(
        std::fs::read(out("cpu.exr")).unwrap(),
        std::fs::read(out("gl.exr")).unwrap()
    );
}
