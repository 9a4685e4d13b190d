//! The command line's subcommands beyond the merge, each with its arguments and its run
//! function; `main.rs` only lists them.

pub mod holdout;
pub mod ops;
