//! `reformat`: change a deep image's resolution and data window together (Nuke's
//! DeepReformat; Gaffer's deep Resize with its Accurate and ForceNearest modes).
//!
//! Geometry. The display window keeps its origin (x0, y0) and takes the new size W' x H'
//! (`--size`, or the old size times `--scale` rounded, at least 1). The scale per axis is
//! sx = W'/W, sy = H'/H, and an input position u (pixel x covers [x, x + 1)) maps to
//! x0 + (u − x0)·sx, so the display window maps onto the display window and overscan (data
//! outside it) keeps its proportion. The output data window is the smallest holding the
//! mapped input data window. Output pixel X covers the input interval
//! [x0 + (X − x0)/sx, x0 + (X + 1 − x0)/sx), and likewise in y: its **footprint**.
//!
//! Filters:
//! - **`nearest`**: output pixel (X, Y) takes the samples of the input pixel holding its
//!   footprint's centre, unchanged and in order (none outside the input's data window).
//! - **`box`** (Gaffer's Accurate): output pixel (X, Y) gathers the input pixels its footprint
//!   covers, each with the weight w_k of its share of the footprint's area (the weights of a
//!   footprint inside the data window sum to 1; pixels outside it are empty). Scaling each
//!   sample's alpha by w_k and merging the lists would not commute with flattening: samples of
//!   different source pixels would occlude each other. What commutes is this: every source
//!   pixel is put in merge order and its overlapping volumes tidied, as the flatten does
//!   ([`crate::composite::tidy_pixel`]); the depths at which any source sample starts or ends
//!   are the **boundaries** d_0 < d_1 < ...; each source volume is split at the boundaries
//!   inside it with the tidy's rule ([`crate::composite::tidy::split_row`]). Then at every
//!   boundary the output's accumulated alpha and colour are the weighted sums Σ w_k A_k(d),
//!   Σ w_k C_k(d) of the sources' accumulated ("over") values at that depth. The output has
//!   one point sample at d_i where some source has points there, and one volume sample on
//!   [d_i, d_{i+1}) where some source has a volume piece there; each is the difference of the
//!   accumulated values across it, un-composited: alpha ΔA / (1 − A) and colour ΔC / (1 − A)
//!   with A the output's accumulated alpha in front of it (per channel alpha for R, G, B where
//!   RA, GA, BA exist). Samples that add nothing (ΔA and ΔC all 0, hidden or empty) are left
//!   out. So `flatten(reformat(D)) = resize(flatten(D))` with the box resize of the same
//!   weights, to the rounding of the stored types (`tests/reformat.rs` checks 1e-5 on float
//!   data). The output pixels are tidy (sorted, no overlaps, no coincident points). Channels
//!   that are not composited (uint ids) come from the source sample that adds the most alpha
//!   to the output sample (blending ids would make ids no input holds).
//!
//! Cost. A footprint holding more than `max_gather` samples is refused in one line naming the
//! output pixel (Gaffer's ErrorIfSlow): the box filter's time and memory grow with the samples
//! gathered times the boundaries they make. `--filter nearest` is the cheap alternative.
//!
//! Streaming. Output rows need input rows that may straddle the band boundaries the planner
//! picks; [`run_reformat`] keeps the last input rows a later output row still needs between
//! bands and moves each band's end to an input row that completes an output row, so every band
//! writes at least one row.

use std::ops::RangeInclusive;
use std::path::Path;

use crate::composite::tidy::{piece_fraction, split_row};
use crate::composite::{
    needs_tidy, read_sample, sort_samples, tidy_pixel, CompositeChannels, CompositeKind,
    PixelSamples,
};
use crate::deep::builder::{build_band, RowBuilder};
use crate::deep::{Bounds, ChannelRole, DeepImage, DeepState, Plane};
use crate::error::{Error, Result};
use crate::exr::ChunkSource;
use crate::stream::plan::OutputShape;
use crate::stream::{plan_bands, stream_bands, BandOutput, OutputFormat, StreamOptions};

use super::registry::{
    NodeInputs, NodeWork, OpSpec, Operation, OptionSpec, Produces, Ran, ValueKind, DEEP_INPUT,
};
use super::{finish_band, DeepOp, OpOutput, OpWindows};
use crate::request::OutputRequest;
use std::path::PathBuf;
use std::sync::Arc;

/// The largest output side a reformat makes: beyond it a typo in `--scale` would ask for an
/// image no one can hold.
pub const MAX_OUTPUT_SIDE: u64 = 1 << 18;

/// The default of `--max-gather`: samples one output pixel of the box filter may gather. Its
/// working set is about 100 bytes per sample gathered per worker thread (the boundaries, and
/// per event a value per composited channel), so the default keeps it to a few MiB a thread;
/// a reduction by 8 of a render with 1000 samples per pixel gathers 64000.
pub const DEFAULT_MAX_GATHER: u64 = 1 << 16;

/// How output pixels are made from input pixels (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Filter {
    /// One input pixel's samples, unchanged.
    Nearest,
    /// The footprint's pixels, gathered so that flattening commutes.
    #[default]
    Box,
}

impl std::str::FromStr for Filter {
    type Err = Error;
    fn from_str(text: &str) -> Result<Self> {
        match text {
            "nearest" => Ok(Filter::Nearest),
            "box" => Ok(Filter::Box),
            _ => Err(Error::Usage(format!(
                "--filter is nearest or box, not {text:?}"
            ))),
        }
    }
}

/// The filters' names, as the CLI lists them.
pub const FILTER_NAMES: &[&str] = &["box", "nearest"];

/// The new size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum NewSize {
    /// The display window's new width and height.
    Pixels(u32, u32),
    /// The display window's size times this factor (> 0), rounded, at least 1.
    Scale(f64),
}

/// A change of resolution (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reformat {
    /// The new size.
    pub size: NewSize,
    /// The filter.
    pub filter: Filter,
    /// Most samples one output pixel may gather (box filter).
    pub max_gather: u64,
}

impl Reformat {
    /// A reformat from `--size WxH` or `--scale S` (exactly one), the filter and the gather
    /// limit; each bad value refused in one line.
    pub fn new(
        size: Option<&str>,
        scale: Option<f64>,
        filter: Filter,
        max_gather: u64,
    ) -> Result<Self> {
        let size = match (size, scale) {
            (Some(_), Some(_)) => {
                return Err(Error::Usage("give --size or --scale, not both".into()))
            }
            (None, None) => {
                return Err(Error::Usage(
                    "reformat needs --size WxH or --scale S".into(),
                ))
            }
            (Some(text), None) => {
                let bad = || {
                    Error::Usage(format!(
                        "--size takes WIDTHxHEIGHT in pixels, both at least 1, not {text:?}"
                    ))
                };
                let (w, h) = text.split_once(['x', 'X']).ok_or_else(bad)?;
                let w: u32 = w.trim().parse().map_err(|_| bad())?;
                let h: u32 = h.trim().parse().map_err(|_| bad())?;
                if w == 0 || h == 0 {
                    return Err(bad());
                }
                if w as u64 > MAX_OUTPUT_SIDE || h as u64 > MAX_OUTPUT_SIDE {
                    return Err(Error::Usage(format!(
                        "--size {text}: a side over {MAX_OUTPUT_SIDE} pixels is refused"
                    )));
                }
                NewSize::Pixels(w, h)
            }
            (None, Some(s)) => {
                if !(s > 0.0 && s.is_finite()) {
                    return Err(Error::Usage(format!(
                        "--scale must be a positive finite factor, not {s}"
                    )));
                }
                NewSize::Scale(s)
            }
        };
        if max_gather == 0 {
            return Err(Error::Usage("--max-gather must be at least 1".into()));
        }
        Ok(Reformat {
            size,
            filter,
            max_gather,
        })
    }

    /// The output display window's size for an input display window.
    fn new_size(&self, display: Bounds) -> Result<(u64, u64)> {
        let (w, h) = (display.width() as u64, display.height() as u64);
        let (nw, nh) = match self.size {
            NewSize::Pixels(a, b) => (a as u64, b as u64),
            NewSize::Scale(s) => {
                let side = |v: u64| ((v as f64 * s).round().max(1.0)).min(u64::MAX as f64) as u64;
                (side(w), side(h))
            }
        };
        if nw > MAX_OUTPUT_SIDE || nh > MAX_OUTPUT_SIDE {
            return Err(Error::Usage(format!(
                "the reformat of the display window {display} would be {nw} x {nh} pixels; a \
                 side over {MAX_OUTPUT_SIDE} is refused"
            )));
        }
        Ok((nw, nh))
    }

    /// The geometry of the reformat of an image with these windows.
    pub fn geometry(&self, data: Bounds, display: Bounds) -> Result<Geometry> {
        let (nw, nh) = self.new_size(display)?;
        let axis_x = Axis {
            origin: display.x0 as i64,
            from: display.width() as i64,
            to: nw as i64,
        };
        let axis_y = Axis {
            origin: display.y0 as i64,
            from: display.height() as i64,
            to: nh as i64,
        };
        let (x0, x1) = axis_x.output_span(data.x0, data.x1)?;
        let (y0, y1) = axis_y.output_span(data.y0, data.y1)?;
        let out_display =
            Bounds::from_origin_size(display.x0, display.y0, nw as usize, nh as usize);
        Ok(Geometry {
            x: axis_x,
            y: axis_y,
            input: data,
            data: Bounds { x0, y0, x1, y1 },
            display: out_display,
        })
    }
}

/// One axis of the mapping: `from` input pixels of the display window become `to` output
/// pixels, about `origin`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Axis {
    origin: i64,
    from: i64,
    to: i64,
}

impl Axis {
    /// The input interval output pixel `o` covers, in input coordinates.
    pub fn footprint(&self, o: i32) -> (f64, f64) {
        let rel = o as i64 - self.origin;
        let at = |r: i64| self.origin as f64 + (r as f64 * self.from as f64) / self.to as f64;
        (at(rel), at(rel + 1))
    }

    /// The input pixels output pixel `o` covers, each with its share of the footprint (the
    /// shares of pixels inside `lo..=hi` only).
    fn weights(&self, o: i32, lo: i32, hi: i32, out: &mut Vec<(i32, f64)>) {
        out.clear();
        let (a, b) = self.footprint(o);
        let scale = self.to as f64 / self.from as f64;
        let first = (a.floor() as i64).max(lo as i64);
        let last = ((b.ceil() as i64) - 1).min(hi as i64);
        for i in first..=last {
            let overlap = b.min(i as f64 + 1.0) - a.max(i as f64);
            if overlap > 0.0 {
                out.push((i as i32, overlap * scale));
            }
        }
    }

    /// The input pixel holding output pixel `o`'s footprint centre.
    fn nearest(&self, o: i32) -> i64 {
        let rel = 2 * (o as i64 - self.origin) + 1;
        // origin + rel * from / (2 to), floored, in integers.
        self.origin + (rel * self.from).div_euclid(2 * self.to)
    }

    /// The output pixels whose footprints meet input pixels `a..=b`.
    fn output_span(&self, a: i32, b: i32) -> Result<(i32, i32)> {
        let map = |u: i64| (u - self.origin) as f64 * self.to as f64 / self.from as f64;
        let lo = self.origin + map(a as i64).floor() as i64;
        let hi = self.origin + map(b as i64 + 1).ceil() as i64 - 1;
        let fits = |v: i64| i32::try_from(v).ok();
        match (fits(lo), fits(hi)) {
            (Some(lo), Some(hi)) => Ok((lo, hi.max(lo))),
            _ => Err(Error::Usage(
                "the reformatted data window leaves the 32-bit pixel range".into(),
            )),
        }
    }

    /// The last input pixel output pixel `o` reads.
    pub fn last_read(&self, o: i32, filter: Filter) -> i64 {
        match filter {
            Filter::Nearest => self.nearest(o),
            Filter::Box => self.footprint(o).1.ceil() as i64 - 1,
        }
    }

    /// The first input pixel output pixel `o` reads.
    pub fn first_read(&self, o: i32, filter: Filter) -> i64 {
        match filter {
            Filter::Nearest => self.nearest(o),
            Filter::Box => self.footprint(o).0.floor() as i64,
        }
    }
}

/// Where a reformat's output lies and how its pixels map to the input's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// The x mapping.
    pub x: Axis,
    /// The y mapping.
    pub y: Axis,
    /// The input's data window.
    pub input: Bounds,
    /// The output's data window.
    pub data: Bounds,
    /// The output's display window.
    pub display: Bounds,
}

impl Reformat {
    /// The output rows `rows` made from `image`, which holds every input row they read (the
    /// input's data window's columns).
    pub fn output_rows(
        &self,
        image: &DeepImage,
        geometry: &Geometry,
        rows: RangeInclusive<i32>,
    ) -> Result<DeepImage> {
        let window = Bounds {
            y0: *rows.start(),
            y1: *rows.end(),
            ..geometry.data
        };
        let input = image.data_window;
        let display = geometry.display;
        match self.filter {
            Filter::Nearest => {
                let fill = |y: i32, row: &mut RowBuilder| {
                    let iy = geometry.y.nearest(y);
                    for x in window.x0..=window.x1 {
                        let ix = geometry.x.nearest(x);
                        let pixel = i32::try_from(ix)
                            .ok()
                            .zip(i32::try_from(iy).ok())
                            .and_then(|(ix, iy)| input.index_of(ix, iy));
                        if let Some(p) = pixel {
                            for i in image.range(p) {
                                row.copy(image, i);
                            }
                        }
                        row.end_pixel();
                    }
                };
                Ok(build_band(
                    &image.channels,
                    window,
                    display,
                    image.state,
                    fill,
                ))
            }
            Filter::Box => {
                self.check_gather(image, geometry, window)?;
                let gather = BoxGather::new(image);
                let fill = |y: i32, row: &mut RowBuilder| {
                    let mut wy = Vec::new();
                    let mut wx = Vec::new();
                    let mut sources = Vec::new();
                    geometry.y.weights(y, input.y0, input.y1, &mut wy);
                    for x in window.x0..=window.x1 {
                        geometry.x.weights(x, input.x0, input.x1, &mut wx);
                        sources.clear();
                        for &(iy, fy) in &wy {
                            for &(ix, fx) in &wx {
                                let p = input.index_of(ix, iy).expect("clipped to the input");
                                if image.count(p) > 0 {
                                    sources.push((p, fx * fy));
                                }
                            }
                        }
                        gather.pixel(&sources, row);
                        row.end_pixel();
                    }
                };
                // Every output pixel is tidy by construction; the writer checks what it holds.
                Ok(build_band(
                    &image.channels,
                    window,
                    display,
                    DeepState::Tidy,
                    fill,
                ))
            }
        }
    }

    /// Refuse a footprint in `window` that gathers more than `max_gather` samples.
    fn check_gather(&self, image: &DeepImage, geometry: &Geometry, window: Bounds) -> Result<()> {
        let input = image.data_window;
        let mut wy = Vec::new();
        let mut wx = Vec::new();
        for y in window.y0..=window.y1 {
            geometry.y.weights(y, input.y0, input.y1, &mut wy);
            for x in window.x0..=window.x1 {
                geometry.x.weights(x, input.x0, input.x1, &mut wx);
                let mut total = 0u64;
                for &(iy, _) in &wy {
                    for &(ix, _) in &wx {
                        let p = input.index_of(ix, iy).expect("clipped to the input");
                        total += image.count(p) as u64;
                    }
                }
                if total > self.max_gather {
                    return Err(Error::Usage(format!(
                        "the box filter's output pixel ({x}, {y}) would gather {total} samples \
                         from {} input pixels, over --max-gather {}; use --filter nearest, a \
                         smaller reduction, or a larger --max-gather",
                        wx.len() * wy.len(),
                        self.max_gather
                    )));
                }
            }
        }
        Ok(())
    }
}

/// What the box filter needs of the image it gathers from.
struct BoxGather<'a> {
    image: &'a DeepImage,
    composite: CompositeChannels,
    columns: Vec<Option<usize>>,
    /// Output channel c's composited column, if any.
    column_of: Vec<Option<usize>>,
    z: Option<usize>,
    zback: Option<usize>,
}

impl<'a> BoxGather<'a> {
    fn new(image: &'a DeepImage) -> Self {
        let composite = CompositeChannels::of(&[image]);
        let columns = composite.sources_in(image);
        let column_of = image
            .channels
            .iter()
            .map(|c| {
                if matches!(
                    c.role,
                    ChannelRole::Z | ChannelRole::ZBack | ChannelRole::Id
                ) {
                    None
                } else {
                    composite.names.iter().position(|n| n == &c.name)
                }
            })
            .collect();
        let (z, zback) = image.depth_channels();
        BoxGather {
            image,
            composite,
            columns,
            column_of,
            z,
            zback,
        }
    }

    /// One source pixel's samples in merge order, tidied where volumes overlap (as the
    /// flatten does).
    fn source(&self, p: usize) -> PixelSamples {
        let mut samples: Vec<_> = self
            .image
            .range(p)
            .map(|i| read_sample(self.image, (self.z, self.zback), 0, i))
            .collect();
        sort_samples(&mut samples);
        let mut pixel = PixelSamples::new(self.composite.len());
        pixel.gather(&samples, &[self.image], std::slice::from_ref(&self.columns));
        if needs_tidy(&pixel.samples) {
            tidy_pixel(&mut pixel, &self.composite);
        }
        pixel
    }

    /// Push the output samples of the pixel gathering `sources` (pixel, weight).
    fn pixel(&self, sources: &[(usize, f64)], row: &mut RowBuilder) {
        if sources.is_empty() {
            return;
        }
        let width = self.composite.len();
        let pixels: Vec<PixelSamples> = sources.iter().map(|&(p, _)| self.source(p)).collect();
        let mut bounds: Vec<f32> = Vec::new();
        for pixel in &pixels {
            for s in &pixel.samples {
                bounds.push(s.z);
                if s.is_volume() {
                    bounds.push(s.zback);
                }
            }
        }
        bounds.sort_unstable_by(f32::total_cmp);
        bounds.dedup_by(|a, b| a == b);
        let at = |d: f32| bounds.partition_point(|&b| b < d);
        // Event 2i: the points at bounds[i]; event 2i + 1: the slab [bounds[i], bounds[i+1]).
        let events = 2 * bounds.len();
        let mut delta = vec![0.0f64; events * width];
        let mut present = vec![false; events];
        // The source sample adding the most alpha to each event: (alpha added, sample index).
        let mut dominant: Vec<(f64, u64)> = vec![(-1.0, 0); events];
        let mut transmit = vec![1.0f64; width];
        let mut piece = vec![0.0f64; width];
        for (pixel, &(_, weight)) in pixels.iter().zip(sources) {
            transmit.iter_mut().for_each(|t| *t = 1.0);
            let mut add = |event: usize, values: &[f64], index: u64, transmit: &mut [f64]| {
                let d = &mut delta[event * width..(event + 1) * width];
                let mut alpha_added = 0.0;
                for (k, kind) in self.composite.kinds.iter().enumerate() {
                    if let CompositeKind::Colour { alpha } = *kind {
                        d[k] += weight * transmit[alpha] * values[k];
                    }
                }
                for &a in &self.composite.alphas {
                    let added = weight * transmit[a] * values[a];
                    d[a] += added;
                    alpha_added += added;
                    transmit[a] *= 1.0 - values[a];
                }
                present[event] = true;
                if alpha_added > dominant[event].0 {
                    dominant[event] = (alpha_added, index);
                }
            };
            for (s, sample) in pixel.samples.iter().enumerate() {
                let row_values = pixel.row(s);
                let i = at(sample.z);
                if !sample.is_volume() {
                    for (v, &r) in piece.iter_mut().zip(row_values) {
                        *v = r as f64;
                    }
                    add(2 * i, &piece, sample.index, &mut transmit);
                    continue;
                }
                let end = at(sample.zback);
                let length = sample.zback as f64 - sample.z as f64;
                for b in i..end {
                    if end == i + 1 {
                        for (v, &r) in piece.iter_mut().zip(row_values) {
                            *v = r as f64;
                        }
                    } else {
                        let fraction =
                            piece_fraction(bounds[b] as f64, bounds[b + 1] as f64, length);
                        for (v, r) in
                            piece
                                .iter_mut()
                                .zip(split_row(row_values, fraction, &self.composite))
                        {
                            *v = r;
                        }
                    }
                    add(2 * b + 1, &piece, sample.index, &mut transmit);
                }
            }
        }
        // The output's transmittance per column in front of each event: 1 less what the
        // events in front took (the footprint's share outside the data window, or over empty
        // pixels, is transparent).
        let mut front = vec![1.0f64; width];
        let mut values = vec![0.0f64; width];
        for event in 0..events {
            if !present[event] {
                continue;
            }
            let d = &delta[event * width..(event + 1) * width];
            if d.iter().all(|&v| v == 0.0) {
                continue;
            }
            let denominator = |alpha: usize| front[alpha];
            let mut visible = true;
            for (k, kind) in self.composite.kinds.iter().enumerate() {
                let alpha = match *kind {
                    CompositeKind::Alpha => k,
                    CompositeKind::Colour { alpha } => alpha,
                };
                let t = denominator(alpha);
                values[k] = if t > 0.0 { d[k] / t } else { 0.0 };
                if matches!(kind, CompositeKind::Alpha) {
                    values[k] = values[k].clamp(0.0, 1.0);
                }
            }
            if self.composite.alphas.iter().all(|&a| front[a] <= 0.0)
                && !self.composite.alphas.is_empty()
            {
                visible = false;
            }
            for &a in &self.composite.alphas {
                front[a] -= d[a];
            }
            if !visible {
                continue;
            }
            let i = event / 2;
            let (z, zback) = if event % 2 == 0 {
                (bounds[i], bounds[i])
            } else {
                (bounds[i], bounds[i + 1])
            };
            let index = dominant[event].1 as usize;
            row.push_changed(self.image, index, |c| {
                if Some(c) == self.z {
                    Some(z as f64)
                } else if Some(c) == self.zback {
                    Some(zback as f64)
                } else {
                    self.column_of[c].map(|k| values[k])
                }
            });
        }
    }
}

impl DeepOp for Reformat {
    fn windows(&self, data: Bounds, display: Bounds) -> Result<OpWindows> {
        let geometry = self.geometry(data, display)?;
        Ok(OpWindows {
            read: data,
            data: geometry.data,
            display: geometry.display,
        })
    }

    /// The whole reformat of `band` when it holds the whole input (the streamed run is
    /// [`run_reformat`], which keeps rows between bands).
    fn apply(&self, band: &DeepImage, windows: &OpWindows) -> Result<DeepImage> {
        let geometry = self.geometry(band.data_window, band.display_window)?;
        debug_assert_eq!(geometry.data, windows.data);
        self.output_rows(band, &geometry, geometry.data.y0..=geometry.data.y1)
    }

    /// The input rows the footprints of output rows `y0..=y1` cover (the geometry was
    /// checked when the node was planned).
    fn rows_read(
        &self,
        input_display: Bounds,
        windows: &OpWindows,
        y0: i32,
        y1: i32,
    ) -> (i32, i32) {
        match self.geometry(windows.read, input_display) {
            Ok(g) => {
                let row = |v: i64| v.clamp(i32::MIN as i64, i32::MAX as i64) as i32;
                (
                    row(g.y.first_read(y0, self.filter)),
                    row(g.y.last_read(y1, self.filter)),
                )
            }
            Err(_) => (y0, y1),
        }
    }

    fn scales_rows(&self) -> bool {
        true
    }

    /// Output rows `rows` from `band`, which holds the input rows they read: the rows the
    /// command's own bands give ([`Reformat::output_rows`]).
    fn apply_rows(
        &self,
        band: &DeepImage,
        windows: &OpWindows,
        rows: RangeInclusive<i32>,
    ) -> Result<DeepImage> {
        let geometry = self.geometry(windows.read, band.display_window)?;
        self.output_rows(band, &geometry, rows)
    }
}

/// `a` followed by `b` (the rows after `a`'s, with the same channels and columns).
fn join_rows(a: DeepImage, b: &DeepImage) -> Result<DeepImage> {
    if a.data_window.height() == 0 || a.data_window.y1 < a.data_window.y0 {
        return Ok(b.clone());
    }
    if b.data_window.y1 < b.data_window.y0 {
        return Ok(a);
    }
    let mut counts = a.counts();
    counts.extend(b.counts());
    let planes = a
        .planes
        .into_iter()
        .zip(&b.planes)
        .map(|(pa, pb)| match (pa, pb) {
            (Plane::U32(mut x), Plane::U32(y)) => {
                x.extend_from_slice(y);
                Plane::U32(x)
            }
            (Plane::F16(mut x), Plane::F16(y)) => {
                x.extend_from_slice(y);
                Plane::F16(x)
            }
            (Plane::F32(mut x), Plane::F32(y)) => {
                x.extend_from_slice(y);
                Plane::F32(x)
            }
            _ => unreachable!("bands of one file have one channel list"),
        })
        .collect();
    DeepImage::from_counts(
        b.display_window,
        Bounds {
            y0: a.data_window.y0,
            ..b.data_window
        },
        a.channels,
        &counts,
        planes,
        b.state,
    )
}

/// Refuse an enlargement whose output for one input row alone (the smallest band) would take
/// more than a band's share of the budget: the output rows it makes, each the output's width,
/// with the row's samples copied into every output pixel that gathers them.
fn check_row_output(
    reformat: &Reformat,
    geometry: &Geometry,
    source: &ChunkSource,
    options: &StreamOptions,
) -> Result<()> {
    let per_axis = |axis: &Axis| (axis.to as f64 / axis.from as f64).ceil() as u64 + 1;
    let (copies_x, rows) = (per_axis(&geometry.x), per_axis(&geometry.y));
    let width = geometry.data.width() as u64;
    let sample_bytes = source.sample_bytes() + crate::composite::DEEP_SAMPLE_BYTES;
    let densest = source.row_samples.iter().copied().max().unwrap_or(0);
    let copies = match reformat.filter {
        Filter::Nearest => copies_x * rows,
        // A box sample may become a point and a volume piece at each boundary it shares.
        Filter::Box => 2 * copies_x * rows,
    };
    let needed = rows
        .saturating_mul(width)
        .saturating_mul(crate::composite::DEEP_PIXEL_BYTES)
        .saturating_add(densest.saturating_mul(copies).saturating_mul(sample_bytes));
    let share = options.budget / crate::exr::BANDS_IN_FLIGHT;
    if needed > share {
        return Err(Error::over_budget(
            format_args!(
                "the reformat's output of one input row ({rows} rows of {width} pixels, its \
                 densest row's {densest} samples copied into them)"
            ),
            needed.saturating_mul(crate::exr::BANDS_IN_FLIGHT),
            options.budget,
        ));
    }
    Ok(())
}

/// Run `reformat` on the deep part `request.part` of `input`, writing `output` as `request`
/// says, streamed in bands (see the module docs).
pub fn run_reformat(
    reformat: &Reformat,
    input: &Path,
    output: &Path,
    request: OpOutput,
) -> Result<()> {
    let options = request.stream_options(output)?;
    let inputs = [input.to_path_buf()];
    crate::exr::check_output_is_not_an_input(output, &inputs)?;
    let mut source = ChunkSource::open(input, &options.part, options.budget)?;
    source.count_rows(options.budget)?;
    let geometry = reformat
        .geometry(source.window, source.display_window)
        .map_err(|e| match e {
            Error::Usage(message) => Error::Usage(format!("{}: {message}", input.display())),
            other => other.in_file(input),
        })?;
    let head = source.no_rows(source.window.y0);
    let composite = CompositeChannels::of(&[&head]);
    if matches!(
        options.merge.output,
        crate::composite::OutputKind::Flat { .. }
    ) && composite.is_empty()
    {
        return Err(Error::file(
            input,
            "holds no colour or alpha channel, so a flat composite has nothing to show",
        ));
    }
    let shape = OutputShape {
        deep_value_bytes: source.sample_bytes(),
        columns: composite.len() as u64,
        ids: head
            .channels
            .iter()
            .filter(|c| c.role == ChannelRole::Id)
            .count() as u64,
    };
    check_row_output(reformat, &geometry, &source, &options).map_err(|e| e.in_file(input))?;
    // An enlargement makes more output than input per row: the rows are planned in a budget
    // shrunk by the area factor, so that a band's output fits the share its input had.
    let area = (geometry.display.area() as f64 / source.display_window.area().max(1) as f64)
        .max(1.0)
        .ceil() as u64;
    let planning = StreamOptions {
        budget: options.budget / area,
        ..options.clone()
    };
    let sources = vec![source];
    let planned =
        plan_bands(&sources, geometry.input, &shape, &planning).map_err(|e| e.in_file(input))?;
    // Output row Y is complete once input row need(Y) is read.
    let input_window = geometry.input;
    let need = |y: i32| -> i32 {
        let last = geometry.y.last_read(y, reformat.filter);
        last.clamp(input_window.y0 as i64, input_window.y1 as i64) as i32
    };
    let out_rows = geometry.data.y0..=geometry.data.y1;
    // Move each band's end to the next input row that completes an output row.
    let mut bands = Vec::new();
    let mut start = input_window.y0;
    let mut next_out = geometry.data.y0;
    for band in planned {
        let end = *band.end();
        let mut completes = false;
        while next_out <= geometry.data.y1 && need(next_out) <= end {
            next_out += 1;
            completes = true;
        }
        if completes {
            bands.push(start..=end);
            start = end + 1;
        } else if end == input_window.y1 {
            // The last rows complete no output row (a nearest reduction reads none of them):
            // they join the band before, so that no band writes nothing.
            match bands.pop() {
                Some(previous) => bands.push(*previous.start()..=end),
                None => bands.push(start..=end),
            }
        }
    }
    let (deep_write, flat_write) =
        options.write_options_from(&sources[0].attributes, &[&sources[0].all_channels]);
    let format = match options.merge.output {
        crate::composite::OutputKind::Deep => OutputFormat::Deep(&deep_write),
        crate::composite::OutputKind::Flat { .. } => OutputFormat::flat_for(output, &flat_write),
    };
    let target = BandOutput {
        path: output,
        window: geometry.data,
        format,
        empty_rows: None,
    };
    let mut held: Option<DeepImage> = None;
    let mut next_row = *out_rows.start();
    let last_input = input_window.y1;
    stream_bands(sources, bands, &target, None, &mut |band, images| {
        let image = images.into_iter().next().expect("one source");
        let joined = match held.take() {
            Some(rows) => join_rows(rows, &image)?,
            None => image,
        };
        let end = *band.end();
        let mut last = next_row;
        while last <= geometry.data.y1 && (need(last) <= end || end >= last_input) {
            last += 1;
        }
        let rows = next_row..=last - 1;
        let out = reformat.output_rows(&joined, &geometry, rows)?;
        next_row = last;
        // Keep the input rows the next output row still reads.
        if next_row <= geometry.data.y1 {
            let first = geometry
                .y
                .first_read(next_row, reformat.filter)
                .clamp(input_window.y0 as i64, input_window.y1 as i64 + 1)
                as i32;
            if first <= joined.data_window.y1 {
                held = Some(joined.cropped(Bounds {
                    y0: first.max(joined.data_window.y0),
                    ..joined.data_window
                }));
            }
        }
        finish_band(out, &options)
    })
    .map_err(|e| e.in_file(input).in_merge(&[input]))
}

/// `reformat` in the table of operations ([`super::registry`]).
pub const SPEC: OpSpec = OpSpec {
    name: "reformat",
    python: "reformat",
    help: "Change the resolution (--size WxH or --scale S): --filter box gathers each footprint \
           so that flattening commutes with resizing; --filter nearest copies one pixel's \
           samples",
    doc: "Change the resolution of ``input`` and write ``out``, as ``deepmerge reformat``: \
          ``size`` is ``(width, height)`` or ``scale`` a factor (exactly one); ``filter`` is \
          ``\"box\"`` (the footprint's pixels gathered so that flattening commutes with \
          resizing) or ``\"nearest\"``; ``max_gather`` bounds the samples one output pixel \
          gathers. Other options as ``deep_slice``.",
    inputs: DEEP_INPUT,
    options: &[
        OptionSpec {
            name: "size",
            kind: ValueKind::Numbers { sep: "x", count: 2 },
            value_name: "WxH",
            help: "The new display window size, WIDTHxHEIGHT (the data window follows, overscan \
                   in proportion)",
            positional: true,
            either: Some("scale"),
            ..OptionSpec::NEW
        },
        OptionSpec {
            name: "scale",
            kind: ValueKind::F64,
            value_name: "S",
            help: "Scale the display window by S (> 0); sides are rounded, at least 1",
            positional: true,
            hyphen_values: true,
            ..OptionSpec::NEW
        },
        OptionSpec {
            name: "filter",
            kind: ValueKind::Name(FILTER_NAMES),
            default: Some("box"),
            value_name: "FILTER",
            help: "box: gather each footprint's pixels so that flattening commutes with \
                   resizing; nearest: each output pixel takes one input pixel's samples \
                   unchanged",
            ..OptionSpec::NEW
        },
        OptionSpec {
            name: "max_gather",
            kind: ValueKind::Count,
            default: Some("65536"),
            value_name: "N",
            help: "The box filter refuses an output pixel that would gather more samples than \
                   this",
            ..OptionSpec::NEW
        },
    ],
    produces: Produces::Image,
    comp: true,
    build: |v, _| {
        let filter: Filter = v.text("filter").unwrap_or("box").parse()?;
        let max_gather = v.count("max_gather").unwrap_or(DEFAULT_MAX_GATHER);
        let reformat = Reformat::new(v.text("size"), v.number("scale"), filter, max_gather)?;
        Ok(Arc::new(reformat))
    },
};

impl Operation for Reformat {
    fn run(&self, inputs: &[PathBuf], output: &Path, request: OutputRequest) -> Result<Ran> {
        run_reformat(self, &inputs[0], output, request)?;
        Ok(Ran::Image)
    }

    /// A graph's node: each band's output rows from the input rows their footprints cover
    /// ([`DeepOp::rows_read`]), which the graph's reader keeps between bands.
    fn node(&self, _: &NodeInputs) -> Result<NodeWork> {
        Ok(NodeWork::Band {
            op: Box::new(*self),
            dy: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(x0: i32, y0: i32, x1: i32, y1: i32) -> Bounds {
        Bounds { x0, y0, x1, y1 }
    }

    #[test]
    fn sizes_and_scales_parse_and_bad_ones_are_refused() {
        let r = Reformat::new(Some("64x32"), None, Filter::Box, 10).unwrap();
        assert_eq!(r.size, NewSize::Pixels(64, 32));
        for bad in ["0x10", "10x0", "10", "ax3", "-1x4"] {
            assert!(matches!(
                Reformat::new(Some(bad), None, Filter::Box, 10),
                Err(Error::Usage(_))
            ));
        }
        for s in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(Reformat::new(None, Some(s), Filter::Box, 10).is_err());
        }
        assert!(Reformat::new(None, None, Filter::Box, 10).is_err());
        assert!(Reformat::new(Some("2x2"), Some(2.0), Filter::Box, 10).is_err());
        assert!(Reformat::new(None, Some(1e9), Filter::Box, 10)
            .unwrap()
            .geometry(b(0, 0, 9, 9), b(0, 0, 9, 9))
            .is_err());
    }

    #[test]
    fn the_display_window_follows_and_overscan_keeps_its_proportion() {
        let r = Reformat::new(None, Some(0.5), Filter::Box, 10).unwrap();
        let g = r.geometry(b(-10, -4, 109, 53), b(0, 0, 99, 49)).unwrap();
        assert_eq!(g.display, b(0, 0, 49, 24));
        assert_eq!(g.data, b(-5, -2, 54, 26));
        // Footprints tile the input: output pixel 3 covers [6, 8).
        assert_eq!(g.x.footprint(3), (6.0, 8.0));
        let mut w = Vec::new();
        g.x.weights(3, -10, 109, &mut w);
        assert_eq!(w, vec![(6, 0.5), (7, 0.5)]);
        // A third: output pixel 1 of 3 over 4 input pixels covers [4/3, 8/3).
        let third = Reformat::new(Some("3x3"), None, Filter::Box, 10).unwrap();
        let g = third.geometry(b(0, 0, 3, 3), b(0, 0, 3, 3)).unwrap();
        g.x.weights(1, 0, 3, &mut w);
        let total: f64 = w.iter().map(|p| p.1).sum();
        assert_eq!(w.len(), 2);
        assert!((total - 1.0).abs() < 1e-12);
        assert_eq!(g.x.nearest(0), 0);
        assert_eq!(g.x.nearest(2), 3);
    }
}
