//! What every single-input operation and the holdout write, as asked: one [`OutputRequest`]
//! (compression, zstd level, metadata, deep or flat, deep state, tidy, flat type and Z, part,
//! budget, bands) that the CLI's flags, Python's keywords and a comp script's options fill
//! alike. [`OutputRequest::check`] refuses what does not fit the output named (a PNG preview
//! takes no EXR option, flat output no deep-only one, deep output no flat-only one) in the
//! front end's words ([`OptionNames`]), as [`super::MergeRequest::check`] does for the merge;
//! [`OutputRequest::stream_options`] then gives the stream's options.

use std::path::Path;

use super::{FieldNames, MergeOption, OptionNames};
use crate::composite::{MergeOptions, OutputKind};
use crate::error::{Error, Result};
use crate::exr::{
    ChannelSelection, Codec, DeepWriteOptions, FlatType, MetadataMode, OutputOptions, PartSelector,
    ZSTD_LEVELS,
};
use crate::preview::{check_output_name, is_png_path};
use crate::stream::{StreamOptions, DEFAULT_MEMORY_BUDGET};

/// An operation's output and reading options (see the module docs). The defaults are the
/// commands': deep output, ZIPS, the input's attributes, `deepImageState` written, the first
/// deep part, 1 GiB.
#[derive(Clone, Debug)]
pub struct OutputRequest {
    /// Flat output (the flat composite of the result) instead of deep samples; an output named
    /// `*.png` is a flat preview whatever this says.
    pub flat: bool,
    /// Flat output: add the Z of the front-most contributing sample.
    pub flat_z: bool,
    /// Flat output: the storage of colour and alpha (`None`: half).
    pub flat_type: Option<FlatType>,
    /// Deep output: tidy it (the band goes through the merge of one input with `tidy`).
    pub tidy: bool,
    /// Deep output: write `deepImageState`.
    pub deep_state: bool,
    /// The compression (`None`: ZIPS for deep output, ZIP for flat).
    pub compression: Option<Codec>,
    /// The zstd level, with zstd compression.
    pub zstd_level: Option<i32>,
    /// Which input attributes the output carries (`None`: the input's).
    pub metadata: Option<MetadataMode>,
    /// The part of a multi-part input.
    pub part: PartSelector,
    /// The memory budget in bytes.
    pub memory_budget: u64,
    /// Bands of exactly this many rows (tests and measurements).
    pub band_rows: Option<usize>,
    /// Keep only these channels (and what they need), where the command takes them.
    pub channels: Option<ChannelSelection>,
    /// Print no note on stderr (`-q`): what an operation says of its input besides errors.
    pub quiet: bool,
}

impl Default for OutputRequest {
    fn default() -> Self {
        OutputRequest {
            flat: false,
            flat_z: false,
            flat_type: None,
            tidy: false,
            deep_state: true,
            compression: None,
            zstd_level: None,
            metadata: None,
            part: PartSelector::FirstDeep,
            memory_budget: DEFAULT_MEMORY_BUDGET,
            band_rows: None,
            channels: None,
            quiet: false,
        }
    }
}

/// `options` as a refusal lists them: "a", "a and b", "a, b and c", with its verb.
fn listed(options: &[&str]) -> (String, &'static str) {
    let verb = if options.len() == 1 {
        "applies"
    } else {
        "apply"
    };
    let text = match options {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    };
    (text, verb)
}

/// Refuse the options `given` (those set) with an output named `*.png`, in `names`' words.
pub fn refuse_with_png(given: &[(bool, MergeOption)], names: &dyn OptionNames) -> Result<()> {
    let set: Vec<&str> = given
        .iter()
        .filter(|&&(g, _)| g)
        .map(|&(_, o)| names.spell(o))
        .collect();
    if set.is_empty() {
        return Ok(());
    }
    let (text, verb) = listed(&set);
    Err(Error::Usage(format!(
        "{text} {verb} to EXR output, not a PNG preview (an 8-bit sRGB picture of the flat \
         composite)"
    )))
}

/// `codec` with the zstd level `level`, checked, in `names`' words.
pub fn codec_with_level(
    codec: Option<Codec>,
    level: Option<i32>,
    names: &dyn OptionNames,
) -> Result<Option<Codec>> {
    crate::exr::zstd_with_level(codec, level).map_err(|refusal| match refusal {
        crate::exr::ZstdLevelRefusal::OutOfRange(level) => Error::Usage(format!(
            "{} must be {} to {}, not {level}",
            names.spell(MergeOption::ZstdLevel),
            ZSTD_LEVELS.start(),
            ZSTD_LEVELS.end()
        )),
        crate::exr::ZstdLevelRefusal::NotZstd => Error::Usage(format!(
            "{} applies to {}",
            names.spell(MergeOption::ZstdLevel),
            names.setting(MergeOption::Compression, "zstd")
        )),
    })
}

impl OutputRequest {
    /// Whether `output` gets flat output: asked for, or a PNG preview.
    pub fn is_flat(&self, output: &Path) -> bool {
        self.flat || is_png_path(output)
    }

    /// Refuse what does not fit writing `output`, naming options as `names` spells them. The
    /// front ends call this before reading anything.
    pub fn check(&self, output: &Path, names: &dyn OptionNames) -> Result<()> {
        let png = is_png_path(output);
        let flat = self.is_flat(output);
        check_output_name(output, !flat)?;
        let name = |o| names.spell(o);
        if png {
            refuse_with_png(
                &[
                    (self.compression.is_some(), MergeOption::Compression),
                    (self.zstd_level.is_some(), MergeOption::ZstdLevel),
                    (self.metadata.is_some(), MergeOption::Metadata),
                    (self.flat_type.is_some(), MergeOption::FlatType),
                    (self.flat_z, MergeOption::FlatZ),
                    (self.tidy, MergeOption::Tidy),
                    (!self.deep_state, MergeOption::NoDeepState),
                ],
                names,
            )?;
        } else if flat {
            for (given, option) in [
                (self.tidy, MergeOption::Tidy),
                (!self.deep_state, MergeOption::NoDeepState),
            ] {
                if given {
                    return Err(Error::Usage(format!(
                        "{} applies to deep output, not a flat one (a flat composite is always \
                         composited tidily and has no deepImageState)",
                        name(option)
                    )));
                }
            }
        } else {
            for (given, option) in [
                (self.flat_z, MergeOption::FlatZ),
                (self.flat_type.is_some(), MergeOption::FlatType),
            ] {
                if given {
                    return Err(Error::Usage(format!(
                        "{} applies to flat output, not deep samples{}",
                        name(option),
                        match name(MergeOption::Flat) {
                            "" => String::new(),
                            flat => format!(" (add {flat})"),
                        }
                    )));
                }
            }
        }
        let codec = codec_with_level(self.compression, self.zstd_level, names)?;
        if let (false, Some(codec)) = (flat, codec) {
            crate::exr::check_deep_output(codec)?;
        }
        if self.memory_budget == 0 {
            return Err(Error::Usage(format!(
                "{} must be a positive size",
                name(MergeOption::MemoryBudget)
            )));
        }
        Ok(())
    }

    /// The stream options for writing `output` (checked first, in the fields' names, for a
    /// caller that did not check).
    pub fn stream_options(&self, output: &Path) -> Result<StreamOptions> {
        self.check(output, &FieldNames)?;
        let flat = self.is_flat(output);
        let png = is_png_path(output);
        let options = OutputOptions {
            compression: codec_with_level(self.compression, self.zstd_level, &FieldNames)?,
            metadata: self.metadata.unwrap_or_default(),
        };
        Ok(StreamOptions {
            part: self.part.clone(),
            merge: MergeOptions {
                output: if flat {
                    OutputKind::Flat {
                        z: self.flat_z && !png,
                    }
                } else {
                    OutputKind::Deep
                },
                tidy: self.tidy,
                ..MergeOptions::default()
            },
            deep_write: if flat {
                DeepWriteOptions::default()
            } else {
                options.deep(self.deep_state)?
            },
            flat_write: options.flat(self.flat_type.unwrap_or_default()),
            metadata: options.metadata,
            budget: self.memory_budget,
            band_rows: self.band_rows,
            channels: self.channels.clone(),
            flat_type_follows_inputs: self.flat_type.is_none(),
            ..StreamOptions::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_fit_the_output_named() {
        let png = Path::new("x.png");
        let with = |f: &dyn Fn(&mut OutputRequest)| {
            let mut r = OutputRequest::default();
            f(&mut r);
            r
        };
        let e = with(&|r| r.compression = Some(Codec::Rle))
            .check(png, &FieldNames)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("compression applies to EXR output"), "{e}");
        let e = with(&|r| {
            r.tidy = true;
            r.flat_type = Some(FlatType::Float)
        })
        .check(png, &FieldNames)
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("flat_type and tidy apply to EXR output"),
            "{e}"
        );
        let flat = with(&|r| {
            r.flat = true;
            r.tidy = true
        });
        let e = flat.check(Path::new("x.exr"), &FieldNames).unwrap_err();
        assert!(
            e.to_string().starts_with("tidy applies to deep output"),
            "{e}"
        );
        let deep_z = with(&|r| r.flat_z = true);
        let e = deep_z.check(Path::new("x.exr"), &FieldNames).unwrap_err();
        assert!(
            e.to_string().starts_with("flat_z applies to flat output"),
            "{e}"
        );
        let level = with(&|r| r.zstd_level = Some(3));
        let e = level.check(Path::new("x.exr"), &FieldNames).unwrap_err();
        assert_eq!(e.to_string(), "zstd_level applies to compression = zstd");
        assert!(OutputRequest::default()
            .check(Path::new("x.exr"), &FieldNames)
            .is_ok());
    }

    #[test]
    fn stream_options_follow_the_request() {
        let flat = OutputRequest {
            flat: true,
            flat_z: true,
            flat_type: Some(FlatType::Float),
            compression: Some(Codec::Rle),
            ..OutputRequest::default()
        };
        let options = flat.stream_options(Path::new("x.exr")).unwrap();
        assert_eq!(options.merge.output, OutputKind::Flat { z: true });
        assert_eq!(options.flat_write.codec, Codec::Rle);
        assert_eq!(options.flat_write.flat_type, FlatType::Float);
        assert_eq!(options.metadata, MetadataMode::First);
        let deep = OutputRequest::default()
            .stream_options(Path::new("x.exr"))
            .unwrap();
        assert_eq!(deep.merge.output, OutputKind::Deep);
        assert_eq!(deep.deep_write.codec, Codec::Zips);
    }
}
