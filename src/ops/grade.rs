//! `grade`: per-sample colour correction of a deep image (Nuke's DeepColorCorrect and
//! DeepGrade; oiiotool's flat `--addc`, `--mulc`, `--powc` on deep samples).
//!
//! Exact semantics, per sample and per colour channel (every float channel but the alphas, `Z`
//! and `ZBack`; `R`, `G` and `B` use `RA`, `GA` and `BA` where the image has them, else `A`):
//! - The stored (premultiplied) value `c` is unpremultiplied by the channel's alpha `a`:
//!   `v = c / a`. A sample whose alpha for that channel is 0 keeps its value bit for bit (it has
//!   no colour to unpremultiply; an emitting sample keeps its emission).
//! - `v` is corrected in this order, each step leaving the value alone when its parameter is
//!   the identity:
//!   1. **saturation** `s` (R, G and B only, when all three exist): with the Rec. 709 luma
//!      `L = 0.2126 R + 0.7152 G + 0.0722 B` of the unpremultiplied colour, `v = L + s (v − L)`;
//!   2. **contrast** `k` about the pivot 0.18 (Nuke's ColorCorrect): `v = 0.18 (v / 0.18)^k`
//!      for `v > 0`; values ≤ 0 are kept;
//!   3. **lift** `l` and **gain** `g` (Nuke's Grade with black point 0 and white point 1):
//!      `v = l + v (g − l)`;
//!   4. **offset** `o`: `v = v + o`;
//!   5. **gamma** `γ` (> 0): `v = v^(1/γ)` for `v > 0`; values ≤ 0 are kept.
//! - The **mask** `m` in [0, 1] mixes: `v' = v + m (corrected − v)`, and the result is
//!   premultiplied again, `c' = v' a`, computed in f64 and rounded once to the channel's type.
//!   A sample with `m = 0` keeps its values bit for bit.
//!   - The depth mask, from the sample's front depth `Z`: 1 for `near ≤ Z < far` (as `slice`
//!     keeps points), falling linearly to 0 over `ramp` on each side (`near − ramp` to `near`,
//!     `far` to `far + ramp`); without `near`/`far` every depth is inside.
//!   - The id mask, from `idselect`'s conditions ([`crate::ops::idselect`], numbers or
//!     manifest names): 1 where every condition holds, else 0. The two masks multiply.
//! - Alphas, depths, uint ids and every other channel are copied bit for bit; so are the
//!   samples' number and order, the windows and `deepImageState`.
//!
//! Parameters are given for every colour channel or per channel by name (`R=2,G=1`); a channel
//! not named keeps the identity for that operation.

use std::path::Path;

use crate::composite::{CompositeChannels, CompositeKind};
use crate::deep::{Bounds, ChannelRole, DeepImage};
use crate::error::{Error, ErrorKind, Result};

use super::idselect::{id_at, read_id_manifest, IdCondition, IdSelect};
use super::registry::{
    NodeInputs, NodeWork, OpSpec, Operation, OptionSpec, Produces, Ran, ValueKind, DEEP_INPUT,
};
use super::{run_op, DeepOp, OpOutput, OpWindows};
use crate::deep::builder::{build_band, RowBuilder};
use crate::request::OutputRequest;
use std::path::PathBuf;
use std::sync::Arc;

/// The pivot of `contrast` (Nuke's ColorCorrect: mid grey).
pub const CONTRAST_PIVOT: f64 = 0.18;

/// Rec. 709 luma weights of R, G and B, for `saturation`.
pub const LUMA: [f64; 3] = [0.2126, 0.7152, 0.0722];

/// One operation's value: for every colour channel, with per-channel exceptions by name.
#[derive(Clone, Debug, PartialEq)]
pub struct ChannelValues {
    /// The value of channels not named in `named`.
    pub all: f64,
    /// Values by full channel name.
    pub named: Vec<(String, f64)>,
}

impl ChannelValues {
    /// The same value for every channel.
    pub fn uniform(value: f64) -> Self {
        ChannelValues {
            all: value,
            named: Vec::new(),
        }
    }

    /// From `V` (every colour channel), `R,G,B` (three numbers: R, G and B) or
    /// `NAME=V[,NAME=V...]` (the channels named; the others keep `identity`). `flag` names the
    /// option in errors; `valid` says whether one value is allowed, `rule` why not.
    pub fn parse(
        flag: &str,
        text: &str,
        identity: f64,
        valid: impl Fn(f64) -> bool,
        rule: &str,
    ) -> Result<Self> {
        let bad = |why: String| {
            Error::Usage(format!(
                "{flag} takes V, R,G,B or NAME=V[,NAME=V...], not {text:?}: {why}"
            ))
        };
        let number = |item: &str| -> Result<f64> {
            let v: f64 = item
                .trim()
                .parse()
                .map_err(|_| bad(format!("{:?} is not a number", item.trim())))?;
            if !v.is_finite() || !valid(v) {
                return Err(Error::Usage(format!("{flag} {v}: {rule}")));
            }
            Ok(v)
        };
        let items: Vec<&str> = text.split(',').collect();
        if items.iter().all(|i| !i.contains('=')) {
            return match items[..] {
                [one] => Ok(ChannelValues::uniform(number(one)?)),
                [r, g, b] => Ok(ChannelValues {
                    all: identity,
                    named: vec![
                        ("R".into(), number(r)?),
                        ("G".into(), number(g)?),
                        ("B".into(), number(b)?),
                    ],
                }),
                _ => Err(bad("give one number or three".into())),
            };
        }
        let mut named = Vec::new();
        for item in items {
            let (name, value) = item
                .split_once('=')
                .ok_or_else(|| bad(format!("{item:?} has no '='")))?;
            let name = name.trim();
            if name.is_empty() {
                return Err(bad("no channel name".into()));
            }
            named.push((name.to_string(), number(value)?));
        }
        Ok(ChannelValues {
            all: identity,
            named,
        })
    }

    /// The value for the channel named `name`.
    pub fn of(&self, name: &str) -> f64 {
        self.named
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map_or(self.all, |&(_, v)| v)
    }

    fn names(&self) -> impl Iterator<Item = &str> {
        self.named.iter().map(|(n, _)| n.as_str())
    }
}

/// The depth mask: full inside [near, far), ramping to 0 over `ramp` outside.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DepthMask {
    /// Front plane (inclusive); −inf when not given.
    pub near: f64,
    /// Back plane (exclusive); +inf when not given.
    pub far: f64,
    /// Width of the linear fall-off on each side (≥ 0).
    pub ramp: f64,
}

impl Default for DepthMask {
    fn default() -> Self {
        DepthMask {
            near: f64::NEG_INFINITY,
            far: f64::INFINITY,
            ramp: 0.0,
        }
    }
}

impl DepthMask {
    /// A mask from optional planes and ramp; refuses NaN, a near plane behind the far one and a
    /// negative ramp.
    pub fn new(near: Option<f64>, far: Option<f64>, ramp: f64) -> Result<Self> {
        let near = near.unwrap_or(f64::NEG_INFINITY);
        let far = far.unwrap_or(f64::INFINITY);
        if near.is_nan() || far.is_nan() {
            return Err(Error::Usage("--near and --far must be numbers".into()));
        }
        if near > far {
            return Err(Error::Usage(format!(
                "--near {near} is behind --far {far}; the depth range [near, far) would be empty"
            )));
        }
        if !(ramp >= 0.0 && ramp.is_finite()) {
            return Err(Error::Usage(format!(
                "--ramp must be a finite depth of 0 or more, not {ramp}"
            )));
        }
        Ok(DepthMask { near, far, ramp })
    }

    /// The mask at front depth `z`.
    pub fn at(&self, z: f64) -> f64 {
        if z.is_nan() {
            return 0.0;
        }
        if z < self.near {
            if self.ramp > 0.0 {
                (1.0 - (self.near - z) / self.ramp).max(0.0)
            } else {
                0.0
            }
        } else if z >= self.far {
            if self.ramp > 0.0 {
                (1.0 - (z - self.far) / self.ramp).max(0.0)
            } else {
                0.0
            }
        } else {
            1.0
        }
    }

    fn is_everything(&self) -> bool {
        self.near == f64::NEG_INFINITY && self.far == f64::INFINITY
    }
}

/// A colour correction with its masks (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct Grade {
    /// Black lift (identity 0).
    pub lift: ChannelValues,
    /// Gamma (identity 1, > 0).
    pub gamma: ChannelValues,
    /// Gain (identity 1).
    pub gain: ChannelValues,
    /// Offset (identity 0).
    pub offset: ChannelValues,
    /// Saturation (identity 1, ≥ 0), of R, G and B together.
    pub saturation: f64,
    /// Contrast about 0.18 (identity 1, ≥ 0).
    pub contrast: ChannelValues,
    /// The depth mask.
    pub depth: DepthMask,
    /// The id mask: conditions all of which a graded sample meets (none: every sample).
    pub ids: Vec<IdCondition>,
}

impl Default for Grade {
    fn default() -> Self {
        Grade {
            lift: ChannelValues::uniform(0.0),
            gamma: ChannelValues::uniform(1.0),
            gain: ChannelValues::uniform(1.0),
            offset: ChannelValues::uniform(0.0),
            saturation: 1.0,
            contrast: ChannelValues::uniform(1.0),
            depth: DepthMask::default(),
            ids: Vec::new(),
        }
    }
}

/// The texts of `grade`'s options, as the CLI and Python take them.
#[derive(Clone, Debug, Default)]
pub struct GradeArgs<'a> {
    /// `--lift`.
    pub lift: Option<&'a str>,
    /// `--gamma`.
    pub gamma: Option<&'a str>,
    /// `--gain`.
    pub gain: Option<&'a str>,
    /// `--offset`.
    pub offset: Option<&'a str>,
    /// `--saturation`.
    pub saturation: Option<f64>,
    /// `--contrast`.
    pub contrast: Option<&'a str>,
    /// `--near`.
    pub near: Option<f64>,
    /// `--far`.
    pub far: Option<f64>,
    /// `--ramp`.
    pub ramp: f64,
    /// `--id` conditions.
    pub ids: &'a [String],
}

impl Grade {
    /// A grade from its options' texts; each bad value is refused in one line naming its option.
    pub fn parse(args: &GradeArgs) -> Result<Self> {
        let any = |_: f64| true;
        let values = |flag: &str,
                      text: Option<&str>,
                      identity: f64,
                      valid: &dyn Fn(f64) -> bool,
                      rule: &str| {
            text.map_or(Ok(ChannelValues::uniform(identity)), |t| {
                ChannelValues::parse(flag, t, identity, valid, rule)
            })
        };
        let saturation = args.saturation.unwrap_or(1.0);
        if !(saturation >= 0.0 && saturation.is_finite()) {
            return Err(Error::Usage(format!(
                "--saturation {saturation}: it must be a finite number of 0 or more (0 is grey)"
            )));
        }
        Ok(Grade {
            lift: values("--lift", args.lift, 0.0, &any, "")?,
            gamma: values(
                "--gamma",
                args.gamma,
                1.0,
                &|v| v > 0.0,
                "a gamma must be greater than 0 (v^(1/gamma))",
            )?,
            gain: values("--gain", args.gain, 1.0, &any, "")?,
            offset: values("--offset", args.offset, 0.0, &any, "")?,
            saturation,
            contrast: values(
                "--contrast",
                args.contrast,
                1.0,
                &|v| v >= 0.0,
                "a contrast must be 0 or more",
            )?,
            depth: DepthMask::new(args.near, args.far, args.ramp)?,
            ids: args
                .ids
                .iter()
                .map(|t| IdCondition::parse(t))
                .collect::<Result<_>>()?,
        })
    }

    /// The corrected unpremultiplied value of column `k` (before the mask), given the
    /// unpremultiplied value after saturation.
    fn correct(&self, p: &ColumnParams, v: f64) -> f64 {
        let mut v = v;
        if p.contrast != 1.0 && v > 0.0 {
            v = CONTRAST_PIVOT * (v / CONTRAST_PIVOT).powf(p.contrast);
        }
        v = p.lift + v * (p.gain - p.lift);
        v += p.offset;
        if p.gamma != 1.0 && v > 0.0 {
            v = v.powf(1.0 / p.gamma);
        }
        v
    }
}

/// The parameters of one composited column.
#[derive(Clone, Copy, Debug)]
struct ColumnParams {
    lift: f64,
    gamma: f64,
    gain: f64,
    offset: f64,
    contrast: f64,
}

impl ColumnParams {
    fn is_identity(&self) -> bool {
        self.lift == 0.0
            && self.gamma == 1.0
            && self.gain == 1.0
            && self.offset == 0.0
            && self.contrast == 1.0
    }
}

impl DeepOp for Grade {
    fn windows(&self, data: Bounds, display: Bounds) -> Result<OpWindows> {
        Ok(OpWindows {
            read: data,
            data,
            display,
        })
    }

    fn apply(&self, band: &DeepImage, _: &OpWindows) -> Result<DeepImage> {
        let composite = CompositeChannels::of(&[band]);
        // A per-channel value for a channel the image lacks is a mistake worth a line.
        for values in [
            &self.lift,
            &self.gamma,
            &self.gain,
            &self.offset,
            &self.contrast,
        ] {
            for name in values.names() {
                let colour = composite
                    .names
                    .iter()
                    .position(|n| n == name)
                    .filter(|&k| matches!(composite.kinds[k], CompositeKind::Colour { .. }));
                if colour.is_none() {
                    let colours: Vec<&str> = composite
                        .names
                        .iter()
                        .zip(&composite.kinds)
                        .filter(|(_, k)| matches!(k, CompositeKind::Colour { .. }))
                        .map(|(n, _)| n.as_str())
                        .collect();
                    // A channel the input lacks is a usage error, as `--channels` and
                    // `idselect --id` have it (docs/cli.md, "Exit codes").
                    return Err(Error::of_kind(
                        ErrorKind::Usage,
                        format!(
                            "has no colour channel {name:?} to grade (its colour channels: {})",
                            colours.join(", ")
                        ),
                    ));
                }
            }
        }
        // Column k of the composite is channel `channel_of[k]` of the band.
        let channel_of: Vec<usize> = composite
            .names
            .iter()
            .map(|n| {
                band.channel_index(n)
                    .expect("composited channels are the band's")
            })
            .collect();
        let column_of: Vec<Option<usize>> = (0..band.channels.len())
            .map(|c| channel_of.iter().position(|&k| k == c))
            .collect();
        let params: Vec<ColumnParams> = composite
            .names
            .iter()
            .map(|n| ColumnParams {
                lift: self.lift.of(n),
                gamma: self.gamma.of(n),
                gain: self.gain.of(n),
                offset: self.offset.of(n),
                contrast: self.contrast.of(n),
            })
            .collect();
        // Saturation mixes R, G and B: their columns, when all three exist.
        let rgb: Option<[usize; 3]> = if self.saturation != 1.0 {
            let find = |role: ChannelRole| {
                composite
                    .names
                    .iter()
                    .position(|n| ChannelRole::of(n, crate::deep::SampleType::F32) == role)
            };
            match (
                find(ChannelRole::Red),
                find(ChannelRole::Green),
                find(ChannelRole::Blue),
            ) {
                (Some(r), Some(g), Some(b)) => Some([r, g, b]),
                _ => {
                    return Err(Error::format(
                        "has no R, G and B channels, so --saturation has no colour to saturate",
                    ))
                }
            }
        } else {
            None
        };
        let resolved = IdSelect {
            conditions: self.ids.clone(),
            invert: false,
            alpha_only: false,
        };
        if resolved.has_names() {
            return Err(Error::internal(
                "grade's id names must be looked up in the manifest before the run",
            ));
        }
        let id_channels: Vec<(usize, &[u32])> = self
            .ids
            .iter()
            .map(|c| {
                band.channel_index(&c.channel)
                    .map(|i| (i, c.ids.as_slice()))
                    .ok_or_else(|| {
                        let names: Vec<&str> =
                            band.channels.iter().map(|c| c.name.as_str()).collect();
                        Error::format(format!(
                            "has no channel {:?} for --id (its channels: {})",
                            c.channel,
                            names.join(", ")
                        ))
                    })
            })
            .collect::<Result<_>>()?;
        let (z_channel, _) = band.depth_channels();
        if z_channel.is_none() && !self.depth.is_everything() {
            return Err(Error::format(
                "has no Z channel, so --near/--far have no depth to mask by",
            ));
        }
        let mask = |i: usize| -> f64 {
            let ids_hold = id_channels
                .iter()
                .all(|&(c, ids)| id_at(&band.planes[c], i).is_some_and(|id| ids.contains(&id)));
            if !ids_hold {
                return 0.0;
            }
            match z_channel {
                Some(z) => self.depth.at(band.planes[z].get_f32(i) as f64),
                None => 1.0,
            }
        };
        let window = band.data_window;
        let width = composite.len();
        let fill = |y: i32, row: &mut RowBuilder| {
            let mut stored = vec![0.0f64; width];
            let mut out = vec![0.0f64; width];
            for x in window.x0..=window.x1 {
                let p = window.index_of(x, y).expect("inside the band");
                for i in band.range(p) {
                    let m = mask(i);
                    if m == 0.0 {
                        row.copy(band, i);
                        continue;
                    }
                    for (k, v) in stored.iter_mut().enumerate() {
                        *v = band.planes[channel_of[k]].get_f32(i) as f64;
                    }
                    out.copy_from_slice(&stored);
                    // Unpremultiplied values of the colour columns with alpha above 0.
                    let alpha_of = |k: usize| match composite.kinds[k] {
                        CompositeKind::Colour { alpha } => Some(stored[alpha]),
                        CompositeKind::Alpha => None,
                    };
                    let mut unpremult = vec![None; width];
                    for (k, u) in unpremult.iter_mut().enumerate() {
                        if let Some(a) = alpha_of(k).filter(|&a| a != 0.0) {
                            *u = Some(stored[k] / a);
                        }
                    }
                    let mut graded = unpremult.clone();
                    if let Some([r, g, b]) = rgb {
                        // The luma of the unpremultiplied colour (a channel of alpha 0 counts
                        // with its stored value, which it keeps).
                        let value = |k: usize| unpremult[k].unwrap_or(stored[k]);
                        let luma = LUMA[0] * value(r) + LUMA[1] * value(g) + LUMA[2] * value(b);
                        for k in [r, g, b] {
                            if let Some(v) = graded[k].as_mut() {
                                *v = luma + self.saturation * (*v - luma);
                            }
                        }
                    }
                    let mut changed = false;
                    for k in 0..width {
                        let (Some(before), Some(after)) = (unpremult[k], graded[k]) else {
                            continue;
                        };
                        let corrected = if params[k].is_identity() {
                            after
                        } else {
                            self.correct(&params[k], after)
                        };
                        if corrected == before {
                            continue;
                        }
                        let mixed = before + m * (corrected - before);
                        out[k] = mixed * alpha_of(k).expect("a colour column");
                        changed = true;
                    }
                    if !changed {
                        row.copy(band, i);
                        continue;
                    }
                    row.push_changed(band, i, |c| {
                        column_of[c]
                            .filter(|&k| out[k] != stored[k])
                            .map(|k| out[k])
                    });
                }
                row.end_pixel();
            }
        };
        Ok(build_band(
            &band.channels,
            window,
            band.display_window,
            band.state,
            fill,
        ))
    }
}

/// Run `grade` on `input`, writing `output` as `request` says; id names are looked up in the
/// input's id manifest first.
pub fn run_grade(grade: &Grade, input: &Path, output: &Path, request: OpOutput) -> Result<u64> {
    let options = request.stream_options(output)?;
    let select = IdSelect {
        conditions: grade.ids.clone(),
        invert: false,
        alpha_only: false,
    };
    if select.has_names() {
        let manifest = read_id_manifest(input, &options.part)?;
        let resolved = select
            .with_names_resolved(manifest.as_ref())
            .map_err(|e| e.in_file(input))?;
        let grade = Grade {
            ids: resolved.conditions,
            ..grade.clone()
        };
        return run_op(&grade, input, output, &options, None);
    }
    run_op(grade, input, output, &options, None)
}

/// A per-channel option of `grade` in the table: `V|R,G,B|NAME=V`.
const fn channel_option(name: &'static str, help: &'static str) -> OptionSpec {
    OptionSpec {
        name,
        kind: ValueKind::ChannelValues,
        value_name: "V|R,G,B|NAME=V",
        help,
        hyphen_values: true,
        ..OptionSpec::NEW
    }
}

/// `grade` in the table of operations ([`super::registry`]).
pub const SPEC: OpSpec = OpSpec {
    name: "grade",
    python: "grade",
    help: "Colour-correct every sample (lift, gain, offset, gamma, contrast, saturation) on \
           unpremultiplied colour, masked by depth (--near/--far/--ramp) and ids (--id)",
    doc: "Colour-correct every sample of ``input`` and write ``out``, as ``deepmerge grade``: \
          ``lift``, ``gain``, ``offset``, ``gamma`` and ``contrast`` each take a number (every \
          colour channel), ``(r, g, b)``, ``{channel: value}`` or the CLI's text; \
          ``saturation`` a number. The correction works on unpremultiplied colour and is mixed \
          by the depth mask ``near``, ``far``, ``ramp`` and the id mask ``ids`` (as \
          ``idselect``'s). Other options as ``deep_slice``.",
    inputs: DEEP_INPUT,
    options: &[
        channel_option(
            "lift",
            "Black lift: v = lift + v*(gain - lift). V for every colour channel, R,G,B, or \
             NAME=V[,NAME=V...]",
        ),
        channel_option("gain", "Gain (multiplier), applied with the lift"),
        channel_option("offset", "Offset added after lift and gain"),
        channel_option("gamma", "Gamma (> 0), applied last: v^(1/gamma) for v > 0"),
        channel_option(
            "contrast",
            "Contrast (>= 0) about 0.18, applied first after saturation",
        ),
        OptionSpec {
            name: "saturation",
            kind: ValueKind::F64,
            value_name: "S",
            help: "Saturation of R, G and B (>= 0; 0 is grey), applied first, about the Rec. \
                   709 luma",
            hyphen_values: true,
            ..OptionSpec::NEW
        },
        OptionSpec {
            name: "near",
            kind: ValueKind::F64,
            value_name: "Z",
            help: "Depth mask: grade samples whose Z is at or behind this depth (default -inf)",
            hyphen_values: true,
            ..OptionSpec::NEW
        },
        OptionSpec {
            name: "far",
            kind: ValueKind::F64,
            value_name: "Z",
            help: "Depth mask: grade samples whose Z is in front of this depth (default +inf)",
            hyphen_values: true,
            ..OptionSpec::NEW
        },
        OptionSpec {
            name: "ramp",
            kind: ValueKind::F64,
            default: Some("0"),
            value_name: "D",
            help: "Soften the depth mask: it falls linearly to 0 over this depth outside [near, \
                   far)",
            hyphen_values: true,
            ..OptionSpec::NEW
        },
        OptionSpec {
            name: "ids",
            flag: "id",
            field: "id",
            kind: ValueKind::Ids,
            value_name: "CHANNEL=N|NAME[,...]",
            help: "Id mask: grade only samples whose CHANNEL holds one of the ids (as \
                   idselect's --id, manifest names included). Repeat for more channels: all \
                   must match",
            ..OptionSpec::NEW
        },
    ],
    produces: Produces::Image,
    comp: true,
    build: |v, _| {
        let grade = Grade::parse(&GradeArgs {
            lift: v.text("lift"),
            gamma: v.text("gamma"),
            gain: v.text("gain"),
            offset: v.text("offset"),
            saturation: v.number("saturation"),
            contrast: v.text("contrast"),
            near: v.number("near"),
            far: v.number("far"),
            ramp: v.number("ramp").unwrap_or(0.0),
            ids: v.texts("ids"),
        })?;
        Ok(Arc::new(grade))
    },
};

impl Operation for Grade {
    fn run(&self, inputs: &[PathBuf], output: &Path, request: OutputRequest) -> Result<Ran> {
        Ok(Ran::image(run_grade(self, &inputs[0], output, request)?))
    }

    /// As [`run_grade`]: id names resolved from the input's manifest.
    fn node(&self, inputs: &NodeInputs) -> Result<NodeWork> {
        let select = IdSelect {
            conditions: self.ids.clone(),
            invert: false,
            alpha_only: false,
        };
        let grade = if select.has_names() {
            Grade {
                ids: select
                    .with_names_resolved(inputs.manifest.as_ref())?
                    .conditions,
                ..self.clone()
            }
        } else {
            self.clone()
        };
        Ok(NodeWork::Band {
            op: Box::new(grade),
            dy: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_for_all_channels_or_per_channel() {
        let any = |_: f64| true;
        let all = ChannelValues::parse("--gain", "2", 1.0, any, "").unwrap();
        assert_eq!((all.of("R"), all.of("Z2")), (2.0, 2.0));
        let rgb = ChannelValues::parse("--gain", "1,2,3", 1.0, any, "").unwrap();
        assert_eq!(
            (rgb.of("R"), rgb.of("G"), rgb.of("B"), rgb.of("X")),
            (1.0, 2.0, 3.0, 1.0)
        );
        let named = ChannelValues::parse("--gain", "left.R=4, G=0.5", 1.0, any, "").unwrap();
        assert_eq!(
            (named.of("left.R"), named.of("G"), named.of("R")),
            (4.0, 0.5, 1.0)
        );
        for bad in ["", "a", "1,2", "R=", "=2", "R=2,3", "inf", "nan"] {
            assert!(
                matches!(
                    ChannelValues::parse("--gain", bad, 1.0, any, ""),
                    Err(Error::Usage(_))
                ),
                "{bad}"
            );
        }
        let gamma = ChannelValues::parse("--gamma", "-1", 1.0, |v| v > 0.0, "gamma > 0");
        assert!(matches!(gamma, Err(Error::Usage(m)) if m.contains("--gamma -1")));
    }

    #[test]
    fn the_depth_mask_ramps_outside_its_range() {
        let hard = DepthMask::new(Some(2.0), Some(4.0), 0.0).unwrap();
        let masks: Vec<f64> = [1.9, 2.0, 3.9, 4.0].iter().map(|&z| hard.at(z)).collect();
        assert_eq!(masks, vec![0.0, 1.0, 1.0, 0.0]);
        let soft = DepthMask::new(Some(2.0), Some(4.0), 1.0).unwrap();
        let masks: Vec<f64> = [0.5, 1.5, 2.0, 4.0, 4.25, 5.5]
            .iter()
            .map(|&z| soft.at(z))
            .collect();
        assert_eq!(masks, vec![0.0, 0.5, 1.0, 0.0 + 1.0, 0.75, 0.0]);
        assert!(DepthMask::new(Some(3.0), Some(2.0), 0.0).is_err());
        assert!(DepthMask::new(None, None, -1.0).is_err());
    }

    #[test]
    fn the_correction_follows_its_order() {
        let grade = Grade::default();
        let p = ColumnParams {
            lift: 0.1,
            gamma: 2.0,
            gain: 2.0,
            offset: 0.05,
            contrast: 1.0,
        };
        // lift + v (gain - lift) + offset, then ^(1/gamma).
        let v: f64 = 0.5;
        let expected = (0.1 + v * (2.0 - 0.1) + 0.05).powf(0.5);
        assert_eq!(grade.correct(&p, v), expected);
        let contrast = ColumnParams {
            lift: 0.0,
            gamma: 1.0,
            gain: 1.0,
            offset: 0.0,
            contrast: 2.0,
        };
        assert!((grade.correct(&contrast, CONTRAST_PIVOT) - CONTRAST_PIVOT).abs() < 1e-15);
        assert!((grade.correct(&contrast, 0.36) - 0.72).abs() < 1e-12);
        assert_eq!(grade.correct(&contrast, -0.5), -0.5);
    }
}
