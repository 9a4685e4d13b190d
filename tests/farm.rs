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
    six_frames(d);
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
    assert_frames_equal_single_runs(d, &log);
    assert!(
        std::fs::read(d.join("out.0001.exr")).unwrap()
            != std::fs::read(d.join("out.0002.exr")).unwrap(),
        "odd and even frames merge different files"
    );
}

/// A 6-frame sequence a.0001.exr.., b.0001.exr.. in `d` from the bundled files.
fn six_frames(d: &Path) {
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
}

/// Every out.NNNN.exr (1 to 6) in `d` equals a single-frame run of its inputs.
fn assert_frames_equal_single_runs(d: &Path, log: &str) {
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
}

#[test]
fn the_slurm_array_script_covers_every_frame_once_across_its_tasks() {
    // Not Slurm itself (none here): the script run as array tasks 0 and 1 would be, which is
    // where its chunk arithmetic can go wrong (the last, short chunk; no frame twice).
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    six_frames(d);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/slurm/merge-sequence.sh");
    let mut log = String::new();
    for task in ["0", "1"] {
        let out = std::process::Command::new("bash")
            .arg(&script)
            .env("A", d.join("a.####.exr"))
            .env("B", d.join("b.####.exr"))
            .env("OUT", d.join("out.####.exr"))
            .env("FIRST", "1")
            .env("LAST", "6")
            .env("CHUNK", "4")
            .env("SLURM_ARRAY_TASK_ID", task)
            .env("DEEPMERGE", env!("CARGO_BIN_EXE_deepmerge"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "task {task}: {text}");
        log += &text;
    }
    assert!(log.contains("4 frames written, 0 failed"), "{log}");
    assert!(log.contains("2 frames written, 0 failed"), "{log}");
    assert_frames_equal_single_runs(d, &log);
}

#[test]
fn the_openjd_comp_template_runs_a_script_over_frames_in_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    six_frames(d);
    // A graph over the sequence: the merge of a and b, then a slice of it, written flat.
    let script = d.join("precomp.toml");
    std::fs::write(
        &script,
        "[input.a]\npath = \"a.####.exr\"\n[input.b]\npath = \"b.####.exr\"\n\
         [node.m]\nop = \"merge\"\ninputs = [\"a\", \"b\"]\ndeep = true\n\
         [node.s]\nop = \"slice\"\ninput = \"m\"\nfar = 300\n\
         [node.f]\nop = \"flatten\"\ninput = \"s\"\n\
         [[output]]\nnode = \"f\"\npath = \"out.####.exr\"\n",
    )
    .unwrap();
    let template = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/openjd/comp-sequence.yaml");
    let out = venv_tool("openjd")
        .arg("run")
        .arg(&template)
        .arg("-p")
        .arg(format!("Script={}", script.display()))
        .args(["-p", "Frames=1-6", "-p", "ChunkSize=4", "-p"])
        .arg(format!("Deepmerge={}", env!("CARGO_BIN_EXE_deepmerge")))
        .output()
        .expect("openjd runs");
    let log =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "openjd run failed:\n{log}");
    assert!(log.contains("Chunks run: 2"), "{log}");
    assert_eq!(log.matches("openjd_progress: 100").count(), 2, "{log}");
    // Each frame is the three commands through files.
    for f in 1..=6 {
        let p = |name: &str| d.join(format!("{name}.{f}.exr"));
        let s = |p: &Path| p.to_str().unwrap().to_string();
        let a = d.join(format!("a.{f:04}.exr"));
        let b = d.join(format!("b.{f:04}.exr"));
        for args in [
            vec![s(&a), s(&b), "--deep".into(), "-o".into(), s(&p("m"))],
            vec![
                "slice".into(),
                s(&p("m")),
                "--far".into(),
                "300".into(),
                "-o".into(),
                s(&p("s")),
            ],
            vec!["flatten".into(), s(&p("s")), "-o".into(), s(&p("f"))],
        ] {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let (ok, _, err) = run(&args);
            assert!(ok, "{err}");
        }
        let farm = d.join(format!("out.{f:04}.exr"));
        assert!(
            std::fs::read(&farm).unwrap() == std::fs::read(p("f")).unwrap(),
            "frame {f}: the comp template's output differs from the steps"
        );
    }
}
