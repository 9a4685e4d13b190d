//! Flat (one value per pixel) images: what a composite produces and the flat EXR writer takes.

use super::Bounds;

/// A flat image: one f32 plane per channel over the data window, plus per-channel storage type.
#[derive(Clone, Debug, PartialEq)]
pub struct FlatImage {
    /// The frame.
    pub display_window: Bounds,
    /// The pixels stored.
    pub data_window: Bounds,
    /// Channel names with their values (row-major over the data window).
    pub channels: Vec<FlatChannel>,
}

/// One channel of a flat image.
#[derive(Clone, Debug, PartialEq)]
pub struct FlatChannel {
    /// Name, e.g. `R`.
    pub name: String,
    /// Values as computed (f32), converted to the file's type on writing.
    pub values: FlatValues,
}

/// Values of a flat channel.
#[derive(Clone, Debug, PartialEq)]
pub enum FlatValues {
    /// Float channels (colour, alpha, depth).
    F32(Vec<f32>),
    /// Unsigned integer channels (ids).
    U32(Vec<u32>),
}

impl FlatImage {
    /// The values of the named float channel.
    pub fn channel(&self, name: &str) -> Option<&[f32]> {
        self.channels.iter().find_map(|c| match &c.values {
            FlatValues::F32(v) if c.name == name => Some(v.as_slice()),
            _ => None,
        })
    }
}
