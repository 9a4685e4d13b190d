//! `deepmerge bench` as a cargo bench target, so the tables can be taken with an optimised build
//! and this build's `deepmerge` binary in the end-to-end table. The options are the CLI's
//! (`deepmerge::bench::BenchArgs`), and so is the code that runs and prints:
//!
//! ```text
//! cargo bench --bench paper_tables -- --size 320x180 --repeats 3 --markdown \
//!     --e2e tests/data/openexr-images/{Balls,Leaves,Trunks}.exr
//! cargo bench --bench paper_tables -- --help
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use deepmerge::bench;

fn main() -> ExitCode {
    let args = match bench::parse_harness_args(std::env::args()) {
        Ok(args) => args,
        Err(e) => e.exit(),
    };
    let deepmerge = PathBuf::from(env!("CARGO_BIN_EXE_deepmerge"));
    match bench::run_front_end(&args, Some(deepmerge)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("paper_tables: error: {e}");
            ExitCode::FAILURE
        }
    }
}
