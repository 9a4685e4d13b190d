//! Depth-complexity heatmaps: one colour per pixel saying how many samples the pixel holds, in
//! the paper's bins (Fig. 8): blue up to 16, green 16-64, yellow 64-128, red 128-512. Beyond the
//! paper's scale, more than 512 is magenta; empty pixels (and pixels outside the data window)
//! are black. The picture covers the display window and the data window together, so samples
//! in the overscan are drawn; below it a legend ([`legend`]) gives the bins' colours and the
//! windows, as the viewer's panel does, so that a heatmap read alone explains itself.
//!
//! Inside a bin the brightness rises with the count (from [`BIN_FLOOR`] of full brightness at the
//! bottom of the bin to full at its top), so the hue names the bin and the shade shows where in
//! it a pixel lies. The PNG (8-bit RGB) is encoded by the `png` crate: a well-kept encoder (CRC,
//! chunking, zlib) rather than one more hand-written format in this crate.

use std::path::Path;

use crate::deep::{Bounds, DeepImage};
use crate::error::{Error, Result};
use crate::exr::write_atomically;
use crate::info::COMPLEXITY_BINS;

pub mod legend;

pub use legend::{Canvas, Legend, LEGEND_BACKGROUND};

/// Brightness at the bottom of a bin, as a fraction of full.
pub const BIN_FLOOR: f32 = 0.45;

/// Full-brightness colour of each [`COMPLEXITY_BINS`] bin: blue, green, yellow, red, magenta.
pub const BIN_COLOURS: [[u8; 3]; 5] = [
    [40, 90, 255],
    [0, 220, 0],
    [255, 230, 0],
    [255, 0, 0],
    [255, 0, 255],
];

/// The colour of a pixel holding `count` samples.
pub fn complexity_colour(count: usize) -> [u8; 3] {
    if count == 0 {
        return [0, 0, 0];
    }
    let bin = COMPLEXITY_BINS
        .iter()
        .position(|&(_, hi)| count <= hi)
        .unwrap_or(COMPLEXITY_BINS.len() - 1);
    let lo = if bin == 0 {
        0
    } else {
        COMPLEXITY_BINS[bin - 1].1
    };
    // The open last bin shades over 512..=2048 and stays bright beyond.
    let hi = if bin == COMPLEXITY_BINS.len() - 1 {
        4 * lo
    } else {
        COMPLEXITY_BINS[bin].1
    };
    let t = ((count - lo) as f32 / (hi - lo) as f32).min(1.0);
    let k = BIN_FLOOR + (1.0 - BIN_FLOOR) * t;
    BIN_COLOURS[bin].map(|c| (c as f32 * k).round() as u8)
}

/// The most pixels a heatmap draws: the frame (data and display windows together) of a file
/// whose windows lie far apart is refused rather than allocated.
pub const MAX_HEATMAP_PIXELS: usize = 1 << 26;

/// The rectangle a heatmap covers: the display window and the data window together, so that
/// samples in the overscan (outside the display window) are drawn too.
pub fn heatmap_frame(image: &DeepImage) -> Bounds {
    if image.data_window.area() == 0 {
        image.display_window
    } else {
        image.display_window.union(&image.data_window)
    }
}

/// RGB bytes (row-major over [`heatmap_frame`]) of `image`'s heatmap, without the legend.
pub fn heatmap_rgb(image: &DeepImage) -> (usize, usize, Vec<u8>) {
    let frame = heatmap_frame(image);
    let (width, height) = (frame.width(), frame.height());
    let mut rgb = Vec::with_capacity(width * height * 3);
    for row in 0..height {
        let y = frame.y0 + row as i32;
        for col in 0..width {
            let x = frame.x0 + col as i32;
            let count = image.pixel_index(x, y).map_or(0, |p| image.count(p));
            rgb.extend(complexity_colour(count));
        }
    }
    (width, height, rgb)
}

/// The heatmap of `image` with its legend below it ([`crate::heatmap::legend`]): RGB bytes of
/// the whole picture, `width` by `height`. The heatmap keeps its pixels at the top left; the
/// picture is widened (dark grey) where the legend is wider than the frame.
pub fn heatmap_with_legend(image: &DeepImage) -> Result<(usize, usize, Vec<u8>)> {
    let frame = heatmap_frame(image);
    if frame.area() > MAX_HEATMAP_PIXELS {
        return Err(Error::format(format!(
            "the heatmap would be {} x {} pixels (display window ({}, {})-({}, {}) and data \
             window ({}, {})-({}, {}) together), more than the {MAX_HEATMAP_PIXELS} a heatmap draws",
            frame.width(),
            frame.height(),
            image.display_window.x0,
            image.display_window.y0,
            image.display_window.x1,
            image.display_window.y1,
            image.data_window.x0,
            image.data_window.y0,
            image.data_window.x1,
            image.data_window.y1,
        )));
    }
    let (map_width, map_height, map) = heatmap_rgb(image);
    let legend = Legend::for_image(image);
    let width = map_width.max(legend.width());
    let height = map_height + legend.height();
    let mut rgb = vec![0u8; width * height * 3];
    for (row, line) in map.chunks_exact(map_width * 3).enumerate() {
        rgb[row * width * 3..row * width * 3 + line.len()].copy_from_slice(line);
    }
    let mut canvas = Canvas {
        width,
        height,
        rgb: &mut rgb,
    };
    // Dark grey beside a narrow heatmap and under it, so black ("empty") reads as a colour.
    for y in 0..height {
        let from = if y < map_height { map_width } else { 0 };
        for x in from..width {
            canvas.set(x, y, LEGEND_BACKGROUND);
        }
    }
    legend.draw(&mut canvas, map_height);
    Ok((width, height, rgb))
}

/// Write the depth-complexity heatmap of `image` over its display and data windows, with its
/// legend, as a PNG.
pub fn write_heatmap(image: &DeepImage, path: &Path) -> Result<()> {
    // The bytes are PNG whatever the name says: a name that says otherwise is refused.
    if !crate::preview::is_png_path(path) {
        return Err(Error::Usage(format!(
            "{}: a heatmap is a PNG; name it *.png",
            path.display()
        )));
    }
    let frame = heatmap_frame(image);
    if frame.area() == 0 {
        return Err(Error::file(path, "the display window is empty"));
    }
    let (width, height, rgb) = heatmap_with_legend(image)?;
    let png = encode_png_rgb(width, height, &rgb);
    write_atomically(path, |w| {
        w.write_all(&png).map_err(|e| Error::write(path, e))
    })
}

/// Encode 8-bit RGB pixels as a PNG: signature, IHDR, IDAT, IEND, rows unfiltered (heatmaps are
/// flat areas that deflate well as they are, and unfiltered rows keep the file easy to check).
pub fn encode_png_rgb(width: usize, height: usize, rgb: &[u8]) -> Vec<u8> {
    assert_eq!(
        rgb.len(),
        width * height * 3,
        "RGB size and dimensions disagree"
    );
    let mut png = Vec::new();
    let mut encoder = png::Encoder::new(&mut png, width as u32, height as u32);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_filter(png::FilterType::NoFilter);
    encoder.set_adaptive_filter(png::AdaptiveFilterType::NonAdaptive);
    // Writing into a Vec cannot fail for I/O reasons, and the size was checked above.
    let mut writer = encoder.write_header().expect("PNG header into memory");
    writer
        .write_image_data(rgb)
        .expect("PNG data of the declared size into memory");
    writer.finish().expect("PNG end into memory");
    png
}
