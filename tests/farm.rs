//! The farm runner (issue 13): `examples/openjd/merge-sequence.yaml` run locally by PyPI
//! `openjd-cli` (from the tests' own Python environment) on a 6-frame sequence made from the
//! bundled files, in chunks; every frame must equal a single-frame run of the same files.

mod common;

use std::path::Path;

use common::{data, run, venv_tool};

#[test]
fn the_openjd_template_merges_a_sequence_in_chunks_like_single_frame_runs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Odd and even frames merge different bundled files, so frames differ and a frame written
    // from the wrong inputs shows.
    let (balls, leaves, trunks) = (
        data("openexr-images/Balls.exr"),
        data("openexr-images/Leaves.exr"),
        data("openexr-images/Trunks.exr"),
    );
    for f in 1..=6 {
        let (a, b) = if f % 2 == 1 {
            (&balls, &leaves)
        } else {
            (&leaves, &trunks)
        };
        std::fs::copy(a, d.join(format!("a.{f:04}.exr"))).unwrap();
        std::fs::copy(b, d.join(format!("b.{f:04}.exr"))).unwrap();
    }
    let template =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/openjd/merge-sequence.yaml");
    let param = |name: &str, value: &Path| format!("{name}={}", value.display());
    let out = venv_tool("openjd")
        .arg("run")
        .arg(&template)
        .arg("-p")
        .arg(param("InputA", &d.join("a.####.exr")))
        .arg("-p")
        .arg(param("InputB", &d.join("b.####.exr")))
        .arg("-p")
        .arg(param("Output", &d.join("out.####.exr")))
        .args(["-p", "Frames=1-6", "-p", "ChunkSize=3", "-p"])
        .arg(param(
            "Deepmerge",
            Path::new(env!("CARGO_BIN_EXE_deepmerge")),
        ))
        .output()
        .expect("openjd runs");
    let log =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "openjd run failed:\n{log}");
    // Chunks, not one task per frame nor one for all; each reported its progress to the end.
    assert!(log.contains("Chunks run: 2"), "{log}");
    assert_eq!(log.matches("openjd_progress: 100").count(), 2, "{log}");
    for f in 1..=6 {
        let single = d.join(format!("single.{f}.exr"));
        let (ok, _, err) = run(&[
            d.join(format!("a.{f:04}.exr")).to_str().unwrap(),
            d.join(format!("b.{f:04}.exr")).to_str().unwrap(),
            "-o",
            single.to_str().unwrap(),
        ]);
        assert!(ok, "{err}");
        let farm = d.join(format!("out.{f:04}.exr"));
        assert!(farm.exists(), "frame {f} was not written:\n{log}");
        // Compared as bytes, reported without them (a file's bytes are no help in a log).
        assert!(
            std::fs::read(&farm).unwrap() == std::fs::read(&single).unwrap(),
            "frame {f}: the template's output differs from a single-frame run"
        );
    }
    assert!(
        std::fs::read(d.join("out.0001.exr")).unwrap()
            != std::fs::read(d.join("out.0002.exr")).unwrap(),
        "odd and even frames merge different files"
    );
}
