//! The single-input commands (flatten and the operations of the table) behave alike (issue 27
//! item 6): `-q` and `--frames` on each, every deep part of a multi-part input unless `--part`
//! picks one (flatten writing the one-input merge's bytes; an operation that reads one part
//! asks for it), exit code 2 for a part or channel
//! an input lacks, an empty result written with a note, flat output typed as its inputs.

mod common;

use std::path::{Path, PathBuf};

use common::{data, deepmerge, read};

/// Run deepmerge with `args`: the exit code and stderr.
fn exit(args: &[&str]) -> (i32, String) {
    let out = deepmerge().args(args).output().expect("deepmerge runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Each single-input command with options that run on `input`, in the order they take them.
fn commands() -> Vec<Vec<&'static str>> {
    vec![
        vec!["flatten"],
        vec!["slice", "--far", "1000"],
        vec!["crop", "--box", "0,0,2000,2000"],
        vec!["transform", "--translate", "1,1"],
        vec!["idselect", "--id", "particleid=1"],
        vec!["grade", "--gain", "2"],
        vec!["reformat", "--scale", "0.5"],
        vec!["points"],
    ]
}

fn output_for(dir: &Path, command: &str, name: &str) -> PathBuf {
    let ext = if command == "points" { "ply" } else { "exr" };
    dir.join(format!("{command}-{name}.{ext}"))
}

#[test]
fn a_part_or_a_channel_an_input_lacks_is_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let ids = data("openexr/11.deep.exr");
    for command in commands() {
        let out = output_for(dir.path(), command[0], "part");
        let mut args = command.clone();
        args.extend([s(&ids), "--part", "7", "-o", s(&out)]);
        let (code, err) = exit(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.contains("has no part 7") && err.lines().count() == 1,
            "{err}"
        );
    }
    let stereo = data("openexr-images/Stereo-Trunks-multipart.exr");
    let balls = data("openexr-images/Balls.exr");
    let out = dir.path().join("all.exr");
    let (code, err) = exit(&[s(&stereo), s(&balls), "--all-parts", "-o", s(&out)]);
    assert_eq!(code, 2, "--all-parts with a part missing: {err}");
    let flat = data("openexr-images/composited.exr");
    for args in [
        vec![s(&balls), "--channels", "foo"],
        vec!["flatten", s(&balls), "--channels", "foo"],
        vec!["idselect", s(&ids), "--id", "foo=1"],
        vec!["deepen", s(&flat), "--z-channel", "foo"],
        vec!["deepen", s(&flat), "--z", "1", "--part", "3"],
    ] {
        let args = [&args[..], &["-o", s(&out)]].concat();
        let (code, err) = exit(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
    }
}

#[test]
fn every_command_runs_frames_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let ids = data("openexr/11.deep.exr");
    for frame in [1, 2] {
        std::fs::copy(&ids, dir.path().join(format!("in.{frame:04}.exr"))).unwrap();
    }
    let input = dir.path().join("in.####.exr");
    for command in commands() {
        let out = output_for(dir.path(), command[0], "####");
        let mut args = command.clone();
        args.extend([s(&input), "--frames", "1-2", "-q", "-o", s(&out)]);
        let (code, err) = exit(&args);
        assert_eq!((code, err.as_str()), (0, ""), "{args:?}");
        for frame in ["0001", "0002"] {
            let written = output_for(dir.path(), command[0], frame);
            assert!(written.exists(), "{args:?}: no {}", written.display());
        }
        // A token without --frames, and --frames without a token, are usage errors.
        let mut args = command.clone();
        args.extend([s(&ids), "-o", s(&out)]);
        assert_eq!(exit(&args).0, 2, "{args:?}");
        let single = output_for(dir.path(), command[0], "single");
        let mut args = command.clone();
        args.extend([s(&ids), "--frames", "1-2", "-o", s(&single)]);
        assert_eq!(exit(&args).0, 2, "{args:?}");
    }
    // The holdout too (its two inputs' tokens take the frame).
    let out = dir.path().join("h.####.exr");
    let args = [
        "holdout",
        s(&input),
        s(&input),
        "--frames",
        "1-2",
        "-q",
        "-o",
        s(&out),
    ];
    assert_eq!(exit(&args), (0, String::new()));
    assert!(dir.path().join("h.0002.exr").exists());
    // Without -q a sequence closes with the merge's line.
    let out = dir.path().join("f.####.exr");
    let (code, err) = exit(&["flatten", s(&input), "--frames", "1-2", "-o", s(&out)]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("2 frames written, 0 failed"), "{err}");
}

#[test]
fn flatten_writes_the_bytes_of_the_one_input_merge_for_every_part() {
    let dir = tempfile::tempdir().unwrap();
    let stereo = data("openexr-images/Stereo-Trunks-multipart.exr");
    for part in [None, Some("1")] {
        let flat = dir.path().join("flat.exr");
        let merged = dir.path().join("merged.exr");
        let part_args: Vec<&str> = part.map_or(vec![], |p| vec!["--part", p]);
        let flatten = [&["flatten", s(&stereo), "-o", s(&flat)][..], &part_args].concat();
        let merge = [&[s(&stereo), "-o", s(&merged)][..], &part_args].concat();
        assert_eq!(exit(&flatten).0, 0);
        assert_eq!(exit(&merge).0, 0);
        assert_eq!(
            std::fs::read(&flat).unwrap(),
            std::fs::read(&merged).unwrap(),
            "part {part:?}"
        );
    }
}

#[test]
fn operations_write_every_deep_part_unless_one_is_picked() {
    let dir = tempfile::tempdir().unwrap();
    let stereo = data("openexr-images/Stereo-Trunks-multipart.exr");
    let both = dir.path().join("both.exr");
    let right = dir.path().join("right.exr");
    let (code, err) = exit(&["slice", s(&stereo), "--far", "100", "-o", s(&both)]);
    assert_eq!(code, 0, "{err}");
    let (code, err) = exit(&[
        "slice",
        s(&stereo),
        "--far",
        "100",
        "--part",
        "1",
        "-o",
        s(&right),
    ]);
    assert_eq!(code, 0, "{err}");
    // The part-by-part output's second part is the slice of the second part alone.
    assert_eq!(read(&both, 1), read(&right, 0));
    assert_ne!(read(&both, 0), read(&both, 1));
    // A PNG preview is one image: it needs a part.
    let png = dir.path().join("both.png");
    let (code, err) = exit(&["slice", s(&stereo), "--far", "100", "-o", s(&png)]);
    assert!(code == 2 && err.contains("--part"), "{err}");
    // So is a point cloud, and a recolor (two inputs): they say so rather than take the first
    // part silently, and run on the part asked for.
    let ply = dir.path().join("points.ply");
    let (code, err) = exit(&["points", s(&stereo), "-o", s(&ply)]);
    assert!(
        code == 2 && err.contains("2 deep parts") && err.contains("--part"),
        "{err}"
    );
    assert!(!ply.exists());
    let (code, err) = exit(&["points", s(&stereo), "--part", "1", "-o", s(&ply)]);
    assert_eq!(code, 0, "{err}");
    let flat = data("openexr-images/composited.exr");
    let recoloured = dir.path().join("recoloured.exr");
    let (code, err) = exit(&["recolor", s(&stereo), s(&flat), "-o", s(&recoloured)]);
    assert!(code == 2 && err.contains("--part"), "{err}");
}

#[test]
fn empty_results_succeed_with_one_note() {
    let dir = tempfile::tempdir().unwrap();
    let balls = data("openexr-images/Balls.exr");
    let out = dir.path().join("empty.exr");
    for args in [
        vec!["crop", s(&balls), "--box", "5000,5000,5009,5004"],
        vec!["slice", s(&balls), "--near", "1e9"],
    ] {
        let with_out = [&args[..], &["-o", s(&out)]].concat();
        let (code, err) = exit(&with_out);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(
            err.lines().count() == 1 && err.contains("no samples"),
            "{err}"
        );
        assert_eq!(read(&out, 0).sample_count(), 0);
        if args[0] == "crop" {
            // The crop's data window is the box.
            let window = read(&out, 0).data_window;
            assert_eq!(
                (window.x0, window.y0, window.x1, window.y1),
                (5000, 5000, 5009, 5004)
            );
        }
        let quiet = [&with_out[..], &["-q"]].concat();
        assert_eq!(exit(&quiet), (0, String::new()), "{args:?} -q");
    }
}

/// The empty crop is a valid image to the peer readers: oiiotool reads and flattens it, and the
/// OpenEXR module (without `deepImageState`, which it does not read) sees the box and no
/// sample.
#[test]
fn an_empty_crop_is_read_by_oiiotool_and_the_openexr_module() {
    let dir = tempfile::tempdir().unwrap();
    let balls = data("openexr-images/Balls.exr");
    let out = dir.path().join("empty.exr");
    let args = [
        "crop",
        s(&balls),
        "--box",
        "5000,5000,5009,5004",
        "--no-deep-state",
        "-q",
        "-o",
        s(&out),
    ];
    assert_eq!(exit(&args), (0, String::new()));
    let flat = dir.path().join("flat.exr");
    let oiio = common::oiiotool()
        .args([s(&out), "--flatten", "-o", s(&flat)])
        .output()
        .unwrap();
    assert!(oiio.status.success(), "{oiio:?}");
    let script = "import sys, OpenEXR\n\
                  p = OpenEXR.File(sys.argv[1], separate_channels=True).parts[0]\n\
                  (x0, y0), (x1, y1) = p.header['dataWindow']\n\
                  n = sum(sum(len(v) for v in row if v is not None) for row in p.channels['A'].pixels)\n\
                  print(x0, y0, x1, y1, n)\n";
    let py = common::test_python()
        .args(["-c", script, s(&out)])
        .output()
        .unwrap();
    assert!(py.status.success(), "{py:?}");
    assert_eq!(
        String::from_utf8_lossy(&py.stdout).trim(),
        "5000 5000 5009 5004 0"
    );
}

#[test]
fn flat_output_keeps_float_colour_unless_a_type_is_asked_for() {
    use deepmerge::exr::read_parts_info;
    let dir = tempfile::tempdir().unwrap();
    let float = data("oiio/tinydeep.exr");
    let half = data("openexr-images/Balls.exr");
    let colour_type = |path: &Path| {
        let parts = read_parts_info(path).unwrap();
        let r = parts[0].channels.iter().find(|c| c.name == "A").unwrap();
        r.sample_type
    };
    use deepmerge::deep::SampleType;
    for (input, extra, want) in [
        (&float, vec![], SampleType::F32),
        (&float, vec!["--flat-type", "half"], SampleType::F16),
        (&half, vec![], SampleType::F16),
        (&half, vec!["--flat-type", "float"], SampleType::F32),
    ] {
        for command in [vec!["flatten"], vec![]] {
            let out = dir.path().join("flat.exr");
            let args = [&command[..], &[s(input), "-o", s(&out)], &extra[..]].concat();
            let (code, err) = exit(&args);
            assert_eq!(code, 0, "{args:?}: {err}");
            assert_eq!(colour_type(&out), want, "{args:?}");
        }
    }
}
