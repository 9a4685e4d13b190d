//! `slice`: keep the part of every sample that lies in the depth range [near, far) (Gaffer's
//! DeepSlice; Nuke has no single node: DeepCrop's znear/zfar drops whole samples).
//!
//! Exact semantics, per sample with front Z and back ZBack (a point where ZBack ≤ Z or where
//! there is no ZBack channel):
//! - A point is kept, unchanged, when near ≤ Z < far. A point exactly at `far` belongs to the
//!   back (the slice starting at `far`); one exactly at `near` to this slice.
//! - A volume [Z, ZBack) keeps its piece [max(Z, near), min(ZBack, far)) when that is not
//!   empty. A volume wholly inside is copied bit for bit. A piece covering a fraction f of the
//!   volume's depth is cut with the tidy's split rule
//!   ([`crate::composite::tidy::split_row`]): each alpha a becomes 1 − (1 − a)^f, each colour is
//!   scaled by the new alpha over the old (by f where the alpha is 0); Z and ZBack become the
//!   piece's ends; channels that are not composited (ids) are copied.
//! - With `keep_outside`, the complement: the parts in [−inf, near) and [far, +inf), so a
//!   volume crossing both planes gives two pieces (front one first).
//!
//! Because a front piece of alpha a1 and the back piece of alpha a2 satisfy
//! (1 − a1)(1 − a2) = 1 − a and their colours add up "over" to the volume's, the merge of
//! `--far z` and `--near z` flattens to the original within the rounding of the stored type
//! (`tests/ops.rs` proves it on the volumetric files of the corpus). Samples keep their order;
//! where the input says its pixels are sorted, each output pixel is sorted again (a volume
//! clipped at `near` may move behind a sample that started inside the slice), so the output's
//! `deepImageState` is the input's.

use crate::composite::tidy::{piece_fraction, split_row};
use crate::composite::CompositeChannels;
use crate::deep::{Bounds, DeepImage};
use crate::error::{Error, Result};
use crate::request::{FieldNames, MergeOption, OptionNames};
use crate::vocab::{depth_cmp, depth_key};

use super::registry::{
    run_band_op, NodeInputs, NodeWork, OpSpec, Operation, OptionSpec, Produces, Ran, ValueKind,
    DEEP_INPUT,
};
use super::{DeepOp, OpWindows};
use crate::deep::builder::{build_band, RowBuilder};
use crate::request::OutputRequest;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The depth range an output keeps (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slice {
    /// Front plane (inclusive); −inf keeps everything in front.
    pub near: f32,
    /// Back plane (exclusive); +inf keeps everything behind.
    pub far: f32,
    /// Keep the parts outside [near, far) instead.
    pub keep_outside: bool,
}

impl Slice {
    /// A slice from optional planes; refuses NaN and a near plane behind the far one, naming
    /// the planes by their fields ([`Self::named`] for a front end's words).
    pub fn new(near: Option<f32>, far: Option<f32>, keep_outside: bool) -> Result<Self> {
        Self::named(near, far, keep_outside, &FieldNames)
    }

    /// [`Self::new`], its refusals naming the planes as `names` spells them.
    pub fn named(
        near: Option<f32>,
        far: Option<f32>,
        keep_outside: bool,
        names: &dyn OptionNames,
    ) -> Result<Self> {
        let near = near.unwrap_or(f32::NEG_INFINITY);
        let far = far.unwrap_or(f32::INFINITY);
        if near.is_nan() || far.is_nan() {
            return Err(Error::Usage(format!(
                "{} and {} must be numbers",
                names.spell(MergeOption::Near),
                names.spell(MergeOption::Far)
            )));
        }
        if near > far {
            return Err(Error::Usage(format!(
                "{} is behind {}; the slice [near, far) would be empty",
                names.setting(MergeOption::Near, &near.to_string()),
                names.setting(MergeOption::Far, &far.to_string())
            )));
        }
        Ok(Slice {
            near,
            far,
            keep_outside,
        })
    }

    /// The pieces of [front, back) this slice keeps (at most two).
    fn pieces(&self, front: f32, back: f32) -> impl Iterator<Item = (f32, f32)> {
        let ranges = if self.keep_outside {
            [(front, back.min(self.near)), (front.max(self.far), back)]
        } else {
            [(front.max(self.near), back.min(self.far)), (0.0, 0.0)]
        };
        ranges.into_iter().filter(|(a, b)| a < b)
    }

    /// Whether a point at `z` is kept.
    fn keeps_point(&self, z: f32) -> bool {
        let inside = self.near <= z && z < self.far;
        inside != self.keep_outside
    }
}

impl DeepOp for Slice {
    fn windows(&self, data: Bounds, display: Bounds) -> Result<OpWindows> {
        Ok(OpWindows {
            read: data,
            data,
            display,
        })
    }

    fn apply(&self, band: &DeepImage, _: &OpWindows) -> Result<DeepImage> {
        let (z_channel, zback_channel) = band.depth_channels();
        let Some(z_channel) = z_channel else {
            return Err(Error::format("has no Z channel; a slice needs depths"));
        };
        let composite = CompositeChannels::of(&[band]);
        // Column k of the split values is channel `columns[k]` of the band.
        let columns: Vec<usize> = composite
            .names
            .iter()
            .map(|n| {
                band.channel_index(n)
                    .expect("composited channels are the band's")
            })
            .collect();
        let column_of: Vec<Option<usize>> = (0..band.channels.len())
            .map(|c| columns.iter().position(|&k| k == c))
            .collect();
        let sorted = band.state.is_sorted();
        let window = band.data_window;
        let depth = |i: usize| {
            let z = band.planes[z_channel].get_f32(i);
            let zback = zback_channel.map_or(z, |c| band.planes[c].get_f32(i));
            depth_key(z, zback)
        };
        let fill = |y: i32, row: &mut RowBuilder| {
            let mut values = Vec::with_capacity(composite.len());
            let mut order: Vec<(f32, f32, usize, f32, f32)> = Vec::new();
            for x in window.x0..=window.x1 {
                let p = window.index_of(x, y).expect("inside the band");
                // (kept front, kept back, sample, piece front, piece back) in input order.
                order.clear();
                for i in band.range(p) {
                    let (z, zback) = depth(i);
                    if zback > z {
                        for (front, back) in self.pieces(z, zback) {
                            order.push((front, back, i, z, zback));
                        }
                    } else if self.keeps_point(z) {
                        order.push((z, zback, i, z, zback));
                    }
                }
                if sorted {
                    order.sort_by(|a, b| depth_cmp((a.0, a.1), (b.0, b.1)));
                }
                for &(front, back, i, z, zback) in &order {
                    if (front, back) == (z, zback) {
                        row.copy(band, i);
                        continue;
                    }
                    let fraction =
                        piece_fraction(front as f64, back as f64, zback as f64 - z as f64);
                    values.clear();
                    values.extend(columns.iter().map(|&c| band.planes[c].get_f32(i)));
                    let split: Vec<f64> = split_row(&values, fraction, &composite).collect();
                    row.push_changed(band, i, |c| {
                        if c == z_channel {
                            Some(front as f64)
                        } else if Some(c) == zback_channel {
                            Some(back as f64)
                        } else {
                            column_of[c].map(|k| split[k])
                        }
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

/// `slice` in the table of operations ([`super::registry`]).
pub const SPEC: OpSpec = OpSpec {
    name: "slice",
    python: "deep_slice",
    help: "Keep the part of every sample inside the depth range [--near, --far), splitting \
           volumes that cross a plane; --keep-outside keeps the rest",
    doc: "Keep the part of every sample of the deep file ``input`` inside the depth range \
          ``[near, far)`` and write it to ``out``, as ``deepmerge slice``: volumes crossing a \
          plane are split with the tidy's rule, points exactly at ``far`` belong to the back, \
          ``keep_outside`` keeps the complement. ``out`` is a deep EXR, or ``*.png`` for a \
          preview of its flat composite. ``compression``, ``no_deep_state``, ``tidy``, ``part`` \
          and ``memory_budget`` (bytes) are the CLI's options.",
    inputs: DEEP_INPUT,
    options: &[
        OptionSpec {
            name: "near",
            kind: ValueKind::F32,
            value_name: "Z",
            help: "Front plane: keep from this depth on (inclusive; default -inf)",
            positional: true,
            hyphen_values: true,
            ..OptionSpec::NEW
        },
        OptionSpec {
            name: "far",
            kind: ValueKind::F32,
            value_name: "Z",
            help: "Back plane: keep up to this depth (exclusive; default +inf)",
            positional: true,
            hyphen_values: true,
            ..OptionSpec::NEW
        },
        OptionSpec {
            name: "keep_outside",
            help: "Keep what lies outside [near, far) instead",
            positional: true,
            ..OptionSpec::NEW
        },
    ],
    produces: Produces::Image,
    comp: true,
    build: |v, names| {
        let slice = Slice::named(v.f32("near"), v.f32("far"), v.flag("keep_outside"), names)?;
        Ok(Arc::new(slice))
    },
};

impl Operation for Slice {
    fn run(&self, inputs: &[PathBuf], output: &Path, request: OutputRequest) -> Result<Ran> {
        run_band_op(self, inputs, output, request)
    }

    fn node(&self, _: &NodeInputs) -> Result<NodeWork> {
        Ok(NodeWork::Band {
            op: Box::new(*self),
            dy: 0,
        })
    }
}
