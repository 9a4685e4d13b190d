//! THE definition of a correct merge (DESIGN §4): sample order, tidying of overlapping volumes,
//! "over", flattening, and the reference merge of any number of deep images.
//!
//! Everything else (the CPU twins in `cpu`, the GL engine in `gpu`) is tested against this module.

mod flatten;
pub mod holdout;
mod merge;
mod order;
mod pixel;
pub mod tidy;

pub use tidy::{is_tidy, needs_tidy, tidy_pixel};

pub use flatten::{flatten_pixel, FlattenResult};
pub use holdout::{holdout, HoldoutMode};
pub use merge::{merge_images, ChannelSources, MergeOptions, MergeOutput, MergePlan, OutputKind};
pub use order::{depth_less, merge_sorted_runs, sort_samples, Sample, SortPolicy};
pub use pixel::{CompositeChannels, CompositeKind, PixelSamples};
