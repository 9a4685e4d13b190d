//! The library in one sitting: merge two deep EXR files into a flat composite, file to file and
//! streamed in bands, on the GPU with the OpenGL engine (or on the CPU engine where no GL
//! context can be made).
//!
//! ```text
//! cargo run --release --example merge_gl -- \
//!     tests/data/openexr-images/Balls.exr tests/data/openexr-images/Leaves.exr out.exr
//! ```
//!
//! The `deepmerge` binary does the same with every option (`deepmerge A B -o OUT`); this is the
//! part a program embedding the crate would copy.

use std::path::PathBuf;

use deepmerge::composite::{MergeOptions, OutputKind};
use deepmerge::gpu::{GlContext, GlOptions};
use deepmerge::stream::{merge_files, MergeEngine, StreamOptions};

fn main() -> deepmerge::Result<()> {
    let paths: Vec<PathBuf> = std::env::args().skip(1).map(PathBuf::from).collect();
    let [a, b, out] = paths.as_slice() else {
        eprintln!("usage: merge_gl A.exr B.exr OUT.exr");
        std::process::exit(2);
    };
    let options = StreamOptions {
        merge: MergeOptions {
            output: OutputKind::Flat { z: false },
            ..MergeOptions::default()
        },
        ..StreamOptions::default()
    };
    // The first input wins ties in depth, as on the command line. Both engines give the same
    // pixels; GL needs an OpenGL 4.3 context (EGL, headless).
    let inputs = [a.clone(), b.clone()];
    let context = GlContext::new();
    let engine = match &context {
        Ok(ctx) => MergeEngine::Gl(ctx, GlOptions::default()),
        Err(why) => {
            eprintln!("no GL context ({why}); merging on the CPU");
            MergeEngine::Cpu
        }
    };
    let report = merge_files(&inputs, out, &options, engine, None)?;
    eprintln!("merged in {} band(s)", report.bands);
    Ok(())
}
