//! Writing: deep round trips are bit-exact for every codec, and files we write read back in the
//! independent readers (PyPI OpenEXR and oiiotool) with the same samples.

mod common;

use common::*;
use deepmerge::deep::{Bounds, DeepImage, FlatChannel, FlatImage, FlatValues};
use deepmerge::exr::{
    decode_deep, encode_deep, write_deep, write_deep_with, write_flat, Codec, DeepWriteOptions,
    FlatType, ReadOptions,
};

const CODECS: [Codec; 4] = [Codec::None, Codec::Rle, Codec::Zips, Codec::Zip];

fn round_trip(image: &DeepImage, codec: Codec) -> DeepImage {
    let bytes = encode_deep(image, codec).unwrap();
    decode_deep(&bytes, &ReadOptions::default()).unwrap()
}

#[test]
fn deep_round_trips_are_bit_exact_for_every_codec() {
    let images = [
        read(&data("openexr-images/Balls.exr"), 0),
        read(&data("openexr/11.deep.exr"), 0), // uint ids, half Z
        read(&data("oiio/input-crop.deep.exr"), 0), // ZBack, per-channel alpha
        read(&data("oiio/deep-nosamples.exr"), 0),
        // Long lists, a width not a multiple of 16, a height not a multiple of ZIP's 16 lines.
        synthetic(Bounds::from_origin_size(3, -2, 37, 21), 3, |p| {
            (p * 7 % 41) as u32
        }),
    ];
    for image in &images {
        for codec in CODECS {
            let back = round_trip(image, codec);
            assert_eq!(back.data_window, image.data_window, "{codec:?}");
            assert_eq!(back.display_window, image.display_window, "{codec:?}");
            assert_eq!(back.channels, image.channels, "{codec:?}");
            assert_eq!(back.offsets, image.offsets, "{codec:?}");
            assert_eq!(back.planes, image.planes, "{codec:?}");
            assert_eq!(back.state, image.state, "{codec:?} keeps deepImageState");
        }
    }
}

#[test]
fn written_deep_files_read_back_in_pypi_openexr() {
    let dir = tempfile::tempdir().unwrap();
    let image = synthetic(Bounds::from_origin_size(0, 0, 33, 17), 11, |p| {
        (p % 9) as u32
    });
    let ids = read(&data("openexr/11.deep.exr"), 0);
    // NONE, RLE and ZIPS: OpenEXR itself refuses ZIP for deep data (see PROVENANCE.md).
    for codec in [Codec::None, Codec::Rle, Codec::Zips] {
        for (name, im) in [("synthetic", &image), ("ids", &ids)] {
            // Without deepImageState, exactly as PyPI OpenEXR 3.5 accepts it.
            let path = dir.path().join(format!("{name}-{}.exr", codec.name()));
            let options = DeepWriteOptions {
                codec,
                write_state: false,
                ..DeepWriteOptions::default()
            };
            write_deep_with(&path, im, &options).unwrap();
            assert_matches_dump(
                im,
                &independent_dump(&path, 0),
                &format!("{name} {codec:?}"),
            );
        }
    }
}

/// oiiotool's `--stats` summary of a deep file: total samples and per-channel min/max lines.
fn oiiotool_stats(path: &std::path::Path) -> Vec<String> {
    let out = oiiotool()
        .arg("--stats")
        .arg(path)
        .output()
        .expect("oiiotool runs");
    assert!(
        out.status.success(),
        "oiiotool failed on {}",
        path.display()
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| {
            l.contains("Stats M") || l.contains("Total deep samples") || l.contains("depth was")
        })
        .map(|l| l.trim().to_string())
        .collect()
}

#[test]
fn written_deep_files_read_in_oiiotool_with_the_same_statistics() {
    let dir = tempfile::tempdir().unwrap();
    for file in [
        "openexr-images/Trunks.exr",
        "oiio/deepalpha.exr",
        "openexr/11.deep.exr",
    ] {
        let original = data(file);
        let image = read(&original, 0);
        for codec in [Codec::Rle, Codec::Zips] {
            let path = dir.path().join(format!("out-{}.exr", codec.name()));
            write_deep(&path, &image, codec).unwrap();
            let ours = oiiotool_stats(&path);
            assert!(
                ours.iter().any(|l| l.contains("Total deep samples")),
                "{ours:?}"
            );
            assert_eq!(ours, oiiotool_stats(&original), "{file} {codec:?}");
        }
    }
}

#[test]
fn flat_files_read_back_in_the_exr_crate_and_pypi() {
    let window = Bounds::from_origin_size(-3, 2, 5, 4);
    let values: Vec<f32> = (0..20).map(|i| i as f32 / 7.0).collect();
    let flat = FlatImage {
        display_window: Bounds::from_origin_size(0, 0, 8, 8),
        data_window: window,
        channels: ["A", "B", "G", "R", "Z"]
            .iter()
            .map(|n| FlatChannel {
                name: n.to_string(),
                values: FlatValues::F32(values.clone()),
            })
            .collect(),
    };
    let dir = tempfile::tempdir().unwrap();
    for flat_type in [FlatType::Half, FlatType::Float] {
        let path = dir.path().join("flat.exr");
        write_flat(&path, &flat, flat_type).unwrap();
        let image = exr::prelude::read_all_flat_layers_from_file(&path).unwrap();
        let layer = &image.layer_data[0];
        assert_eq!(layer.attributes.layer_position.x(), -3);
        assert_eq!(layer.size.x(), 5);
        for c in &layer.channel_data.list {
            let got: Vec<f32> = c.sample_data.values_as_f32().collect();
            let name = c.name.to_string();
            let exact = name == "Z" || flat_type == FlatType::Float;
            for (g, v) in got.iter().zip(&values) {
                let want = if exact {
                    *v
                } else {
                    half::f16::from_f32(*v).to_f32()
                };
                assert_eq!(*g, want, "{name} {flat_type:?}");
            }
        }
        let py = test_python()
            .args(["-c", "import OpenEXR,sys; p=OpenEXR.File(sys.argv[1]).parts[0]; print(sorted(p.channels), p.header['dataWindow'][0].tolist())"])
            .arg(&path)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&py.stdout);
        assert!(
            py.status.success() && text.contains("[-3, 2]"),
            "{text} {}",
            String::from_utf8_lossy(&py.stderr)
        );
    }
}
