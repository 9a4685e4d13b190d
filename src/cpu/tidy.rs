//! CPU twin of `glsl/tidy.comp`: tidy and flatten chosen pixels of a merged, sorted, linearised
//! (CSR) fragment list in one pass per pixel, without materialising the tidied list.
//!
//! The result is `composite::tidy_pixel` followed by `composite::flatten_pixel`
//! (docs/architecture.md, "Tidy"), in f32 with the shader's own `log1p`/`expm1` (GLSL has neither,
//! and `log`/`exp` near 1 are only specified to an absolute 2^-21). Every function here has a GLSL
//! namesake with the same constants and the same order of operations, so the two agree to a few
//! ulp.
//!
//! The walk: a pixel's boundaries are its samples' Z and (volumes') ZBack values. Going front to
//! back over the distinct boundaries `b`, first the points at `b` composite in list order (for a
//! tidy deep output, the count and emit modes, they merge into one as
//! `composite::tidy::tidy_deep_pixel` merges them, by the same mix as volume pieces), then
//! the slab `[b, next)`: every volume covering it contributes the piece covering that slab
//! (alpha `-expm1(f·log1p(-a))`, f = slab / volume length), and two or more such pieces merge as
//! in `composite::tidy::merge_coincident`. This is exactly the order the reference's stable sort
//! of the cut pieces gives: at equal Z a point (Z, ZBack ≤ Z) sorts before a volume (Z, ZBack > Z),
//! and pieces of one slab keep the order of their sources. The list must be in merge order.
//!
//! Work per pixel is O(boundaries × samples alive at a boundary × columns) with O(1) memory,
//! which is what one shader invocation can afford: nothing is bounded by a compile-time length,
//! so lists of hundreds of samples are correct, only slower. (The shader also splits the walk
//! into resumable passes to live under llvmpipe's loop cap; that changes no arithmetic, so the
//! twin walks in one go.)

use super::compact::compact_flagged;
use super::scan::exclusive_scan;
use crate::vocab::{FlagField, Fragment, TidiedPixels, GATE_LIMIT};

/// ln 2 rounded to f32 (GLSL `LN2`).
pub const LN2: f32 = std::f32::consts::LN_2;
/// √½ rounded to f32: logarithms reduce their mantissa into [√½, √2) (GLSL `SQRT_HALF`).
pub const SQRT_HALF: f32 = std::f32::consts::FRAC_1_SQRT_2;
/// Below this |a|, `optical_depth` uses the atanh series directly: |a/(2 − a)| ≤ 0.1716, the
/// same bound as the reduced mantissa of `log_f` (GLSL `SERIES_ALPHA`).
pub const SERIES_ALPHA: f32 = 0.29;
/// Below this |x|, `expm1`-style functions use their Taylor series (9 terms: relative error
/// below 3e-10 there) (GLSL `SERIES_EXP`).
pub const SERIES_EXP: f32 = 0.35;

/// `atanh(s) / s` for s² = `t` ≤ 0.0295: 1 + t/3 + t²/5 + t³/7 + t⁴/9 (next term below 2e-9).
pub fn atanh_ratio(t: f32) -> f32 {
    1.0 + t * (1.0 / 3.0 + t * (1.0 / 5.0 + t * (1.0 / 7.0 + t * (1.0 / 9.0))))
}

/// GLSL `frexp` for a positive normal `y`: (m, e) with y = m·2^e, m in [0.5, 1).
pub fn frexp_f(y: f32) -> (f32, i32) {
    let bits = y.to_bits();
    let e = ((bits >> 23) & 0xff) as i32 - 126;
    (f32::from_bits((bits & 0x807f_ffff) | (126 << 23)), e)
}

/// GLSL `ldexp`: x·2^e (exact; e within ±127 here).
pub fn ldexp_f(x: f32, e: i32) -> f32 {
    x * 2f32.powi(e)
}

/// ln(y) for positive normal `y`: y = m·2^e with m in [√½, √2), ln m = 2·atanh((m − 1)/(m + 1)).
pub fn log_f(y: f32) -> f32 {
    let (mut m, mut e) = frexp_f(y);
    if m < SQRT_HALF {
        m *= 2.0;
        e -= 1;
    }
    let s = (m - 1.0) / (m + 1.0);
    e as f32 * LN2 + 2.0 * s * atanh_ratio(s * s)
}

/// e^t: t = k·ln2 + r with |r| ≤ ln2/2, Taylor series for e^r, then scaled by 2^k.
pub fn exp_f(t: f32) -> f32 {
    if t < -88.0 {
        return 0.0;
    }
    if t > 88.0 {
        return f32::INFINITY;
    }
    let k = (t / LN2 + 0.5).floor();
    let r = t - k * LN2;
    let e = 1.0
        + r * (1.0
            + r / 2.0
                * (1.0
                    + r / 3.0
                        * (1.0
                            + r / 4.0
                                * (1.0
                                    + r / 5.0
                                        * (1.0
                                            + r / 6.0
                                                * (1.0
                                                    + r / 7.0
                                                        * (1.0 + r / 8.0 * (1.0 + r / 9.0))))))));
    ldexp_f(e, k as i32)
}

/// `-log1p(-a)` for a < 1: the optical depth u of a medium of alpha `a`.
pub fn optical_depth(a: f32) -> f32 {
    if a.abs() <= SERIES_ALPHA {
        // log1p(x) = 2·atanh(x / (2 + x)), here with x = −a: no cancellation for small a.
        let s = a / (2.0 - a);
        2.0 * s * atanh_ratio(s * s)
    } else {
        -log_f(1.0 - a)
    }
}

/// `-expm1(-x)` = 1 − e^(−x): the alpha of optical depth `x`.
pub fn alpha_of_depth(x: f32) -> f32 {
    if x.abs() <= SERIES_EXP {
        x * (1.0
            - x / 2.0
                * (1.0
                    - x / 3.0
                        * (1.0
                            - x / 4.0
                                * (1.0
                                    - x / 5.0
                                        * (1.0
                                            - x / 6.0
                                                * (1.0
                                                    - x / 7.0
                                                        * (1.0 - x / 8.0 * (1.0 - x / 9.0))))))))
    } else {
        1.0 - exp_f(-x)
    }
}

/// `composite::tidy::split_alpha` in f32: the alpha of the piece covering `fraction` of a medium
/// of alpha `alpha`, and the factor its colour scales by.
pub fn split_alpha(alpha: f32, fraction: f32) -> (f32, f32) {
    if alpha >= 1.0 || alpha.is_nan() {
        (alpha, 1.0)
    } else if alpha == 0.0 {
        (0.0, fraction)
    } else {
        let piece = alpha_of_depth(fraction * optical_depth(alpha));
        (piece, piece / alpha)
    }
}

/// The fraction of volume [z, zback) that slab [front, back) covers (the reference's
/// `piece_fraction`): an infinitely deep volume gives its finite pieces nothing.
pub fn piece_fraction(front: f32, back: f32, z: f32, zback: f32) -> f32 {
    let length = zback - z;
    if length.is_finite() {
        ((back - front) / length).clamp(0.0, 1.0)
    } else if (back - front).is_finite() {
        0.0
    } else {
        1.0
    }
}

fn is_volume(f: &Fragment) -> bool {
    f.zback > f.z
}

/// Per-pixel state of the walk: the running composite (the shader's globals).
struct Walk<'c> {
    alpha_of: &'c [Option<usize>],
    alphas: Vec<usize>,
    acc: Vec<f32>,
    done: bool,
    front: [u32; 4],
}

impl Walk<'_> {
    /// `composite::flatten_pixel`'s loop body for one tidied sample `piece` (source `f`, front
    /// depth `z`): stop once every alpha is 1, note the front, colours then alphas.
    fn composite(&mut self, piece: &[f32], f: &Fragment, z: f32) {
        if !self.alphas.is_empty() && self.alphas.iter().all(|&a| self.acc[a] >= 1.0) {
            self.done = true;
            return;
        }
        if self.front[3] == 0 && self.alphas.iter().any(|&a| piece[a] > 0.0) {
            self.front = [f.input, f.index, z.to_bits(), 1];
        }
        for (c, alpha) in self.alpha_of.iter().enumerate() {
            if let Some(a) = *alpha {
                self.acc[c] += (1.0 - self.acc[a]) * piece[c];
            }
        }
        for &a in &self.alphas {
            self.acc[a] += (1.0 - self.acc[a]) * piece[a];
        }
    }
}

/// The tidied piece of slab [b, next) of one pixel (`keys`/`values` are that pixel's slots):
/// per column, the pieces of every volume in `lo..hi` covering the slab, merged as
/// `composite::tidy::merge_coincident` does (a lone piece is used as it is). With `at_points`,
/// the points at `b` instead, whole (`next` unused): the merge of coincident points. Returns the
/// index of the first contributor, or None when nothing covers the slab (or stands at `b`).
#[allow(clippy::too_many_arguments)]
fn slab_piece(
    keys: &[Fragment],
    values: &[f32],
    stride: usize,
    alpha_of: &[Option<usize>],
    lo: usize,
    hi: usize,
    b: f32,
    next: f32,
    at_points: bool,
    piece: &mut [f32],
) -> Option<usize> {
    let mut first = None;
    // Every stored column, as the shader does: a table without composited channels still has
    // its one placeholder column (an "alpha"), so the first contributor is always found.
    for c in 0..stride {
        let ac = alpha_of.get(c).copied().flatten().unwrap_or(c);
        let mut count = 0u32;
        let mut single = 0.0f32;
        let mut opaque_sum = 0.0f32;
        let mut opaque_count = 0u32;
        let mut depth = 0.0f32;
        let mut weighted = 0.0f32;
        for i in lo..hi {
            let f = &keys[i];
            let covers = if at_points {
                f.z == b && !is_volume(f)
            } else {
                is_volume(f) && f.z <= b && f.zback > b
            };
            if !covers {
                continue;
            }
            let raw_a = values[i * stride + ac];
            let raw_c = values[i * stride + c];
            // A point, or a volume with no boundary strictly inside, stays as it is, bit for bit.
            let (pa, pc) = if at_points || (f.z == b && f.zback == next) {
                (raw_a, raw_c)
            } else {
                let (pa, scale) = split_alpha(raw_a, piece_fraction(b, next, f.z, f.zback));
                (pa, if ac == c { pa } else { raw_c * scale })
            };
            if count == 0 {
                first = Some(i);
                single = pc;
            }
            count += 1;
            if pa >= 1.0 {
                opaque_sum += pc;
                opaque_count += 1;
            } else {
                let u = optical_depth(pa);
                depth += u;
                weighted += if pa == 0.0 { pc } else { pc * (u / pa) };
            }
        }
        piece[c] = if count <= 1 {
            single
        } else if opaque_count > 0 {
            if ac == c {
                1.0
            } else {
                opaque_sum / opaque_count as f32
            }
        } else {
            let merged = alpha_of_depth(depth);
            if ac == c {
                merged
            } else {
                let w = if depth == 0.0 { 1.0 } else { merged / depth };
                w * weighted
            }
        };
    }
    first
}

/// Receives one pixel's tidied samples from [`walk_pixel`], front to back: the shader's
/// `deliver` in each of its modes (flatten, count, emit).
trait TidySink {
    /// One tidied sample over `[z, zback)` with composited values `row`, cut from `source` (for a
    /// merged piece: its first contributor in merge order). Returns true when the walk may stop
    /// (flattening: everything behind is hidden).
    fn take(&mut self, source: &Fragment, z: f32, zback: f32, row: &[f32]) -> bool;

    /// True when points at one depth are delivered as one merged point (a tidy deep output),
    /// false when each is delivered in list order (flattening).
    fn merges_points(&self) -> bool {
        true
    }
}

impl TidySink for Walk<'_> {
    fn take(&mut self, source: &Fragment, z: f32, _zback: f32, row: &[f32]) -> bool {
        self.composite(row, source, z);
        self.done
    }

    fn merges_points(&self) -> bool {
        false
    }
}

/// Counts the tidied samples (`TIDY_MODE` count).
struct CountSink(u32);

impl TidySink for CountSink {
    fn take(&mut self, _: &Fragment, _: f32, _: f32, _: &[f32]) -> bool {
        self.0 += 1;
        false
    }
}

/// Collects the tidied samples (`TIDY_MODE` emit): keys with their source, `stride` values each.
struct EmitSink<'o> {
    keys: &'o mut Vec<Fragment>,
    values: &'o mut Vec<f32>,
}

impl TidySink for EmitSink<'_> {
    fn take(&mut self, source: &Fragment, z: f32, zback: f32, row: &[f32]) -> bool {
        self.keys.push(Fragment {
            z,
            zback,
            ..*source
        });
        self.values.extend_from_slice(row);
        false
    }
}

/// Walk one pixel whose slots are `keys` (in merge order) with `stride` values each, handing its
/// tidied samples to `sink` front to back (see the module docs for the walk).
fn walk_pixel(
    keys: &[Fragment],
    values: &[f32],
    stride: usize,
    alpha_of: &[Option<usize>],
    sink: &mut impl TidySink,
) {
    let n = keys.len();
    if n == 0 {
        return;
    }
    let mut piece = vec![0.0f32; stride];
    // The smallest boundary is the first Z: the list is sorted by Z and ZBack > Z.
    let mut b = keys[0].z;
    let (mut lo, mut hi) = (0usize, 0usize);
    // Each step moves to a strictly larger boundary, and there are at most 2n of them; the
    // bound also ends the walk on NaN depths.
    for _ in 0..2 * n + 1 {
        while hi < n && keys[hi].z <= b {
            hi += 1;
        }
        if sink.merges_points() {
            let points = slab_piece(
                keys, values, stride, alpha_of, lo, hi, b, b, true, &mut piece,
            );
            if let Some(i) = points {
                let f = &keys[i];
                if sink.take(f, f.z, f.zback, &piece) {
                    return;
                }
            }
        } else {
            for i in lo..hi {
                let f = &keys[i];
                if f.z == b
                    && !is_volume(f)
                    && sink.take(f, f.z, f.zback, &values[i * stride..(i + 1) * stride])
                {
                    return;
                }
            }
        }
        let mut next = f32::INFINITY;
        let mut found = false;
        if hi < n && keys[hi].z > b {
            next = keys[hi].z;
            found = true;
        }
        for f in &keys[lo..hi] {
            if is_volume(f) && f.zback > b && (!found || f.zback < next) {
                next = f.zback;
                found = true;
            }
        }
        if !found {
            return;
        }
        let slab = slab_piece(
            keys, values, stride, alpha_of, lo, hi, b, next, false, &mut piece,
        );
        if let Some(i) = slab {
            if sink.take(&keys[i], b, next, &piece) {
                return;
            }
        }
        b = next;
        // Samples ending at or before the new boundary can never contribute again.
        while lo < hi && !(is_volume(&keys[lo]) && keys[lo].zback > b) {
            lo += 1;
        }
    }
}

/// Tidy and flatten one pixel whose slots are `keys` (in merge order) with `stride` values each.
fn tidy_flatten_pixel(
    keys: &[Fragment],
    values: &[f32],
    stride: usize,
    alpha_of: &[Option<usize>],
    out: &mut [f32],
) -> [u32; 4] {
    let mut walk = Walk {
        alpha_of,
        alphas: (0..alpha_of.len())
            .filter(|&c| alpha_of[c].is_none())
            .collect(),
        acc: vec![0.0; stride],
        done: false,
        front: [0; 4],
    };
    walk_pixel(keys, values, stride, alpha_of, &mut walk);
    out.copy_from_slice(&walk.acc);
    walk.front
}

/// Tidy and flatten each pixel in `pixels` of the CSR list (`offsets`, `keys` in merge order,
/// `values` with `alpha_of.len().max(1)` floats per slot). `alpha_of[c]` is the column of column
/// c's alpha, `None` for alpha columns (as `gpu::resident::ColumnSpec`).
pub fn tidy_flatten_pixels(
    offsets: &[u32],
    keys: &[Fragment],
    values: &[f32],
    pixels: &[u32],
    alpha_of: &[Option<usize>],
) -> TidiedPixels {
    let stride = alpha_of.len().max(1);
    let mut out = TidiedPixels {
        values: vec![0.0; pixels.len() * stride],
        front: vec![[0; 4]; pixels.len()],
    };
    for (k, &p) in pixels.iter().enumerate() {
        let (start, end) = (
            offsets[p as usize] as usize,
            offsets[p as usize + 1] as usize,
        );
        out.front[k] = tidy_flatten_pixel(
            &keys[start..end],
            &values[start * stride..end * stride],
            stride,
            alpha_of,
            &mut out.values[k * stride..(k + 1) * stride],
        );
    }
    out
}

/// The slots of pixel `p` of a CSR list.
fn pixel_range(offsets: &[u32], p: u32) -> std::ops::Range<usize> {
    offsets[p as usize] as usize..offsets[p as usize + 1] as usize
}

/// Per pixel of the CSR list, 1 where a volume overlaps a later sample or two points coincide
/// (as `composite::tidy::needs_deep_tidy`), or the list is longer than [`GATE_LIMIT`]; else 0.
pub fn tidy_gate(offsets: &[u32], keys: &[Fragment]) -> Vec<u32> {
    (0..offsets.len().saturating_sub(1) as u32)
        .map(|p| {
            let range = pixel_range(offsets, p);
            if range.len() > GATE_LIMIT as usize {
                return 1;
            }
            let mut reach = f32::NEG_INFINITY;
            // The previous sample's Z when it was a point: coincident points are neighbours.
            let mut point_before: Option<f32> = None;
            for f in &keys[range] {
                if f.z < reach {
                    return 1;
                }
                if is_volume(f) {
                    reach = reach.max(f.zback);
                    point_before = None;
                } else {
                    if point_before == Some(f.z) {
                        return 1;
                    }
                    point_before = Some(f.z);
                }
            }
            0
        })
        .collect()
}

/// How many samples each pixel in `pixels` has once tidied (the walk's count mode).
pub fn tidy_count_pixels(
    offsets: &[u32],
    keys: &[Fragment],
    values: &[f32],
    pixels: &[u32],
    alpha_of: &[Option<usize>],
) -> Vec<u32> {
    let stride = alpha_of.len().max(1);
    pixels
        .iter()
        .map(|&p| {
            let range = pixel_range(offsets, p);
            let mut count = CountSink(0);
            walk_pixel(
                &keys[range.clone()],
                &values[range.start * stride..range.end * stride],
                stride,
                alpha_of,
                &mut count,
            );
            count.0
        })
        .collect()
}

/// A tidied deep list in CSR form: `stride` values per slot.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TidiedDeep {
    /// Exclusive scan of the per-pixel counts (`pixels + 1`).
    pub offsets: Vec<u32>,
    /// Tidied keys: a piece keeps its source's input and index (a merged piece its first
    /// contributor's), with its own Z and ZBack.
    pub keys: Vec<Fragment>,
    /// Tidied composited values.
    pub values: Vec<f32>,
    /// Per pixel, 1 where the list was tidied by the walk (its values are new), 0 where it was
    /// copied (already tidy).
    pub marks: Vec<u32>,
}

/// The tidied lists of the pixels in `pixels`, one after another (the walk's emit mode); the
/// offsets index the list, not the image.
pub fn tidy_emit_pixels(
    offsets: &[u32],
    keys: &[Fragment],
    values: &[f32],
    pixels: &[u32],
    alpha_of: &[Option<usize>],
) -> TidiedDeep {
    let stride = alpha_of.len().max(1);
    let mut out = TidiedDeep {
        offsets: vec![0],
        marks: vec![1; pixels.len()],
        ..Default::default()
    };
    for &p in pixels {
        let range = pixel_range(offsets, p);
        walk_pixel(
            &keys[range.clone()],
            &values[range.start * stride..range.end * stride],
            stride,
            alpha_of,
            &mut EmitSink {
                keys: &mut out.keys,
                values: &mut out.values,
            },
        );
        out.offsets.push(out.keys.len() as u32);
    }
    out
}

/// Tidy a whole merged, sorted CSR image (twin of `gpu::tidy::tidy_deep`): the gate marks the
/// pixels that need it, they are listed (`compact_flagged`), counted and emitted by the walk;
/// every other pixel is copied unchanged.
pub fn tidy_deep(
    offsets: &[u32],
    keys: &[Fragment],
    values: &[f32],
    alpha_of: &[Option<usize>],
) -> TidiedDeep {
    let stride = alpha_of.len().max(1);
    let pixels = offsets.len().saturating_sub(1);
    let gate = tidy_gate(offsets, keys);
    let listed = compact_flagged(&gate, pixels, FlagField::WORD);
    let emitted = tidy_emit_pixels(offsets, keys, values, &listed.list, alpha_of);
    let counts: Vec<u32> = (0..pixels)
        .map(|p| {
            if listed.marks[p] != 0 {
                let k = listed.rank[p] as usize;
                emitted.offsets[k + 1] - emitted.offsets[k]
            } else {
                offsets[p + 1] - offsets[p]
            }
        })
        .collect();
    let mut out = TidiedDeep {
        offsets: exclusive_scan(&counts),
        marks: listed.marks.clone(),
        ..Default::default()
    };
    for p in 0..pixels {
        // A listed pixel takes its emitted list, any other its merged list unchanged.
        let (from_keys, from_values, range): (&[Fragment], &[f32], _) = if listed.marks[p] != 0 {
            let range = pixel_range(&emitted.offsets, listed.rank[p]);
            (&emitted.keys, &emitted.values, range)
        } else {
            (keys, values, pixel_range(offsets, p as u32))
        };
        out.keys.extend_from_slice(&from_keys[range.clone()]);
        out.values
            .extend_from_slice(&from_values[range.start * stride..range.end * stride]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_functions_match_f64() {
        for i in 0..2000 {
            let a = i as f32 / 2000.0;
            let u = -(-(a as f64)).ln_1p();
            assert!(
                (optical_depth(a) as f64 - u).abs() <= 4e-7 * u.max(1e-30),
                "{a}"
            );
            let x = i as f32 / 100.0;
            let e = -(-(x as f64)).exp_m1();
            assert!(
                (alpha_of_depth(x) as f64 - e).abs() <= 3e-7 * e.max(1e-30),
                "{x}"
            );
        }
        let tiny = 1e-9f32;
        assert!((optical_depth(tiny) / tiny - 1.0).abs() < 1e-6);
        assert!((alpha_of_depth(tiny) / tiny - 1.0).abs() < 1e-6);
        assert_eq!(alpha_of_depth(1000.0), 1.0);
    }
}
