//! The library in one sitting: read two deep EXR files, merge them on the GPU with the OpenGL
//! engine (or with the CPU engine where no GL context can be made), write the flat composite.
//!
//! ```text
//! cargo run --release --example merge_gl -- \
//!     tests/data/openexr-images/Balls.exr tests/data/openexr-images/Leaves.exr out.exr
//! ```
//!
//! The `deepmerge` binary does the same with every option (`deepmerge A B -o OUT`); this is the
//! part a program embedding the crate would copy.

use std::path::PathBuf;

use deepmerge::composite::{merge_images, MergeOptions, MergeOutput, OutputKind};
use deepmerge::deep::DeepImage;
use deepmerge::exr::{read_deep, write_flat, FlatType, ReadOptions};
use deepmerge::gpu::{merge_images_gl, GlContext, GlOptions};

fn main() -> deepmerge::Result<()> {
    let paths: Vec<PathBuf> = std::env::args().skip(1).map(PathBuf::from).collect();
    let [a, b, out] = paths.as_slice() else {
        eprintln!("usage: merge_gl A.exr B.exr OUT.exr");
        std::process::exit(2);
    };
    // The first input wins ties in depth, as on the command line.
    let images = [a, b]
        .into_iter()
        .map(|path| read_deep(path, &ReadOptions::default()))
        .collect::<deepmerge::Result<Vec<DeepImage>>>()?;
    let inputs: Vec<&DeepImage> = images.iter().collect();
    let options = MergeOptions {
        output: OutputKind::Flat { z: false },
        ..MergeOptions::default()
    };
    // Both engines give the same pixels; GL needs an OpenGL 4.3 context (EGL, headless).
    let merged = match GlContext::new() {
        Ok(ctx) => {
            let (merged, stats) = merge_images_gl(&ctx, &inputs, &options, &GlOptions::default())?;
            eprint!("{stats}");
            merged
        }
        Err(why) => {
            eprintln!("no GL context ({why}); merging on the CPU");
            merge_images(&inputs, &options)?
        }
    };
    match merged {
        MergeOutput::Flat(flat) => write_flat(out, &flat, FlatType::Half),
        MergeOutput::Deep(_) => unreachable!("OutputKind::Flat asks for a flat image"),
    }
}
