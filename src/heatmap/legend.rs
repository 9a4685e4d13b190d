//! The legend drawn under a heatmap: the viewer's legend (each bin's colour and range, black for
//! empty, darker lower in a bin) and the file's display and data windows, one line each.
//!
//! Text is rasterised with `ab_glyph` from the Hack font that egui bundles
//! (`epaint_default_fonts`): both already build for the viewer, so the heatmap needs no font of
//! its own and no hand-written rasteriser.

use ab_glyph::{point, Font, FontRef, PxScale, ScaleFont};

use super::{BIN_COLOURS, BIN_FLOOR};
use crate::deep::{Bounds, DeepImage};
use crate::info::COMPLEXITY_BINS;

/// The legend's background: dark grey, so that black ("empty") shows as a colour of its own.
pub const LEGEND_BACKGROUND: [u8; 3] = [48, 48, 48];
/// The legend's text colour.
const TEXT: [u8; 3] = [235, 235, 235];
/// Text size in pixels.
const FONT_PX: f32 = 13.0;
/// Height of one legend line.
pub const LINE_HEIGHT: usize = 17;
/// Margin around the legend and between a swatch and its label.
const MARGIN: usize = 6;
/// A swatch's size: a bin's shades from its bottom (left) to its top (right).
pub const SWATCH_WIDTH: usize = 28;
const SWATCH_HEIGHT: usize = 12;

/// RGB pixels being drawn on.
pub struct Canvas<'a> {
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// Row-major RGB bytes.
    pub rgb: &'a mut [u8],
}

impl Canvas<'_> {
    /// Set pixel (x, y); outside the canvas nothing happens.
    pub fn set(&mut self, x: usize, y: usize, colour: [u8; 3]) {
        if x < self.width && y < self.height {
            let at = (y * self.width + x) * 3;
            self.rgb[at..at + 3].copy_from_slice(&colour);
        }
    }

    /// Blend `colour` over pixel (x, y) with coverage `cover` (0 to 1).
    fn blend(&mut self, x: usize, y: usize, colour: [u8; 3], cover: f32) {
        if x < self.width && y < self.height {
            let at = (y * self.width + x) * 3;
            for (k, c) in colour.iter().enumerate() {
                let under = self.rgb[at + k] as f32;
                self.rgb[at + k] =
                    (under + (*c as f32 - under) * cover.clamp(0.0, 1.0)).round() as u8;
            }
        }
    }
}

/// One line of the legend: an optional swatch, then text.
enum Line {
    /// A bin's swatch (its index in [`COMPLEXITY_BINS`]) and its range.
    Bin(usize),
    /// A flat swatch of one colour and what it means.
    Swatch([u8; 3], &'static str),
    /// Text alone.
    Text(String),
}

/// The legend of one heatmap.
pub struct Legend {
    lines: Vec<Line>,
    font: FontRef<'static>,
}

fn window_text(what: &str, w: Bounds) -> String {
    format!("{what} ({}, {})-({}, {})", w.x0, w.y0, w.x1, w.y1)
}

impl Legend {
    /// The legend for `image`'s heatmap.
    pub fn for_image(image: &DeepImage) -> Legend {
        let mut lines = vec![Line::Text("samples per pixel:".into())];
        lines.extend((0..COMPLEXITY_BINS.len()).map(Line::Bin));
        lines.push(Line::Swatch([0, 0, 0], "empty"));
        lines.push(Line::Text("darker: lower in the bin".into()));
        lines.push(Line::Text(window_text(
            "display window",
            image.display_window,
        )));
        if image.data_window.area() == 0 {
            lines.push(Line::Text("data window empty".into()));
        } else {
            lines.push(Line::Text(window_text("data window", image.data_window)));
        }
        Legend {
            lines,
            font: FontRef::try_from_slice(epaint_default_fonts::HACK_REGULAR)
                .expect("egui's bundled Hack font parses"),
        }
    }

    fn text_of(line: &Line) -> &str {
        match line {
            Line::Bin(bin) => COMPLEXITY_BINS[*bin].0,
            Line::Swatch(_, text) => text,
            Line::Text(text) => text,
        }
    }

    fn indent(line: &Line) -> usize {
        match line {
            Line::Text(_) => 0,
            _ => SWATCH_WIDTH + MARGIN,
        }
    }

    fn text_width(&self, text: &str) -> usize {
        let scaled = self.font.as_scaled(PxScale::from(FONT_PX));
        text.chars()
            .map(|c| scaled.h_advance(scaled.glyph_id(c)))
            .sum::<f32>()
            .ceil() as usize
    }

    /// The width the legend needs, margins included.
    pub fn width(&self) -> usize {
        let widest = self
            .lines
            .iter()
            .map(|l| Self::indent(l) + self.text_width(Self::text_of(l)))
            .max()
            .unwrap_or(0);
        widest + 2 * MARGIN
    }

    /// The height the legend needs, margins included.
    pub fn height(&self) -> usize {
        self.lines.len() * LINE_HEIGHT + 2 * MARGIN
    }

    /// Where line `i`'s swatch starts (left, top) when the legend is drawn from row `top`.
    pub fn swatch_at(i: usize, top: usize) -> (usize, usize) {
        (
            MARGIN,
            top + MARGIN + i * LINE_HEIGHT + (LINE_HEIGHT - SWATCH_HEIGHT) / 2,
        )
    }

    /// Draw the legend on `canvas` from row `top` (its background is already there).
    pub fn draw(&self, canvas: &mut Canvas, top: usize) {
        let scaled = self.font.as_scaled(PxScale::from(FONT_PX));
        for (i, line) in self.lines.iter().enumerate() {
            let (sx, sy) = Self::swatch_at(i, top);
            let shade = |x: usize| -> [u8; 3] {
                match line {
                    Line::Bin(bin) => {
                        let t = x as f32 / (SWATCH_WIDTH - 1) as f32;
                        let k = BIN_FLOOR + (1.0 - BIN_FLOOR) * t;
                        BIN_COLOURS[*bin].map(|c| (c as f32 * k).round() as u8)
                    }
                    Line::Swatch(colour, _) => *colour,
                    Line::Text(_) => unreachable!("text has no swatch"),
                }
            };
            if !matches!(line, Line::Text(_)) {
                for dy in 0..SWATCH_HEIGHT {
                    for dx in 0..SWATCH_WIDTH {
                        canvas.set(sx + dx, sy + dy, shade(dx));
                    }
                }
            }
            let baseline = (top + MARGIN + i * LINE_HEIGHT) as f32 + scaled.ascent();
            let mut x = (MARGIN + Self::indent(line)) as f32;
            for c in Self::text_of(line).chars() {
                let id = scaled.glyph_id(c);
                let glyph = id.with_scale_and_position(FONT_PX, point(x, baseline));
                x += scaled.h_advance(id);
                if let Some(outline) = self.font.outline_glyph(glyph) {
                    let bounds = outline.px_bounds();
                    outline.draw(|gx, gy, cover| {
                        let px = bounds.min.x + gx as f32;
                        let py = bounds.min.y + gy as f32;
                        if px >= 0.0 && py >= 0.0 {
                            canvas.blend(px as usize, py as usize, TEXT, cover);
                        }
                    });
                }
            }
        }
    }
}
