//! A small seeded random number generator (SplitMix64) for the scene generator.
//!
//! Our own rather than a crate's, so that a seed names the same scene whatever version of a
//! random-number crate the build happens to resolve: scenes are benchmark inputs and must stay
//! reproducible across builds.

/// SplitMix64 (Steele, Lea and Flood 2014): tiny, fast, and good enough for placing geometry.
#[derive(Clone, Debug)]
pub struct SceneRng {
    state: u64,
}

impl SceneRng {
    /// A generator for `seed`, decorrelated by `stream` so that each scene (and each layer of a
    /// scene) draws from its own sequence.
    pub fn new(seed: u64, stream: &str) -> Self {
        // FNV-1a of the stream name, mixed into the seed.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in stream.bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        let mut rng = SceneRng {
            state: seed ^ h.rotate_left(17),
        };
        rng.next_u64();
        rng
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.unit()
    }

    /// Uniform integer in [0, n).
    pub fn below(&mut self, n: usize) -> usize {
        (((self.next_u64() >> 32) * n as u64) >> 32) as usize
    }

    /// A uniformly distributed unit vector in 3D.
    pub fn unit_vector(&mut self) -> [f32; 3] {
        let z = self.range(-1.0, 1.0);
        let phi = self.range(0.0, std::f32::consts::TAU);
        let s = (1.0 - z * z).max(0.0).sqrt();
        [s * phi.cos(), s * phi.sin(), z]
    }
}
