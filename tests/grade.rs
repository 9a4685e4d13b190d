//! `grade` (`deepmerge::ops::Grade`, the `grade` command): a gain inside a depth range changes
//! exactly those samples by exactly that amount after unpremultiplying, checked by an
//! independent computation over PyPI OpenEXR's reading of the files
//! (`tests/independent/grade_check.py`) on real renders, per-channel alphas included; every
//! other operation against its formula written here; the masks (depth ramp, ids by number and by
//! manifest name); refusals in one line.

mod common;

use std::path::Path;

use common::{data, image, point, read, run, test_python, volume};
use deepmerge::deep::{DeepImage, DeepState};
use deepmerge::ops::idselect::id_at;
use deepmerge::ops::{DeepOp, Grade, GradeArgs};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn grade(args: GradeArgs) -> Grade {
    Grade::parse(&args).unwrap_or_else(|e| panic!("{e}"))
}

fn apply(op: &Grade, input: &DeepImage) -> DeepImage {
    let windows = op.windows(input.data_window, input.display_window).unwrap();
    op.apply(input, &windows).unwrap_or_else(|e| panic!("{e}"))
}

/// The depths of `image` at the quartiles: a range holding about half its samples.
fn middle_depths(image: &DeepImage) -> (f32, f32) {
    let z = image.channel_index("Z").unwrap();
    let mut depths: Vec<f32> = (0..image.sample_count())
        .map(|i| image.planes[z].get_f32(i))
        .collect();
    depths.sort_by(f32::total_cmp);
    (depths[depths.len() / 4], depths[3 * depths.len() / 4])
}

#[test]
fn a_gain_in_a_depth_range_changes_exactly_those_samples_by_the_gain_independently() {
    let dir = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/independent/grade_check.py");
    // Balls: A with half colour; input-crop: RA, GA, BA and volumes (RenderMan).
    for file in ["openexr-images/Balls.exr", "oiio/input-crop.deep.exr"] {
        let input = data(file);
        let (near, far) = middle_depths(&read(&input, 0));
        let out = dir.path().join("graded.exr");
        let (ok, _, err) = run(&[
            "grade",
            s(&input),
            "-o",
            s(&out),
            "--gain",
            "2",
            "--near",
            &near.to_string(),
            "--far",
            &far.to_string(),
        ]);
        assert!(ok, "{file}: {err}");
        let check = test_python()
            .arg(&script)
            .args([s(&input), s(&out), "2", &near.to_string(), &far.to_string()])
            .output()
            .expect("python runs");
        let report = String::from_utf8_lossy(&check.stdout);
        assert!(
            check.status.success(),
            "{file}: the independent check failed:\n{report}{}",
            String::from_utf8_lossy(&check.stderr)
        );
        eprintln!("{file}: {}", report.trim());
    }
}

/// An expected unpremultiplied value of channel k (0 R, 1 G, 2 B) from the input's.
type Formula = Box<dyn Fn(usize, f64) -> f64>;

#[test]
fn each_operation_follows_its_formula_on_unpremultiplied_colour() {
    // One pixel: a = 0.5 with colour (0.1, 0.2, 0.3) premultiplied, i.e. (0.2, 0.4, 0.6).
    let input = image(
        1,
        &[vec![
            point(1.0, 0.5, [0.1, 0.2, 0.3]),
            point(2.0, 0.0, [0.25, 0.0, 0.0]),
        ]],
        DeepState::Sorted,
    );
    let unpremult = [0.2f64, 0.4, 0.6];
    let cases: Vec<(GradeArgs, Formula)> = vec![
        (
            GradeArgs {
                gain: Some("3"),
                ..GradeArgs::default()
            },
            Box::new(|_, v| v * 3.0),
        ),
        (
            GradeArgs {
                lift: Some("0.1"),
                gain: Some("2"),
                ..GradeArgs::default()
            },
            Box::new(|_, v| 0.1 + v * (2.0 - 0.1)),
        ),
        (
            GradeArgs {
                offset: Some("R=0.5"),
                ..GradeArgs::default()
            },
            Box::new(|k, v| if k == 0 { v + 0.5 } else { v }),
        ),
        (
            GradeArgs {
                gamma: Some("2"),
                ..GradeArgs::default()
            },
            Box::new(|_, v: f64| v.powf(0.5)),
        ),
        (
            GradeArgs {
                contrast: Some("1,2,3"),
                ..GradeArgs::default()
            },
            Box::new(|k, v: f64| 0.18 * (v / 0.18).powf([1.0, 2.0, 3.0][k])),
        ),
        (
            GradeArgs {
                saturation: Some(0.0),
                ..GradeArgs::default()
            },
            Box::new(|_, _| 0.2126 * 0.2 + 0.7152 * 0.4 + 0.0722 * 0.6),
        ),
    ];
    for (args, formula) in cases {
        let what = format!("{args:?}");
        let out = apply(&grade(args), &input);
        assert_eq!(out.sample_count(), 2, "{what}");
        for (k, name) in ["R", "G", "B"].iter().enumerate() {
            let c = out.channel_index(name).unwrap();
            let expected = (formula(k, unpremult[k]) * 0.5) as f32;
            let got = out.planes[c].get_f32(0);
            assert!(
                (got - expected).abs() <= 1e-6,
                "{what}: {name} {got} vs {expected}"
            );
            // Alpha 0: the colour (an emission) is kept.
            assert_eq!(
                out.planes[c].get_f32(1).to_bits(),
                input.planes[c].get_f32(1).to_bits(),
                "{what}: {name} of the transparent sample"
            );
        }
        for name in ["A", "Z", "ZBack"] {
            let c = out.channel_index(name).unwrap();
            assert_eq!(out.planes[c], input.planes[c], "{what}: {name} kept");
        }
    }
}

#[test]
fn the_depth_ramp_mixes_the_correction() {
    let samples: Vec<_> = [0.5f32, 1.5, 2.0, 3.0, 4.0, 4.5, 5.5]
        .iter()
        .map(|&z| point(z, 1.0, [0.5, 0.5, 0.5]))
        .collect();
    let mut input = image(1, &[samples], DeepState::Sorted);
    input.state = DeepState::Sorted;
    let op = grade(GradeArgs {
        gain: Some("3"),
        near: Some(2.0),
        far: Some(4.0),
        ramp: 1.0,
        ..GradeArgs::default()
    });
    let out = apply(&op, &input);
    let r = out.channel_index("R").unwrap();
    let z = out.channel_index("Z").unwrap();
    for i in 0..out.sample_count() {
        let depth = out.planes[z].get_f32(i) as f64;
        // Full inside [2, 4), linear to 0 over 1 outside.
        let mask: f64 = if depth < 2.0 {
            (1.0 - (2.0 - depth)).max(0.0)
        } else if depth >= 4.0 {
            (1.0 - (depth - 4.0)).max(0.0)
        } else {
            1.0
        };
        let expected = (0.5 + mask * (1.5 - 0.5)) as f32;
        assert!(
            (out.planes[r].get_f32(i) - expected).abs() < 1e-6,
            "Z {depth}: {} vs {expected}",
            out.planes[r].get_f32(i)
        );
    }
}

#[test]
fn volumes_keep_their_depths_and_the_ids_mask_by_number_and_by_name() {
    let input_path = data("openexr/11.deep.exr");
    let input = read(&input_path, 0);
    let id = input.channel_index("id").unwrap();
    // The most common id: a mask by its number grades its samples and no other.
    let mut ids: Vec<u32> = (0..input.sample_count())
        .filter_map(|i| id_at(&input.planes[id], i))
        .collect();
    ids.sort_unstable();
    let chosen = ids[ids.len() / 2];
    let texts = [format!("id={chosen}")];
    let op = grade(GradeArgs {
        gain: Some("2"),
        ids: &texts,
        ..GradeArgs::default()
    });
    let out = apply(&op, &input);
    let r = input.channel_index("R").unwrap();
    let a = input.channel_index("A").unwrap();
    let mut graded = 0;
    for i in 0..input.sample_count() {
        let selected = id_at(&input.planes[id], i) == Some(chosen);
        let (before, after) = (input.planes[r].get_f32(i), out.planes[r].get_f32(i));
        if selected && input.planes[a].get_f32(i) != 0.0 && before != 0.0 {
            graded += 1;
            assert!((after as f64 - 2.0 * before as f64).abs() <= 1e-3 * before.abs() as f64);
        } else if !selected {
            assert_eq!(
                after.to_bits(),
                before.to_bits(),
                "sample {i} is not selected"
            );
        }
    }
    assert!(graded > 0, "the chosen id is graded somewhere");
    assert_eq!(out.planes[id], input.planes[id], "ids are never touched");

    // By name, through the manifest: the same bytes as by number.
    let manifest = deepmerge::ops::idselect::read_id_manifest(
        &input_path,
        &deepmerge::exr::PartSelector::FirstDeep,
    )
    .unwrap()
    .unwrap();
    let group = manifest.group_of("id").unwrap();
    let name = &group
        .entries
        .iter()
        .find(|(i, _)| *i == chosen as u64)
        .expect("the chosen id is named")
        .1[0];
    // Every id one of whose names is that name: what the name selects.
    let named: Vec<String> = group
        .entries
        .iter()
        .filter(|(_, names)| names.iter().any(|n| n == name))
        .map(|(i, _)| i.to_string())
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let (by_number, by_name) = (dir.path().join("n.exr"), dir.path().join("m.exr"));
    for (out, id_text) in [
        (&by_number, format!("id={}", named.join(","))),
        (&by_name, format!("id={}", glob_escape(name))),
    ] {
        let (ok, _, err) = run(&[
            "grade",
            s(&input_path),
            "-o",
            s(out),
            "--gain",
            "2",
            "--id",
            &id_text,
        ]);
        assert!(ok, "{id_text}: {err}");
    }
    assert!(
        std::fs::read(&by_number).unwrap() == std::fs::read(&by_name).unwrap(),
        "grading by the name {name:?} differs from grading its ids {named:?}"
    );

    // Volumes: depths and alphas stay; only colour changes.
    let vol = image(
        1,
        &[vec![volume(1.0, 2.0, 0.25, [0.05, 0.1, 0.2])]],
        DeepState::Tidy,
    );
    let out = apply(
        &grade(GradeArgs {
            gain: Some("2"),
            ..GradeArgs::default()
        }),
        &vol,
    );
    for name in ["A", "Z", "ZBack"] {
        let c = vol.channel_index(name).unwrap();
        assert_eq!(out.planes[c], vol.planes[c], "{name}");
    }
    assert_eq!(out.state, DeepState::Tidy);
}

/// `text` with the shell-pattern characters escaped, so that it matches only itself.
fn glob_escape(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '*' | '?' | '[' | ']' => format!("[{c}]"),
            c => c.to_string(),
        })
        .collect()
}

#[test]
fn bad_arguments_are_one_line_errors_that_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let input = data("openexr-images/Balls.exr");
    let out = dir.path().join("o.exr");
    let cases: [(&[&str], &str); 7] = [
        (&["--gamma", "-1"], "--gamma -1"),
        (&["--gamma", "0"], "greater than 0"),
        (&["--gain", "1,2"], "--gain takes"),
        (&["--saturation", "-1"], "--saturation"),
        (&["--near", "5", "--far", "1"], "behind --far"),
        (&["--gain", "Q=2"], "no colour channel \"Q\""),
        (&["--gain", "2", "--id", "id=blob"], "no idManifest"),
    ];
    for (args, says) in cases {
        let mut all = vec!["grade", s(&input), "-o", s(&out)];
        all.extend_from_slice(args);
        let (ok, _, err) = run(&all);
        assert!(!ok, "{args:?}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(!out.exists(), "{args:?} wrote a file");
    }
}
