//! `deepen`: a flat image made deep, one sample per pixel (Gaffer's FlatToDeep, Nuke's
//! DeepFromImage, `oiiotool --deepen`).
//!
//! Exact semantics:
//! - The input is a flat EXR part (the first flat part, or `--part`), read in bands
//!   ([`crate::exr::FlatSource`]). It must have an alpha channel (`A`, or a per-channel
//!   `RA`/`GA`/`BA`, in any layer): without one the sample's colour would composite as
//!   transparent.
//! - Each pixel becomes one sample carrying every channel of the input, bit for bit and in its
//!   own type, except the input's `Z` and `ZBack` channels, which are replaced: the sample's
//!   `Z` (float) is the constant `--z` or the value of the channel `--z-channel`; its `ZBack`
//!   (float) is `Z + --thickness` or the value of `--zback-channel`; with neither there is no
//!   `ZBack` channel (point samples). A depth channel named by `--z-channel` or
//!   `--zback-channel` other than `Z`/`ZBack` is also kept as an ordinary channel.
//! - A pixel is dropped (no sample) when every channel of the input is zero, a depth channel
//!   (the input's `Z` and `ZBack` and the channels depths are taken from) counting as zero also
//!   when it is at or beyond 1e30 or not a number: `oiiotool --deepen`'s rule, under which
//!   a far background depth alone makes no sample.
//! - A kept pixel whose depth is not a number, or whose `ZBack` is in front of its `Z`, is an
//!   error naming the file and the pixel.
//! - The output's windows are the input's; its `deepImageState` is tidy (one sample per
//!   pixel). Flattening the output gives back the input's channels (other than the depths):
//!   one sample composited over nothing is itself.

use std::path::Path;

use crate::composite::{OutputKind, DEEP_PIXEL_BYTES, DEEP_SAMPLE_BYTES};
use crate::deep::{
    offsets_from_counts, Bounds, Channel, ChannelRole, DeepImage, DeepState, Plane, SampleType,
};
use crate::error::{Error, Result};
use crate::exr::BANDS_IN_FLIGHT;
use crate::exr::{FlatRows, FlatSource, PartSelector};
use crate::request::{FieldNames, MergeOption, OptionNames};
use crate::stream::plan::{Band, MAX_BAND_BYTES};
use crate::stream::{stream_bands, BandOutput, OutputFormat, StreamOptions};

use super::registry::{
    InputSpec, NodeInputs, NodeWork, OpSpec, Operation, OptionSpec, Produces, Ran, ValueKind,
};
use super::{finish_band, OpOutput};
use crate::request::OutputRequest;
use std::path::PathBuf;
use std::sync::Arc;

/// Depths at or beyond this are "no depth" when deciding whether a pixel is empty (oiiotool's
/// threshold for a far background).
const FAR_DEPTH: f32 = 1e30;

/// Where each sample's front depth comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum FrontDepth {
    /// The same depth for every sample.
    Constant(f32),
    /// The value of this channel of the flat input.
    Channel(String),
}

/// Where each sample's back depth comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum BackDepth {
    /// No `ZBack` channel: point samples.
    None,
    /// `Z` plus this thickness.
    Thickness(f32),
    /// The value of this channel of the flat input.
    Channel(String),
}

/// How a flat image is made deep (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct Deepen {
    /// The front depth.
    pub z: FrontDepth,
    /// The back depth.
    pub back: BackDepth,
}

impl Deepen {
    /// From the command's options: exactly one of `z` and `z_channel`, at most one of
    /// `thickness` and `zback_channel`.
    pub fn new(
        z: Option<f32>,
        z_channel: Option<&str>,
        thickness: Option<f32>,
        zback_channel: Option<&str>,
    ) -> Result<Self> {
        Self::named(z, z_channel, thickness, zback_channel, &FieldNames)
    }

    /// [`Self::new`], its refusals naming the options as `names` spells them.
    pub fn named(
        z: Option<f32>,
        z_channel: Option<&str>,
        thickness: Option<f32>,
        zback_channel: Option<&str>,
        names: &dyn OptionNames,
    ) -> Result<Self> {
        let name = |o| names.spell(o);
        let (z_name, channel_name) = (name(MergeOption::Z), name(MergeOption::ZChannel));
        let z = match (z, z_channel) {
            (Some(z), None) if z.is_finite() => FrontDepth::Constant(z),
            (Some(z), None) => {
                return Err(Error::Usage(format!(
                    "{z_name} takes a finite depth, not {z}"
                )))
            }
            (None, Some(name)) => FrontDepth::Channel(name.to_string()),
            (None, None) => {
                return Err(Error::Usage(format!(
                    "deepen needs the depth: {z_name} or {channel_name}"
                )))
            }
            (Some(_), Some(_)) => {
                return Err(Error::Usage(format!(
                    "{z_name} and {channel_name} cannot be used together"
                )))
            }
        };
        let (thickness_name, back_name) = (
            name(MergeOption::Thickness),
            name(MergeOption::ZBackChannel),
        );
        let back = match (thickness, zback_channel) {
            (None, None) => BackDepth::None,
            (Some(t), None) if t.is_finite() && t >= 0.0 => BackDepth::Thickness(t),
            (Some(t), None) => {
                return Err(Error::Usage(format!(
                    "{thickness_name} takes a finite depth of at least 0, not {t}"
                )))
            }
            (None, Some(name)) => BackDepth::Channel(name.to_string()),
            (Some(_), Some(_)) => {
                return Err(Error::Usage(format!(
                    "{thickness_name} and {back_name} cannot be used together"
                )))
            }
        };
        Ok(Deepen { z, back })
    }

    /// The input's channels resolved for this deepen.
    fn layout(&self, source: &FlatSource) -> Result<Layout> {
        let find = |name: &str, what: &str| {
            let c = source.channel_index(name).ok_or_else(|| {
                let names: Vec<&str> = source.channels.iter().map(|c| c.name.as_str()).collect();
                // A usage error, as `--channels` naming a channel no input has.
                Error::of_kind(
                    crate::error::ErrorKind::Usage,
                    format!(
                        "has no channel {name:?} for {what} (its channels: {})",
                        names.join(", ")
                    ),
                )
                .in_file(source.path())
            })?;
            if source.channels[c].sample_type == SampleType::U32 {
                return Err(Error::file(
                    source.path(),
                    format!("channel {name:?} for {what} is uint; a depth is a float"),
                ));
            }
            Ok(c)
        };
        let z = match &self.z {
            FrontDepth::Constant(_) => None,
            FrontDepth::Channel(name) => Some(find(name, "the depth")?),
        };
        let zback = match &self.back {
            BackDepth::Channel(name) => Some(find(name, "the back depth")?),
            _ => None,
        };
        let is_depth = |c: &Channel| matches!(c.role, ChannelRole::Z | ChannelRole::ZBack);
        let copied: Vec<usize> = (0..source.channels.len())
            .filter(|&c| !is_depth(&source.channels[c]))
            .collect();
        let has_alpha = copied.iter().any(|&c| {
            matches!(
                source.channels[c].role,
                ChannelRole::Alpha
                    | ChannelRole::RedAlpha
                    | ChannelRole::GreenAlpha
                    | ChannelRole::BlueAlpha
            )
        });
        if !has_alpha {
            return Err(Error::file(
                source.path(),
                "has no alpha channel (A), so its pixels would be transparent samples; add one \
                 (e.g. with oiiotool --ch R,G,B,A=1.0) before deepen",
            ));
        }
        let depth_channels: Vec<usize> = (0..source.channels.len())
            .filter(|&c| is_depth(&source.channels[c]) || Some(c) == z || Some(c) == zback)
            .collect();
        let mut channels: Vec<Channel> =
            copied.iter().map(|&c| source.channels[c].clone()).collect();
        channels.push(Channel::new("Z", SampleType::F32));
        if self.back != BackDepth::None {
            channels.push(Channel::new("ZBack", SampleType::F32));
        }
        Ok(Layout {
            copied,
            z,
            zback,
            depth_channels,
            channels,
        })
    }

    /// The deep band made from the flat rows `rows` (over `window`, the input's window cut to
    /// the band's rows).
    fn band(
        &self,
        layout: &Layout,
        rows: &FlatRows,
        display: Bounds,
        path: &Path,
    ) -> Result<DeepImage> {
        let window = rows.window;
        let area = window.area();
        let zero = |c: usize, p: usize| {
            let v = rows.planes[c].get_f32(p);
            if layout.depth_channels.contains(&c) {
                v == 0.0 || v.is_nan() || v >= FAR_DEPTH
            } else {
                match &rows.planes[c] {
                    Plane::U32(ids) => ids[p] == 0,
                    _ => v == 0.0,
                }
            }
        };
        let kept: Vec<usize> = (0..area)
            .filter(|&p| (0..rows.planes.len()).any(|c| !zero(c, p)))
            .collect();
        let mut planes: Vec<Plane> = layout
            .channels
            .iter()
            .map(|c| Plane::with_capacity(c.sample_type, kept.len()))
            .collect();
        for (out, &c) in planes.iter_mut().zip(&layout.copied) {
            for &p in &kept {
                out.push_from(&rows.planes[c], p);
            }
        }
        let n = layout.copied.len();
        let pixel = |p: usize| {
            let w = window.width();
            (window.x0 + (p % w) as i32, window.y0 + (p / w) as i32)
        };
        for &p in &kept {
            let z = match (&self.z, layout.z) {
                (FrontDepth::Constant(z), _) => *z,
                (_, Some(c)) => rows.planes[c].get_f32(p),
                _ => unreachable!("a depth channel was resolved"),
            };
            let back = match (&self.back, layout.zback) {
                (BackDepth::None, _) => None,
                (BackDepth::Thickness(t), _) => Some(z + t),
                (_, Some(c)) => Some(rows.planes[c].get_f32(p)),
                _ => unreachable!("a back depth channel was resolved"),
            };
            let (x, y) = pixel(p);
            if z.is_nan() || back.is_some_and(f32::is_nan) {
                return Err(Error::file(
                    path,
                    format!("pixel ({x}, {y}) has no depth (NaN) but holds colour or alpha"),
                ));
            }
            if back.is_some_and(|b| b < z) {
                return Err(Error::file(
                    path,
                    format!(
                        "pixel ({x}, {y}): its ZBack {} is in front of its Z {z}",
                        back.unwrap_or_default()
                    ),
                ));
            }
            planes[n].push_f32(z);
            if let Some(b) = back {
                planes[n + 1].push_f32(b);
            }
        }
        let mut counts = vec![0u32; area];
        for &p in &kept {
            counts[p] = 1;
        }
        // EXR lists channels in name order.
        let mut columns: Vec<(Channel, Plane)> =
            layout.channels.iter().cloned().zip(planes).collect();
        columns.sort_by(|a, b| a.0.name.cmp(&b.0.name));
        let (channels, planes) = columns.into_iter().unzip();
        Ok(DeepImage {
            display_window: display,
            data_window: window,
            channels,
            offsets: offsets_from_counts(&counts),
            planes,
            state: DeepState::Tidy,
        })
    }
}

/// The input's channels as a deepen uses them.
struct Layout {
    /// The input channels copied into the samples, in order.
    copied: Vec<usize>,
    /// The channel Z is taken from.
    z: Option<usize>,
    /// The channel ZBack is taken from.
    zback: Option<usize>,
    /// The channels that are depths (for the empty-pixel rule).
    depth_channels: Vec<usize>,
    /// The output's channels: the copied ones, Z, then ZBack when written.
    channels: Vec<Channel>,
}

/// A deepen bound to its open flat input, handing out deep rows on request (top to bottom):
/// the comp graph's deepen node ([`crate::comp`]), which chooses the bands itself.
pub struct DeepenRows {
    deepen: Deepen,
    layout: Layout,
    source: FlatSource,
}

impl DeepenRows {
    /// Open the flat part `part` of `input` for `deepen`, refusing what the command refuses
    /// (missing depth channels, no alpha).
    pub fn open(deepen: &Deepen, input: &Path, part: &PartSelector, budget: u64) -> Result<Self> {
        let source = FlatSource::open(input, part, budget)?;
        let layout = deepen.layout(&source)?;
        if source.window.area() == 0 {
            return Err(Error::file(input, "has an empty data window"));
        }
        Ok(DeepenRows {
            deepen: deepen.clone(),
            layout,
            source,
        })
    }

    /// The input's data and display windows (the output's).
    pub fn windows(&self) -> (Bounds, Bounds) {
        (self.source.window, self.source.display_window)
    }

    /// The input's header attributes.
    pub fn attributes(&self) -> &[crate::exr::RawAttribute] {
        &self.source.attributes
    }

    /// The deep rows `band` (inside the window, after the rows already taken).
    pub fn rows(&mut self, band: Band) -> Result<DeepImage> {
        let rows = self.source.take_rows(band)?;
        let path = self.source.path().to_path_buf();
        self.deepen
            .band(&self.layout, &rows, self.source.display_window, &path)
    }
}

/// Rows per band for `source`: the budget's share for a band (a third, at most
/// [`MAX_BAND_BYTES`]) over what a row costs (its flat pixels twice, unpacked and copied, and
/// its deep sample, twice again when the band goes through the merge for a tidy or flat
/// output), in whole block rows of the input.
fn band_rows(
    source: &FlatSource,
    out_value_bytes: u64,
    merged: bool,
    budget: u64,
) -> Result<usize> {
    let width = source.window.width() as u64;
    let deep = 16 + DEEP_PIXEL_BYTES + DEEP_SAMPLE_BYTES + 2 * out_value_bytes;
    let pixel = 2 * source.pixel_bytes() + if merged { 2 * deep } else { deep };
    let row = width.saturating_mul(pixel);
    let share = budget / BANDS_IN_FLIGHT;
    let block = source.block_height() as u64;
    if row.saturating_mul(block) > share {
        return Err(Error::over_budget(
            format_args!(
                "a block of {block} rows of {width} pixels, one of {BANDS_IN_FLIGHT} bands in flight,"
            ),
            row.saturating_mul(block).saturating_mul(BANDS_IN_FLIGHT),
            budget,
        )
        .in_file(source.path()));
    }
    let rows = (share.min(MAX_BAND_BYTES) / row.max(1)).max(block);
    Ok((rows - rows % block) as usize)
}

/// The bands of `window`, `rows` rows each.
fn bands_of(window: Bounds, rows: usize) -> Vec<Band> {
    let mut bands = Vec::new();
    let mut y = window.y0 as i64;
    while y <= window.y1 as i64 {
        let end = (y + rows as i64 - 1).min(window.y1 as i64);
        bands.push(y as i32..=end as i32);
        y = end + 1;
    }
    bands
}

/// Deepen the flat part `request.part` of `input` into `output` (deep, or a PNG preview of its
/// flatten), streamed in bands within `request.budget`.
pub fn run_deepen(deepen: &Deepen, input: &Path, output: &Path, request: OpOutput) -> Result<()> {
    let options: StreamOptions = request.stream_options(output)?;
    crate::exr::check_output_is_not_an_input(output, &[input.to_path_buf()])?;
    let mut source = FlatSource::open(input, &options.part, options.budget)?;
    let layout = deepen.layout(&source)?;
    let window = source.window;
    let display = source.display_window;
    if window.area() == 0 {
        return Err(Error::file(input, "has an empty data window"));
    }
    let value_bytes: u64 = layout
        .channels
        .iter()
        .map(|c| c.sample_type.size() as u64)
        .sum();
    let merged = options.merge.tidy || options.merge.output != OutputKind::Deep;
    let rows = match options.band_rows {
        Some(rows) => rows.max(1),
        None => band_rows(&source, value_bytes, merged, options.budget)?,
    };
    let (deep_write, flat_write) =
        options.write_options_from(&source.attributes, &[&source.channels]);
    let format = match options.merge.output {
        OutputKind::Deep => OutputFormat::Deep(&deep_write),
        OutputKind::Flat { .. } => OutputFormat::flat_for(output, &flat_write),
    };
    let target = BandOutput {
        path: output,
        window,
        format,
        empty_rows: None,
    };
    // No deep source: the work reads each band's flat rows itself.
    stream_bands(
        Vec::new(),
        bands_of(window, rows),
        &target,
        None,
        &mut |band, _| {
            let rows = source.take_rows(band)?;
            let deep = deepen.band(&layout, &rows, display, input)?;
            finish_band(deep, &options)
        },
    )
    .map_err(|e| e.in_file(input))
}

/// `deepen` in the table of operations ([`super::registry`]).
pub const SPEC: OpSpec = OpSpec {
    name: "deepen",
    python: "deepen",
    help: "Make a flat image deep, one sample per pixel at depth --z or --z-channel, a volume \
           with --thickness or --zback-channel (Gaffer FlatToDeep, oiiotool --deepen)",
    doc: "Make the flat EXR ``input`` deep, one sample per pixel, and write it to ``out``, as \
          ``deepmerge deepen``: the depth is the constant ``z`` or the channel ``z_channel`` \
          (exactly one of them), the back depth ``Z + thickness`` or the channel \
          ``zback_channel`` (neither: point samples). Pixels whose every channel is zero get no \
          sample; the input needs an alpha channel. ``part`` picks the flat part; other options \
          as ``deep_slice``.",
    inputs: &[InputSpec {
        name: "input",
        python: "input",
        flat: true,
        help: "Flat EXR input (it needs an alpha channel)",
    }],
    options: &[
        OptionSpec {
            name: "z",
            kind: ValueKind::F32,
            value_name: "Z",
            help: "Every sample's depth Z",
            positional: true,
            either: Some("z_channel"),
            hyphen_values: true,
            ..OptionSpec::NEW
        },
        OptionSpec {
            name: "z_channel",
            kind: ValueKind::Text,
            value_name: "NAME",
            help: "Take each sample's Z from this channel of the input",
            positional: true,
            ..OptionSpec::NEW
        },
        OptionSpec {
            name: "thickness",
            kind: ValueKind::F32,
            value_name: "T",
            help: "Make volumes: ZBack = Z + T (T >= 0). Without it or --zback-channel, samples \
                   are points",
            positional: true,
            conflicts_with: Some("zback_channel"),
            hyphen_values: true,
            ..OptionSpec::NEW
        },
        OptionSpec {
            name: "zback_channel",
            kind: ValueKind::Text,
            value_name: "NAME",
            help: "Take each sample's ZBack from this channel of the input",
            positional: true,
            ..OptionSpec::NEW
        },
    ],
    produces: Produces::Image,
    comp: true,
    build: |v, names| {
        let deepen = Deepen::named(
            v.f32("z"),
            v.text("z_channel"),
            v.f32("thickness"),
            v.text("zback_channel"),
            names,
        )?;
        Ok(Arc::new(deepen))
    },
};

impl Operation for Deepen {
    fn run(&self, inputs: &[PathBuf], output: &Path, request: OutputRequest) -> Result<Ran> {
        run_deepen(self, &inputs[0], output, request)?;
        Ok(Ran::Image)
    }

    fn node(&self, inputs: &NodeInputs) -> Result<NodeWork> {
        let Some((path, part)) = inputs.flat_files[0] else {
            return Err(Error::internal("deepen's input is no flat file"));
        };
        let rows = DeepenRows::open(self, path, part, inputs.budget)?;
        Ok(NodeWork::FlatRows(Box::new(rows)))
    }
}
