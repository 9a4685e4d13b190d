//! Integer pixel rectangles with inclusive corners, as EXR stores windows.

/// A rectangle of pixels from (x0, y0) to (x1, y1) inclusive. Empty when x1 < x0 or y1 < y0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Left column.
    pub x0: i32,
    /// Top row.
    pub y0: i32,
    /// Right column (inclusive).
    pub x1: i32,
    /// Bottom row (inclusive).
    pub y1: i32,
}

impl Bounds {
    /// From origin and size.
    pub fn from_origin_size(x0: i32, y0: i32, width: usize, height: usize) -> Self {
        Bounds {
            x0,
            y0,
            x1: x0 + width as i32 - 1,
            y1: y0 + height as i32 - 1,
        }
    }

    /// Columns in the rectangle.
    pub fn width(&self) -> usize {
        (self.x1 as i64 - self.x0 as i64 + 1).max(0) as usize
    }

    /// Rows in the rectangle.
    pub fn height(&self) -> usize {
        (self.y1 as i64 - self.y0 as i64 + 1).max(0) as usize
    }

    /// Pixels in the rectangle. Saturates instead of wrapping: a window read from a file can
    /// be 2^32 x 2^32, and a wrapped area would slip past every memory check that uses it.
    pub fn area(&self) -> usize {
        self.width().saturating_mul(self.height())
    }

    /// The smallest rectangle holding both.
    pub fn union(&self, other: &Bounds) -> Bounds {
        Bounds {
            x0: self.x0.min(other.x0),
            y0: self.y0.min(other.y0),
            x1: self.x1.max(other.x1),
            y1: self.y1.max(other.y1),
        }
    }

    /// Row-major index of (x, y) inside the rectangle.
    pub fn index_of(&self, x: i32, y: i32) -> Option<usize> {
        if x < self.x0 || x > self.x1 || y < self.y0 || y > self.y1 {
            return None;
        }
        Some((y - self.y0) as usize * self.width() + (x - self.x0) as usize)
    }

    /// Absolute coordinates of row-major index `p`.
    pub fn coords_of(&self, p: usize) -> (i32, i32) {
        let w = self.width().max(1);
        (self.x0 + (p % w) as i32, self.y0 + (p / w) as i32)
    }
}

impl std::fmt::Display for Bounds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "({},{})-({},{}) {}x{}",
            self.x0,
            self.y0,
            self.x1,
            self.y1,
            self.width(),
            self.height()
        )
    }
}
