//! What a command asks of the file it writes, whatever it computes: the compression and which
//! input attributes the output carries. The CLI (`--compression`, `--zstd-level`,
//! `--metadata`) and the Python functions fill one [`OutputOptions`]; it gives the deep and
//! flat writers' options, refusing what OpenEXR would not read (ZIP for deep parts).

use super::attributes::{carried_attributes, software_attribute, MetadataMode, RawAttribute};
use super::codec::{
    check_deep_output, zstd_with_level, Codec, ZstdLevelRefusal, DEEP_DEFAULT, FLAT_DEFAULT,
    ZSTD_LEVELS,
};
use super::write::{DeepWriteOptions, FlatType, FlatWriteOptions};
use crate::error::{Error, Result};

/// The output file's compression and metadata, as asked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OutputOptions {
    /// The compression; `None` for the default of the output's kind: ZIPS for deep output,
    /// ZIP for flat output.
    pub compression: Option<Codec>,
    /// Which input attributes the output carries.
    pub metadata: MetadataMode,
}

impl OutputOptions {
    /// The options for compression `name` (none, rle, zips, zip, zstd; `None` for the default)
    /// at zstd `level` (`None`: OpenEXR's default; only with zstd) and metadata `metadata`
    /// (first, none; `None`: first).
    pub fn parse(name: Option<&str>, level: Option<i32>, metadata: Option<&str>) -> Result<Self> {
        let codec = name.map(str::parse::<Codec>).transpose()?;
        let metadata = metadata.map(str::parse).transpose()?;
        Self::new(codec, level, metadata)
    }

    /// The options for `codec` (`None`: the default of the output's kind) at zstd `level`
    /// (`None`: OpenEXR's default; only with zstd) carrying `metadata` (`None`: first).
    pub fn new(
        codec: Option<Codec>,
        level: Option<i32>,
        metadata: Option<MetadataMode>,
    ) -> Result<Self> {
        Ok(OutputOptions {
            compression: with_zstd_level(codec, level)?,
            metadata: metadata.unwrap_or_default(),
        })
    }

    /// Deep output's options: the compression (ZIPS by default; ZIP refused), `deepImageState`
    /// as `write_state` says, and `software` (a command adds its first input's attributes, see
    /// [`Self::attributes_from`]).
    pub fn deep(&self, write_state: bool) -> Result<DeepWriteOptions> {
        let codec = self.compression.unwrap_or(DEEP_DEFAULT);
        check_deep_output(codec)?;
        Ok(DeepWriteOptions {
            codec,
            write_state,
            attributes: vec![software_attribute()],
        })
    }

    /// Flat output's options: the compression (ZIP by default), the storage of colour and
    /// `software`.
    pub fn flat(&self, flat_type: FlatType) -> FlatWriteOptions {
        FlatWriteOptions {
            flat_type,
            codec: self.compression.unwrap_or(FLAT_DEFAULT),
            attributes: vec![software_attribute()],
        }
    }

    /// The attributes an output made from an input with header `attributes` carries.
    pub fn attributes_from(&self, attributes: &[RawAttribute]) -> Vec<RawAttribute> {
        match self.metadata {
            MetadataMode::First => carried_attributes(attributes),
            MetadataMode::None => Vec::new(),
        }
    }
}

/// `codec` with the zstd level `level` (the codec table's one check), in the library's words.
fn with_zstd_level(codec: Option<Codec>, level: Option<i32>) -> Result<Option<Codec>> {
    zstd_with_level(codec, level).map_err(|refusal| match refusal {
        ZstdLevelRefusal::OutOfRange(level) => Error::Usage(format!(
            "the zstd level must be {} to {}, not {level}",
            ZSTD_LEVELS.start(),
            ZSTD_LEVELS.end()
        )),
        ZstdLevelRefusal::NotZstd => {
            Error::Usage("the zstd level applies to zstd compression".into())
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_differ_by_kind_and_zip_is_refused_for_deep() {
        let default = OutputOptions::default();
        assert_eq!(default.deep(true).unwrap().codec, Codec::Zips);
        assert_eq!(default.flat(FlatType::Half).codec, Codec::Zip);
        let zip = OutputOptions::parse(Some("zip"), None, None).unwrap();
        let err = zip.deep(true).unwrap_err().to_string();
        assert!(
            err.contains("OpenEXR accepts none, rle, zips and zstd for deep parts"),
            "{err}"
        );
        assert_eq!(zip.flat(FlatType::Half).codec, Codec::Zip);
    }

    #[test]
    fn zstd_levels_are_checked() {
        let zstd = OutputOptions::parse(Some("zstd"), None, None).unwrap();
        assert_eq!(zstd.compression, Some(Codec::Zstd { level: 5 }));
        let fast = OutputOptions::parse(Some("zstd"), Some(1), None).unwrap();
        assert_eq!(fast.compression, Some(Codec::Zstd { level: 1 }));
        assert!(OutputOptions::parse(Some("zstd"), Some(23), None).is_err());
        assert!(OutputOptions::parse(Some("zips"), Some(3), None).is_err());
        assert!(OutputOptions::parse(Some("piz"), None, None).is_err());
    }

    #[test]
    fn metadata_none_carries_nothing() {
        let header = [RawAttribute {
            name: "owner".into(),
            kind: "string".into(),
            value: b"me".to_vec(),
        }];
        let none = OutputOptions::parse(None, None, Some("none")).unwrap();
        assert!(none.attributes_from(&header).is_empty());
        let first = OutputOptions::parse(None, None, None).unwrap();
        assert_eq!(first.attributes_from(&header)[0], header[0]);
        assert!(OutputOptions::parse(None, None, Some("all")).is_err());
    }
}
