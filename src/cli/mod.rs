//! The command line's subcommands other than the merge, and what they share with it.

pub mod comp;
pub mod holdout;
pub mod ops;
pub mod options;
