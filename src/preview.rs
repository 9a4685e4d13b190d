//! PNG previews of flat output: an output named `*.png` is written as an 8-bit sRGB PNG of the
//! flat composite instead of an EXR, as oiiotool picks the format from the extension.
//!
//! The PNG covers the output's data window (PNG has no windows; overscan is kept). Each pixel is
//! RGBA, 8 bits per channel, non-premultiplied as PNG requires: colour is the composite's
//! premultiplied colour divided by its alpha (0 where the alpha is 0), clamped to 0..=1 and
//! sRGB-encoded with the transform the viewer also uses ([`srgb`]); alpha is stored
//! linearly. A composite without R, G and B shows its alpha as grey; one without A is opaque.
//! The file carries the `sRGB` chunk. Rows are compressed as the bands arrive (the `png`
//! crate's stream writer), so a preview streams in the memory budget like any other output, and
//! it is written through a temporary file and renamed like every output ([`AtomicFile`]).

use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::deep::{Bounds, FlatImage};
use crate::error::{Error, ErrorKind, Result};
use crate::exr::{check_rows, span_message, AtomicFile};

/// True when `path` is named `*.png` (any case).
pub fn is_png_path(path: &Path) -> bool {
    extension(path).as_deref() == Some("png")
}

fn extension(path: &Path) -> Option<String> {
    path.extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
}

/// Refuse an output path that names a directory (an existing one, or any path ending in a
/// slash): an output is one file, written beside itself and renamed into place.
pub fn check_output_is_a_file(path: &Path) -> Result<()> {
    let text = path.as_os_str().to_string_lossy();
    if text.ends_with(std::path::MAIN_SEPARATOR) || text.ends_with('/') || path.is_dir() {
        return Err(Error::Usage(format!(
            "{}: the output must be a file, not a directory",
            path.display()
        )));
    }
    Ok(())
}

/// Refuse an output name the format cannot be told from: deep output must be `*.exr`, flat
/// output `*.exr` or `*.png` (a PNG preview). Any case is accepted. A directory is refused as
/// one first, whatever its name ([`check_output_is_a_file`]).
pub fn check_output_name(path: &Path, deep: bool) -> Result<()> {
    check_output_is_a_file(path)?;
    match (extension(path).as_deref(), deep) {
        (Some("exr"), _) | (Some("png"), false) => Ok(()),
        (Some("png"), true) => Err(Error::Usage(format!(
            "{}: deep output is written as EXR; name it *.exr (a PNG preview is flat output)",
            path.display()
        ))),
        _ => Err(Error::Usage(format!(
            "{}: the output format comes from the extension: .exr{}",
            path.display(),
            if deep {
                " for deep output"
            } else {
                " (EXR) or .png (an 8-bit sRGB preview)"
            }
        ))),
    }
}

/// The 8-bit RGBA of one flat pixel from its premultiplied linear values (see the module docs).
pub fn preview_rgba(colour: Option<[f32; 3]>, alpha: Option<f32>) -> [u8; 4] {
    let a = alpha.unwrap_or(1.0);
    let premultiplied = colour.unwrap_or([a; 3]);
    let straight = |c: f32| if a > 0.0 { c / a } else { 0.0 };
    [
        to_byte(srgb(straight(premultiplied[0]))),
        to_byte(srgb(straight(premultiplied[1]))),
        to_byte(srgb(straight(premultiplied[2]))),
        to_byte(a),
    ]
}

type Stream = png::StreamWriter<'static, CheckedFile>;

/// The file under the PNG encoder, keeping the first write error: the encoder writes its last
/// chunk (IEND) and its buffer is flushed when they are dropped, where no error can be returned.
struct CheckedFile {
    file: BufWriter<std::fs::File>,
    error: Arc<Mutex<Option<std::io::Error>>>,
}

impl CheckedFile {
    fn keep(&self, e: &std::io::Error) {
        let mut first = self.error.lock().expect("error slot");
        if first.is_none() {
            *first = Some(std::io::Error::new(e.kind(), e.to_string()));
        }
    }
}

impl Write for CheckedFile {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.file.write(bytes).inspect_err(|e| self.keep(e))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush().inspect_err(|e| self.keep(e))
    }
}

impl Drop for CheckedFile {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

/// A PNG preview written band by band (see the module docs).
pub struct PngBandWriter {
    output: AtomicFile,
    stream: Option<Stream>,
    error: Arc<Mutex<Option<std::io::Error>>>,
    window: Bounds,
    next_row: i32,
}

impl PngBandWriter {
    /// Start a preview of `window` at `path`.
    pub fn create(path: &Path, window: Bounds) -> Result<Self> {
        let (width, height) = (window.width(), window.height());
        if width == 0 || height == 0 || width > u32::MAX as usize || height > u32::MAX as usize {
            return Err(Error::file(
                path,
                format!("cannot write a PNG of the data window {window}"),
            ));
        }
        let output = AtomicFile::create(path)?;
        let error = Arc::new(Mutex::new(None));
        let file = CheckedFile {
            file: BufWriter::new(output.file().try_clone().map_err(|e| output.error(e))?),
            error: error.clone(),
        };
        let mut encoder = png::Encoder::new(file, width as u32, height as u32);
        encoder.set_color(png::ColorType::Rgba);
        encoder.set_depth(png::BitDepth::Eight);
        encoder.set_source_srgb(png::SrgbRenderingIntent::Perceptual);
        let stream = encoder
            .write_header()
            .and_then(|w| w.into_stream_writer())
            .map_err(|e| output.error(png_error(e)))?;
        Ok(PngBandWriter {
            output,
            stream: Some(stream),
            error,
            window,
            next_row: window.y0,
        })
    }

    /// Write the rows of `band` (the window's full width, after the previous band's rows).
    pub fn write_band(&mut self, band: &FlatImage) -> Result<()> {
        let (x0, x1) = (band.data_window.x0, band.data_window.x1);
        let (y0, y1) = (band.data_window.y0, band.data_window.y1);
        check_rows(self.window, self.next_row, y0, y1)
            .and_then(|()| match (x0, x1) == (self.window.x0, self.window.x1) {
                true => Ok(()),
                false => Err(span_message(x0, x1, self.window)),
            })
            .map_err(|m| Error::of_kind(ErrorKind::Usage, m).in_file(self.output.path()))?;
        self.next_row = band.data_window.y1 + 1;
        let (r, g, b) = (band.channel("R"), band.channel("G"), band.channel("B"));
        let alpha = band.channel("A");
        let colour = |i: usize| -> Option<[f32; 3]> {
            if r.is_none() && g.is_none() && b.is_none() {
                return None;
            }
            let at = |c: Option<&[f32]>| c.map_or(0.0, |v| v[i]);
            Some([at(r), at(g), at(b)])
        };
        let pixels = band.data_window.area();
        let mut bytes = Vec::with_capacity(pixels * 4);
        for i in 0..pixels {
            bytes.extend(preview_rgba(colour(i), alpha.map(|a| a[i])));
        }
        let stream = self.stream.as_mut().expect("open until finished");
        stream.write_all(&bytes).map_err(|e| self.output.error(e))
    }

    /// Finish the PNG (its last chunk, the buffer flushed) and rename it into place.
    pub fn finish(mut self) -> Result<()> {
        let stream = self.stream.take().expect("open until finished");
        stream
            .finish()
            .map_err(|e| self.output.error(png_error(e)))?;
        if let Some(e) = self.error.lock().expect("error slot").take() {
            return Err(self.output.error(e));
        }
        self.output.commit()
    }
}

fn png_error(e: png::EncodingError) -> std::io::Error {
    match e {
        png::EncodingError::IoError(e) => e,
        other => std::io::Error::other(other.to_string()),
    }
}

/// The sRGB encoding of a linear value, clamped to 0..=1.
pub fn srgb(linear: f32) -> f32 {
    let v = linear.clamp(0.0, 1.0);
    if v <= 0.0031308 {
        12.92 * v
    } else {
        1.055 * v.powf(1.0 / 2.4) - 0.055
    }
}

/// A 0..=1 value as the framebuffer stores it in 8 bits.
pub fn to_byte(v: f32) -> u8 {
    (v.clamp(0.0, 1.0) * 255.0).round() as u8
}
