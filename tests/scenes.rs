//! Procedural scenes, heatmaps and the bench harness: determinism, the depth-complexity each
//! scene is meant to have, heatmap colours, and a whole bench run at a tiny size.

use std::path::Path;

use deepmerge::bench::{self, BenchConfig, Cell, PeerSetting, Unit};
use deepmerge::deep::{Bounds, DeepImage, DeepState, Plane};
use deepmerge::exr::{read_deep, ReadOptions};
use deepmerge::heatmap::legend::SWATCH_WIDTH;
use deepmerge::heatmap::{
    complexity_colour, encode_png_rgb, heatmap_rgb, heatmap_with_legend, write_heatmap, Legend,
    BIN_COLOURS, BIN_FLOOR, LEGEND_BACKGROUND,
};
use deepmerge::scene::{self, SceneParams, SCENE_NAMES};

const W: usize = 128;
const H: usize = 72;

fn plane_f32(image: &DeepImage, name: &str) -> Vec<f32> {
    let plane = &image.planes[image.channel_index(name).expect("channel")];
    (0..plane.len()).map(|i| plane.get_f32(i)).collect()
}

#[test]
fn same_seed_gives_identical_images_and_another_seed_does_not() {
    for name in SCENE_NAMES {
        let a = scene::generate(name, W, H, 7).unwrap();
        let b = scene::generate(name, W, H, 7).unwrap();
        let c = scene::generate(name, W, H, 8).unwrap();
        assert_eq!(a, b, "{name}: same seed");
        assert_ne!(a, c, "{name}: different seed");
        assert_eq!(a.len(), 2);
    }
}

#[test]
fn samples_are_sorted_premultiplied_with_alpha_in_range() {
    for name in SCENE_NAMES {
        for (k, image) in scene::generate(name, W, H, 3).unwrap().iter().enumerate() {
            assert_eq!(image.state, DeepState::Sorted);
            let names: Vec<&str> = image.channels.iter().map(|c| c.name.as_str()).collect();
            assert_eq!(names, ["A", "B", "G", "R", "Z"]);
            assert!(matches!(image.planes[4], Plane::F32(_)));
            let (z, a) = (plane_f32(image, "Z"), plane_f32(image, "A"));
            let colours = ["R", "G", "B"].map(|c| plane_f32(image, c));
            for p in 0..image.pixel_count() {
                let r = image.range(p);
                assert!(
                    z[r.clone()].windows(2).all(|w| w[0] <= w[1]),
                    "{name} input {k}: pixel {p} not sorted"
                );
                for i in r {
                    assert!(a[i] > 0.0 && a[i] <= 1.0, "{name}: alpha {}", a[i]);
                    for c in &colours {
                        assert!(c[i] >= 0.0 && c[i] <= a[i], "{name}: not premultiplied");
                    }
                }
            }
        }
    }
}

/// Pixels of `counts` per complexity bin: <=16 (non-empty), 16-64, 64-128, 128-512, >512.
fn bins(counts: &[u32]) -> [usize; 5] {
    let mut out = [0; 5];
    for &n in counts.iter().filter(|&&n| n > 0) {
        let bin = match n {
            0..=16 => 0,
            17..=64 => 1,
            65..=128 => 2,
            129..=512 => 3,
            _ => 4,
        };
        out[bin] += 1;
    }
    out
}

fn merged_counts(pair: &[DeepImage]) -> Vec<u32> {
    pair[0]
        .counts()
        .iter()
        .zip(pair[1].counts())
        .map(|(a, b)| a + b)
        .collect()
}

#[test]
fn scenes_have_their_intended_depth_complexity() {
    let atrium = scene::generate("atrium", W, H, 1).unwrap();
    for image in &atrium {
        assert!(image.max_count() < 20, "atrium max {}", image.max_count());
        assert!(image.max_count() >= 5, "atrium too sparse");
    }
    // The exterior has a sky: every pixel holds a sample.
    assert!(atrium[1].counts().iter().all(|&n| n > 0));

    let powerplant = bins(&merged_counts(
        &scene::generate("powerplant", W, H, 1).unwrap(),
    ));
    assert!(powerplant[0] > 0 && powerplant[1] > 0, "{powerplant:?}");
    assert!(
        powerplant[2] + powerplant[3] > 0,
        "powerplant never exceeds 64: {powerplant:?}"
    );

    let hairball = scene::generate("hairball", W, H, 1).unwrap();
    let hair = bins(&hairball[0].counts());
    assert!(hair[3] > 0, "hairball has no pixel above 128: {hair:?}");
    assert!(
        hair[0] > 0 && hair[1] > 0,
        "hairball has no fringe: {hair:?}"
    );
    assert!(hairball[0].max_count() <= 512);

    let planes = scene::generate("planes", W, H, 1).unwrap();
    let quads = bins(&planes[0].counts());
    assert!(quads[3] > 0, "planes never exceed 128: {quads:?}");
    assert!(
        quads[0] + quads[1] > 0,
        "planes have no sparse edge: {quads:?}"
    );
    // The spheres layer is sparse: two fragments per sphere hit.
    assert!(planes[1].max_count() < 64);
}

#[test]
fn four_inputs_split_the_two_layers() {
    for name in ["hairball", "planes"] {
        let pair = scene::generate(name, W, H, 5).unwrap();
        let quad = scene::generate_inputs(name, W, H, 5, 4).unwrap();
        assert_eq!(quad.len(), 4);
        for (layer, parts) in [(0, &quad[0..2]), (1, &quad[2..4])] {
            // No pixel hits the fragment budget here, so the halves add up to the layer.
            assert_eq!(
                merged_counts(parts),
                pair[layer].counts(),
                "{name} layer {layer}"
            );
            assert!(parts.iter().all(|p| p.sample_count() > 0));
        }
    }
}

#[test]
fn write_scene_writes_readable_files_equal_to_the_generated_images() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("atrium");
    let paths = scene::write_scene("atrium", 40, 24, 9, 4, &prefix).unwrap();
    let names: Vec<String> = paths
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "atrium_0.exr",
            "atrium_1.exr",
            "atrium_2.exr",
            "atrium_3.exr"
        ]
    );
    let generated = scene::generate_inputs("atrium", 40, 24, 9, 4).unwrap();
    for (path, image) in paths.iter().zip(&generated) {
        let read = read_deep(path, &ReadOptions::default()).unwrap();
        assert_eq!(read.counts(), image.counts());
        assert_eq!(read.planes, image.planes);
        assert_eq!(read.state, DeepState::Sorted);
    }
}

#[test]
fn bad_scene_requests_are_refused() {
    assert!(scene::generate("sponza", 8, 8, 1).is_err());
    assert!(scene::generate("atrium", 0, 8, 1).is_err());
    assert!(scene::generate_inputs("atrium", 8, 8, 1, 1).is_err());
    assert_eq!(scene::parse_size("1920x1080").unwrap(), (1920, 1080));
    assert!(scene::parse_size("1920").is_err());
    assert!(scene::parse_size("0x4").is_err());
    let mut p = SceneParams::parse("t", "a = 1\nb.min = 2 # note\nb.max = 3\n").unwrap();
    assert_eq!(p.take("a").unwrap(), 1.0);
    assert!(p.take("a").is_err(), "taken twice");
    let finished = p.clone().finish();
    assert!(finished.is_err(), "b.min and b.max were not used");
    assert_eq!(p.take_range("b").unwrap(), (2.0, 3.0));
    p.finish().unwrap();
    assert!(SceneParams::parse("t", "a = x").is_err());
    assert!(SceneParams::parse("t", "a = 1\na = 2").is_err());
}

#[test]
fn heatmap_colours_follow_the_paper_bins() {
    // Hue names the bin: blue, green, yellow, red, then magenta beyond 512; empty is black.
    assert_eq!(complexity_colour(0), [0, 0, 0]);
    let dominant = |n: usize| {
        let [r, g, b] = complexity_colour(n);
        match (r > 100, g > 100, b > 100) {
            (false, false, true) => "blue",
            (false, true, false) => "green",
            (true, true, false) => "yellow",
            (true, false, false) => "red",
            (true, false, true) => "magenta",
            other => panic!("{n}: unexpected colour {other:?}"),
        }
    };
    for (n, colour) in [
        (1, "blue"),
        (16, "blue"),
        (17, "green"),
        (64, "green"),
        (65, "yellow"),
        (128, "yellow"),
        (129, "red"),
        (512, "red"),
        (513, "magenta"),
        (100_000, "magenta"),
    ] {
        assert_eq!(dominant(n), colour, "count {n}");
    }
    // Brighter towards the top of a bin.
    assert!(complexity_colour(16)[2] > complexity_colour(1)[2]);
    assert!(complexity_colour(512)[0] > complexity_colour(129)[0]);
}

#[test]
fn heatmap_png_holds_the_display_window_in_bin_colours() {
    let image = &scene::generate("hairball", W, H, 1).unwrap()[0];
    let (w, h, rgb) = heatmap_rgb(image);
    assert_eq!((w, h), (W, H));
    let counts = image.counts();
    for (p, &n) in counts.iter().enumerate() {
        assert_eq!(rgb[3 * p..3 * p + 3], complexity_colour(n as usize));
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("heat.png");
    write_heatmap(image, &path).unwrap();
    let png = std::fs::read(&path).unwrap();
    let (pw, ph, picture) = heatmap_with_legend(image).unwrap();
    assert_eq!(png, encode_png_rgb(pw, ph, &picture));
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(&png[12..16], b"IHDR");
    assert_eq!(
        u32::from_be_bytes(png[16..20].try_into().unwrap()),
        pw as u32
    );
    assert_eq!(
        u32::from_be_bytes(png[20..24].try_into().unwrap()),
        ph as u32
    );
    // The IDAT payload inflates back to filter byte 0 + the row's RGB, row after row.
    let idat_len = u32::from_be_bytes(png[33..37].try_into().unwrap()) as usize;
    assert_eq!(&png[37..41], b"IDAT");
    let raw = miniz_oxide::inflate::decompress_to_vec_zlib(&png[41..41 + idat_len]).unwrap();
    let rows: Vec<&[u8]> = raw.chunks_exact(pw * 3 + 1).collect();
    assert_eq!(rows.len(), ph);
    for (y, row) in rows.iter().enumerate() {
        assert_eq!(row[0], 0);
        assert_eq!(&row[1..], &picture[y * pw * 3..(y + 1) * pw * 3]);
    }
    // The heatmap is the picture's top left, pixel for pixel.
    for y in 0..H {
        assert_eq!(
            &picture[y * pw * 3..y * pw * 3 + W * 3],
            &rgb[y * W * 3..(y + 1) * W * 3]
        );
    }
}

/// Pixel (x, y) of an RGB picture `width` wide.
fn rgb_at(rgb: &[u8], width: usize, x: usize, y: usize) -> [u8; 3] {
    rgb[(y * width + x) * 3..(y * width + x) * 3 + 3]
        .try_into()
        .unwrap()
}

#[test]
fn heatmap_legend_shows_every_bin_colour_and_text() {
    let image = &scene::generate("planes", 24, 16, 1).unwrap()[0];
    let (w, h, picture) = heatmap_with_legend(image).unwrap();
    let legend = Legend::for_image(image);
    // Wider than the 24-pixel frame: the legend's lines set the width, and sit below the map.
    assert_eq!((w, h), (legend.width().max(24), 16 + legend.height()));
    assert!(w > 24, "{w}");
    // Line 0 is the title; lines 1-5 the bins, whose swatches end at the bin's full colour and
    // start at its floor shade; line 6 is "empty", black.
    for (bin, colour) in BIN_COLOURS.iter().enumerate() {
        let (x, y) = Legend::swatch_at(1 + bin, 16);
        assert_eq!(
            rgb_at(&picture, w, x + SWATCH_WIDTH - 1, y),
            *colour,
            "bin {bin}"
        );
        let floor = colour.map(|c| (c as f32 * BIN_FLOOR).round() as u8);
        assert_eq!(rgb_at(&picture, w, x, y), floor, "bin {bin}");
    }
    let (x, y) = Legend::swatch_at(6, 16);
    assert_eq!(rgb_at(&picture, w, x, y), [0, 0, 0]);
    // Text is drawn: light pixels right of each swatch, and on the title line.
    for line in 0..10 {
        let (_, top) = Legend::swatch_at(line, 16);
        let lit = (top.saturating_sub(3)..top + 12)
            .flat_map(|y| (0..w).map(move |x| (x, y)))
            .filter(|&(x, y)| rgb_at(&picture, w, x, y).iter().all(|&c| c > 150))
            .filter(|&(x, _)| line == 0 || line > 6 || x > SWATCH_WIDTH + 6)
            .count();
        assert!(lit > 5, "line {line}: {lit} text pixels");
    }
    // Beside the narrow map and under it: the legend's background.
    assert_eq!(rgb_at(&picture, w, w - 1, 0), LEGEND_BACKGROUND);
}

#[test]
fn heatmap_covers_the_overscan() {
    // A data window reaching 3 pixels left of and 2 below the display window.
    let mut image = scene::generate("planes", 20, 12, 1).unwrap().remove(0);
    image.display_window = Bounds {
        x0: 3,
        y0: 0,
        x1: 19,
        y1: 9,
    };
    let (w, h, rgb) = heatmap_rgb(&image);
    assert_eq!((w, h), (20, 12), "the frame is the union of the windows");
    let counts = image.counts();
    for (p, &n) in counts.iter().enumerate() {
        assert_eq!(
            rgb[3 * p..3 * p + 3],
            complexity_colour(n as usize),
            "pixel {p}"
        );
    }
    let overscan = (0..counts.len()).filter(|p| p % 20 < 3 || p / 20 > 9);
    assert!(
        overscan.clone().any(|p| counts[p] > 0)
            && overscan
                .clone()
                .all(|p| rgb[3 * p..3 * p + 3] == complexity_colour(counts[p] as usize)),
        "the overscan holds samples, drawn"
    );
    // A display window far from the data: both are drawn, black between them.
    image.display_window = Bounds {
        x0: 100,
        y0: 0,
        x1: 109,
        y1: 4,
    };
    let (w, h, _) = heatmap_rgb(&image);
    assert_eq!((w, h), (110, 12));
    // Windows so far apart that the frame would be huge are refused, not allocated.
    image.display_window = Bounds {
        x0: 1 << 20,
        y0: 1 << 20,
        x1: (1 << 20) + 9,
        y1: (1 << 20) + 9,
    };
    let err = heatmap_with_legend(&image).unwrap_err().to_string();
    assert!(err.contains("more than the"), "{err}");
}

#[test]
fn bench_runs_end_to_end_and_reports_four_tables() {
    // GL columns with the default sort and tidy stages on purpose (what a user gets; only the
    // tables' shape is asserted, which holds wherever they run).
    let dir = tempfile::tempdir().unwrap();
    let e2e = scene::write_scene("planes", 32, 18, 2, 2, &dir.path().join("e2e")).unwrap();
    let config = BenchConfig {
        width: 32,
        height: 18,
        repeats: 1,
        copy_bytes: 1 << 20,
        e2e_inputs: e2e,
        deepmerge_exe: Some(env!("CARGO_BIN_EXE_deepmerge").into()),
        work_dir: Some(dir.path().join("work")),
        progress: false,
        // Table 5 (k-way against the chain) is checked in tests/bench_gl.rs.
        kway_inputs: Vec::new(),
        ..BenchConfig::default()
    };
    let report = bench::run(&config).unwrap();
    assert_eq!(report.tables.len(), 4);
    for (t, table) in report.tables.iter().enumerate() {
        assert!(table.title.starts_with(&format!("Table {}", t + 1)));
        assert_eq!(table.rows.len(), SCENE_NAMES.len());
        assert_eq!(table.columns[0], "cpu");
        assert_eq!(table.unit, if t == 3 { Unit::MiB } else { Unit::Millis });
        for row in &table.rows {
            assert_eq!(row.cells.len(), table.columns.len());
            // The CPU engine ran, and every number is at least as good as the row's worst.
            assert!(matches!(row.cells[0], Cell::Value(v) if v > 0.0), "{row:?}");
            let mut ratios = 0;
            for c in 0..row.cells.len() {
                if let Some(r) = row.ratio(c) {
                    assert!(r >= 1.0, "{}: {} ratio {r}", table.title, row.label);
                    ratios += 1;
                }
            }
            assert!(ratios >= 2, "cpu and a floor or model: {row:?}");
        }
    }
    // Time tables end with the floor; the memory table with the four layout models.
    assert!(report.tables[0]
        .columns
        .last()
        .unwrap()
        .starts_with("floor"));
    assert_eq!(
        report.tables[3]
            .columns
            .iter()
            .filter(|c| c.ends_with("(model)"))
            .count(),
        4
    );
    let e2e = report.end_to_end.as_ref().expect("end-to-end table");
    assert!(matches!(e2e.rows[0].cells[0], Cell::Value(_)), "{e2e:?}");
    let text = report.to_text();
    let markdown = report.to_markdown();
    for t in 1..=4 {
        assert!(text.contains(&format!("Table {t}:")));
        assert!(markdown.contains(&format!("**Table {t}:")));
    }
    assert!(text.contains("host:"));
    assert!(markdown.contains("| scene | cpu |"));
}

#[test]
fn bench_says_when_the_peer_is_missing() {
    let config = BenchConfig {
        scenes: vec!["atrium".into()],
        width: 16,
        height: 9,
        repeats: 1,
        copy_bytes: 1 << 20,
        oiiotool: PeerSetting::Path("/nonexistent/oiiotool".into()),
        progress: false,
        kway_inputs: Vec::new(),
        ..BenchConfig::default()
    };
    let report = bench::run(&config).unwrap();
    let table = &report.tables[0];
    let column = table
        .columns
        .iter()
        .position(|c| c == "oiiotool e2e")
        .expect("peer column");
    assert_eq!(
        table.rows[0].cells[column],
        Cell::Text("not installed".into())
    );
    assert!(report.header.iter().any(|l| l == "oiiotool: not installed"));
}

#[test]
fn heatmap_of_a_flat_file_points_to_deepen() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("hm.png");
    let flat =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/openexr-images/composited.exr");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_deepmerge"))
        .args([
            "heatmap",
            flat.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("composited.exr") && err.contains("deepmerge deepen"),
        "{err}"
    );
    assert!(!err.contains("oiiotool"), "{err}");
    assert!(!out.exists());
}
