//! `points` (`deepmerge::ops::points`, the `points` command): the PLY file holds one point per
//! sample kept; on the Arnold render `deepalpha.exr` and the RenderMan cut `input-crop.deep.exr`
//! (both carry `worldToCamera` and `worldToNDC`), every point projected back through
//! `worldToNDC` lands in its pixel, at its pixel's centre, and lies at its sample's depth
//! through `worldToCamera` (the projection is written here, from the matrices in the header);
//! without a camera the points are pixel coordinates and one stderr line says so; the streamed
//! file does not depend on the band height; bad arguments are one-line errors.

mod common;

use std::path::Path;

use common::{data, read, run};
use deepmerge::deep::DeepImage;
use deepmerge::exr::read_parts_info;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A PLY file's points: (x, y, z, [r, g, b, a]), read by the PLY format's rules.
fn read_ply(path: &Path) -> Vec<([f32; 3], [u8; 4])> {
    let bytes = std::fs::read(path).unwrap();
    let end = bytes
        .windows(11)
        .position(|w| w == b"end_header\n")
        .expect("a PLY header")
        + 11;
    let header = std::str::from_utf8(&bytes[..end]).unwrap();
    let mut lines = header.lines();
    assert_eq!(lines.next(), Some("ply"));
    assert_eq!(lines.next(), Some("format binary_little_endian 1.0"));
    let count: usize = header
        .lines()
        .find_map(|l| l.strip_prefix("element vertex "))
        .expect("a vertex element")
        .trim()
        .parse()
        .unwrap();
    let properties: Vec<&str> = header
        .lines()
        .filter_map(|l| l.strip_prefix("property "))
        .collect();
    assert_eq!(
        properties,
        [
            "float x",
            "float y",
            "float z",
            "uchar red",
            "uchar green",
            "uchar blue",
            "uchar alpha"
        ]
    );
    let body = &bytes[end..];
    assert_eq!(body.len(), count * 16, "the vertex count matches the data");
    body.chunks_exact(16)
        .map(|p| {
            let f = |k: usize| f32::from_le_bytes(p[4 * k..4 * k + 4].try_into().unwrap());
            ([f(0), f(1), f(2)], [p[12], p[13], p[14], p[15]])
        })
        .collect()
}

/// The header's matrix attribute `name` (m44f, row-major).
fn matrix(path: &Path, name: &str) -> [[f64; 4]; 4] {
    let parts = read_parts_info(path).unwrap();
    let attribute = parts[0]
        .attributes
        .iter()
        .find(|a| a.name == name)
        .unwrap_or_else(|| panic!("{} has no {name}", path.display()));
    assert_eq!(attribute.kind, "m44f");
    let mut m = [[0.0; 4]; 4];
    for (k, c) in attribute.value.chunks_exact(4).enumerate() {
        m[k / 4][k % 4] = f32::from_le_bytes(c.try_into().unwrap()) as f64;
    }
    m
}

/// `p M` (row vector, w = 1).
fn times(p: [f32; 3], m: &[[f64; 4]; 4]) -> [f64; 4] {
    let p = [p[0] as f64, p[1] as f64, p[2] as f64, 1.0];
    let mut out = [0.0; 4];
    for (j, o) in out.iter_mut().enumerate() {
        *o = (0..4).map(|i| p[i] * m[i][j]).sum();
    }
    out
}

/// Each sample's pixel and depth, in row order then sample order, with its alpha.
fn samples(image: &DeepImage) -> Vec<(i32, i32, f32, f32)> {
    let z = image.channel_index("Z").unwrap();
    let a = image.channel_index("A").unwrap();
    let mut out = Vec::new();
    for p in 0..image.pixel_count() {
        let (x, y) = image.data_window.coords_of(p);
        for i in image.range(p) {
            out.push((x, y, image.planes[z].get_f32(i), image.planes[a].get_f32(i)));
        }
    }
    out
}

/// Check every point of `ply` against the camera of `input` over `frame` (x0, y0, w, h).
fn check_projection(input: &Path, ply: &Path, frame: (f64, f64, f64, f64), min_alpha: f32) {
    let image = read(input, 0);
    let kept: Vec<_> = samples(&image)
        .into_iter()
        .filter(|s| s.3 >= min_alpha)
        .collect();
    let points = read_ply(ply);
    assert_eq!(
        points.len(),
        kept.len(),
        "{}: a point per sample kept",
        input.display()
    );
    assert!(!kept.is_empty());
    let (w2c, w2n) = (matrix(input, "worldToCamera"), matrix(input, "worldToNDC"));
    let (x0, y0, w, h) = frame;
    let mut worst_centre = 0.0f64;
    let mut worst_depth = 0.0f64;
    for ((position, _), &(x, y, z, _)) in points.iter().zip(&kept) {
        let ndc = times(*position, &w2n);
        assert!(ndc[3] > 0.0, "the point is in front of the camera");
        let (nx, ny) = (ndc[0] / ndc[3], ndc[1] / ndc[3]);
        // NDC [-1, 1] over the frame, y up; pixel y down.
        let px = x0 + (nx + 1.0) / 2.0 * w;
        let py = y0 + (1.0 - ny) / 2.0 * h;
        assert_eq!(
            (px.floor() as i32, py.floor() as i32),
            (x, y),
            "{}: the point of a sample of pixel ({x}, {y}) projects to ({px}, {py})",
            input.display()
        );
        worst_centre =
            worst_centre.max((px - x as f64 - 0.5).abs().max((py - y as f64 - 0.5).abs()));
        let camera = times(*position, &w2c);
        let depth_error = (camera[2].abs() - z as f64).abs() / (z as f64).abs().max(1.0);
        worst_depth = worst_depth.max(depth_error);
    }
    assert!(
        worst_centre < 1e-2,
        "{}: off the pixel centres by {worst_centre}",
        input.display()
    );
    assert!(
        worst_depth < 1e-5,
        "{}: depth off by {worst_depth}",
        input.display()
    );
    eprintln!(
        "{}: {} points; worst distance from the pixel centre {worst_centre:.1e} px, worst \
         relative depth error {worst_depth:.1e}",
        input.display(),
        points.len()
    );
}

#[test]
fn points_project_back_into_their_pixels_through_the_headers_camera() {
    let dir = tempfile::tempdir().unwrap();
    // Arnold: the frame is the display window.
    let arnold = data("oiio/deepalpha.exr");
    let ply = dir.path().join("arnold.ply");
    let (ok, _, err) = run(&["points", s(&arnold), "-o", s(&ply)]);
    assert!(ok, "{err}");
    assert!(
        err.is_empty(),
        "a file with a camera is placed silently: {err}"
    );
    check_projection(&arnold, &ply, (0.0, 0.0, 160.0, 120.0), 0.0);
    // A threshold at the median alpha keeps about half the samples.
    let mut alphas: Vec<f32> = samples(&read(&arnold, 0)).iter().map(|s| s.3).collect();
    alphas.sort_by(f32::total_cmp);
    let median = alphas[alphas.len() / 2];
    let kept = dir.path().join("kept.ply");
    let threshold = median.to_string();
    let (ok, _, err) = run(&[
        "points",
        s(&arnold),
        "-o",
        s(&kept),
        "--min-alpha",
        &threshold,
    ]);
    assert!(ok, "{err}");
    check_projection(&arnold, &kept, (0.0, 0.0, 160.0, 120.0), median);

    // RenderMan, cut 32x32 at (525, 355) out of a 1280x720 render by oiiotool: the frame is
    // that render's display window in the cut's pixels, and without it a line says so.
    let cut = data("oiio/input-crop.deep.exr");
    let ply = dir.path().join("cut.ply");
    let (ok, _, err) = run(&[
        "points",
        s(&cut),
        "-o",
        s(&ply),
        "--frame=-525,-355,754,364",
    ]);
    assert!(ok, "{err}");
    assert!(err.is_empty(), "{err}");
    check_projection(&cut, &ply, (-525.0, -355.0, 1280.0, 720.0), 0.0);
    let (ok, _, err) = run(&["points", s(&cut), "-o", s(&ply)]);
    assert!(ok, "{err}");
    assert!(
        err.contains("--frame") && err.trim().lines().count() == 1,
        "{err}"
    );
}

#[test]
fn without_a_camera_points_are_pixel_coordinates_and_a_line_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let balls = data("openexr-images/Balls.exr");
    let ply = dir.path().join("balls.ply");
    let (ok, _, err) = run(&["points", s(&balls), "-o", s(&ply)]);
    assert!(ok, "{err}");
    assert!(
        err.contains("no camera") && err.trim().lines().count() == 1,
        "{err}"
    );
    let image = read(&balls, 0);
    let points = read_ply(&ply);
    let kept = samples(&image);
    assert_eq!(points.len(), kept.len());
    for ((position, rgba), &(x, y, z, a)) in points.iter().zip(&kept) {
        assert_eq!(*position, [x as f32 + 0.5, y as f32 + 0.5, z]);
        assert_eq!(rgba[3], (a.clamp(0.0, 1.0) * 255.0).round() as u8);
    }
    // --camera file asks for one: refused in one line naming the file.
    let (ok, _, err) = run(&["points", s(&balls), "-o", s(&ply), "--camera", "file"]);
    assert!(
        !ok && err.contains("Balls.exr") && err.contains("no camera"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    // --camera pixels ignores a camera.
    let arnold = data("oiio/deepalpha.exr");
    let (ok, _, err) = run(&["points", s(&arnold), "-o", s(&ply), "--camera", "pixels"]);
    assert!(ok && err.is_empty(), "{err}");
    let first = read_ply(&ply)[0].0;
    let (x, y, z, _) = samples(&read(&arnold, 0))[0];
    assert_eq!(first, [x as f32 + 0.5, y as f32 + 0.5, z]);
}

#[test]
fn the_file_does_not_depend_on_the_band_height() {
    let dir = tempfile::tempdir().unwrap();
    let arnold = data("oiio/deepalpha.exr");
    let mut files = Vec::new();
    for rows in ["1", "7", "1000"] {
        let ply = dir.path().join(format!("{rows}.ply"));
        let (ok, _, err) = run(&["points", s(&arnold), "-o", s(&ply), "--band-rows", rows]);
        assert!(ok, "{err}");
        files.push(std::fs::read(&ply).unwrap());
    }
    assert!(
        files.windows(2).all(|f| f[0] == f[1]),
        "band heights change the file"
    );
}

#[test]
fn bad_arguments_are_one_line_errors_that_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let arnold = data("oiio/deepalpha.exr");
    let out = dir.path().join("o.ply");
    let cases: [(&[&str], &str, &Path); 4] = [
        (&["--min-alpha", "2"], "--min-alpha", &out),
        (&["--frame", "1,2,3"], "--frame takes", &out),
        (&[], "name it *.ply", Path::new("o.exr")),
        (&["--memory-budget", "0"], "--memory-budget", &out),
    ];
    for (args, says, output) in cases {
        let mut all = vec!["points", s(&arnold), "-o", s(output)];
        all.extend_from_slice(args);
        let (ok, _, err) = run(&all);
        assert!(!ok, "{args:?}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(!out.exists(), "{args:?} wrote a file");
    }
}

/// A PNG's size and RGBA bytes.
fn read_png(path: &Path) -> ((usize, usize), Vec<u8>) {
    let decoder = png::Decoder::new(std::fs::File::open(path).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut bytes = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut bytes).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgba);
    bytes.truncate(info.buffer_size());
    ((info.width as usize, info.height as usize), bytes)
}

#[test]
fn the_top_view_draws_every_point_where_its_position_says() {
    let dir = tempfile::tempdir().unwrap();
    let balls = data("openexr-images/Balls.exr");
    let (ply, view) = (dir.path().join("b.ply"), dir.path().join("top.png"));
    let (ok, _, err) = run(&["points", s(&balls), "-o", s(&ply), "--top-view", s(&view)]);
    assert!(ok, "{err}");
    // Without a camera: across is x, up is Z (near at the bottom), one scale, 512 at most.
    let points = read_ply(&ply);
    let (mut x0, mut x1, mut z0, mut z1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for (p, _) in &points {
        (x0, x1) = (x0.min(p[0] as f64), x1.max(p[0] as f64));
        (z0, z1) = (z0.min(p[2] as f64), z1.max(p[2] as f64));
    }
    let scale = 511.0 / (x1 - x0).max(z1 - z0);
    let size = (
        ((x1 - x0) * scale).round() as usize + 1,
        ((z1 - z0) * scale).round() as usize + 1,
    );
    let ((w, h), rgba) = read_png(&view);
    assert_eq!((w, h), size);
    // The cells points fall in are exactly the drawn ones (alpha above 0).
    let mut cells = vec![false; w * h];
    for (p, colour) in &points {
        if colour[3] == 0 {
            continue;
        }
        let u = ((p[0] as f64 - x0) * scale).round() as usize;
        let v = h - 1 - ((p[2] as f64 - z0) * scale).round() as usize;
        cells[v * w + u] = true;
    }
    let drawn: Vec<bool> = rgba.chunks_exact(4).map(|px| px[3] > 0).collect();
    let differ = drawn.iter().zip(&cells).filter(|(a, b)| a != b).count();
    // A cell whose points are all nearly transparent may round to alpha 0 in 8 bits.
    assert!(
        differ * 1000 <= cells.iter().filter(|&&c| c).count(),
        "{differ} cells differ"
    );
    assert!(cells.iter().any(|&c| c));
    // A name that is not *.png is refused before anything is written.
    let other = dir.path().join("c.ply");
    let (ok, _, err) = run(&[
        "points",
        s(&balls),
        "-o",
        s(&other),
        "--top-view",
        "top.jpg",
    ]);
    assert!(
        !ok && err.contains("name it *.png") && !other.exists(),
        "{err}"
    );
}
