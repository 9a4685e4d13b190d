//! The bench's one front end: the options of `deepmerge bench` and of
//! `cargo bench --bench paper_tables` are the same [`BenchArgs`], and both run
//! [`run_front_end`], so the two doors cannot drift apart (issue 9).
//!
//! ```text
//! deepmerge bench --size 320x180 --repeats 3 --markdown --e2e Balls.exr Leaves.exr Trunks.exr
//! cargo bench --bench paper_tables -- --size 320x180 --repeats 3 --markdown --e2e ...
//! deepmerge bench --tidy-gate --repeats 21 --e2e Balls.exr Leaves.exr
//! ```

use std::path::PathBuf;

use clap::{Args, Parser};

use super::{run, tidy_gate, BenchConfig, PeerSetting};
use crate::error::Result;
use crate::gpu::resident::DeepWrites;
use crate::scene;

/// What to measure and how to print it, as given on a command line.
#[derive(Args, Clone, Debug, PartialEq, Eq)]
pub struct BenchArgs {
    /// Scenes to run (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = scene::SCENE_NAMES.map(String::from))]
    pub scenes: Vec<String>,
    /// Scene size, WIDTHxHEIGHT. The GL columns hold each image in one storage buffer, so on
    /// llvmpipe (128 MiB per buffer) 640x360 is the largest size every scene fits.
    #[arg(long, value_name = "WxH", default_value = "480x270", value_parser = size_arg)]
    pub size: (usize, usize),
    /// Scene seed: the same seed gives the same scenes.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Timed runs per cell, after one untimed warm-up (the tables report the median, the tidy
    /// gate the minimum).
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeats: u32,
    /// Print Markdown tables (for docs/benchmarks.md) instead of aligned text.
    #[arg(long)]
    pub markdown: bool,
    /// Leave oiiotool out even when it is installed (its cells take up to a minute at 640x360).
    #[arg(long)]
    pub no_oiiotool: bool,
    /// Leave the GL columns out (the CPU engine and the memcpy floor only).
    #[arg(long)]
    pub no_gl: bool,
    /// Register block size of the GL engine's RBM merges and BIA layout.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=32))]
    pub block_size: u32,
    /// Leave out the BIA RBM column in raster-tile pixel order.
    #[arg(long)]
    pub no_tiles: bool,
    /// Add an RBM column per layout whose register blocks shift (constant indices) instead of
    /// being indexed by a moving position (`--rbm-blocks shifted` in a merge).
    #[arg(long)]
    pub rbm_shifted: bool,
    /// Add Table 2 and 3 columns (LA, IA and BIA, stepwise) with the deep output written each of
    /// these other ways (`DEEPMERGE_GL_DEEP_WRITES`'s spellings: relayout, staged, staged:8K),
    /// to choose between them on a GPU. Table 1 (flat output) is not timed for them.
    #[arg(long, value_name = "WAY,...", value_delimiter = ',', value_parser = deep_writes_arg)]
    pub deep_writes: Vec<DeepWrites>,
    /// Profile every GL cell of Tables 1 and 2 once more (untimed) with GPU timer queries and
    /// print a per-stage table: ms per stage, GB/s and share of the GL copy floor.
    #[arg(long)]
    pub stages: bool,
    /// Run Table 5 alone (k-way against the pairwise chain), not Tables 1-4.
    #[arg(long, conflicts_with = "no_kway")]
    pub only_kway: bool,
    /// Input counts of Table 5, k-way against the pairwise chain (2 to 64 each).
    #[arg(long, value_name = "N,...", value_delimiter = ',', default_values_t = [2usize, 4, 8],
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(2..=64))]
    pub kway_inputs: Vec<usize>,
    /// Leave out Table 5 (k-way against the chain).
    #[arg(long)]
    pub no_kway: bool,
    /// Deep EXR files for the end-to-end table (e.g. Balls.exr Leaves.exr Trunks.exr), timed
    /// as whole `deepmerge` and `oiiotool` processes; with --tidy-gate, one more row merging them.
    #[arg(long, value_name = "FILE", num_args = 2..)]
    pub e2e: Vec<PathBuf>,
    /// Instead of Tables 1-4, time what the GPU tidy stages cost merges that need no tidying:
    /// BIA RBM flat merges with the tidy on the GPU against on the host (GL required).
    #[arg(long)]
    pub tidy_gate: bool,
}

/// One way of writing deep output as clap wants it: `DEEPMERGE_GL_DEEP_WRITES`'s parser.
fn deep_writes_arg(text: &str) -> std::result::Result<DeepWrites, String> {
    match crate::gpu::mapped::deep_writes_from(Some(text)) {
        Ok(Some(way)) => Ok(way),
        Ok(None) => Err("a way of writing deep output is needed".into()),
        Err(e) => Err(e
            .to_string()
            .replace("DEEPMERGE_GL_DEEP_WRITES=", "--deep-writes ")),
    }
}

/// `WIDTHxHEIGHT` as clap wants it: the scene module's parser, its error as text.
fn size_arg(text: &str) -> std::result::Result<(usize, usize), String> {
    scene::parse_size(text).map_err(|e| e.to_string())
}

impl BenchArgs {
    /// The run these options ask for; `deepmerge_exe` is the binary the end-to-end table times
    /// (`None`: the CPU pipeline in-process instead).
    pub fn config(&self, deepmerge_exe: Option<PathBuf>) -> BenchConfig {
        let (width, height) = self.size;
        BenchConfig {
            scenes: self.scenes.clone(),
            width,
            height,
            seed: self.seed,
            repeats: self.repeats as usize,
            oiiotool: if self.no_oiiotool {
                PeerSetting::Off
            } else {
                PeerSetting::Detect
            },
            e2e_inputs: self.e2e.clone(),
            deepmerge_exe,
            gl: !self.no_gl,
            block_size: self.block_size,
            tiled_order: !self.no_tiles,
            rbm_shifted: self.rbm_shifted,
            deep_writes: self.deep_writes.clone(),
            stages: self.stages,
            only_kway: self.only_kway,
            kway_inputs: if self.no_kway {
                Vec::new()
            } else {
                self.kway_inputs.clone()
            },
            ..BenchConfig::default()
        }
    }
}

/// The `paper_tables` bench target's command line: [`BenchArgs`] and nothing else.
#[derive(Parser, Debug)]
#[command(
    name = "paper_tables",
    about = "The paper-style benchmark tables (the same options as `deepmerge bench`)"
)]
struct HarnessCommand {
    #[command(flatten)]
    bench: BenchArgs,
}

/// Parse the bench target's arguments (program name first). Cargo appends `--bench` to what
/// follows `cargo bench --bench paper_tables --`; it is dropped here, as it is no option of ours.
pub fn parse_harness_args<I>(args: I) -> std::result::Result<BenchArgs, clap::Error>
where
    I: IntoIterator<Item = String>,
{
    HarnessCommand::try_parse_from(args.into_iter().filter(|a| a != "--bench")).map(|c| c.bench)
}

/// Run what `args` ask for and return the output, as text or Markdown.
pub fn render_front_end(args: &BenchArgs, deepmerge_exe: Option<PathBuf>) -> Result<String> {
    let config = args.config(deepmerge_exe);
    let report = if args.tidy_gate {
        tidy_gate::run_tidy_gate(&config)?
    } else {
        run(&config)?
    };
    Ok(if args.markdown {
        report.to_markdown()
    } else {
        report.to_text()
    })
}

/// Run what `args` ask for and print it to stdout: `deepmerge bench` and the `paper_tables`
/// bench target are both this call.
pub fn run_front_end(args: &BenchArgs, deepmerge_exe: Option<PathBuf>) -> Result<()> {
    print!("{}", render_front_end(args, deepmerge_exe)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> std::result::Result<BenchArgs, clap::Error> {
        parse_harness_args(
            std::iter::once("paper_tables")
                .chain(args.iter().copied())
                .map(String::from),
        )
    }

    #[test]
    fn cargo_bench_flag_is_dropped_even_after_the_e2e_files() {
        let args = parse(&["--markdown", "--e2e", "a.exr", "b.exr", "--bench"]).unwrap();
        assert_eq!(args.e2e, [PathBuf::from("a.exr"), PathBuf::from("b.exr")]);
        assert!(args.markdown);
    }

    #[test]
    fn every_option_reaches_the_config() {
        let args = parse(&[
            "--scenes",
            "planes,atrium",
            "--size",
            "32x8",
            "--seed",
            "7",
            "--repeats",
            "2",
            "--no-oiiotool",
            "--no-gl",
            "--block-size",
            "4",
            "--no-tiles",
            "--kway-inputs",
            "3,5",
            "--deep-writes",
            "relayout,staged:8K",
        ])
        .unwrap();
        let config = args.config(None);
        assert_eq!(
            config.deep_writes,
            [
                DeepWrites::Relayout,
                DeepWrites::Staged { group_bytes: 8192 }
            ]
        );
        assert_eq!(config.scenes, ["planes", "atrium"]);
        assert_eq!((config.width, config.height), (32, 8));
        assert_eq!((config.seed, config.repeats), (7, 2));
        assert_eq!(config.oiiotool, PeerSetting::Off);
        assert!(!config.gl && !config.tiled_order);
        assert_eq!(config.block_size, 4);
        assert_eq!(config.kway_inputs, [3, 5]);
        assert!(parse(&["--no-kway"])
            .unwrap()
            .config(None)
            .kway_inputs
            .is_empty());
    }

    #[test]
    fn defaults_measure_every_scene_with_every_column() {
        let config = parse(&[]).unwrap().config(None);
        assert_eq!(config.scenes, scene::SCENE_NAMES);
        assert_eq!((config.width, config.height, config.repeats), (480, 270, 3));
        assert_eq!(config.oiiotool, PeerSetting::Detect);
        assert!(config.gl && config.tiled_order);
        assert_eq!(config.kway_inputs, [2, 4, 8]);
    }

    #[test]
    fn bad_options_are_refused() {
        for bad in [
            &["--size", "320"][..],
            &["--repeats", "0"],
            &["--block-size", "33"],
            &["--e2e", "only-one.exr"],
            &["--no-such-option"],
            &["--kway-inputs", "1"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
