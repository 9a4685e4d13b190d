//! `holdout`, streamed: IN held out by HOLDOUT ([`crate::composite::holdout`]) band by band
//! within the memory budget, written as the merge writes its output.
//!
//! The holdout works pixel by pixel on absolute coordinates, so a band of rows of IN needs only
//! the same rows of HOLDOUT: both files are opened as the merge opens its inputs (the same
//! `--part` in each), their count tables plan the bands over IN's data window, and each band
//! pair is held out on the calling thread while the next one is read and the last one written.
//! The output has IN's data and display windows, whatever HOLDOUT's are.
//!
//! What is written comes from [`StreamOptions`] as for the merge: deep output (compression,
//! `deepImageState`, optional tidy through the merge of one input), or the flat composite of the
//! held-out image as a flat EXR or, for `*.png`, a PNG preview. IN's header attributes are
//! carried as `--metadata first` says (IN is the first input). The bytes are those of holding
//! out the whole images and writing the result at once: bands change only the memory used.

use std::path::{Path, PathBuf};

use crate::composite::{holdout, CompositeChannels, HoldoutMode, OutputKind};
use crate::error::{Error, Result};
use crate::exr::ChunkSource;
use crate::request::Backend;
use crate::run_stats::RunStats;
use crate::stream::plan::OutputShape;
use crate::stream::{plan_bands, stream_bands, BandOutput, OutputFormat, StreamOptions};

use super::finish_band;

/// Hold the deep part `options.part` of `input` out by that of `holdout_path` with `mode`,
/// writing `output` as `options` say (deep or flat, compression, state, tidy, budget, bands).
/// Stage times go to `stats`.
pub fn run_holdout(
    input: &Path,
    holdout_path: &Path,
    output: &Path,
    mode: HoldoutMode,
    options: &StreamOptions,
    stats: Option<&RunStats>,
) -> Result<()> {
    let paths = [input.to_path_buf(), holdout_path.to_path_buf()];
    crate::exr::check_output_is_not_an_input(output, &paths)?;
    let mut sources = paths
        .iter()
        .map(|p| ChunkSource::open(p, &options.part, options.budget))
        .collect::<Result<Vec<_>>>()?;
    for source in &mut sources {
        source.count_rows(options.budget)?;
    }
    let window = sources[0].window;
    let head = sources[0].no_rows(window.y0);
    let composite = CompositeChannels::of(&[&head]);
    if matches!(options.merge.output, OutputKind::Flat { .. }) && composite.is_empty() {
        return Err(Error::file(
            input,
            "holds no colour or alpha channel, so a flat composite has nothing to show",
        ));
    }
    let shape = OutputShape {
        deep_value_bytes: sources[0].sample_bytes(),
        columns: composite.len() as u64,
        ids: head
            .channels
            .iter()
            .filter(|c| c.role == crate::deep::ChannelRole::Id)
            .count() as u64,
    };
    let bands = plan_bands(&sources, window, &shape, options)?;
    let (deep_write, flat_write) = options.write_options_from(
        &sources[0].attributes,
        &[&sources[0].all_channels, &sources[1].all_channels],
    );
    let format = match options.merge.output {
        OutputKind::Deep => OutputFormat::Deep(&deep_write),
        OutputKind::Flat { .. } => OutputFormat::flat_for(output, &flat_write),
    };
    let target = BandOutput {
        path: output,
        window,
        format,
        empty_rows: None,
    };
    let names: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    stream_bands(sources, bands, &target, stats, &mut |_, images| {
        let held = holdout(&images[0], &images[1], mode)?;
        finish_band(held, options)
    })
    .map_err(|e| e.in_merge(&names))
}

/// The engine a holdout runs on: the CPU, whatever `backend` asks. OpenGL is refused in one
/// line saying why: the GPU engine has no holdout stage, and the holdout's arithmetic (powers
/// of transmittance in f64 for split volumes) has no bit-exact GLSL twin.
pub fn check_backend(backend: Backend) -> Result<()> {
    match backend {
        Backend::Auto | Backend::Cpu => Ok(()),
        Backend::Gl => Err(Error::Usage(
            "holdout has no OpenGL path (the GPU engine has no holdout stage, and its f64 \
             transmittance powers have no bit-exact GLSL twin); it runs on the CPU: use \
             --backend cpu or auto"
                .into(),
        )),
    }
}
