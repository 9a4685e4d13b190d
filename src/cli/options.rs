//! How the command line maps onto the library's option types: the flags' spellings for the
//! refusals of [`deepmerge::request::MergeRequest::check`] ([`Flags`]), a clap parser for each
//! option enum that lists its names in help and completions and parses them with the enum's
//! own `FromStr` ([`named`]), and the one memory-size parser ([`memory_size`]).

use std::str::FromStr;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use deepmerge::request::{MergeOption, OptionNames};

/// The merge's flags, as its refusals name them.
pub struct Flags;

impl OptionNames for Flags {
    fn spell(&self, option: MergeOption) -> &'static str {
        match option {
            MergeOption::Deep => "--deep",
            MergeOption::FlatZ => "--flat-z",
            MergeOption::FlatType => "--flat-type",
            MergeOption::Tidy => "--tidy",
            MergeOption::NoDeepState => "--no-deep-state",
            MergeOption::Compression => "--compression",
            MergeOption::ZstdLevel => "--zstd-level",
            MergeOption::Metadata => "--metadata",
            MergeOption::OutputFile => "-o",
            MergeOption::Backend => "--backend",
            MergeOption::Layout => "--layout",
            MergeOption::Method => "--rbm/--stepwise",
            MergeOption::Block => "--block",
            MergeOption::RbmBlocks => "--rbm-blocks",
            MergeOption::LongLists => "--gpu-long-lists",
            MergeOption::PixelOrder => "--pixel-order",
            MergeOption::GpuStages => "--gpu-stages",
            MergeOption::Stats => "--stats",
            MergeOption::GpuMemory => "--gpu-memory",
            MergeOption::Strategy => "--merge-strategy",
            MergeOption::Sort => "--sort",
            MergeOption::AssumeSorted => "--assume-sorted",
            MergeOption::Part => "--part",
            MergeOption::AllParts => "--all-parts",
            MergeOption::MemoryBudget => "--memory-budget",
            MergeOption::DropTransparent => "--drop-transparent",
            MergeOption::DropHidden => "--drop-hidden",
            MergeOption::Jobs => "-j",
            MergeOption::Flat => "--flat",
            MergeOption::Near => "--near",
            MergeOption::Far => "--far",
            MergeOption::Box => "--box",
            MergeOption::Translate => "--translate",
            MergeOption::ZOffset => "--z-offset",
            MergeOption::ZScale => "--z-scale",
            MergeOption::Id => "--id",
            MergeOption::Mask => "--mask",
            MergeOption::Z => "--z",
            MergeOption::ZChannel => "--z-channel",
            MergeOption::Thickness => "--thickness",
            MergeOption::ZBackChannel => "--zback-channel",
        }
    }

    fn setting(&self, option: MergeOption, value: &str) -> String {
        format!("{} {value}", self.spell(option))
    }

    fn operation_option(&self, option: &deepmerge::ops::registry::OptionSpec) -> String {
        format!("--{}", option.flag())
    }
}

/// A clap parser for the library option enum `T`: `names` are shown in help and completions,
/// and each is parsed by `T::from_str` (so the CLI takes exactly the names Python takes).
pub fn named<T>(names: &'static [&'static str]) -> impl TypedValueParser<Value = T>
where
    T: FromStr + Clone + Send + Sync + 'static,
    T::Err: std::fmt::Debug,
{
    PossibleValuesParser::new(names).map(|name| name.parse::<T>().expect("a listed name"))
}

/// The value of the memory option `flag` (`--memory-budget`, `--max-memory`): a number of GiB
/// or a size with a unit ([`deepmerge::size::parse_memory`]); a bad one is a usage error of one
/// line naming the flag (exit 2), like every other refusal of the merge's options.
pub fn memory_size(flag: &str, text: &str) -> deepmerge::Result<u64> {
    deepmerge::size::parse_memory(text).map_err(|e| deepmerge::Error::Usage(format!("{flag}: {e}")))
}
