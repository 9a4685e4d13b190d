//! The paper-style tables (`deepmerge::bench::run`) as a cargo bench, so they can be measured
//! with an optimised build before the CLI's `bench` subcommand exists, and so the numbers in
//! docs/benchmarks.md come from one exact command:
//!
//! ```text
//! cargo bench --bench paper_tables -- --size 320x180 --repeats 3 --markdown \
//!     --e2e Balls.exr Leaves.exr Trunks.exr
//! ```
//!
//! The GL columns keep each scene resident in one storage buffer per image, so the largest size
//! is set by GL_MAX_SHADER_STORAGE_BLOCK_SIZE (128 MiB on llvmpipe: 640x360 for every scene);
//! larger cells say `failed: ...` with the GL limit.
//!
//! Options: `--size WxH` (default 480x270, so a plain `cargo bench` stays short), `--seed N`,
//! `--repeats N`, `--scenes a,b,...`, `--markdown`, `--no-oiiotool`, `--e2e FILE...` (deep
//! EXR files for the end-to-end table, timed with this build's `deepmerge` binary, both
//! backends), `--no-gl` (leave the GL columns out), `--block-size N` (GL RBM and BIA, default
//! 8), `--no-tiles` (leave out the raster-tile column). Anything else (cargo passes `--bench`)
//! is ignored.

use std::path::PathBuf;
use std::process::ExitCode;

use deepmerge::bench::{self, BenchConfig, PeerSetting};
use deepmerge::scene;

fn main() -> ExitCode {
    let mut config = BenchConfig {
        width: 480,
        height: 270,
        repeats: 3,
        deepmerge_exe: Some(PathBuf::from(env!("CARGO_BIN_EXE_deepmerge"))),
        ..BenchConfig::default()
    };
    let mut markdown = false;
    let mut args = std::env::args().skip(1).peekable();
    let result = (|| -> deepmerge::Result<()> {
        while let Some(arg) = args.next() {
            let mut value = |name: &str| {
                args.next()
                    .ok_or_else(|| deepmerge::Error::Usage(format!("{name} needs a value")))
            };
            match arg.as_str() {
                "--size" => (config.width, config.height) = scene::parse_size(&value("--size")?)?,
                "--seed" => {
                    config.seed = value("--seed")?
                        .parse()
                        .map_err(|_| deepmerge::Error::Usage("--seed takes a number".into()))?
                }
                "--repeats" => {
                    config.repeats = value("--repeats")?
                        .parse()
                        .map_err(|_| deepmerge::Error::Usage("--repeats takes a number".into()))?
                }
                "--scenes" => {
                    config.scenes = value("--scenes")?.split(',').map(String::from).collect()
                }
                "--markdown" => markdown = true,
                "--no-oiiotool" => config.oiiotool = PeerSetting::Off,
                "--no-gl" => config.gl = false,
                "--no-tiles" => config.tiled_order = false,
                "--block-size" => {
                    config.block_size = value("--block-size")?.parse().map_err(|_| {
                        deepmerge::Error::Usage("--block-size takes a number".into())
                    })?
                }
                "--e2e" => {
                    while let Some(file) = args.next_if(|a| !a.starts_with("--")) {
                        config.e2e_inputs.push(PathBuf::from(file));
                    }
                }
                _ => {}
            }
        }
        let report = bench::run(&config)?;
        if markdown {
            print!("{}", report.to_markdown());
        } else {
            print!("{}", report.to_text());
        }
        Ok(())
    })();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("paper_tables: {e}");
            ExitCode::FAILURE
        }
    }
}
