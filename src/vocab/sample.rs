//! One sample as the engines move it, and the rules every engine orders samples by.
//!
//! - [`Sample`] is the reference engine's record (64-bit sample index, for inputs of any size);
//!   [`Fragment`] is the 16-byte key the GPU stages and their twins move (32-bit index, laid out
//!   as `glsl/include/fragment.glsl`'s `Fragment`). `From`/`TryFrom` below are the one conversion.
//! - [`depth_key`] is the key rule: a ZBack not greater than Z makes a point.
//! - [`depth_less`] / [`depth_cmp`] are the order: (Z, ZBack) lexicographically, `-0.0 == 0.0`,
//!   ties left to stability (earlier input, then earlier sample, first).

use std::cmp::Ordering;

/// The (Z, ZBack) key of a sample read as `z`, `zback`: a ZBack not greater than Z (or NaN
/// compared false) makes a point, whose ZBack is its Z. Every reader of depths goes through this.
pub fn depth_key(z: f32, zback: f32) -> (f32, f32) {
    (z, if zback > z { zback } else { z })
}

/// True when key `a` sorts strictly before key `b`: (Z, ZBack) lexicographically. `-0.0` and
/// `0.0` compare equal, as they do on the GPU (`glsl/include/fragment.glsl`'s `depth_less`).
pub fn depth_less(a: (f32, f32), b: (f32, f32)) -> bool {
    a.0 < b.0 || (a.0 == b.0 && a.1 < b.1)
}

/// [`depth_less`] as an [`Ordering`] for stable sorts: equal keys compare `Equal`, so a stable
/// sort keeps them in input order (the tie rule).
pub fn depth_cmp(a: (f32, f32), b: (f32, f32)) -> Ordering {
    if depth_less(a, b) {
        Ordering::Less
    } else if depth_less(b, a) {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

/// One sample of one input, as the reference merge orders it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// Front depth.
    pub z: f32,
    /// Back depth; equal to `z` for point samples ([`depth_key`]).
    pub zback: f32,
    /// Which input (0 = first on the command line).
    pub input: u32,
    /// Index of the sample in its input's planes.
    pub index: u64,
}

impl Sample {
    /// A volume covers [z, zback) with zback > z; anything else is a point.
    pub fn is_volume(&self) -> bool {
        self.zback > self.z
    }

    /// Its (Z, ZBack) key.
    pub fn key(&self) -> (f32, f32) {
        (self.z, self.zback)
    }
}

/// The key of one sample as the GPU stages move it: depth range plus where it came from, so the
/// host can copy every channel bit-exactly from the original planes afterwards.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Fragment {
    /// Front depth.
    pub z: f32,
    /// Back depth (equal to `z` for points).
    pub zback: f32,
    /// Which input of the whole merge (0 = first).
    pub input: u32,
    /// Index of the sample in that input's planes.
    pub index: u32,
}

impl Fragment {
    /// Its (Z, ZBack) key.
    pub fn key(&self) -> (f32, f32) {
        (self.z, self.zback)
    }

    /// Strict (Z, ZBack) order ([`depth_less`]).
    pub fn depth_less(&self, other: &Fragment) -> bool {
        depth_less(self.key(), other.key())
    }

    /// [`depth_cmp`] of the keys, for stable sorts.
    pub fn depth_cmp(&self, other: &Fragment) -> Ordering {
        depth_cmp(self.key(), other.key())
    }
}

impl From<Fragment> for Sample {
    fn from(f: Fragment) -> Sample {
        Sample {
            z: f.z,
            zback: f.zback,
            input: f.input,
            index: f.index as u64,
        }
    }
}

impl TryFrom<Sample> for Fragment {
    type Error = std::num::TryFromIntError;

    /// Fails when the sample index does not fit the GPU's 32 bits.
    fn try_from(s: Sample) -> Result<Fragment, Self::Error> {
        Ok(Fragment {
            z: s.z,
            zback: s.zback,
            input: s.input,
            index: u32::try_from(s.index)?,
        })
    }
}

/// How the merged samples' sources, (input, index), travel back from the GPU for a deep output
/// read back by its keys alone with nothing to tidy on the host (`glsl/sources.comp`): the host
/// copies every channel from the sample a source names and needs nothing else of the key, so
/// four or eight bytes a sample come back instead of the sixteen-byte key (and, for a linked
/// list, its next pointer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourcePacking {
    /// One word, `input << index_bits | index`, where every input's indices fit `index_bits`.
    OneWord {
        /// Low bits holding the index (32 with one input: the word is the index).
        index_bits: u32,
    },
    /// Two words: input, then index.
    TwoWords,
}

impl SourcePacking {
    /// One word where every index of every input (`samples[k]` of input k) fits beside the
    /// input's number, two otherwise.
    pub fn for_inputs(samples: &[usize]) -> SourcePacking {
        let input_bits = u32::BITS - (samples.len().max(1) as u32 - 1).leading_zeros();
        let index_bits = u32::BITS - input_bits;
        let fits = samples
            .iter()
            .all(|&n| index_bits == u32::BITS || (n as u64) <= 1u64 << index_bits);
        if fits {
            SourcePacking::OneWord { index_bits }
        } else {
            SourcePacking::TwoWords
        }
    }

    /// Words per sample.
    pub fn words(self) -> usize {
        match self {
            SourcePacking::OneWord { .. } => 1,
            SourcePacking::TwoWords => 2,
        }
    }

    /// The low bits of a packed word that hold the index (32 for two words: a word of its own).
    pub fn index_bits(self) -> u32 {
        match self {
            SourcePacking::OneWord { index_bits } => index_bits,
            SourcePacking::TwoWords => 32,
        }
    }

    /// Words of a run's record when the sources come back as runs (`glsl/source_runs.comp`): the
    /// run's first position, then its first sample's source as packed here.
    pub fn run_words(self) -> usize {
        1 + self.words()
    }

    /// `fragment`'s source into `out` (`words()` long).
    pub fn pack(self, fragment: &Fragment, out: &mut [u32]) {
        match self {
            SourcePacking::OneWord { index_bits: 32 } => out[0] = fragment.index,
            SourcePacking::OneWord { index_bits } => {
                out[0] = (fragment.input << index_bits) | fragment.index
            }
            SourcePacking::TwoWords => out.copy_from_slice(&[fragment.input, fragment.index]),
        }
    }

    /// The (input, index) that [`Self::pack`] wrote into `words`.
    pub fn unpack(self, words: &[u32]) -> (u32, u32) {
        match self {
            SourcePacking::OneWord { index_bits: 32 } => (0, words[0]),
            SourcePacking::OneWord { index_bits } => {
                (words[0] >> index_bits, words[0] & ((1 << index_bits) - 1))
            }
            SourcePacking::TwoWords => (words[0], words[1]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zback_not_behind_z_makes_a_point() {
        assert_eq!(depth_key(1.0, 2.0), (1.0, 2.0));
        assert_eq!(depth_key(1.0, 1.0), (1.0, 1.0));
        assert_eq!(depth_key(1.0, 0.5), (1.0, 1.0));
        assert_eq!(depth_key(1.0, f32::NAN), (1.0, 1.0));
        assert_eq!(depth_key(1.0, f32::INFINITY), (1.0, f32::INFINITY));
    }

    #[test]
    fn order_is_z_then_zback_with_signed_zeros_equal() {
        assert!(depth_less((1.0, 1.0), (1.0, 2.0)));
        assert!(depth_less((1.0, 5.0), (2.0, 2.0)));
        assert_eq!(depth_cmp((-0.0, 0.0), (0.0, -0.0)), Ordering::Equal);
        assert_eq!(depth_cmp((2.0, 3.0), (2.0, 2.0)), Ordering::Greater);
        assert!(depth_less((f32::NEG_INFINITY, 0.0), (0.0, 0.0)));
    }

    #[test]
    fn conversion_round_trips_and_refuses_wide_indices() {
        let f = Fragment {
            z: 1.0,
            zback: 2.0,
            input: 3,
            index: 4,
        };
        assert_eq!(Fragment::try_from(Sample::from(f)), Ok(f));
        let wide = Sample {
            index: 1 << 32,
            ..Sample::from(f)
        };
        assert!(Fragment::try_from(wide).is_err());
    }

    #[test]
    fn sources_pack_in_one_word_where_every_index_fits_beside_its_input() {
        use SourcePacking::*;
        assert_eq!(SourcePacking::for_inputs(&[]), OneWord { index_bits: 32 });
        assert_eq!(
            SourcePacking::for_inputs(&[usize::MAX >> 20]),
            OneWord { index_bits: 32 }
        );
        assert_eq!(
            SourcePacking::for_inputs(&[1 << 31, 5]),
            OneWord { index_bits: 31 }
        );
        assert_eq!(SourcePacking::for_inputs(&[(1 << 31) + 1, 5]), TwoWords);
        assert_eq!(
            SourcePacking::for_inputs(&[1, 1, 1 << 30]),
            OneWord { index_bits: 30 }
        );
        assert_eq!(
            SourcePacking::for_inputs(&[1; 9]),
            OneWord { index_bits: 28 }
        );
        for (packing, input, index) in [
            (OneWord { index_bits: 32 }, 0, u32::MAX),
            (OneWord { index_bits: 31 }, 1, (1 << 31) - 1),
            (OneWord { index_bits: 28 }, 8, 12345),
            (TwoWords, 40, u32::MAX),
        ] {
            let fragment = Fragment {
                z: 1.0,
                zback: 1.0,
                input,
                index,
            };
            let mut words = [0u32; 2];
            packing.pack(&fragment, &mut words[..packing.words()]);
            assert_eq!(
                packing.unpack(&words[..packing.words()]),
                (input, index),
                "{packing:?}"
            );
        }
    }
}
