//! Depth-complexity heatmaps: one colour per pixel of the display window saying how many samples
//! the pixel holds, in the paper's bins (Fig. 8): blue up to 16, green 16-64, yellow 64-128,
//! red 128-512. Beyond the paper's scale, more than 512 is magenta; empty pixels (and pixels of
//! the display window outside the data window) are black.
//!
//! Inside a bin the brightness rises with the count (from [`BIN_FLOOR`] of full brightness at the
//! bottom of the bin to full at its top), so the hue names the bin and the shade shows where in
//! it a pixel lies. The PNG (8-bit RGB) is encoded by the `png` crate: a well-kept encoder (CRC,
//! chunking, zlib) rather than one more hand-written format in this crate.

use std::path::Path;

use crate::deep::DeepImage;
use crate::error::{Error, Result};
use crate::exr::write_atomically;
use crate::info::COMPLEXITY_BINS;

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

/// RGB bytes (row-major over the display window) of `image`'s heatmap.
pub fn heatmap_rgb(image: &DeepImage) -> (usize, usize, Vec<u8>) {
    let frame = image.display_window;
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

/// Write the depth-complexity heatmap of `image` over its display window as a PNG.
pub fn write_heatmap(image: &DeepImage, path: &Path) -> Result<()> {
    // The bytes are PNG whatever the name says: a name that says otherwise is refused.
    if !crate::preview::is_png_path(path) {
        return Err(Error::Usage(format!(
            "{}: a heatmap is a PNG; name it *.png",
            path.display()
        )));
    }
    let (width, height, rgb) = heatmap_rgb(image);
    if width == 0 || height == 0 {
        return Err(Error::file(path, "the display window is empty"));
    }
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
