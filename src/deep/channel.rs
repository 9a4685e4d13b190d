//! Channels, their roles in compositing and their planes of values.

use half::f16;

/// How a channel's values are stored (the EXR pixel types).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SampleType {
    /// 32-bit unsigned integer (ids).
    U32,
    /// 16-bit float.
    F16,
    /// 32-bit float.
    F32,
}

impl SampleType {
    /// Bytes per value.
    pub fn size(self) -> usize {
        match self {
            SampleType::F16 => 2,
            _ => 4,
        }
    }

    /// The EXR pixel type code (0 uint, 1 half, 2 float).
    pub fn code(self) -> i32 {
        match self {
            SampleType::U32 => 0,
            SampleType::F16 => 1,
            SampleType::F32 => 2,
        }
    }

    /// Name as `deepmerge info` prints it.
    pub fn name(self) -> &'static str {
        match self {
            SampleType::U32 => "uint",
            SampleType::F16 => "half",
            SampleType::F32 => "float",
        }
    }
}

/// What a channel means to the merge, decided from its name (the part after the last '.') and type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChannelRole {
    /// Front depth.
    Z,
    /// Back depth of a volume sample.
    ZBack,
    /// Alpha for all colour channels.
    Alpha,
    /// Per-channel alpha for red.
    RedAlpha,
    /// Per-channel alpha for green.
    GreenAlpha,
    /// Per-channel alpha for blue.
    BlueAlpha,
    /// Red colour (premultiplied).
    Red,
    /// Green colour (premultiplied).
    Green,
    /// Blue colour (premultiplied).
    Blue,
    /// Any other float channel: premultiplied by A and composited like colour.
    Other,
    /// An unsigned integer channel (object or material ids): never blended.
    Id,
}

impl ChannelRole {
    /// The role of a channel with this name and type.
    pub fn of(name: &str, sample_type: SampleType) -> Self {
        if sample_type == SampleType::U32 {
            return ChannelRole::Id;
        }
        let base = name.rsplit('.').next().unwrap_or(name);
        match base {
            "Z" => ChannelRole::Z,
            "ZBack" => ChannelRole::ZBack,
            "A" => ChannelRole::Alpha,
            "RA" => ChannelRole::RedAlpha,
            "GA" => ChannelRole::GreenAlpha,
            "BA" => ChannelRole::BlueAlpha,
            "R" => ChannelRole::Red,
            "G" => ChannelRole::Green,
            "B" => ChannelRole::Blue,
            _ => ChannelRole::Other,
        }
    }
}

/// A named channel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Channel {
    /// Full name, e.g. `R` or `left.R`.
    pub name: String,
    /// Storage type.
    pub sample_type: SampleType,
    /// Role in the merge.
    pub role: ChannelRole,
}

impl Channel {
    /// A channel whose role follows from its name and type.
    pub fn new(name: impl Into<String>, sample_type: SampleType) -> Self {
        let name = name.into();
        let role = ChannelRole::of(&name, sample_type);
        Channel {
            name,
            sample_type,
            role,
        }
    }
}

/// A type a [`Plane`] holds: loops over many values take the plane's values once, typed,
/// instead of matching the plane's type for every value.
pub trait PlaneValue: Copy + Send + Sync + 'static {
    /// Zero of this type (a channel an input lacks counts as 0 there).
    const ZERO: Self;
    /// `plane`'s values when it holds this type.
    fn values(plane: &Plane) -> Option<&[Self]>;
    /// `plane`'s values, to append to, when it holds this type.
    fn values_mut(plane: &mut Plane) -> Option<&mut Vec<Self>>;
}

macro_rules! plane_value {
    ($t:ty, $variant:ident, $zero:expr) => {
        impl PlaneValue for $t {
            const ZERO: Self = $zero;
            fn values(plane: &Plane) -> Option<&[Self]> {
                match plane {
                    Plane::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn values_mut(plane: &mut Plane) -> Option<&mut Vec<Self>> {
                match plane {
                    Plane::$variant(v) => Some(v),
                    _ => None,
                }
            }
        }
    };
}
plane_value!(u32, U32, 0);
plane_value!(f16, F16, f16::ZERO);
plane_value!(f32, F32, 0.0);

/// All values of one channel, sample after sample, in the channel's own type.
#[derive(Clone, Debug, PartialEq)]
pub enum Plane {
    /// Unsigned integers.
    U32(Vec<u32>),
    /// Half floats.
    F16(Vec<f16>),
    /// Floats.
    F32(Vec<f32>),
}

impl Plane {
    /// A plane of `len` zeros.
    pub fn zeros(sample_type: SampleType, len: usize) -> Self {
        match sample_type {
            SampleType::U32 => Plane::U32(vec![0; len]),
            // Zeroed allocation, as `vec!` gives the others: large planes come as untouched pages
            // instead of being written twice (`vec![f16::ZERO; len]` stores every value).
            SampleType::F16 => Plane::F16(bytemuck::zeroed_vec(len)),
            SampleType::F32 => Plane::F32(vec![0.0; len]),
        }
    }

    /// An empty plane with room for `capacity` values.
    pub fn with_capacity(sample_type: SampleType, capacity: usize) -> Self {
        match sample_type {
            SampleType::U32 => Plane::U32(Vec::with_capacity(capacity)),
            SampleType::F16 => Plane::F16(Vec::with_capacity(capacity)),
            SampleType::F32 => Plane::F32(Vec::with_capacity(capacity)),
        }
    }

    /// The storage type.
    pub fn sample_type(&self) -> SampleType {
        match self {
            Plane::U32(_) => SampleType::U32,
            Plane::F16(_) => SampleType::F16,
            Plane::F32(_) => SampleType::F32,
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            Plane::U32(v) => v.len(),
            Plane::F16(v) => v.len(),
            Plane::F32(v) => v.len(),
        }
    }

    /// True when there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Value `i` as f32 (uints convert numerically).
    pub fn get_f32(&self, i: usize) -> f32 {
        match self {
            Plane::U32(v) => v[i] as f32,
            Plane::F16(v) => v[i].to_f32(),
            Plane::F32(v) => v[i],
        }
    }

    /// Append every value of `tail`, which has this plane's type (the one append of whole
    /// planes: band rows joined into an image, lines joined into a chunk).
    pub fn append(&mut self, tail: &Plane) {
        self.append_range(tail, 0..tail.len());
    }

    /// `pieces` (planes of type `sample_type`) joined in order into one plane: pieces of an
    /// output plane gathered in parallel, copied in parallel too, a task a piece (one thread a
    /// plane was a serial tail at the end of every deep band, on either engine).
    pub fn concat(sample_type: SampleType, pieces: &[Plane]) -> Plane {
        fn typed<T: PlaneValue>(pieces: &[Plane]) -> Vec<T> {
            let runs = pieces
                .iter()
                .map(|p| T::values(p).expect("pieces of one plane have its type"))
                .map(|values| (values.len(), values))
                .collect();
            let mut out = Vec::new();
            super::parallel_extend::extend_in_parallel(&mut out, runs, |values| {
                values.iter().copied()
            });
            out
        }
        match sample_type {
            SampleType::U32 => Plane::U32(typed(pieces)),
            SampleType::F16 => Plane::F16(typed(pieces)),
            SampleType::F32 => Plane::F32(typed(pieces)),
        }
    }

    /// Append the values `range` of `from`, which has this plane's type (rows of a decoded
    /// block copied into a band).
    pub fn append_range(&mut self, from: &Plane, range: std::ops::Range<usize>) {
        match (self, from) {
            (Plane::U32(a), Plane::U32(b)) => a.extend_from_slice(&b[range]),
            (Plane::F16(a), Plane::F16(b)) => a.extend_from_slice(&b[range]),
            (Plane::F32(a), Plane::F32(b)) => a.extend_from_slice(&b[range]),
            _ => unreachable!("planes of one channel have one type"),
        }
    }

    /// Append value `i` of `from`, converting only if the types differ (same type: bit-exact).
    pub fn push_from(&mut self, from: &Plane, i: usize) {
        match (self, from) {
            (Plane::U32(a), Plane::U32(b)) => a.push(b[i]),
            (Plane::F16(a), Plane::F16(b)) => a.push(b[i]),
            (Plane::F32(a), Plane::F32(b)) => a.push(b[i]),
            (Plane::U32(a), other) => a.push(other.get_f32(i) as u32),
            (Plane::F16(a), other) => a.push(f16::from_f32(other.get_f32(i))),
            (Plane::F32(a), other) => a.push(other.get_f32(i)),
        }
    }

    /// Append a zero (a channel an input lacks counts as 0 there).
    pub fn push_zero(&mut self) {
        match self {
            Plane::U32(a) => a.push(0),
            Plane::F16(a) => a.push(f16::ZERO),
            Plane::F32(a) => a.push(0.0),
        }
    }

    /// Append value `v` converted to this plane's type.
    pub fn push_f32(&mut self, v: f32) {
        match self {
            Plane::U32(a) => a.push(v as u32),
            Plane::F16(a) => a.push(f16::from_f32(v)),
            Plane::F32(a) => a.push(v),
        }
    }

    /// Little-endian bytes of values `range`, appended to `out`.
    pub fn write_le(&self, range: std::ops::Range<usize>, out: &mut Vec<u8>) {
        match self {
            Plane::U32(v) => extend_le(&v[range], out, |x| x.to_le_bytes()),
            Plane::F16(v) => extend_le(&v[range], out, |x| x.to_le_bytes()),
            Plane::F32(v) => extend_le(&v[range], out, |x| x.to_le_bytes()),
        }
    }

    /// Overwrite values from index `start` on with values decoded from little-endian bytes.
    pub fn write_le_at(&mut self, start: usize, bytes: &[u8]) {
        match self {
            Plane::U32(v) => {
                for (d, b) in v[start..].iter_mut().zip(bytes.chunks_exact(4)) {
                    *d = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                }
            }
            Plane::F16(v) => {
                for (d, b) in v[start..].iter_mut().zip(bytes.chunks_exact(2)) {
                    *d = f16::from_le_bytes([b[0], b[1]]);
                }
            }
            Plane::F32(v) => {
                for (d, b) in v[start..].iter_mut().zip(bytes.chunks_exact(4)) {
                    *d = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                }
            }
        }
    }
}

/// `values` appended to `out` as little-endian bytes: one copy of their memory on a
/// little-endian host (every value's bytes as they lie), `le_bytes` per value elsewhere. The
/// per-value form was a tenth of a deep merge's writing outside the codec.
fn extend_le<T: bytemuck::Pod, const N: usize>(
    values: &[T],
    out: &mut Vec<u8>,
    le_bytes: impl Fn(&T) -> [u8; N],
) {
    if cfg!(target_endian = "little") {
        out.extend_from_slice(bytemuck::cast_slice(values));
    } else {
        values.iter().for_each(|x| out.extend(le_bytes(x)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pieces of every type, empty ones among them, joined in their order.
    #[test]
    fn concat_joins_pieces_in_order_for_every_type() {
        let lengths = [3usize, 0, 70_000, 1, 0, 5];
        let mut next = 0u32;
        let mut pieces: Vec<Vec<u32>> = Vec::new();
        for n in lengths {
            pieces.push((next..next + n as u32).collect());
            next += n as u32;
        }
        let expected: Vec<u32> = (0..next).collect();
        let u32s: Vec<Plane> = pieces.iter().map(|p| Plane::U32(p.clone())).collect();
        assert_eq!(
            Plane::concat(SampleType::U32, &u32s),
            Plane::U32(expected.clone())
        );
        let f32s: Vec<Plane> = pieces
            .iter()
            .map(|p| Plane::F32(p.iter().map(|&v| v as f32).collect()))
            .collect();
        let floats = expected.iter().map(|&v| v as f32).collect();
        assert_eq!(Plane::concat(SampleType::F32, &f32s), Plane::F32(floats));
        let f16s: Vec<Plane> = pieces
            .iter()
            .map(|p| Plane::F16(p.iter().map(|&v| f16::from_bits(v as u16)).collect()))
            .collect();
        // As bits: the pieces hold NaN patterns too, which compare unequal as values.
        let Plane::F16(halves) = Plane::concat(SampleType::F16, &f16s) else {
            panic!("a half plane comes back")
        };
        let bits: Vec<u16> = halves.iter().map(|h| h.to_bits()).collect();
        let expected_bits: Vec<u16> = expected.iter().map(|&v| v as u16).collect();
        assert_eq!(bits, expected_bits);
        assert_eq!(Plane::concat(SampleType::F32, &[]), Plane::F32(Vec::new()));
    }
}
