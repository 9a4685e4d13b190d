//! `transform`: move a deep image by whole pixels and change its depths (Nuke's DeepTransform
//! with whole-pixel translation; Gaffer's offset of the data window).
//!
//! Exact semantics: a translation (dx, dy) moves the data window by (dx, dy); every pixel keeps
//! its samples, bit for bit, at its new place. The display window (the format) stays, as Nuke's
//! DeepTransform keeps the format, so a later merge's frame does not change; with
//! [`Transform::moving_display`] it moves too. The depth change maps Z and ZBack to
//! Z' = Z·S + D, computed in f64 and rounded once to the channel's storage type (half or float),
//! with S > 0 and finite and D finite, so the order of samples and `deepImageState` are kept.
//! Infinite depths stay infinite. S = 1 and D = 0 leave the depths untouched (bit for bit, −0
//! included). Every other channel is copied.
//!
//! A depth change of a **half** Z or ZBack promotes that channel to float: half holds depths
//! only to 65504 and in steps of 1/1024 of their size, so a `--z-scale` would overflow it to
//! inf and a small `--z-offset` would leave it unchanged, silently. The CLI says so on one line
//! ([`Transform::promotes`]); a translation alone keeps every type.

use crate::deep::{Bounds, ChannelRole, DeepImage, Plane, SampleType};
use crate::error::{Error, Result};
use crate::request::{FieldNames, MergeOption, OptionNames};

use super::registry::{
    run_band_op, NodeInputs, NodeWork, OpSpec, Operation, OptionSpec, Produces, Ran, ValueKind,
    DEEP_INPUT,
};
use super::{DeepOp, OpWindows};
use crate::request::OutputRequest;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A whole-pixel translation and a depth change (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Transform {
    /// Columns to move right.
    pub dx: i32,
    /// Rows to move down.
    pub dy: i32,
    /// The depth scale S (> 0).
    pub z_scale: f64,
    /// The depth offset D.
    pub z_offset: f64,
    /// Move the display window with the data window.
    pub move_display: bool,
}

impl Default for Transform {
    fn default() -> Self {
        Transform {
            dx: 0,
            dy: 0,
            z_scale: 1.0,
            z_offset: 0.0,
            move_display: false,
        }
    }
}

impl Transform {
    /// A transform from `--translate X,Y`, `--z-offset D` and `--z-scale S`; refuses a scale
    /// that is not positive and finite and an offset that is not finite.
    /// Refusals name the fields ([`Self::named`] for a front end's words).
    pub fn new(translate: Option<&str>, z_offset: f64, z_scale: f64) -> Result<Self> {
        Self::named(translate, z_offset, z_scale, &FieldNames)
    }

    /// [`Self::new`], its refusals naming the options as `names` spells them.
    pub fn named(
        translate: Option<&str>,
        z_offset: f64,
        z_scale: f64,
        names: &dyn OptionNames,
    ) -> Result<Self> {
        if !(z_scale > 0.0 && z_scale.is_finite()) {
            return Err(Error::Usage(format!(
                "{} must be a positive finite number (it keeps the depth order), not {z_scale}",
                names.spell(MergeOption::ZScale)
            )));
        }
        if !z_offset.is_finite() {
            return Err(Error::Usage(format!(
                "{} must be a finite number, not {z_offset}",
                names.spell(MergeOption::ZOffset)
            )));
        }
        let (dx, dy) = match translate {
            None => (0, 0),
            Some(text) => {
                let bad = || {
                    Error::Usage(format!(
                        "{} takes X,Y in whole pixels, not {text:?}",
                        names.spell(MergeOption::Translate)
                    ))
                };
                let parts: Vec<i32> = text
                    .split(',')
                    .map(|n| n.trim().parse().map_err(|_| bad()))
                    .collect::<Result<_>>()?;
                let [x, y] = parts[..] else {
                    return Err(bad());
                };
                (x, y)
            }
        };
        Ok(Transform {
            dx,
            dy,
            z_scale,
            z_offset,
            move_display: false,
        })
    }

    /// The same transform, moving the display window with the data window when `yes`
    /// (`--move-display`).
    pub fn moving_display(self, yes: bool) -> Self {
        Transform {
            move_display: yes,
            ..self
        }
    }

    fn changes_depth(&self) -> bool {
        self.z_scale != 1.0 || self.z_offset != 0.0
    }

    /// `window` moved by the translation; an error where a corner leaves the 32-bit range.
    fn moved(&self, window: Bounds) -> Result<Bounds> {
        let add = |v: i32, d: i32| {
            v.checked_add(d).ok_or_else(|| {
                Error::Usage(format!(
                    "the translation {},{} moves the window {window} out of the 32-bit pixel range",
                    self.dx, self.dy
                ))
            })
        };
        Ok(Bounds {
            x0: add(window.x0, self.dx)?,
            y0: add(window.y0, self.dy)?,
            x1: add(window.x1, self.dx)?,
            y1: add(window.y1, self.dy)?,
        })
    }

    /// Z' = Z·S + D in f64, as the module docs say.
    pub fn depth(&self, z: f32) -> f64 {
        z as f64 * self.z_scale + self.z_offset
    }

    /// Whether this transform writes some of `channels`' depths as float where they are half
    /// (see the module docs).
    pub fn promotes(&self, channels: &[crate::deep::Channel]) -> bool {
        self.changes_depth()
            && channels.iter().any(|c| {
                matches!(c.role, ChannelRole::Z | ChannelRole::ZBack)
                    && c.sample_type == crate::deep::SampleType::F16
            })
    }
}

impl DeepOp for Transform {
    fn windows(&self, data: Bounds, display: Bounds) -> Result<OpWindows> {
        Ok(OpWindows {
            read: data,
            data: self.moved(data)?,
            display: if self.move_display {
                self.moved(display)?
            } else {
                display
            },
        })
    }

    fn apply(&self, band: &DeepImage, _: &OpWindows) -> Result<DeepImage> {
        let mut out = band.clone();
        out.data_window = self.moved(band.data_window)?;
        if self.changes_depth() {
            for (channel, plane) in out.channels.iter_mut().zip(&mut out.planes) {
                if !matches!(channel.role, ChannelRole::Z | ChannelRole::ZBack) {
                    continue;
                }
                match plane {
                    Plane::F32(values) => {
                        values.iter_mut().for_each(|z| *z = self.depth(*z) as f32)
                    }
                    Plane::F16(values) => {
                        // Promoted to float (module docs).
                        let depths = values
                            .iter()
                            .map(|z| self.depth(z.to_f32()) as f32)
                            .collect();
                        *plane = Plane::F32(depths);
                        *channel = crate::deep::Channel::new(channel.name.clone(), SampleType::F32);
                    }
                    // A uint depth is refused by the reader; nothing to scale.
                    Plane::U32(_) => {}
                }
            }
        }
        Ok(out)
    }
}

/// `transform` in the table of operations ([`super::registry`]).
pub const SPEC: OpSpec = OpSpec {
    name: "transform",
    python: "transform",
    help: "Move by whole pixels (--translate) and change depths: Z' = Z*S + D",
    doc: "Move ``input`` by whole pixels (``translate=(x, y)``; the display window stays unless \
          ``move_display``) and map its depths to ``Z * z_scale + z_offset`` (``z_scale > 0``; \
          half depths are written as float), writing ``out``, as ``deepmerge transform``. \
          Options as ``deep_slice``.",
    inputs: DEEP_INPUT,
    options: &[
        OptionSpec {
            name: "translate",
            kind: ValueKind::Numbers { sep: ",", count: 2 },
            value_name: "X,Y",
            help: "Move the image by whole pixels: X,Y (the data window; the display window \
                   stays)",
            positional: true,
            hyphen_values: true,
            ..OptionSpec::NEW
        },
        OptionSpec {
            name: "move_display",
            help: "Move the display window with the data window",
            ..OptionSpec::NEW
        },
        OptionSpec {
            name: "z_offset",
            kind: ValueKind::F64,
            default: Some("0"),
            value_name: "D",
            help: "Add D to every depth (after the scale): Z' = Z*S + D",
            positional: true,
            hyphen_values: true,
            ..OptionSpec::NEW
        },
        OptionSpec {
            name: "z_scale",
            kind: ValueKind::F64,
            default: Some("1"),
            value_name: "S",
            help: "Multiply every depth by S (> 0): Z' = Z*S + D",
            positional: true,
            hyphen_values: true,
            ..OptionSpec::NEW
        },
    ],
    produces: Produces::Image,
    comp: true,
    build: |v, names| {
        let (offset, scale) = (v.number("z_offset"), v.number("z_scale"));
        let transform = Transform::named(
            v.text("translate"),
            offset.unwrap_or(0.0),
            scale.unwrap_or(1.0),
            names,
        )?;
        Ok(Arc::new(transform.moving_display(v.flag("move_display"))))
    },
};

impl Operation for Transform {
    fn run(&self, inputs: &[PathBuf], output: &Path, request: OutputRequest) -> Result<Ran> {
        run_band_op(self, inputs, output, request)
    }

    fn node(&self, _: &NodeInputs) -> Result<NodeWork> {
        Ok(NodeWork::Band {
            op: Box::new(*self),
            dy: self.dy,
        })
    }

    /// Half depths cannot hold most depth changes: the operation writes them as float, and the
    /// CLI says so, once.
    fn note(&self, inputs: &[PathBuf]) -> Result<Option<String>> {
        let half_depths = crate::exr::read_parts_info(&inputs[0])?
            .iter()
            .any(|part| part.deep && self.promotes(&part.channels));
        Ok(half_depths.then(|| {
            format!(
                "{}: its Z/ZBack are half, which would overflow or not change; the new depths \
                 are written as float",
                inputs[0].display()
            )
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_scales_that_would_break_the_depth_order() {
        for s in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(
                matches!(Transform::new(None, 0.0, s), Err(Error::Usage(_))),
                "{s}"
            );
        }
        assert!(Transform::new(None, f64::INFINITY, 1.0).is_err());
        assert!(Transform::new(Some("1"), 0.0, 1.0).is_err());
        assert_eq!(Transform::new(Some("-3, 4"), 0.0, 1.0).unwrap().dy, 4);
    }

    #[test]
    fn infinite_depths_stay_infinite() {
        let t = Transform::new(None, -5.0, 0.5).unwrap();
        assert_eq!(t.depth(f32::INFINITY), f64::INFINITY);
        assert_eq!(t.depth(f32::NEG_INFINITY), f64::NEG_INFINITY);
        assert_eq!(t.depth(4.0), -3.0);
    }

    #[test]
    fn half_depths_are_promoted_to_float_when_they_change() {
        use crate::deep::{Channel, DeepState};
        let channels = vec![
            Channel::new("A", SampleType::F16),
            Channel::new("Z", SampleType::F16),
        ];
        let window = Bounds::from_origin_size(0, 0, 1, 1);
        let planes = vec![
            Plane::F16(vec![half::f16::from_f32(0.5)]),
            Plane::F16(vec![half::f16::from_f32(1000.0)]),
        ];
        let image =
            DeepImage::from_counts(window, window, channels, &[1], planes, DeepState::Sorted)
                .unwrap();
        // A scale that overflows half, and an offset below half's step at 1000 (0.5).
        for t in [
            Transform::new(None, 0.0, 100.0),
            Transform::new(None, 0.01, 1.0),
        ] {
            let t = t.unwrap();
            assert!(t.promotes(&image.channels));
            let out = t
                .apply(&image, &t.windows(window, window).unwrap())
                .unwrap();
            assert_eq!(out.channels[1].sample_type, SampleType::F32);
            assert_eq!(out.planes[1], Plane::F32(vec![t.depth(1000.0) as f32]));
            assert_eq!(out.planes[0], image.planes[0], "alpha keeps its type");
        }
        let moved = Transform::new(Some("1,1"), 0.0, 1.0).unwrap();
        assert!(!moved.promotes(&image.channels));
    }
}
