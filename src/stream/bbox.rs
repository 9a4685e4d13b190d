//! The merge's output data window, `--bbox` (Nuke Merge's "set bbox to"): the union of the
//! inputs' data windows (the default), their intersection, the first input's, or a given box.
//!
//! Exact semantics: the output's data window is the chosen window; every output pixel inside
//! it is the pixel the union merge makes there, bit for bit (the merge reads every input's
//! samples at that pixel, whatever the window), and the inputs' samples outside it are not
//! read past their rows' chunks and not written. A box may reach beyond every input (those
//! pixels are empty, as the union's gaps are). An empty intersection is an error. The display
//! window is the first input's, as always.

use std::fmt;
use std::str::FromStr;

use crate::deep::Bounds;
use crate::error::{Error, Result};

/// Which data window a merge writes (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OutputWindow {
    /// The union of the inputs' data windows.
    #[default]
    Union,
    /// The intersection of the inputs' data windows.
    Intersection,
    /// The first input's data window.
    First,
    /// This box (inclusive corners).
    Box(Bounds),
}

impl OutputWindow {
    /// The output window for inputs with these data windows (in input order).
    pub fn resolve(&self, windows: &[Bounds]) -> Result<Bounds> {
        let first = *windows
            .first()
            .ok_or_else(|| Error::Usage("nothing to merge".into()))?;
        Ok(match self {
            OutputWindow::Union => windows.iter().fold(first, |a, b| a.union(b)),
            OutputWindow::Intersection => {
                let meet = windows.iter().fold(first, |a, b| Bounds {
                    x0: a.x0.max(b.x0),
                    y0: a.y0.max(b.y0),
                    x1: a.x1.min(b.x1),
                    y1: a.y1.min(b.y1),
                });
                if meet.x0 > meet.x1 || meet.y0 > meet.y1 {
                    let list: Vec<String> = windows.iter().map(Bounds::to_string).collect();
                    return Err(Error::Usage(format!(
                        "the output window is the inputs' intersection, but their data windows {} do not meet",
                        list.join(", ")
                    )));
                }
                meet
            }
            OutputWindow::First => first,
            OutputWindow::Box(area) => *area,
        })
    }
}

impl FromStr for OutputWindow {
    type Err = Error;

    /// `union`, `intersection`, `first` or `X0,Y0,X1,Y1` (inclusive corners).
    fn from_str(text: &str) -> Result<Self> {
        match text.trim() {
            "union" => return Ok(OutputWindow::Union),
            "intersection" => return Ok(OutputWindow::Intersection),
            "first" => return Ok(OutputWindow::First),
            _ => {}
        }
        let bad = || {
            Error::Usage(format!(
                "the output window is union, intersection, first or X0,Y0,X1,Y1 \
                 (inclusive corners, X0 <= X1, Y0 <= Y1), not {text:?}"
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
        Ok(OutputWindow::Box(Bounds { x0, y0, x1, y1 }))
    }
}

impl fmt::Display for OutputWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OutputWindow::Union => f.write_str("union"),
            OutputWindow::Intersection => f.write_str("intersection"),
            OutputWindow::First => f.write_str("first"),
            OutputWindow::Box(b) => write!(f, "{},{},{},{}", b.x0, b.y0, b.x1, b.y1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(x0: i32, y0: i32, x1: i32, y1: i32) -> Bounds {
        Bounds { x0, y0, x1, y1 }
    }

    #[test]
    fn each_mode_picks_its_window() {
        let windows = [b(0, 0, 9, 9), b(5, -3, 20, 4)];
        let pick = |text: &str| text.parse::<OutputWindow>().unwrap().resolve(&windows);
        assert_eq!(pick("union").unwrap(), b(0, -3, 20, 9));
        assert_eq!(pick("intersection").unwrap(), b(5, 0, 9, 4));
        assert_eq!(pick("first").unwrap(), b(0, 0, 9, 9));
        assert_eq!(pick("-4,2,100,3").unwrap(), b(-4, 2, 100, 3));
        let apart = [b(0, 0, 1, 1), b(5, 5, 6, 6)];
        assert!(matches!(
            OutputWindow::Intersection.resolve(&apart),
            Err(Error::Usage(_))
        ));
    }

    #[test]
    fn bad_texts_are_refused_and_good_ones_print_back() {
        for bad in ["", "all", "1,2,3", "3,0,1,0", "1,2,3,4,5"] {
            assert!(bad.parse::<OutputWindow>().is_err(), "{bad}");
        }
        for good in ["union", "intersection", "first", "-1,-2,3,4"] {
            assert_eq!(good.parse::<OutputWindow>().unwrap().to_string(), good);
        }
    }
}
