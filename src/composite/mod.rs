//! THE definition of a correct merge (docs/architecture.md, "Invariants"): sample order, tidying of
//! overlapping volumes, "over", flattening, and the reference merge of any number of deep images.
//!
//! Everything else (the CPU twins in `cpu`, the GL engine in `gpu`) is tested against this module.

mod budget;
mod exact_sum;
mod flat;
mod flatten;
pub mod holdout;
mod list;
mod merge;
mod one_alpha;
mod order;
mod pixel;
pub mod prune;
pub mod source_runs;
pub mod tidy;
mod views;
mod walk;

pub use tidy::{is_split, is_tidy, needs_deep_tidy, needs_tidy, tidy_deep_pixel, tidy_pixel};

pub use crate::vocab::MergeStrategy;
pub use crate::vocab::Sample;
pub use budget::{
    check_compatible, check_merge, input_names, output_bytes, DEEP_PIXEL_BYTES, DEEP_SAMPLE_BYTES,
    FLAT_COPIES, GL_FLAT_PIXEL_BYTES,
};
pub use flat::FlatPixels;
pub use flatten::{flatten_pixel, FlattenResult};
pub use holdout::{holdout, HoldoutMode};
pub use list::{tidy_flatten_list, tidy_list};
pub use merge::{
    merge_checked_images_over, merge_images, merge_images_over, read_sample, ChannelSources,
    MergeOptions, MergeOutput, MergePlan, OutputKind,
};
pub use order::{
    merge_runs_chained, merge_runs_kway, merge_sorted_runs, sort_samples, SortPolicy, MAX_HEAP_RUNS,
};
pub use pixel::{CompositeChannels, CompositeKind, PixelSamples};
pub use prune::Pruning;
