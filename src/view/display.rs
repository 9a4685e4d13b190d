//! The display transforms the window applies, stated once in Rust: `glsl/view/view_image.frag` does
//! the same arithmetic on the GPU, and the window test computes the colours it expects with
//! these functions from the headless merge. The id view's false colour ([`id_colour`]) is
//! integer arithmetic on both sides, so the two agree exactly (`tests/view.rs` draws many ids
//! headless and compares every pixel).

use crate::heatmap::{complexity_colour, BIN_COLOURS, BIN_FLOOR};
use crate::info::COMPLEXITY_BINS;
pub use crate::preview::{srgb, to_byte};

/// How dark the farthest depth is drawn in the depth view: near is white, far is `1 - this`.
pub const DEPTH_FAR_DIM: f32 = 0.8;

/// The points mode's depth ramp: the colours of the nearest, middle and farthest depths
/// (display values, 0..=1), warm to cold so near reads as near.
pub const DEPTH_RAMP: [[f32; 3]; 3] = [[1.0, 0.85, 0.25], [0.85, 0.25, 0.45], [0.2, 0.35, 0.95]];

/// The colour of depth `z` on the points mode's ramp spanning `range` (`view_points.vert` does
/// the same in f32): linear between the three stops of [`DEPTH_RAMP`].
pub fn depth_ramp(z: f32, range: (f32, f32)) -> [f32; 3] {
    let span = (range.1 - range.0).max(1e-30);
    let t = ((z - range.0) / span).clamp(0.0, 1.0);
    let (a, b, f) = if t < 0.5 {
        (DEPTH_RAMP[0], DEPTH_RAMP[1], 2.0 * t)
    } else {
        (DEPTH_RAMP[1], DEPTH_RAMP[2], 2.0 * t - 1.0)
    };
    // GLSL's mix, as the shader computes it.
    std::array::from_fn(|k| a[k] * (1.0 - f) + b[k] * f)
}

/// An 8-bit display value of a linear colour component at `exposure` stops.
pub fn display_byte(linear: f32, exposure: f32) -> u8 {
    to_byte(srgb(linear * exposure.exp2()))
}

/// The grey level (0..=1) of depth `z` in a depth view spanning `range`.
pub fn depth_grey(z: f32, range: (f32, f32)) -> f32 {
    let span = (range.1 - range.0).max(1e-30);
    1.0 - DEPTH_FAR_DIM * ((z - range.0) / span).clamp(0.0, 1.0)
}

/// The heatmap colour of `count` samples: the CLI's ([`complexity_colour`]).
pub fn heat_colour(count: usize) -> [u8; 3] {
    complexity_colour(count)
}

/// The false colour of id `id` in the id view, as 8-bit RGB: black for id 0 (and, in the view,
/// for a pixel with no sample), else a hue, saturation and value taken from a hash of the id
/// (murmur3's 32-bit finalizer, which spreads consecutive ids over the whole range), so the
/// same id is always the same colour and neighbouring ids look unrelated. Value stays at 180 or
/// above, so no id is mistaken for the black of "no id". Integer arithmetic only: `id_colour`
/// in `glsl/view/view_image.frag` is the same operation for operation.
pub fn id_colour(id: u32) -> [u8; 3] {
    if id == 0 {
        return [0, 0, 0];
    }
    let h = id_hash(id);
    // Hue from the top 16 bits into 6 sectors of 256 steps; saturation and value from the low
    // bytes, kept high enough for a distinct, bright colour.
    let hue = ((h >> 16) * 1536) >> 16;
    let s = 150 + (h & 0xff) * 105 / 255;
    let v = 180 + ((h >> 8) & 0xff) * 75 / 255;
    hsv_bytes(hue, s, v)
}

/// murmur3's fmix32: every input bit affects every output bit.
pub fn id_hash(id: u32) -> u32 {
    let mut h = id;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h
}

/// HSV to RGB in integers: `hue` in 0..1536 (six sectors of 256), `s` and `v` in 0..=255.
fn hsv_bytes(hue: u32, s: u32, v: u32) -> [u8; 3] {
    let sector = hue / 256;
    let f = hue % 256;
    let p = v * (255 - s) / 255;
    let q = v * (255 - s * f / 255) / 255;
    let t = v * (255 - s * (255 - f) / 255) / 255;
    let [r, g, b] = match sector {
        0 => [v, t, p],
        1 => [q, v, p],
        2 => [p, v, t],
        3 => [p, q, v],
        4 => [t, p, v],
        _ => [v, p, q],
    };
    [r as u8, g as u8, b as u8]
}

/// The `#define`s that give `view_image.frag` the heatmap's bins and colours and the depth
/// view's dimming, from the Rust constants (so the two cannot drift apart).
pub fn shader_defines() -> Vec<(&'static str, String)> {
    let bins: Vec<String> = COMPLEXITY_BINS
        .iter()
        .map(|&(_, hi)| format!("{}u", hi.min(u32::MAX as usize)))
        .collect();
    let colours: Vec<String> = BIN_COLOURS
        .iter()
        .map(|c| format!("vec3({:.1}, {:.1}, {:.1})", c[0], c[1], c[2]))
        .collect();
    vec![
        ("HEAT_BIN_LIST", bins.join(",")),
        ("HEAT_COLOUR_LIST", colours.join(",")),
        ("HEAT_FLOOR", format!("{BIN_FLOOR:?}")),
        ("DEPTH_FAR_DIM", format!("{DEPTH_FAR_DIM:?}")),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn srgb_fixed_points() {
        assert_eq!(display_byte(0.0, 0.0), 0);
        assert_eq!(display_byte(1.0, 0.0), 255);
        assert_eq!(display_byte(0.5, 1.0), 255);
        // sRGB 0.5 is linear 0.21404: just above it rounds to 128 of 255, just below to 127.
        assert_eq!(display_byte(0.2141, 0.0), 128);
        assert_eq!(display_byte(0.2139, 0.0), 127);
    }

    #[test]
    fn the_depth_ramp_runs_from_near_to_far() {
        assert_eq!(depth_ramp(1.0, (1.0, 3.0)), DEPTH_RAMP[0]);
        assert_eq!(depth_ramp(2.0, (1.0, 3.0)), DEPTH_RAMP[1]);
        assert_eq!(depth_ramp(3.0, (1.0, 3.0)), DEPTH_RAMP[2]);
        assert_eq!(depth_ramp(-7.0, (1.0, 3.0)), DEPTH_RAMP[0]);
    }

    #[test]
    fn depth_grey_spans_white_to_dim() {
        assert_eq!(depth_grey(1.0, (1.0, 3.0)), 1.0);
        assert!((depth_grey(3.0, (1.0, 3.0)) - (1.0 - DEPTH_FAR_DIM)).abs() < 1e-6);
    }

    #[test]
    fn id_colours_are_stable_distinct_and_never_black() {
        assert_eq!(id_colour(0), [0, 0, 0]);
        assert_eq!(id_colour(7), id_colour(7));
        // Consecutive ids and ids that differ in one high bit land far apart.
        let mut seen = std::collections::HashSet::new();
        for id in (1..=2000u32).chain([u32::MAX, 1 << 31, 3_236_172_513]) {
            let c = id_colour(id);
            assert!(c.iter().copied().max().unwrap() >= 180, "{id}: {c:?}");
            seen.insert(c);
        }
        // A hash into about 2^24 colours: collisions among 2003 ids are rare, not impossible.
        assert!(seen.len() >= 1990, "{} distinct colours", seen.len());
        let far = |a: [u8; 3], b: [u8; 3]| {
            a.iter()
                .zip(b)
                .map(|(x, y)| x.abs_diff(y) as u32)
                .sum::<u32>()
        };
        let near_pairs = (1..1000u32)
            .filter(|&id| far(id_colour(id), id_colour(id + 1)) < 30)
            .count();
        assert!(near_pairs < 50, "{near_pairs} consecutive pairs look alike");
    }

    #[test]
    fn hsv_sectors_meet() {
        // The primaries at the sector starts, full saturation and value.
        assert_eq!(hsv_bytes(0, 255, 255), [255, 0, 0]);
        assert_eq!(hsv_bytes(512, 255, 255), [0, 255, 0]);
        assert_eq!(hsv_bytes(1024, 255, 255), [0, 0, 255]);
        // No saturation: grey at the value.
        assert_eq!(hsv_bytes(700, 0, 200), [200, 200, 200]);
    }

    #[test]
    fn defines_carry_every_bin() {
        let defines = shader_defines();
        assert_eq!(defines[0].1.matches('u').count(), COMPLEXITY_BINS.len());
        assert_eq!(defines[1].1.matches("vec3").count(), BIN_COLOURS.len());
    }
}
