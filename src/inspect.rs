//! The pixel inspector's table: one pixel's samples per input and merged, as text.
//!
//! This is the one place the table is formatted: `deepmerge info FILE --pixel X,Y` prints it
//! headless and `deepmerge view` shows it in its inspector panel and copies it to stdout, so a
//! script (or a test) can compare what the window shows with what the CLI says.
//!
//! Two modes ([`TableValues`]):
//! - **raw**: an input's samples in file order with every channel as stored; the merged
//!   section's samples in merge order after tidying (volumes split where they overlap, as the
//!   flat merge composites them), with their composited columns;
//! - **accumulated**: the same rows in merge order (an input on its own is tidied the same way),
//!   each composited column replaced by the running front-to-back "over" up to and including
//!   that row ([`crate::composite::flatten_pixel`]'s arithmetic), so the last row of the merged
//!   section is the flat merge's pixel.
//!
//! Numbers are printed with Rust's shortest round-trip form, so the text says exactly what the
//! file (or the merge) holds; `uint` channels (ids) are printed as the integers they are
//! ([`Cell::Uint`]), never through a float, so that an id can be looked up (in the file's id
//! manifest, say). The merged section shows the id channels too, after the composited columns:
//! each row's ids are those of the input sample it comes from (ids are never blended, so raw
//! and accumulated tables show the same ids; an input without that channel shows `-`).

use std::fmt::Write as _;

use crate::composite::{CompositeChannels, CompositeKind, MergePlan, PixelSamples};
use crate::deep::{ChannelRole, DeepImage, Plane};
use crate::error::Result;
use crate::vocab::Sample;

/// Raw sample values or the running composite.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TableValues {
    /// Each sample as stored (inputs) or as tidied (merged).
    #[default]
    Raw,
    /// The running front-to-back "over" of the composited columns, row by row.
    Accumulated,
}

impl TableValues {
    /// Lower-case name as the table heads print it.
    pub fn name(self) -> &'static str {
        match self {
            TableValues::Raw => "raw",
            TableValues::Accumulated => "accumulated",
        }
    }
}

/// One value of a table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Cell {
    /// A half or float channel's value (or a composited value), as f32.
    Float(f32),
    /// A `uint` channel's value, exactly.
    Uint(u32),
    /// The row's input has no such channel (merged id columns).
    Absent,
}

impl Cell {
    /// The value as f32: ids through the float they round to, absent as 0 (for plots).
    pub fn as_f32(self) -> f32 {
        match self {
            Cell::Float(v) => v,
            Cell::Uint(v) => v as f32,
            Cell::Absent => 0.0,
        }
    }

    /// The value as the table prints it: floats in Rust's shortest round-trip form (`1`,
    /// `0.25`, `1e-7`, `inf`), ids as integers, absent as `-`.
    pub fn text(self) -> String {
        match self {
            Cell::Float(v) => number(v),
            Cell::Uint(v) => v.to_string(),
            Cell::Absent => "-".into(),
        }
    }
}

/// One row of a table: which sample, its depth and one value per column.
#[derive(Clone, Debug, PartialEq)]
pub struct TableRow {
    /// The sample's index in its input's pixel (for merged rows: in the source input's pixel).
    pub index: usize,
    /// The input it comes from (0-based, command-line order).
    pub input: usize,
    /// Front depth.
    pub z: f32,
    /// Back depth (equal to `z` for a point).
    pub zback: f32,
    /// Values, one per [`PixelTable::columns`] entry.
    pub values: Vec<Cell>,
}

/// The samples of one pixel of one input (or of the merge), ready to print or to plot.
#[derive(Clone, Debug, PartialEq)]
pub struct PixelTable {
    /// What the section is about (a file and part, or "merged").
    pub title: String,
    /// Absolute pixel coordinates.
    pub pixel: (i32, i32),
    /// Raw or accumulated.
    pub mode: TableValues,
    /// Column names after index, input, Z, ZBack.
    pub columns: Vec<String>,
    /// The rows, front to back in merge order (raw inputs: file order).
    pub rows: Vec<TableRow>,
    /// Column of the main alpha (`A`), if any: what the accumulated-alpha plot follows.
    pub alpha_column: Option<usize>,
}

impl PixelTable {
    /// The table of `image`'s samples at absolute pixel (x, y), titled `title`; `input` is the
    /// number its rows carry in the input column.
    pub fn of_input(
        title: &str,
        image: &DeepImage,
        input: usize,
        (x, y): (i32, i32),
        mode: TableValues,
    ) -> Result<PixelTable> {
        match mode {
            TableValues::Raw => Ok(raw_input_table(title, image, input, (x, y))),
            TableValues::Accumulated => {
                let mut table = merged_table(title, &[image], (x, y), mode)?;
                for row in &mut table.rows {
                    row.input = input;
                }
                Ok(table)
            }
        }
    }

    /// The merge of `inputs` at absolute pixel (x, y): every input's samples in merge order,
    /// tidied where volumes overlap, with their composited columns.
    pub fn of_merge(inputs: &[&DeepImage], (x, y): (i32, i32), mode: TableValues) -> Result<Self> {
        merged_table("merged", inputs, (x, y), mode)
    }

    /// Accumulated alpha against depth, one point per row's back depth: what the inspector
    /// plots. Needs an accumulated table with an alpha column (empty otherwise).
    pub fn alpha_curve(&self) -> Vec<(f32, f32)> {
        match (self.mode, self.alpha_column) {
            (TableValues::Accumulated, Some(a)) => self
                .rows
                .iter()
                .map(|r| (r.zback, r.values[a].as_f32()))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The table as text: a head line, a column line, one line per sample.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let (x, y) = self.pixel;
        let _ = writeln!(
            out,
            "pixel ({x}, {y}) of {}: {} samples, {}",
            self.title,
            self.rows.len(),
            self.mode.name()
        );
        let mut head = format!("{:>5} {:>5} {:>12} {:>12}", "index", "input", "Z", "ZBack");
        for c in &self.columns {
            let _ = write!(head, " {c:>12}");
        }
        let _ = writeln!(out, "{}", head.trim_end());
        for r in &self.rows {
            let mut line = format!(
                "{:>5} {:>5} {:>12} {:>12}",
                r.index,
                r.input,
                number(r.z),
                number(r.zback)
            );
            for v in &r.values {
                let _ = write!(line, " {:>12}", v.text());
            }
            let _ = writeln!(out, "{line}");
        }
        out
    }
}

/// A value as the table prints it: Rust's shortest round-trip form (`1`, `0.25`, `1e-7`, `inf`).
fn number(v: f32) -> String {
    format!("{v}")
}

/// The title of an input's section: the path, and the part where the file has several.
pub fn input_title(path: &std::path::Path, part: Option<usize>) -> String {
    match part {
        Some(p) => format!("{} part {p}", path.display()),
        None => path.display().to_string(),
    }
}

/// An input's samples in file order, every channel but Z and ZBack as stored.
fn raw_input_table(title: &str, image: &DeepImage, input: usize, pixel: (i32, i32)) -> PixelTable {
    let (z, zback) = image.depth_channels();
    let shown: Vec<usize> = (0..image.channels.len())
        .filter(|&c| !matches!(image.channels[c].role, ChannelRole::Z | ChannelRole::ZBack))
        .collect();
    let mut rows = Vec::new();
    if let Some(p) = image.pixel_index(pixel.0, pixel.1) {
        for (k, i) in image.range(p).enumerate() {
            let zf = z.map_or(0.0, |c| image.planes[c].get_f32(i));
            let zb = zback.map_or(zf, |c| image.planes[c].get_f32(i));
            rows.push(TableRow {
                index: k,
                input,
                z: zf,
                zback: zb,
                values: shown.iter().map(|&c| value(&image.planes[c], i)).collect(),
            });
        }
    }
    let columns: Vec<String> = shown
        .iter()
        .map(|&c| image.channels[c].name.clone())
        .collect();
    let alpha_column = columns.iter().position(|n| n == "A");
    PixelTable {
        title: title.to_string(),
        pixel,
        mode: TableValues::Raw,
        columns,
        rows,
        alpha_column,
    }
}

/// Value `i` of a plane: uint exactly, half and float as f32.
fn value(plane: &Plane, i: usize) -> Cell {
    match plane {
        Plane::U32(v) => Cell::Uint(v[i]),
        _ => Cell::Float(plane.get_f32(i)),
    }
}

/// `inputs` merged at one pixel: samples in merge order, tidied where volumes overlap (the flat
/// merge's own per-pixel path), composited columns raw or accumulated.
fn merged_table(
    title: &str,
    inputs: &[&DeepImage],
    pixel: (i32, i32),
    mode: TableValues,
) -> Result<PixelTable> {
    let plan = MergePlan::new(inputs)?;
    let mut samples: Vec<Sample> = Vec::new();
    plan.ordered_samples(pixel.0, pixel.1, &mut samples);
    let mut tidied = PixelSamples::new(plan.composite.len());
    plan.tidy_samples(&samples, &mut tidied);
    let composite: &CompositeChannels = &plan.composite;
    // Per source input, each sample's index within its pixel (tables count from the pixel).
    let first_of = |s: &Sample| {
        let image = inputs[s.input as usize];
        image
            .pixel_index(pixel.0, pixel.1)
            .map_or(0, |p| image.range(p).start)
    };
    // The id channels of every input, first seen first, and where each input holds them.
    let mut id_names: Vec<String> = Vec::new();
    for image in inputs {
        for c in image.channels.iter().filter(|c| c.role == ChannelRole::Id) {
            if !id_names.contains(&c.name) {
                id_names.push(c.name.clone());
            }
        }
    }
    let id_planes: Vec<Vec<Option<usize>>> = inputs
        .iter()
        .map(|image| id_names.iter().map(|n| image.channel_index(n)).collect())
        .collect();
    let mut acc = vec![0.0f32; composite.len()];
    let mut rows = Vec::with_capacity(tidied.len());
    for s in 0..tidied.len() {
        let sample = tidied.samples[s];
        let row = tidied.row(s);
        let mut values: Vec<Cell> = match mode {
            TableValues::Raw => row.iter().map(|&v| Cell::Float(v)).collect(),
            TableValues::Accumulated => {
                over(&mut acc, row, composite);
                acc.iter().map(|&v| Cell::Float(v)).collect()
            }
        };
        let source = inputs[sample.input as usize];
        values.extend(id_planes[sample.input as usize].iter().map(|c| {
            c.map_or(Cell::Absent, |c| {
                value(&source.planes[c], sample.index as usize)
            })
        }));
        rows.push(TableRow {
            index: sample.index as usize - first_of(&sample),
            input: sample.input as usize,
            z: sample.z,
            zback: sample.zback,
            values,
        });
    }
    let alpha_column = composite.names.iter().position(|n| n == "A");
    let mut columns = composite.names.clone();
    columns.extend(id_names);
    Ok(PixelTable {
        title: title.to_string(),
        pixel,
        mode,
        columns,
        rows,
        alpha_column,
    })
}

/// One step of front-to-back "over", exactly as [`crate::composite::flatten_pixel`] does it
/// (colours read the alpha accumulated before this sample). Unlike the flatten it never stops
/// early: rows behind an opaque front keep the (unchanged) running value.
fn over(acc: &mut [f32], row: &[f32], channels: &CompositeChannels) {
    for (k, kind) in channels.kinds.iter().enumerate() {
        if let CompositeKind::Colour { alpha } = *kind {
            acc[k] += (1.0 - acc[alpha]) * row[k];
        }
    }
    for &a in &channels.alphas {
        acc[a] += (1.0 - acc[a]) * row[a];
    }
}

/// The whole inspector text for `inputs` (titled by `titles`) at one pixel: each input's
/// section, then, for more than one input, the merged section. Sections are separated by a
/// blank line.
pub fn pixel_report(
    titles: &[String],
    inputs: &[&DeepImage],
    pixel: (i32, i32),
    mode: TableValues,
) -> Result<String> {
    let mut sections = Vec::new();
    for (i, (title, image)) in titles.iter().zip(inputs).enumerate() {
        sections.push(PixelTable::of_input(title, image, i, pixel, mode)?.to_text());
    }
    if inputs.len() > 1 {
        sections.push(PixelTable::of_merge(inputs, pixel, mode)?.to_text());
    }
    Ok(sections.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deep::{Bounds, Channel, DeepState, SampleType};

    /// A 1x1 image with channels A, R, Z (and ZBack) holding `samples` (a, r, z, zback).
    fn pixel_image(samples: &[(f32, f32, f32, f32)]) -> DeepImage {
        let window = Bounds::from_origin_size(0, 0, 1, 1);
        let channels = vec![
            Channel::new("A", SampleType::F32),
            Channel::new("R", SampleType::F32),
            Channel::new("Z", SampleType::F32),
            Channel::new("ZBack", SampleType::F32),
        ];
        let planes = (0..4)
            .map(|k| Plane::F32(samples.iter().map(|s| [s.0, s.1, s.2, s.3][k]).collect()))
            .collect();
        DeepImage::from_counts(
            window,
            window,
            channels,
            &[samples.len() as u32],
            planes,
            DeepState::Messy,
        )
        .unwrap()
    }

    #[test]
    fn raw_rows_keep_file_order_and_accumulated_rows_follow_over() {
        let image = pixel_image(&[(0.5, 0.25, 2.0, 2.0), (0.5, 0.5, 1.0, 1.0)]);
        let raw = PixelTable::of_input("f", &image, 0, (0, 0), TableValues::Raw).unwrap();
        assert_eq!(raw.columns, vec!["A", "R"]);
        assert_eq!(raw.rows[0].z, 2.0);
        assert_eq!(
            raw.rows[0].values,
            vec![Cell::Float(0.5), Cell::Float(0.25)]
        );
        let acc = PixelTable::of_input("f", &image, 0, (0, 0), TableValues::Accumulated).unwrap();
        // Merge order puts Z = 1 first: A 0.5, R 0.5; then over the Z = 2 sample.
        assert_eq!(acc.rows[0].index, 1);
        assert_eq!(acc.rows[0].values, vec![Cell::Float(0.5), Cell::Float(0.5)]);
        assert_eq!(
            acc.rows[1].values,
            vec![Cell::Float(0.75), Cell::Float(0.625)]
        );
        assert_eq!(acc.alpha_curve(), vec![(1.0, 0.5), (2.0, 0.75)]);
        let text = acc.to_text();
        assert!(
            text.starts_with("pixel (0, 0) of f: 2 samples, accumulated\n"),
            "{text}"
        );
        assert!(
            text.lines().nth(2).unwrap().ends_with("0.5          0.5"),
            "{text}"
        );
    }

    #[test]
    fn merged_rows_are_tidied_and_end_at_the_flat_merge() {
        // A volume [0, 2) cut by the other input's point at 1: three rows, two of them halves.
        let volume = pixel_image(&[(0.75, 0.75, 0.0, 2.0)]);
        let point = pixel_image(&[(1.0, 0.1, 1.0, 1.0)]);
        let merged =
            PixelTable::of_merge(&[&volume, &point], (0, 0), TableValues::Accumulated).unwrap();
        let depths: Vec<(f32, f32, usize)> = merged
            .rows
            .iter()
            .map(|r| (r.z, r.zback, r.input))
            .collect();
        assert_eq!(depths, vec![(0.0, 1.0, 0), (1.0, 1.0, 1), (1.0, 2.0, 0)]);
        // Half of alpha .75 is .5; the opaque point makes the rest 1.
        assert!((merged.rows[0].values[0].as_f32() - 0.5).abs() < 1e-6);
        assert_eq!(merged.rows[1].values[0], Cell::Float(1.0));
        let report = pixel_report(
            &["v".into(), "p".into()],
            &[&volume, &point],
            (0, 0),
            TableValues::Raw,
        )
        .unwrap();
        assert_eq!(report.matches("pixel (0, 0) of").count(), 3, "{report}");
        // Outside the window: no rows, no error.
        let empty = PixelTable::of_input("v", &volume, 0, (5, 5), TableValues::Raw).unwrap();
        assert!(empty.rows.is_empty());
    }

    #[test]
    fn ids_print_exactly_and_the_merged_table_keeps_them() {
        // 3236172513 is not a float: through f32 it would print as 3236172500.
        let id = 3_236_172_513u32;
        let mut with_id = pixel_image(&[(0.5, 0.25, 1.0, 1.0)]);
        with_id
            .channels
            .push(Channel::new("objectId", SampleType::U32));
        with_id.planes.push(Plane::U32(vec![id]));
        let plain = pixel_image(&[(0.5, 0.5, 2.0, 2.0)]);
        let raw = PixelTable::of_input("f", &with_id, 0, (0, 0), TableValues::Raw).unwrap();
        assert_eq!(raw.rows[0].values[2], Cell::Uint(id));
        assert!(raw.to_text().contains(" 3236172513\n"), "{}", raw.to_text());
        for mode in [TableValues::Raw, TableValues::Accumulated] {
            let merged = PixelTable::of_merge(&[&with_id, &plain], (0, 0), mode).unwrap();
            assert_eq!(merged.columns, vec!["A", "R", "objectId"]);
            // Merge order: the id's sample (Z 1) first, then the input without ids.
            assert_eq!(merged.rows[0].values[2], Cell::Uint(id));
            assert_eq!(merged.rows[1].values[2], Cell::Absent);
            let text = merged.to_text();
            assert!(
                text.contains(" 3236172513\n") && text.ends_with(" -\n"),
                "{text}"
            );
            assert!(!text.contains("3236172500"), "{text}");
        }
    }
}
