//! `deepmerge info`: what a file holds, per part, with sample statistics for deep parts; with
//! `--pixel`, one pixel's samples as the viewer's inspector lists them ([`crate::inspect`]).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::deep::DeepImage;
use crate::error::{Error, Result};
use crate::exr::{read_deep, read_parts_info, PartSelector, ReadOptions};
use crate::inspect::{input_title, PixelTable, TableValues};

/// Depth-complexity bins (inclusive upper bounds) as the paper draws them; the last is open.
pub const COMPLEXITY_BINS: [(&str, usize); 5] = [
    ("<=16", 16),
    ("16-64", 64),
    ("64-128", 128),
    ("128-512", 512),
    (">512", usize::MAX),
];

/// Sample statistics of a deep image.
#[derive(Clone, Debug, PartialEq)]
pub struct SampleStats {
    /// All samples.
    pub total: usize,
    /// Most samples in one pixel.
    pub max: usize,
    /// Mean samples per pixel of the data window.
    pub mean: f64,
    /// Pixels with no samples.
    pub empty: usize,
    /// Pixels per [`COMPLEXITY_BINS`] bin (empty pixels included in the first).
    pub histogram: [usize; 5],
}

/// Statistics of `image`.
pub fn sample_stats(image: &DeepImage) -> SampleStats {
    let mut histogram = [0usize; 5];
    let mut empty = 0;
    for p in 0..image.pixel_count() {
        let n = image.count(p);
        empty += usize::from(n == 0);
        let bin = COMPLEXITY_BINS
            .iter()
            .position(|&(_, hi)| n <= hi)
            .unwrap_or(4);
        histogram[bin] += 1;
    }
    SampleStats {
        total: image.sample_count(),
        max: image.max_count(),
        mean: image.sample_count() as f64 / image.pixel_count().max(1) as f64,
        empty,
        histogram,
    }
}

/// The report `deepmerge info FILE` prints.
pub fn describe_file(path: &Path, max_memory: u64) -> Result<String> {
    let parts = read_parts_info(path)?;
    let mut out = String::new();
    let _ = writeln!(out, "{}: {} part(s)", path.display(), parts.len());
    for part in &parts {
        let kind = match (part.deep, part.tiles) {
            (true, Some(_)) => "deep tiled",
            (true, None) => "deep scanline",
            (false, Some(_)) => "flat tiled",
            (false, None) => "flat scanline",
        };
        let _ = writeln!(
            out,
            "  part {}{}: {kind}",
            part.index,
            part.name
                .as_ref()
                .map(|n| format!(" \"{n}\""))
                .unwrap_or_default()
        );
        if let Some((w, h)) = part.tiles {
            let _ = writeln!(out, "    tiles: {w}x{h}");
        }
        let _ = writeln!(out, "    display window: {}", part.display_window);
        let _ = writeln!(out, "    data window: {}", part.data_window);
        let channels: Vec<String> = part
            .channels
            .iter()
            .map(|c| format!("{} ({})", c.name, c.sample_type.name()))
            .collect();
        let _ = writeln!(out, "    channels: {}", channels.join(", "));
        let _ = writeln!(out, "    compression: {}", part.compression);
        let _ = writeln!(out, "    line order: {}", part.line_order);
        if !part.deep {
            continue;
        }
        // OpenEXR reads a part without the attribute as messy; say which it is.
        let stated = part.attributes.iter().any(|a| a.name == "deepImageState");
        if stated {
            let _ = writeln!(out, "    deep image state: {}", part.state.name());
        } else {
            let _ = writeln!(out, "    deep image state: absent (read as messy)");
        }
        // A part in a compression deepmerge does not read is still described, samples aside.
        if let Err(e) = crate::exr::Codec::for_deep_part(part.compression_id) {
            let _ = writeln!(out, "    samples: not read: {e}");
            continue;
        }
        let options = ReadOptions {
            part: PartSelector::Index(part.index),
            max_memory,
        };
        let image = read_deep(path, &options)?;
        let s = sample_stats(&image);
        let _ = writeln!(
            out,
            "    samples: {} total, max {} per pixel, mean {:.3} per pixel, {} empty pixels",
            s.total, s.max, s.mean, s.empty
        );
        let bins: Vec<String> = COMPLEXITY_BINS
            .iter()
            .zip(s.histogram)
            .map(|((name, _), n)| format!("{name}: {n}"))
            .collect();
        let _ = writeln!(out, "    depth complexity (pixels): {}", bins.join(", "));
        if let Some(range) = depth_range(&image) {
            let _ = writeln!(out, "    depth range: {range}");
        }
    }
    Ok(out)
}

/// The smallest and largest value of a deep image's depth channels, as `info` prints them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DepthRange {
    /// Z's smallest and largest value; none without samples.
    pub z: Option<(f32, f32)>,
    /// ZBack's, when the image has a ZBack channel and samples.
    pub zback: Option<(f32, f32)>,
}

impl std::fmt::Display for DepthRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.z {
            None => write!(f, "no samples"),
            Some((lo, hi)) => {
                write!(f, "Z {lo} to {hi}")?;
                if let Some((lo, hi)) = self.zback {
                    write!(f, ", ZBack {lo} to {hi}")?;
                }
                Ok(())
            }
        }
    }
}

/// The range of `image`'s Z and ZBack (what `slice`, `grade` and `points` ranges are chosen
/// from); none without a Z channel.
pub fn depth_range(image: &DeepImage) -> Option<DepthRange> {
    let (z, zback) = image.depth_channels();
    let range = |c: usize| {
        let plane = &image.planes[c];
        (0..plane.len()).map(|i| plane.get_f32(i)).fold(
            None,
            |acc: Option<(f32, f32)>, v| match acc {
                None => Some((v, v)),
                Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
            },
        )
    };
    Some(DepthRange {
        z: range(z?),
        zback: zback.and_then(range),
    })
}

/// The attributes shown on their own lines by [`describe_file`].
const DESCRIBED: [&str; 8] = [
    "channels",
    "compression",
    "dataWindow",
    "displayWindow",
    "lineOrder",
    "tiles",
    "name",
    "type",
];

/// Every other attribute of each part's header, as `deepmerge info --all-attributes` prints
/// them: `    name (type): value`.
pub fn describe_attributes(path: &Path) -> Result<String> {
    let mut out = String::new();
    for part in read_parts_info(path)? {
        let others: Vec<_> = part
            .attributes
            .iter()
            .filter(|a| !DESCRIBED.contains(&a.name.as_str()))
            .collect();
        let _ = writeln!(
            out,
            "  part {}: {} other attributes",
            part.index,
            others.len()
        );
        for a in others {
            let _ = writeln!(out, "    {} ({}): {}", a.name, a.kind, a.display_value());
            // An id manifest is compressed bytes: say what it names instead.
            if a.kind == "idmanifest" {
                match crate::exr::IdManifest::from_attribute(&a.value) {
                    Ok(manifest) => {
                        for line in manifest.summary() {
                            let _ = writeln!(out, "      {line}");
                        }
                    }
                    Err(e) => {
                        let _ = writeln!(out, "      (does not decode: {e})");
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Each part's id manifest as `deepmerge info --ids` prints it: per group its channels and the
/// names of its columns, then one line per id with its names, so that `idselect` and `grade`
/// names can be picked from it.
pub fn describe_ids(path: &Path) -> Result<String> {
    let mut out = String::new();
    for part in read_parts_info(path)? {
        let Some(attribute) = part
            .attributes
            .iter()
            .find(|a| a.name == "idManifest" && a.kind == "idmanifest")
        else {
            let _ = writeln!(out, "  part {}: no idManifest", part.index);
            continue;
        };
        let manifest = crate::exr::IdManifest::from_attribute(&attribute.value)
            .map_err(|e| e.in_file(path))?;
        for group in &manifest.groups {
            let _ = writeln!(
                out,
                "  part {}: ids of {} ({} ids){}",
                part.index,
                group.channels.join(","),
                group.entries.len(),
                if group.components.is_empty() {
                    String::new()
                } else {
                    format!(", names: {}", group.components.join(", "))
                }
            );
            for (id, names) in &group.entries {
                let _ = writeln!(out, "    {id}\t{}", names.join("\t"));
            }
        }
    }
    Ok(out)
}

/// What one sample of each deep part costs once decoded (the bytes of its channels), and, with
/// `selection` (`--channels`), what it costs when a merge keeps only those channels and what
/// they need: `  part 0: a sample is 20 bytes (A, B, G, R, Z); with --channels R: 12 bytes
/// (A, R, Z)`. Headers only; no sample is read.
pub fn describe_sample_cost(
    path: &Path,
    selection: Option<&crate::exr::ChannelSelection>,
) -> Result<String> {
    let mut out = String::new();
    for part in read_parts_info(path)?.iter().filter(|p| p.deep) {
        let cost = |keep: &dyn Fn(&crate::deep::Channel) -> bool| {
            let kept: Vec<&crate::deep::Channel> =
                part.channels.iter().filter(|c| keep(c)).collect();
            let bytes: usize = kept.iter().map(|c| c.sample_type.size()).sum();
            let names: Vec<&str> = kept.iter().map(|c| c.name.as_str()).collect();
            format!("{bytes} bytes ({})", names.join(", "))
        };
        let _ = write!(
            out,
            "  part {}: a sample is {}",
            part.index,
            cost(&|_| true)
        );
        if let Some(selection) = selection {
            let _ = write!(
                out,
                "; with --channels {}: {}",
                selection.names().join(","),
                cost(&|c| selection.keeps(c, &part.channels))
            );
        }
        out.push('\n');
    }
    Ok(out)
}

/// The indices of the deep parts of `path` that `part` selects: every deep part where `None`,
/// else the one part it names (which must be deep).
pub fn deep_parts(path: &Path, part: Option<&PartSelector>) -> Result<Vec<usize>> {
    let parts = read_parts_info(path)?;
    let deep: Vec<usize> = parts.iter().filter(|p| p.deep).map(|p| p.index).collect();
    let chosen = match part {
        None => return Ok(deep),
        Some(PartSelector::FirstDeep) => deep.first().copied(),
        Some(PartSelector::Index(i)) => parts.iter().find(|p| p.index == *i).map(|p| p.index),
        Some(PartSelector::Name(n)) => parts
            .iter()
            .find(|p| p.name.as_deref() == Some(n.as_str()))
            .map(|p| p.index),
    };
    match chosen {
        Some(i) if parts[i].deep => Ok(vec![i]),
        Some(i) => Err(Error::file(path, format!("part {i} is not a deep part"))),
        None => Err(Error::file(path, "no such deep part")),
    }
}

/// What `deepmerge info FILE... --pixel X,Y` prints: for each file (numbered as inputs are, in
/// command-line order) and each deep part `part` selects, the [`PixelTable`] of that pixel.
pub fn describe_pixel(
    files: &[PathBuf],
    part: Option<&PartSelector>,
    pixel: (i32, i32),
    mode: TableValues,
    max_memory: u64,
) -> Result<String> {
    let sections = files
        .iter()
        .enumerate()
        .map(|(input, path)| describe_pixel_of(input, path, part, pixel, mode, max_memory))
        .collect::<Result<Vec<_>>>()?;
    Ok(sections.join("\n"))
}

/// [`describe_pixel`] for one file, input number `input`: the table of each deep part `part`
/// selects, each followed by a line saying why it is empty where the pixel lies outside the
/// part's data window. A file without a deep part is an error that says so.
pub fn describe_pixel_of(
    input: usize,
    path: &Path,
    part: Option<&PartSelector>,
    pixel: (i32, i32),
    mode: TableValues,
    max_memory: u64,
) -> Result<String> {
    let parts = deep_parts(path, part)?;
    if parts.is_empty() {
        return Err(Error::file(
            path,
            "no deep part: --pixel lists the samples of deep parts, and this file has only flat ones",
        ));
    }
    let mut sections = Vec::new();
    for index in parts {
        let options = ReadOptions {
            part: PartSelector::Index(index),
            max_memory,
        };
        let image = read_deep(path, &options)?;
        let title = input_title(path, Some(index));
        let mut text = PixelTable::of_input(&title, &image, input, pixel, mode)?.to_text();
        if image.data_window.index_of(pixel.0, pixel.1).is_none() {
            let _ = writeln!(
                text,
                "  ({}, {}) is outside this part's data window {}: it has no samples there",
                pixel.0, pixel.1, image.data_window
            );
        }
        sections.push(text);
    }
    Ok(sections.join("\n"))
}

/// Parse `X,Y` (what `--pixel` takes).
pub fn parse_pixel(text: &str) -> Result<(i32, i32)> {
    let bad = || Error::Usage(format!("--pixel takes X,Y (two integers), not {text:?}"));
    let (x, y) = text.split_once(',').ok_or_else(bad)?;
    Ok((
        x.trim().parse().map_err(|_| bad())?,
        y.trim().parse().map_err(|_| bad())?,
    ))
}
