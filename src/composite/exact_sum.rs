//! An exact running sum of f64 values that supports removing what was added.
//!
//! The tidy's sweep ([`super::tidy::tidy_pixel`]) keeps the mix of every volume covering the
//! current depth as sums over those volumes, adding a volume where it starts and removing it
//! where it ends. A plain f64 running sum cannot do that: after a huge term leaves, what remains
//! is dominated by the rounding the huge term caused (catastrophic cancellation), and a NaN or
//! infinity that entered never leaves. [`ExactSum`] keeps the sum of its finite terms exactly, as
//! a fixed-point number wide enough for every f64 (2^-1074 up to 2^1024 times the count of
//! terms), and counts its non-finite terms apart, so removing a term restores exactly the sum
//! without it, and the value read is the same whatever order terms came and went in.
//!
//! Cost: O(1) per add or remove (three limbs touched, carries deferred), one pass over the limbs
//! per read; [`ExactSum`] is under 600 bytes.

/// Limbs of 32 significant bits each: bit `32 j + r` has weight 2^(32 j + r − 1074). An f64's
/// 53-bit mantissa shifted by at most 31 spans three limbs; the highest bit of any finite f64 is
/// bit 2097, in limb 65; two more limbs hold the carries of up to 2^64 terms.
const LIMBS: usize = 68;

/// Operations between two normalisations: each one moves a limb by less than 2^32, so 2^30 of
/// them keep every limb far inside i64.
const NORMALISE_EVERY: u32 = 1 << 30;

/// An exact sum of f64 terms with removal; see the module docs.
#[derive(Clone, Debug)]
pub struct ExactSum {
    limbs: [i64; LIMBS],
    /// Operations since the limbs were last normalised.
    pending: u32,
    /// Net count of +inf, −inf and NaN terms.
    positive_infinities: i64,
    negative_infinities: i64,
    nans: i64,
}

impl Default for ExactSum {
    fn default() -> Self {
        ExactSum {
            limbs: [0; LIMBS],
            pending: 0,
            positive_infinities: 0,
            negative_infinities: 0,
            nans: 0,
        }
    }
}

impl ExactSum {
    /// Add `x` to the sum.
    pub fn add(&mut self, x: f64) {
        self.update(x, 1);
    }

    /// Remove `x`, which must have been added before, from the sum.
    pub fn remove(&mut self, x: f64) {
        self.update(x, -1);
    }

    fn update(&mut self, x: f64, direction: i64) {
        if x.is_nan() {
            self.nans += direction;
            return;
        }
        if x.is_infinite() {
            if x > 0.0 {
                self.positive_infinities += direction;
            } else {
                self.negative_infinities += direction;
            }
            return;
        }
        if x == 0.0 {
            return;
        }
        let bits = x.to_bits();
        let biased = ((bits >> 52) & 0x7ff) as usize;
        let fraction = bits & ((1u64 << 52) - 1);
        // x = ±mantissa · 2^(position − 1074); subnormals have biased exponent 0 and no hidden bit.
        let (mantissa, position) = if biased == 0 {
            (fraction, 0)
        } else {
            (fraction | (1u64 << 52), biased - 1)
        };
        let sign = if x < 0.0 { -direction } else { direction };
        let wide = (mantissa as u128) << (position % 32);
        let limb = position / 32;
        for k in 0..3 {
            let chunk = ((wide >> (32 * k)) & 0xffff_ffff) as i64;
            self.limbs[limb + k] += sign * chunk;
        }
        self.pending += 1;
        if self.pending >= NORMALISE_EVERY {
            self.normalise();
        }
    }

    /// Carry every limb into [0, 2^32) but the top one, which keeps the sign.
    fn normalise(&mut self) {
        for j in 0..LIMBS - 1 {
            let carry = self.limbs[j] >> 32;
            self.limbs[j] -= carry << 32;
            self.limbs[j + 1] += carry;
        }
        self.pending = 0;
    }

    /// The sum, rounded to f64 (within one unit in the last place; the same value for the same
    /// multiset of terms, whatever their order). Non-finite terms win as IEEE addition says:
    /// NaN if any NaN or both infinities are present, else the infinity present.
    pub fn value(&mut self) -> f64 {
        if self.nans != 0 || (self.positive_infinities != 0 && self.negative_infinities != 0) {
            return f64::NAN;
        }
        if self.positive_infinities != 0 {
            return f64::INFINITY;
        }
        if self.negative_infinities != 0 {
            return f64::NEG_INFINITY;
        }
        self.normalise();
        if self.limbs[LIMBS - 1] < 0 {
            self.negate();
            let magnitude = self.magnitude();
            self.negate();
            -magnitude
        } else {
            self.magnitude()
        }
    }

    /// Negate the (normalised) sum in place, leaving it normalised.
    fn negate(&mut self) {
        for limb in &mut self.limbs {
            *limb = -*limb;
        }
        self.normalise();
    }

    /// The value of a normalised, non-negative sum: its top three limbs (96 bits, so the rounding
    /// to 53 is within an ulp) scaled to their weight.
    fn magnitude(&self) -> f64 {
        let Some(top) = (0..LIMBS).rev().find(|&j| self.limbs[j] != 0) else {
            return 0.0;
        };
        let low = top.saturating_sub(2);
        let mut integer: u128 = 0;
        for j in (low..=top).rev() {
            integer = (integer << 32) | self.limbs[j] as u128;
        }
        scale_by_power_of_two(integer as f64, 32 * low as i32 - 1074)
    }
}

/// `x · 2^k` for any k an f64 sum can need, in steps that stay inside f64's normal range.
fn scale_by_power_of_two(mut x: f64, mut k: i32) -> f64 {
    let step = |e: i32| f64::from_bits(((e + 1023) as u64) << 52);
    while k > 1000 {
        x *= step(1000);
        k -= 1000;
    }
    while k < -1000 {
        x *= step(-1000);
        k += 1000;
    }
    x * step(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum_of(terms: &[f64]) -> f64 {
        let mut sum = ExactSum::default();
        for &t in terms {
            sum.add(t);
        }
        sum.value()
    }

    #[test]
    fn exact_where_floating_point_cancels() {
        assert_eq!(sum_of(&[1e300, 1.0, -1e300]), 1.0);
        assert_eq!(sum_of(&[1e-300, 1e300, -1e300]), 1e-300);
        assert_eq!(
            sum_of(&[f64::MIN_POSITIVE / 8.0, 3.0, -3.0]),
            5e-324 * 2f64.powi(49)
        );
        assert_eq!(sum_of(&[0.1, 0.2, 0.3]), 0.6);
        assert_eq!(sum_of(&[-2.5, 1.0]), -1.5);
        assert_eq!(sum_of(&[f64::MAX, f64::MAX, -f64::MAX]), f64::MAX);
        assert_eq!(sum_of(&[]), 0.0);
    }

    #[test]
    fn removal_restores_the_sum_without_the_term() {
        let mut sum = ExactSum::default();
        sum.add(3.25);
        sum.add(1e200);
        sum.add(f64::NAN);
        sum.add(f64::INFINITY);
        assert!(sum.value().is_nan());
        sum.remove(f64::NAN);
        assert_eq!(sum.value(), f64::INFINITY);
        sum.remove(f64::INFINITY);
        sum.remove(1e200);
        assert_eq!(sum.value(), 3.25);
        sum.add(-7.0);
        assert_eq!(sum.value(), -3.75);
        sum.add(f64::NEG_INFINITY);
        assert_eq!(sum.value(), f64::NEG_INFINITY);
    }

    #[test]
    fn rounding_is_within_an_ulp_and_order_free() {
        // Many terms of mixed magnitude and sign: compared with an f64 sum of the same terms
        // sorted by magnitude (error well below an ulp of the total here), and in two orders.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut terms = Vec::new();
        for _ in 0..5000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let mantissa = (state >> 11) as f64 / (1u64 << 53) as f64;
            let exponent = (state % 40) as i32 - 20;
            let sign = if state & 1 == 0 { 1.0 } else { -1.0 };
            terms.push(sign * mantissa * 2f64.powi(exponent));
        }
        let forward = sum_of(&terms);
        terms.reverse();
        assert_eq!(sum_of(&terms), forward);
        let mut by_size = terms.clone();
        by_size.sort_by(|a, b| a.abs().total_cmp(&b.abs()));
        let naive: f64 = by_size.iter().sum();
        assert!(
            (forward - naive).abs() <= 4.0 * f64::EPSILON * forward.abs(),
            "{forward} {naive}"
        );
    }
}
