//! The display transforms the window applies, stated once in Rust: `glsl/view_image.frag` does
//! the same arithmetic on the GPU, and the window test computes the colours it expects with
//! these functions from the headless merge.

use crate::heatmap::{complexity_colour, BIN_COLOURS, BIN_FLOOR};
use crate::info::COMPLEXITY_BINS;
pub use crate::preview::{srgb, to_byte};

/// How dark the farthest depth is drawn in the depth view: near is white, far is `1 - this`.
pub const DEPTH_FAR_DIM: f32 = 0.8;

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
    fn depth_grey_spans_white_to_dim() {
        assert_eq!(depth_grey(1.0, (1.0, 3.0)), 1.0);
        assert!((depth_grey(3.0, (1.0, 3.0)) - (1.0 - DEPTH_FAR_DIM)).abs() < 1e-6);
    }

    #[test]
    fn defines_carry_every_bin() {
        let defines = shader_defines();
        assert_eq!(defines[0].1.matches('u').count(), COMPLEXITY_BINS.len());
        assert_eq!(defines[1].1.matches("vec3").count(), BIN_COLOURS.len());
    }
}
