//! Twin of `glsl/gather_count.comp` and `glsl/gather.comp`: one staged input's samples of a
//! band ([`StagedInput`]) as the pixel-ordered stream a build scatters: per layout pixel, its
//! count, and its samples in file order as fragment keys and composited values. The key is
//! [`depth_key`] of the Z and ZBack read as floats, as `composite::read_sample` reads them;
//! half values are widened with `half`'s conversion, which `gather.glsl` repeats bit for bit.

use crate::vocab::{depth_key, Fragment, SlotSource, StagedInput};

/// Per layout pixel p (`order[p]` is its row-major index in a band `band_width` wide), how many
/// samples `input` holds there.
pub fn gather_counts(input: &StagedInput, order: &[u32], band_width: usize) -> Vec<u32> {
    order
        .iter()
        .map(|&q| match input.source_pixel(q as usize, band_width) {
            Some(i) => input.offsets[i + 1] - input.offsets[i],
            None => 0,
        })
        .collect()
}

/// Value `s` of a slot as a float, `fallback` where the input lacks the channel.
pub fn read_slot(slot: &SlotSource, s: usize, fallback: f32) -> f32 {
    match slot {
        SlotSource::Absent => fallback,
        SlotSource::F16(v) => v[s].to_f32(),
        SlotSource::F32(v) => v[s],
        SlotSource::U32(v) => v[s] as f32,
    }
}

/// `input`'s samples in layout pixel order: the fragment keys and `columns` values per key
/// (the composited columns; a column the input lacks reads 0).
pub fn gather(
    input: &StagedInput,
    order: &[u32],
    band_width: usize,
    columns: usize,
) -> (Vec<Fragment>, Vec<f32>) {
    let mut keys = Vec::with_capacity(input.samples());
    let mut values = Vec::with_capacity(input.samples() * columns);
    for &q in order {
        let Some(i) = input.source_pixel(q as usize, band_width) else {
            continue;
        };
        for s in input.offsets[i] as usize..input.offsets[i + 1] as usize {
            let z = read_slot(&input.slots[0], s, 0.0);
            let zback = read_slot(&input.slots[1], s, z);
            let (z, zback) = depth_key(z, zback);
            keys.push(Fragment {
                z,
                zback,
                input: input.input,
                index: input.index_base + s as u32,
            });
            for c in 0..columns {
                values.push(match input.slots.get(2 + c) {
                    Some(slot) => read_slot(slot, s, 0.0),
                    None => 0.0,
                });
            }
        }
    }
    (keys, values)
}

#[cfg(test)]
mod tests {
    use half::f16;

    /// `gather.glsl`'s `half_bits_to_float`, written again in Rust: it must agree with the
    /// conversion the CPU engine uses for every one of the 65536 halves, bit for bit.
    fn half_bits_to_float(h: u32) -> f32 {
        let sign = (h & 0x8000) << 16;
        let exponent = (h >> 10) & 0x1F;
        let mantissa = h & 0x3FF;
        if exponent == 0x1F {
            let quiet = if mantissa != 0 { 0x40_0000 } else { 0 };
            return f32::from_bits(sign | 0x7F80_0000 | quiet | (mantissa << 13));
        }
        if exponent == 0 {
            if mantissa == 0 {
                return f32::from_bits(sign);
            }
            let top = 31 - mantissa.leading_zeros() as i32;
            let bits = (mantissa << (23 - top)) & 0x7F_FFFF;
            return f32::from_bits(sign | (((top + 103) as u32) << 23) | bits);
        }
        f32::from_bits(sign | ((exponent + 112) << 23) | (mantissa << 13))
    }

    /// `gather.glsl`'s `uint_to_float`, written again in Rust.
    fn uint_to_float(v: u32) -> f32 {
        if v < 0x100_0000 {
            return v as f32;
        }
        let top = 31 - v.leading_zeros();
        let shift = top - 23;
        let mut kept = v >> shift;
        let rest = v & ((1 << shift) - 1);
        let half_way = 1 << (shift - 1);
        if rest > half_way || (rest == half_way && kept & 1 != 0) {
            kept += 1;
        }
        f32::from_bits(((top + 127) << 23) + (kept - 0x80_0000))
    }

    #[test]
    fn the_shaders_half_conversion_is_the_engines() {
        for h in 0..=u16::MAX {
            let want = f16::from_bits(h).to_f32();
            let got = half_bits_to_float(h as u32);
            assert_eq!(got.to_bits(), want.to_bits(), "half bits {h:#06x}");
        }
    }

    #[test]
    fn the_shaders_uint_conversion_rounds_as_rust_does() {
        let mut values: Vec<u32> = vec![0, 1, 0xFF_FFFF, 0x100_0000, 0x100_0001, 0x100_0003];
        values.extend([
            u32::MAX,
            u32::MAX - 1,
            0x8000_0000,
            0x8000_0080,
            0x8000_0180,
        ]);
        // A spread of values with every low-bit pattern near the rounding point.
        let mut x = 0x9E37_79B9u32;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            values.push(x);
        }
        for v in values {
            assert_eq!(uint_to_float(v).to_bits(), (v as f32).to_bits(), "{v:#x}");
        }
    }
}
