//! What a compositor needs to pick ranges and names (issue 26, item 5): `info` prints each deep
//! part's depth range (checked against the samples read here), says when `deepImageState` is
//! absent, and with `--ids` lists the id manifest's ids with their names (checked against the
//! manifest); a name that matches nothing is refused listing names, not columns; `transform`
//! keeps the display window unless `--move-display`, and writes half depths it changes as float,
//! saying so on one line.

mod common;

use std::path::Path;

use common::{data, read, run};
use deepmerge::deep::{Bounds, Channel, DeepImage, DeepState, Plane, SampleType};
use deepmerge::exr::{read_parts_info, write_deep, Codec, PartSelector};
use half::f16;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn info(args: &[&str]) -> String {
    let (ok, out, err) = run(&[&["info"], args].concat());
    assert!(ok, "{err}");
    out
}

#[test]
fn info_prints_the_depth_range_of_the_samples() {
    for file in ["openexr-images/Balls.exr", "oiio/input-crop.deep.exr"] {
        let path = data(file);
        let image = read(&path, 0);
        let range = |name: &str| {
            let c = image.channel_index(name)?;
            let values: Vec<f32> = (0..image.sample_count())
                .map(|i| image.planes[c].get_f32(i))
                .collect();
            let lo = values.iter().copied().fold(f32::INFINITY, f32::min);
            let hi = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            Some(format!("{name} {lo} to {hi}"))
        };
        let mut expected = range("Z").unwrap();
        if let Some(zback) = range("ZBack") {
            expected = format!("{expected}, {zback}");
        }
        let text = info(&[s(&path)]);
        assert!(
            text.contains(&format!("depth range: {expected}\n")),
            "{file}: expected {expected} in\n{text}"
        );
    }
}

#[test]
fn an_absent_deep_image_state_is_said_to_be_absent() {
    let balls = data("openexr-images/Balls.exr");
    let stated = read_parts_info(&balls).unwrap()[0]
        .attributes
        .iter()
        .any(|a| a.name == "deepImageState");
    assert!(!stated, "Balls.exr carries no deepImageState");
    assert!(info(&[s(&balls)]).contains("deep image state: absent (read as messy)"));
    // A file that states it: its state, as stated.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.exr");
    let (ok, _, err) = run(&["reformat", s(&balls), "--scale", "0.5", "-o", s(&out)]);
    assert!(ok, "{err}");
    assert!(info(&[s(&out)]).contains("deep image state: tidy\n"));
}

#[test]
fn info_ids_lists_every_id_with_its_names() {
    let path = data("openexr/11.deep.exr");
    let text = info(&[s(&path), "--ids"]);
    let manifest = deepmerge::ops::idselect::read_id_manifest(&path, &PartSelector::FirstDeep)
        .unwrap()
        .unwrap();
    let mut listed = 0;
    for group in &manifest.groups {
        assert!(text.contains(&format!(
            "ids of {} ({} ids)",
            group.channels.join(","),
            group.entries.len()
        )));
        for (id, names) in &group.entries {
            let line = format!("    {id}\t{}\n", names.join("\t"));
            assert!(text.contains(&line), "{line:?} missing from\n{text}");
            listed += 1;
        }
    }
    assert!(listed > 0);
    assert!(info(&[s(&data("openexr-images/Balls.exr")), "--ids"]).contains("no idManifest"));

    // A name that matches nothing is refused with the names there are.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.exr");
    let (ok, _, err) = run(&["idselect", s(&path), "--id", "id=chair*", "-o", s(&out)]);
    assert!(!ok);
    let group = manifest.group_of("id").unwrap();
    let mut names: Vec<&String> = group.entries.iter().flat_map(|(_, n)| n).collect();
    names.sort();
    assert!(
        err.contains(names[0].as_str()),
        "the first name is listed: {err}"
    );
    assert!(err.contains("info --ids"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// A 2x1 image with half alpha and half Z at the given depths.
fn half_depths(z: [f32; 2]) -> DeepImage {
    let window = Bounds::from_origin_size(0, 0, 2, 1);
    let display = Bounds::from_origin_size(0, 0, 4, 4);
    let channels = vec![
        Channel::new("A", SampleType::F16),
        Channel::new("Z", SampleType::F16),
    ];
    let planes = vec![
        Plane::F16(vec![f16::from_f32(0.5); 2]),
        Plane::F16(z.map(f16::from_f32).to_vec()),
    ];
    DeepImage::from_counts(display, window, channels, &[1, 1], planes, DeepState::Tidy).unwrap()
}

#[test]
fn transform_keeps_the_format_and_promotes_half_depths_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("half.exr");
    write_deep(&input, &half_depths([1000.0, 2.0]), Codec::None).unwrap();
    let out = dir.path().join("o.exr");

    let (ok, _, err) = run(&["transform", s(&input), "--translate", "3,1", "-o", s(&out)]);
    assert!(ok && err.is_empty(), "{err}");
    let moved = read(&out, 0);
    assert_eq!(moved.display_window, Bounds::from_origin_size(0, 0, 4, 4));
    assert_eq!(moved.data_window, Bounds::from_origin_size(3, 1, 2, 1));
    assert_eq!(
        moved.channels[1].sample_type,
        SampleType::F16,
        "no depth change"
    );
    let (ok, _, err) = run(&[
        "transform",
        s(&input),
        "--translate",
        "3,1",
        "--move-display",
        "-o",
        s(&out),
    ]);
    assert!(ok, "{err}");
    assert_eq!(
        read(&out, 0).display_window,
        Bounds::from_origin_size(3, 1, 4, 4)
    );

    // 1000 * 100 overflows half; 1000 + 0.01 is 1000 in half (its step there is 0.5).
    for (flag, value) in [("--z-scale", "100"), ("--z-offset", "0.01")] {
        let (ok, _, err) = run(&["transform", s(&input), flag, value, "-o", s(&out)]);
        assert!(ok, "{err}");
        assert!(
            err.contains("written as float") && err.trim().lines().count() == 1,
            "{err}"
        );
        let image = read(&out, 0);
        let z = image.channel_index("Z").unwrap();
        assert_eq!(image.channels[z].sample_type, SampleType::F32);
        let (scale, offset) = if flag == "--z-scale" {
            (100.0, 0.0)
        } else {
            (1.0, 0.01)
        };
        for (i, before) in [1000.0f64, 2.0].iter().enumerate() {
            let want = (before * scale + offset) as f32;
            assert_eq!(image.planes[z].get_f32(i), want, "{flag} {value}");
            assert!(want.is_finite() && want != *before as f32);
        }
    }
}
