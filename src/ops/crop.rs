//! `crop`: keep the samples of the pixels inside a box, or with `keep_outside` those outside it
//! (Nuke's DeepCrop without its depth planes, which `slice` covers; oiiotool `--crop`).
//!
//! Exact semantics: the box is inclusive, X0,Y0,X1,Y1 in absolute pixel coordinates, as EXR
//! windows are written. A pixel keeps all its samples, bit for bit and in order, when it is
//! kept, and none otherwise. The output's data window shrinks to what remains: the input's data
//! window intersected with the box, or, with `keep_outside`, the smallest window holding the
//! input's window minus the box (it shrinks only where the box covers whole rows or columns of
//! it). When nothing remains the output has no samples: its data window is the box (or, keeping
//! the outside of a box covering it all, the input's), every count zero, and the command notes
//! it. The display window and `deepImageState` are the input's.

use crate::deep::{Bounds, DeepImage};
use crate::error::{Error, Result};
use crate::request::{FieldNames, MergeOption, OptionNames};

use super::registry::{
    run_band_op, NodeInputs, NodeWork, OpSpec, Operation, OptionSpec, Produces, Ran, ValueKind,
    DEEP_INPUT,
};
use super::{DeepOp, OpWindows};
use crate::deep::builder::{build_band, RowBuilder};
use crate::request::OutputRequest;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A crop box and which side of it is kept (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Crop {
    /// The box, inclusive.
    pub area: Bounds,
    /// Keep the pixels outside the box instead.
    pub keep_outside: bool,
}

impl Crop {
    /// A crop from `X0,Y0,X1,Y1` (inclusive corners); refusals name the field
    /// ([`Self::parse_named`] for a front end's words).
    pub fn parse(text: &str, keep_outside: bool) -> Result<Self> {
        Self::parse_named(text, keep_outside, &FieldNames)
    }

    /// [`Self::parse`], its refusals naming the box as `names` spells it.
    pub fn parse_named(text: &str, keep_outside: bool, names: &dyn OptionNames) -> Result<Self> {
        let bad = || {
            Error::Usage(format!(
                "{} takes X0,Y0,X1,Y1 (inclusive pixel corners, X0 <= X1, Y0 <= Y1), not {text:?}",
                names.spell(MergeOption::Box)
            ))
        };
        let numbers: Vec<i32> = text
            .split(',')
            .map(|n| n.trim().parse().map_err(|_| bad()))
            .collect::<Result<_>>()?;
        let [x0, y0, x1, y1] = numbers[..] else {
            return Err(bad());
        };
        if x0 > x1 || y0 > y1 {
            return Err(bad());
        }
        Ok(Crop {
            area: Bounds { x0, y0, x1, y1 },
            keep_outside,
        })
    }

    fn inside(&self, x: i32, y: i32) -> bool {
        self.area.index_of(x, y).is_some()
    }
}

/// The intersection of two windows (empty when they do not meet).
fn intersection(a: Bounds, b: Bounds) -> Bounds {
    Bounds {
        x0: a.x0.max(b.x0),
        y0: a.y0.max(b.y0),
        x1: a.x1.min(b.x1),
        y1: a.y1.min(b.y1),
    }
}

/// The smallest window holding `data` minus `cut`.
fn outside(data: Bounds, cut: Bounds) -> Bounds {
    let meet = intersection(data, cut);
    if meet.area() == 0 {
        return data;
    }
    let mut left = data;
    // Only a box spanning every column removes whole rows (and the other way round).
    if meet.x0 == data.x0 && meet.x1 == data.x1 {
        if meet.y0 == data.y0 {
            left.y0 = meet.y1 + 1;
        }
        if meet.y1 == data.y1 {
            left.y1 = meet.y0 - 1;
        }
    }
    if meet.y0 == data.y0 && meet.y1 == data.y1 {
        if meet.x0 == data.x0 {
            left.x0 = meet.x1 + 1;
        }
        if meet.x1 == data.x1 {
            left.x1 = meet.x0 - 1;
        }
    }
    left
}

impl DeepOp for Crop {
    fn windows(&self, data: Bounds, display: Bounds) -> Result<OpWindows> {
        let left = if self.keep_outside {
            outside(data, self.area)
        } else {
            intersection(data, self.area)
        };
        if left.area() == 0 {
            // Nothing remains: an output with no samples, read from no row of the input. Its
            // data window is the box (what was asked for), or the input's for the outside of
            // a box that covers it all.
            return Ok(OpWindows {
                read: Bounds {
                    y1: data.y0 - 1,
                    ..data
                },
                data: if self.keep_outside { data } else { self.area },
                display,
            });
        }
        Ok(OpWindows {
            read: left,
            data: left,
            display,
        })
    }

    fn apply(&self, band: &DeepImage, windows: &OpWindows) -> Result<DeepImage> {
        let input = band.data_window;
        let window = Bounds {
            y0: input.y0,
            y1: input.y1,
            ..windows.data
        };
        let fill = |y: i32, row: &mut RowBuilder| {
            for x in window.x0..=window.x1 {
                if self.inside(x, y) != self.keep_outside {
                    let p = input.index_of(x, y).expect("the output lies in the input");
                    for i in band.range(p) {
                        row.copy(band, i);
                    }
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

/// `crop` in the table of operations ([`super::registry`]).
pub const SPEC: OpSpec = OpSpec {
    name: "crop",
    python: "crop",
    help: "Keep the pixels inside an inclusive box (or, with --keep-outside, outside it); the \
           data window shrinks to what remains",
    doc: "Keep the pixels of ``input`` inside the inclusive box ``(x0, y0, x1, y1)`` (or, with \
          ``keep_outside``, outside it) and write them to ``out``, as ``deepmerge crop``; the \
          data window shrinks to what remains. Options as ``deep_slice``.",
    inputs: DEEP_INPUT,
    options: &[
        OptionSpec {
            name: "box",
            kind: ValueKind::Numbers { sep: ",", count: 4 },
            value_name: "X0,Y0,X1,Y1",
            help: "The box X0,Y0,X1,Y1: inclusive pixel corners, as EXR windows are written",
            positional: true,
            required: true,
            hyphen_values: true,
            ..OptionSpec::NEW
        },
        OptionSpec {
            name: "keep_outside",
            help: "Keep the pixels outside the box instead",
            positional: true,
            ..OptionSpec::NEW
        },
    ],
    produces: Produces::Image,
    comp: true,
    build: |v, names| {
        let area = v.text("box").unwrap_or_default();
        Ok(Arc::new(Crop::parse_named(
            area,
            v.flag("keep_outside"),
            names,
        )?))
    },
};

impl Operation for Crop {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn b(x0: i32, y0: i32, x1: i32, y1: i32) -> Bounds {
        Bounds { x0, y0, x1, y1 }
    }

    #[test]
    fn outside_shrinks_only_where_the_box_spans_the_window() {
        let data = b(0, 0, 9, 9);
        assert_eq!(outside(data, b(2, 2, 5, 5)), data);
        assert_eq!(outside(data, b(-5, -5, 20, 3)), b(0, 4, 9, 9));
        assert_eq!(outside(data, b(-5, 6, 20, 30)), b(0, 0, 9, 5));
        assert_eq!(outside(data, b(7, -1, 12, 12)), b(0, 0, 6, 9));
        assert_eq!(outside(data, b(20, 20, 30, 30)), data);
        assert_eq!(outside(data, b(-1, -1, 10, 10)).area(), 0);
    }

    #[test]
    fn boxes_parse_as_inclusive_corners() {
        assert_eq!(Crop::parse("1,2,3,4", false).unwrap().area, b(1, 2, 3, 4));
        assert_eq!(
            Crop::parse("-4, -2, 0, 0", true).unwrap().area,
            b(-4, -2, 0, 0)
        );
        for bad in ["1,2,3", "1,2,3,4,5", "3,0,1,0", "a,b,c,d", ""] {
            assert!(
                matches!(Crop::parse(bad, false), Err(Error::Usage(_))),
                "{bad}"
            );
        }
    }
}
