//! The codec floor of a file-to-file merge: decoding its inputs plus encoding its output, each
//! measured alone, on the same threads and in the same run. No merge can take less, whatever
//! its engine, so a merge's wall time is reported as a multiple of it (docs/benchmarks.md,
//! "The codec floor"). The decode half is [`super::StreamMerge::decode_only`]; the encode half
//! is here: the merge's own output, read back band by band (not timed) and encoded again with
//! the same writer and options (timed), into a scratch file beside it that is then removed.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::plan::{plan_bands, OutputShape};
use super::StreamOptions;
use crate::composite::OutputKind;
use crate::deep::{FlatChannel, FlatImage, FlatValues, Plane};
use crate::error::{Error, Result};
use crate::exr::{ChunkSource, DeepChunkWriter, FlatChunkWriter, FlatSource, PartSelector};

/// Rows per band when a flat output is encoded again (a multiple of every codec's block
/// height, 1, 16 and 32).
const FLAT_BAND_ROWS: i32 = 64;

/// Where the encode is written: a hidden scratch file beside `output`, on the same disk.
fn scratch_path(output: &Path) -> PathBuf {
    let name = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    output.with_file_name(format!(".{name}.codec-floor.exr"))
}

/// Seconds to encode `output` (an EXR this run wrote with `options`) again, band by band, the
/// reading of each band not counted. The scratch file is removed, whatever happens.
pub fn encode_only(output: &Path, options: &StreamOptions) -> Result<f64> {
    if crate::preview::is_png_path(output) {
        return Err(Error::Usage(
            "the codec floor is measured for EXR output, not a PNG preview".into(),
        ));
    }
    let scratch = scratch_path(output);
    let result = match options.merge.output {
        OutputKind::Deep => encode_deep(output, &scratch, options),
        OutputKind::Flat { .. } => encode_flat(output, &scratch, options),
    };
    let _ = std::fs::remove_file(&scratch);
    result
}

fn encode_deep(output: &Path, scratch: &Path, options: &StreamOptions) -> Result<f64> {
    let mut source = ChunkSource::open(output, &PartSelector::FirstDeep, options.budget)?;
    source.count_rows(options.budget)?;
    let channels = source.channels();
    let shape = OutputShape {
        deep_value_bytes: channels.iter().map(|c| c.sample_type.size() as u64).sum(),
        columns: channels.len() as u64,
        ids: 0,
    };
    let window = source.window;
    let bands = plan_bands(std::slice::from_ref(&source), window, &shape, options)?;
    let mut writer = DeepChunkWriter::create(scratch, window, &options.deep_write)?;
    let mut seconds = 0.0;
    for band in bands {
        let image = source.take_rows(band)?;
        let start = Instant::now();
        writer.write_band(&image)?;
        seconds += start.elapsed().as_secs_f64();
    }
    let start = Instant::now();
    writer.finish()?;
    Ok(seconds + start.elapsed().as_secs_f64())
}

fn encode_flat(output: &Path, scratch: &Path, options: &StreamOptions) -> Result<f64> {
    let mut source = FlatSource::open(output, &PartSelector::Index(0), options.budget)?;
    let window = source.window;
    let display_window = source.display_window;
    let names: Vec<String> = source.channels.iter().map(|c| c.name.clone()).collect();
    let mut writer = FlatChunkWriter::create(scratch, window, &options.flat_write)?;
    let mut seconds = 0.0;
    let mut y0 = window.y0;
    while y0 <= window.y1 {
        let y1 = (y0 as i64 + FLAT_BAND_ROWS as i64 - 1).min(window.y1 as i64) as i32;
        let rows = source.take_rows(y0..=y1)?;
        let band = FlatImage {
            display_window,
            data_window: rows.window,
            channels: names
                .iter()
                .zip(rows.planes)
                .map(|(name, plane)| FlatChannel {
                    name: name.clone(),
                    values: match plane {
                        Plane::U32(v) => FlatValues::U32(v),
                        other => {
                            FlatValues::F32((0..other.len()).map(|i| other.get_f32(i)).collect())
                        }
                    },
                })
                .collect(),
        };
        let start = Instant::now();
        writer.write_band(&band)?;
        seconds += start.elapsed().as_secs_f64();
        y0 = y1 + 1;
    }
    let start = Instant::now();
    writer.finish()?;
    Ok(seconds + start.elapsed().as_secs_f64())
}
