//! What the GPU stages and their CPU twins exchange besides fragments: the sizes the sort and
//! the tidy gate are specialised with (emitted to GLSL as `#define`s by their loaders), the
//! record of tidied-and-flattened pixels, and which flag bits mark a pixel for compaction.

/// Slots sorted at once in registers (the shader's `REG_SORT_SIZE`): the longest list one
/// invocation sorts alone, and the block each invocation of a local sort starts from. Small
/// enough that the unrolled network stays cheap to compile and in registers.
pub const REG_SORT_SIZE: usize = 16;

/// Slots one work group sorts in shared memory (the shader's `LOCAL_SORT_SIZE`): 512 keys of 16
/// bytes and their 4-byte positions take 10 KiB, well inside the 32 KiB every GL 4.3 device has,
/// and the group is one warp of 32. Measured on llvmpipe, 1024 (64 invocations, 20 KiB) made
/// lists of 17-200 samples about 1.5 times slower and long lists no faster.
pub const LOCAL_SORT_SIZE: usize = 512;

/// Invocations of a chunk group (the shader's `LOCAL_GROUP_SIZE`): one register block each.
pub const LOCAL_GROUP_SIZE: usize = LOCAL_SORT_SIZE / REG_SORT_SIZE;

/// Value columns moved per gather/scatter round: the scratch's 16 bytes per slot.
pub const VALUE_ROUND: usize = 4;

/// Slots the gate (`tidy_assemble.comp`'s gate stage) reads in one pixel at most: a longer list
/// is flagged without looking (the tidy walk leaves a tidy list as it is, so a false flag costs
/// time, never correctness). It keeps the gate's loop under llvmpipe's cap of 65535 iterations.
pub const GATE_LIMIT: u32 = 49152;

/// Result of tidying and flattening a list of pixels.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TidiedPixels {
    /// `stride` (columns, at least 1) flattened values per listed pixel, in list order.
    pub values: Vec<f32>,
    /// Per listed pixel, the front-most tidied sample with any alpha above 0, as the flat merge
    /// writes it: (input, sample index, Z bits, 1), or all zero when there is none.
    pub front: Vec<[u32; 4]>,
}

/// Which bits of which word mark a pixel: pixel `p` is marked when
/// `flags[p * stride + component] & mask != 0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlagField {
    /// u32 words per pixel in the flag buffer.
    pub stride: u32,
    /// Which of them holds the flag.
    pub component: u32,
    /// Bits that mark.
    pub mask: u32,
}

impl FlagField {
    /// One u32 per pixel, any non-zero value marks.
    pub const WORD: FlagField = FlagField {
        stride: 1,
        component: 0,
        mask: u32::MAX,
    };

    /// The flat merge's front buffer (`uvec4` per pixel): bit 2 of the fourth word, "volumes
    /// overlap here".
    pub const NEEDS_TIDY_IN_FRONT: FlagField = FlagField {
        stride: 4,
        component: 3,
        mask: 2,
    };
}
