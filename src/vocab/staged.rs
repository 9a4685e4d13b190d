//! One input's rows of a band as they are staged for the GPU gather (`glsl/gather.glsl`): the
//! decoded planes the reader holds, untouched (half stays half), and the sample offsets of the
//! staged rows. The host's per-sample work ends at decoding: staging copies whole plane runs
//! and converts one offset per pixel; keys, values and the half-to-float conversion are made by
//! the gather (`gather.comp`, twin `cpu::gather::gather`).

use half::f16;

use crate::deep::{Bounds, DeepImage, Plane};

/// Where a slot's values come from (slot 0 is Z, slot 1 ZBack, slot 2 + c column c).
#[derive(Clone, Copy, Debug)]
pub enum SlotSource<'i> {
    /// The input has no such channel: Z reads 0, ZBack reads Z, a column reads 0.
    Absent,
    /// Half values.
    F16(&'i [f16]),
    /// Float values.
    F32(&'i [f32]),
    /// Unsigned integers (read as the nearest float).
    U32(&'i [u32]),
}

impl SlotSource<'_> {
    /// The slot type's number in `gather.glsl` (`SLOT_ABSENT` .. `SLOT_UINT`).
    pub fn glsl_type(&self) -> u32 {
        match self {
            SlotSource::Absent => 0,
            SlotSource::F16(_) => 1,
            SlotSource::F32(_) => 2,
            SlotSource::U32(_) => 3,
        }
    }

    /// Its values as 32-bit words as they are staged: halves two to a word (low half first,
    /// a last odd one padded with 0), floats and uints one to a word.
    pub fn words(&self) -> usize {
        match self {
            SlotSource::Absent => 0,
            SlotSource::F16(v) => v.len().div_ceil(2),
            SlotSource::F32(v) => v.len(),
            SlotSource::U32(v) => v.len(),
        }
    }

    /// Its bytes as staged ([`Self::words`] words).
    pub fn bytes(&self) -> &[u8] {
        match self {
            SlotSource::Absent => &[],
            SlotSource::F16(v) => bytemuck::cast_slice(v),
            SlotSource::F32(v) => bytemuck::cast_slice(v),
            SlotSource::U32(v) => bytemuck::cast_slice(v),
        }
    }
}

/// One input's rows of one band, staged.
#[derive(Clone, Debug)]
pub struct StagedInput<'i> {
    /// Which input of the merge (the fragments' `input`).
    pub input: u32,
    /// The input's sample index of staged sample 0 (the fragments' `index` is this plus the
    /// staged index).
    pub index_base: u32,
    /// Width of the input's data window.
    pub width: usize,
    /// Rows staged (the input's rows inside the band; may be 0).
    pub rows: usize,
    /// The staged input pixel (column, row) the band's first pixel falls on: the band's
    /// window origin in staged coordinates, negative where the band starts left of or above
    /// the input.
    pub origin: (i64, i64),
    /// Sample offsets of the staged pixels, relative to the first staged sample:
    /// `width * rows + 1` entries.
    pub offsets: Vec<u32>,
    /// Z, ZBack, then each composited column.
    pub slots: Vec<SlotSource<'i>>,
}

impl<'i> StagedInput<'i> {
    /// Stage input `input` (`image`, its Z and ZBack channels `depth`, the channel of each
    /// composited column `sources`) for the band of `window`'s rows `row0 .. row0 + rows`.
    /// The caller has checked that `image` holds fewer than 2^32 samples.
    pub fn new(
        image: &'i DeepImage,
        input: u32,
        depth: (Option<usize>, Option<usize>),
        sources: &[Option<usize>],
        window: Bounds,
        row0: usize,
        rows: usize,
    ) -> Self {
        let dw = image.data_window;
        let width = dw.width();
        let band_y0 = window.y0 as i64 + row0 as i64;
        let band_y1 = band_y0 + rows as i64;
        // The input's rows inside the band, relative to its data window.
        let first = (band_y0 - dw.y0 as i64).clamp(0, dw.height() as i64) as usize;
        let last = (band_y1 - dw.y0 as i64).clamp(0, dw.height() as i64) as usize;
        let staged_rows = last.max(first) - first;
        let (p0, p1) = (first * width, (first + staged_rows) * width);
        let s0 = image.offsets[p0];
        let s1 = image.offsets[p1];
        let offsets = image.offsets[p0..=p1]
            .iter()
            .map(|&o| (o - s0) as u32)
            .collect();
        let (s0, s1) = (s0 as usize, s1 as usize);
        let slot = |channel: Option<usize>| match channel.map(|c| &image.planes[c]) {
            None => SlotSource::Absent,
            Some(Plane::F16(v)) => SlotSource::F16(&v[s0..s1]),
            Some(Plane::F32(v)) => SlotSource::F32(&v[s0..s1]),
            Some(Plane::U32(v)) => SlotSource::U32(&v[s0..s1]),
        };
        let mut slots = vec![slot(depth.0), slot(depth.1)];
        slots.extend(sources.iter().map(|&c| slot(c)));
        StagedInput {
            input,
            index_base: s0 as u32,
            width,
            rows: staged_rows,
            origin: (
                window.x0 as i64 - dw.x0 as i64,
                band_y0 - (dw.y0 as i64 + first as i64),
            ),
            offsets,
            slots,
        }
    }

    /// Samples staged (whole rows of the input, columns outside the band's included).
    pub fn samples(&self) -> usize {
        *self.offsets.last().unwrap_or(&0) as usize
    }

    /// Samples the gather takes for a band `band_width` wide: the staged ones inside the band's
    /// columns (all of them unless the input reaches past the window, as with `--bbox`).
    pub fn gathered_samples(&self, band_width: usize) -> usize {
        let std::ops::Range { start: first, end } = self.gathered_columns(band_width);
        (0..self.rows)
            .map(|y| {
                (self.offsets[y * self.width + end] - self.offsets[y * self.width + first]) as usize
            })
            .sum()
    }

    /// The staged columns inside a band `band_width` wide (empty when the input lies outside it).
    fn gathered_columns(&self, band_width: usize) -> std::ops::Range<usize> {
        let first = self.origin.0.clamp(0, self.width as i64);
        let end = (self.origin.0 + band_width as i64).clamp(first, self.width as i64);
        first as usize..end as usize
    }

    /// The sample counts of the staged pixels the gather takes for a band `band_width` wide
    /// (those inside the band's columns, as [`Self::gathered_samples`] counts them), row by row.
    pub fn gathered_counts(&self, band_width: usize) -> impl Iterator<Item = u32> + '_ {
        let std::ops::Range { start: first, end } = self.gathered_columns(band_width);
        (0..self.rows).flat_map(move |y| {
            let row = &self.offsets[y * self.width + first..=y * self.width + end];
            row.windows(2).map(|w| w[1] - w[0])
        })
    }

    /// The staged pixel under band pixel `q` (row-major in a band `band_width` wide), if the
    /// input has one there.
    pub fn source_pixel(&self, q: usize, band_width: usize) -> Option<usize> {
        let x = (q % band_width) as i64 + self.origin.0;
        let y = (q / band_width) as i64 + self.origin.1;
        if x < 0 || y < 0 || x >= self.width as i64 || y >= self.rows as i64 {
            return None;
        }
        Some(y as usize * self.width + x as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A staged input of 4 x 2 pixels with counts 0..8, its first column at band column `x`.
    fn staged(x: i64) -> StagedInput<'static> {
        let counts: Vec<u32> = (0..8).collect();
        let mut offsets = vec![0u32];
        for c in &counts {
            offsets.push(offsets.last().unwrap() + c);
        }
        StagedInput {
            input: 0,
            index_base: 0,
            width: 4,
            rows: 2,
            origin: (-x, 0),
            offsets,
            slots: Vec::new(),
        }
    }

    #[test]
    fn gathered_counts_are_the_band_columns_counts_row_by_row() {
        // Inside the band, reaching past its left edge, past its right edge, and outside it.
        let cases: [(i64, usize, Vec<u32>); 4] = [
            (0, 4, vec![0, 1, 2, 3, 4, 5, 6, 7]),
            (-1, 4, vec![1, 2, 3, 5, 6, 7]),
            (2, 4, vec![0, 1, 4, 5]),
            (5, 4, vec![]),
        ];
        for (x, width, expected) in cases {
            let input = staged(x);
            let counts: Vec<u32> = input.gathered_counts(width).collect();
            assert_eq!(counts, expected, "input at band column {x}");
            let sum: u32 = counts.iter().sum();
            assert_eq!(sum as usize, input.gathered_samples(width), "at {x}");
        }
    }
}
