//! Merge deep EXR files once with the GL engine and print `GpuStats` (a quick manual check).
//!
//! `cargo run --release --example gl_merge_once -- LAYOUT S|RBM BLOCK flat|deep FILE...`

use deepmerge::composite::{MergeOptions, OutputKind};
use deepmerge::exr::{read_deep, ReadOptions};
use deepmerge::gpu::{merge_images_gl, GlContext, GlOptions, Layout, MergeMethod};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 5 {
        eprintln!("usage: gl_merge_once LAYOUT S|RBM BLOCK flat|deep FILE...");
        std::process::exit(2);
    }
    let layout = Layout::from_name(&args[0]).expect("layout LL, LA, IA or BIA");
    let method = if args[1] == "S" {
        MergeMethod::Stepwise
    } else {
        MergeMethod::RegisterBlock
    };
    let block_size = args[2].parse().expect("block size");
    let output = if args[3] == "deep" {
        OutputKind::Deep
    } else {
        OutputKind::Flat { z: false }
    };
    let images: Vec<_> = args[4..]
        .iter()
        .map(|f| read_deep(std::path::Path::new(f), &ReadOptions::default()).expect("read"))
        .collect();
    let inputs: Vec<_> = images.iter().collect();
    let ctx = GlContext::new().expect("GL context");
    let options = MergeOptions {
        output,
        ..Default::default()
    };
    let gl = GlOptions {
        layout,
        method,
        block_size,
        ..Default::default()
    };
    let start = std::time::Instant::now();
    let (_, stats) = merge_images_gl(&ctx, &inputs, &options, &gl).expect("merge");
    print!("{stats}");
    println!("total {:.3}s", start.elapsed().as_secs_f64());
}
