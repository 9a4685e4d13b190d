//! Reading: every deep file of the corpus decodes to the same samples as an independent reader
//! (PyPI OpenEXR), and every re-encoded variant of Balls decodes to exactly Balls' samples.

mod common;
use common::*;
use deepmerge::deep::{Bounds, DeepState};
use deepmerge::exr::{read_deep, write_deep, Codec, PartSelector, ReadOptions};

const DEEP_FILES: &[(&str, usize)] = &[
    ("openexr-images/Balls.exr", 0),
    ("openexr-images/Leaves.exr", 0),
    ("openexr-images/Trunks.exr", 0),
    ("openexr-images/Stereo-Trunks-multipart.exr", 0),
    ("openexr-images/Stereo-Trunks-multipart.exr", 1),
    ("oiio/deepalpha.exr", 0),
    ("oiio/tinydeep.exr", 0),
    ("oiio/deep-nosamples.exr", 0),
    ("oiio/deep-onesample.exr", 0),
    ("oiio/input-crop.deep.exr", 0),
    ("oiio/holdout-crop.deep.exr", 0),
    ("oiio/ref-holdout-crop.deep.exr", 0),
    ("oiio/ref-cull-crop.deep.exr", 0),
    ("openexr/11.deep.exr", 0),
    ("openexr/multivariate.deep.exr", 0),
    ("variants/Balls_deeptile17x13_none.exr", 0),
    ("variants/Balls_deeptile32x16_rle.exr", 0),
    ("variants/Balls_deeptile64_zips.exr", 0),
    ("variants/Balls_deeptile800x1_zips.exr", 0),
    ("variants/Balls_scan_none.exr", 0),
    ("variants/Balls_scan_rle.exr", 0),
];

#[test]
fn every_deep_file_matches_the_independent_reader() {
    for &(file, part) in DEEP_FILES {
        let path = data(file);
        let ours = read(&path, part);
        let dump = independent_dump(&path, part);
        assert_matches_dump(&ours, &dump, &format!("{file} part {part}"));
    }
}

#[test]
fn every_variant_decodes_to_the_samples_of_balls() {
    let balls = read(&data("openexr-images/Balls.exr"), 0);
    assert_eq!(balls.sample_count(), 162_877);
    for v in [
        "Balls_deeptile17x13_none",
        "Balls_deeptile32x16_rle",
        "Balls_deeptile64_zips",
        "Balls_deeptile800x1_zips",
        "Balls_scan_none",
        "Balls_scan_rle",
    ] {
        let image = read(&data(&format!("variants/{v}.exr")), 0);
        assert_eq!(image.data_window, balls.data_window, "{v}");
        assert_eq!(image.channels, balls.channels, "{v}");
        assert_eq!(image.offsets, balls.offsets, "{v}");
        assert_eq!(image.planes, balls.planes, "{v}");
    }
}

#[test]
fn known_facts_of_the_corpus_hold() {
    let tiled = read(&data("oiio/deepalpha.exr"), 0);
    assert_eq!(tiled.sample_count(), 28_846);
    assert_eq!(tiled.max_count(), 22);
    assert_eq!(tiled.channels.len(), 2);
    let ids = read(&data("openexr/11.deep.exr"), 0);
    assert_eq!(ids.state, DeepState::Tidy, "deepImageState = 3 is read");
    assert!(ids.channels.iter().any(|c| c.name == "id"));
}

#[test]
fn parts_are_chosen_by_index_name_or_first_deep() {
    let path = data("openexr-images/Stereo-Trunks-multipart.exr");
    let by_name = |n: &str| {
        read_deep(
            &path,
            &ReadOptions {
                part: PartSelector::Name(n.into()),
                ..ReadOptions::default()
            },
        )
    };
    let right = by_name("rgba.right").unwrap();
    assert_eq!(right.sample_count(), 193_453);
    assert_eq!(right, read(&path, 1));
    let first = read_deep(&path, &ReadOptions::default()).unwrap();
    assert_eq!(first.sample_count(), 172_743);
    let missing = by_name("rgba.middle").unwrap_err().to_string();
    assert!(
        missing.contains("no part named \"rgba.middle\""),
        "{missing}"
    );
    assert!(
        missing.contains("1:rgba.right"),
        "lists the parts: {missing}"
    );
}

#[test]
fn negative_data_window_origins_read_back_and_match_the_independent_reader() {
    let window = Bounds::from_origin_size(-37, -5, 45, 9);
    let image = synthetic(window, 7, |p| (p % 5) as u32);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("negative.exr");
    write_deep(&path, &image, Codec::Zips).unwrap();
    let back = read(&path, 0);
    assert_eq!(back.data_window, window);
    assert_eq!(back.planes, image.planes);
    assert_matches_dump(&back, &independent_dump(&path, 0), "negative origin");
}
