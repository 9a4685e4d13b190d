//! The codecs of EXR chunks, one file each (NONE, RLE, ZIPS and ZIP, ZSTD), and [`CODECS`], the
//! one table that says everything the rest of deepmerge asks of a codec: its name, its OpenEXR
//! compression id, scanlines per chunk, whether deep output may use it, its help text, and its
//! pack and unpack functions. Reading, writing, [`Codec`]'s `FromStr`, the CLI's names and
//! help, and the deep-output check all go through the table; a test holds the Python stub's
//! names to it. Adding a codec is its file, its [`Codec`] variant and its row here.
//!
//! The codec files share only [`layout`] (the block's rows of values and OpenEXR's byte
//! preprocessing); none of them uses another or this module, so nothing imports in a circle.
//!
//! OpenEXR stores a block raw whenever compressing would not make it smaller, so a packed size
//! equal to the unpacked size means "stored raw" for every codec. The unpacked size always comes
//! from the file, so it is checked against what the packed bytes can possibly produce
//! ([`check_plausible`]) before any buffer is reserved, and buffers are reserved no larger than
//! that bound: a few bytes claiming gigabytes are refused, not allocated.

mod layout;
mod none;
mod rle;
mod zip;
mod zstd;

pub(crate) use layout::as_uninit;
pub use layout::{BlockLayout, Segment};
pub use zstd::{
    with_level as zstd_with_level, LevelRefusal as ZstdLevelRefusal,
    DEFAULT_LEVEL as ZSTD_DEFAULT_LEVEL, LEVELS as ZSTD_LEVELS,
};

use crate::error::{Error, Result};

/// A compression method deepmerge reads and writes (deep and flat). What each does is its row
/// of `CODECS`; the enum only names them (and carries ZSTD's level).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    /// Stored raw.
    None,
    /// Run-length encoding, one scanline per chunk.
    Rle,
    /// zlib, one scanline per chunk.
    Zips,
    /// zlib, sixteen scanlines per chunk. OpenEXR refuses it for deep parts (it is read, and
    /// written only for tests of multi-line chunks).
    Zip,
    /// zstd with OpenEXR 3.5's preprocessing, one scanline per chunk, packed at `level` (1 to
    /// 22; the level is not stored in the file, so a file read says [`ZSTD_DEFAULT_LEVEL`]).
    Zstd {
        /// zstd level.
        level: i32,
    },
}

/// Packs a block (raw bytes, their layout, the codec's level if it has one); `None` asks for
/// the block to be stored raw.
type PackFn = fn(&[u8], &BlockLayout, Option<i32>) -> Option<Vec<u8>>;

/// Unpacks a block (packed bytes, the unpacked size the file states, the layout, the block's
/// name for errors) into exactly that size, or refuses it.
type UnpackFn = fn(&[u8], usize, &BlockLayout, &str) -> Result<Vec<u8>>;

/// One codec's row of [`CODECS`].
struct CodecInfo {
    /// The value a name or a file's id gives (codecs with a level: at their default).
    codec: Codec,
    /// The name the CLI, Python and `info` use, in lower case.
    name: &'static str,
    /// The id OpenEXR's `compression` attribute stores.
    id: u8,
    /// Scanlines per chunk in a scanline file.
    lines_per_chunk: usize,
    /// Whether OpenEXR reads deep parts in it (deepmerge reads every codec in deep parts, and
    /// refuses to write the others there).
    deep: bool,
    /// What it is, for the CLI's help (deep-only limits are added from `deep`).
    help: &'static str,
    /// Most bytes one packed byte can unpack to: what [`check_plausible`] bounds a claim by.
    max_ratio: usize,
    /// Copies of a block's unpacked size held at once while unpacking it (the codec's output,
    /// any intermediate copy, and the result), for memory budgets.
    unpack_copies: u64,
    pack: PackFn,
    unpack: UnpackFn,
}

/// Every codec, in the order the CLI and Python list them. The one place that knows them all.
const CODECS: &[CodecInfo] = &[
    CodecInfo {
        codec: Codec::None,
        name: "none",
        id: 0,
        lines_per_chunk: 1,
        deep: true,
        help: "stored raw",
        max_ratio: none::MAX_RATIO,
        unpack_copies: 2,
        pack: none::pack,
        unpack: none::unpack,
    },
    CodecInfo {
        codec: Codec::Rle,
        name: "rle",
        id: 1,
        lines_per_chunk: 1,
        deep: true,
        help: "run-length",
        max_ratio: rle::MAX_RATIO,
        unpack_copies: 2,
        pack: rle::pack,
        unpack: rle::unpack,
    },
    CodecInfo {
        codec: Codec::Zips,
        name: "zips",
        id: 2,
        lines_per_chunk: 1,
        deep: true,
        help: "zlib, one scanline a chunk",
        max_ratio: zip::MAX_RATIO,
        unpack_copies: 2,
        pack: zip::pack,
        unpack: zip::unpack,
    },
    CodecInfo {
        codec: Codec::Zip,
        name: "zip",
        id: 3,
        lines_per_chunk: 16,
        deep: false,
        help: "zlib, 16 scanlines a chunk",
        max_ratio: zip::MAX_RATIO,
        unpack_copies: 2,
        pack: zip::pack,
        unpack: zip::unpack,
    },
    CodecInfo {
        codec: Codec::Zstd {
            level: ZSTD_DEFAULT_LEVEL,
        },
        name: "zstd",
        id: 13,
        lines_per_chunk: 1,
        deep: true,
        help: "OpenEXR 3.5's, level: --zstd-level; older readers refuse it, oiiotool 2.4 with \
               \"Unknown compression type\"",
        max_ratio: zstd::MAX_RATIO,
        // The zstd output, the sorted copy and the result.
        unpack_copies: 3,
        pack: zstd::pack,
        unpack: zstd::unpack,
    },
];

/// The codecs' names, in `CODECS` order (the CLI's possible values).
pub const CODEC_NAMES: &[&str] = &{
    let mut names = [""; CODECS.len()];
    let mut i = 0;
    while i < CODECS.len() {
        names[i] = CODECS[i].name;
        i += 1;
    }
    names
};

/// The codec of deep output when none is asked for.
pub const DEEP_DEFAULT: Codec = Codec::Zips;

/// The codec of flat output when none is asked for.
pub const FLAT_DEFAULT: Codec = Codec::Zip;

impl std::str::FromStr for Codec {
    type Err = Error;

    /// A name of [`CODEC_NAMES`], at the codec's default level where it has one.
    fn from_str(s: &str) -> Result<Self> {
        let choices: [(&str, Codec); CODECS.len()] =
            std::array::from_fn(|i| (CODECS[i].name, CODECS[i].codec));
        crate::error::parse_name("the compression", s, choices)
    }
}

/// OpenEXR's names of the compression ids, in id order (OpenEXRCore `exr_compression_name`):
/// every id a file can state, read by deepmerge or not.
const COMPRESSION_NAMES: [&str; 14] = [
    "none", "rle", "zips", "zip", "piz", "pxr24", "b44", "b44a", "dwaa", "dwab", "htj2k256",
    "htj2k32", "lj2k", "zstd",
];

/// The name of compression id `id` in upper case ("HTJ2K256"), or "unknown (id N)".
pub fn compression_name(id: u8) -> String {
    match COMPRESSION_NAMES.get(id as usize) {
        Some(name) => name.to_uppercase(),
        None => format!("unknown (id {id})"),
    }
}

/// The names of the codecs deep output may use, as a list ending in `last_joint` ("a, b and
/// c"), in upper case if `upper`.
fn deep_names(last_joint: &str, upper: bool) -> String {
    let names: Vec<String> = CODECS
        .iter()
        .filter(|c| c.deep)
        .map(|c| match upper {
            true => c.name.to_uppercase(),
            false => c.name.to_string(),
        })
        .collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => {
            format!("{} {last_joint} {last}", rest.join(", "))
        }
        _ => names.concat(),
    }
}

/// The CLI's help for `--compression`: every codec with its help, and the defaults.
pub fn compression_help() -> String {
    let codecs: Vec<String> = CODECS
        .iter()
        .map(|c| match c.deep {
            true => format!("{} ({})", c.name, c.help),
            false => format!(
                "{} ({}; flat output only: OpenEXR refuses it for deep parts)",
                c.name, c.help
            ),
        })
        .collect();
    format!(
        "Compression: {}. Default: {} for deep output, {} for flat output",
        codecs.join(", "),
        DEEP_DEFAULT.name(),
        FLAT_DEFAULT.name()
    )
}

impl Codec {
    /// This codec's row of [`CODECS`].
    fn info(self) -> &'static CodecInfo {
        CODECS
            .iter()
            .find(|c| std::mem::discriminant(&c.codec) == std::mem::discriminant(&self))
            .expect("every codec has a row in CODECS")
    }

    /// The level it packs at, for codecs that have one.
    fn level(self) -> Option<i32> {
        match self {
            Codec::Zstd { level } => Some(level),
            _ => None,
        }
    }

    /// The codec whose `compression` attribute is `id`, if deepmerge has it.
    pub fn from_id(id: u8) -> Option<Self> {
        CODECS.iter().find(|c| c.id == id).map(|c| c.codec)
    }

    /// Scanlines per chunk in a scanline file.
    pub fn lines_per_chunk(self) -> usize {
        self.info().lines_per_chunk
    }

    /// Name as the CLI and `info` spell it.
    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// The id the `compression` attribute stores.
    pub fn id(self) -> u8 {
        self.info().id
    }

    /// The codec of a deep part whose `compression` attribute is `id`; other methods cannot
    /// hold deep data (OpenEXR allows NONE, RLE, ZIPS and ZSTD; ZIP is read as well).
    pub fn for_deep_part(id: u8) -> Result<Self> {
        if let Some(codec) = Codec::from_id(id) {
            return Ok(codec);
        }
        Err(Error::unsupported(
            if (id as usize) < COMPRESSION_NAMES.len() {
                format!(
                    "{} compression is not supported for deep parts \
                 (deep data is stored in {})",
                    compression_name(id),
                    deep_names("or", true)
                )
            } else {
                format!(
                    "unknown compression id {id} (OpenEXR 3.5 defines ids 0 to {})",
                    COMPRESSION_NAMES.len() - 1
                )
            },
        ))
    }

    /// Copies of a block's unpacked size held at once while unpacking it: the codec's output
    /// and the de-interleaved result (ZSTD: the zstd output, the sorted copy and the result).
    pub fn unpack_copies(self) -> u64 {
        self.info().unpack_copies
    }

    /// Whether OpenEXR reads deep parts in this codec (all but ZIP).
    pub fn valid_for_deep(self) -> bool {
        self.info().deep
    }
}

/// Refuse writing a deep part in a codec OpenEXR cannot read (ZIP), in one line.
pub fn check_deep_output(codec: Codec) -> Result<()> {
    if codec.valid_for_deep() {
        return Ok(());
    }
    Err(Error::Usage(format!(
        "{} compression is not valid for deep output: OpenEXR accepts {} \
         for deep parts ({} is for flat output)",
        codec.name(),
        deep_names("and", false),
        codec.name()
    )))
}

/// The most bytes `packed_len` bytes of `codec` data can unpack to (a block stored raw is as
/// large as its unpacked data, which every codec allows).
pub fn max_unpacked(codec: Codec, packed_len: usize) -> usize {
    packed_len.saturating_mul(codec.info().max_ratio)
}

/// Refuse a block whose claimed unpacked size its packed bytes cannot produce.
pub fn check_plausible(codec: Codec, packed_len: usize, unpacked: usize, what: &str) -> Result<()> {
    if unpacked != packed_len && unpacked > max_unpacked(codec, packed_len) {
        return Err(Error::format(format!(
            "{what}: {packed_len} packed bytes of {} cannot unpack to the {unpacked} bytes claimed",
            codec.name()
        )));
    }
    Ok(())
}

/// Unpack `packed`, a block laid out as `layout` says, into exactly `expected` bytes. `what`
/// names the block in errors.
pub fn decompress(
    codec: Codec,
    packed: &[u8],
    expected: usize,
    layout: &BlockLayout,
    what: &str,
) -> Result<Vec<u8>> {
    if packed.len() == expected {
        return Ok(packed.to_vec());
    }
    check_plausible(codec, packed.len(), expected, what)?;
    (codec.info().unpack)(packed, expected, layout, what)
}

/// [`decompress`] into `segments` of the block instead of a block of its own: each segment's
/// bytes go straight where its reader wants them. RLE, ZIPS and ZIP rebuild each segment from
/// the predictor's halves in place; the other codecs unpack the block and copy the segments
/// out of it. A segment reaching past the block's `expected` bytes is an error, before
/// anything is unpacked.
pub fn decompress_into(
    codec: Codec,
    packed: &[u8],
    expected: usize,
    layout: &BlockLayout,
    what: &str,
    segments: &mut [Segment],
) -> Result<()> {
    if let Some(s) = segments.iter().find(|s| {
        s.at.checked_add(s.out.len())
            .is_none_or(|end| end > expected)
    }) {
        return Err(Error::format(format!(
            "{what}: {} bytes at {} asked of a block of {expected}",
            s.out.len(),
            s.at
        )));
    }
    if packed.len() == expected {
        layout::copy_segments(packed, segments);
        return Ok(());
    }
    check_plausible(codec, packed.len(), expected, what)?;
    match codec {
        Codec::Zips | Codec::Zip => zip::unpack_into(packed, expected, what, segments),
        Codec::Rle => rle::unpack_into(packed, expected, what, segments),
        Codec::None | Codec::Zstd { .. } => {
            let block = (codec.info().unpack)(packed, expected, layout, what)?;
            layout::copy_segments(&block, segments);
            Ok(())
        }
    }
}

/// Pack `raw`, a block laid out as `layout` says, with `codec`; returns `raw` itself when
/// packing would not make it smaller.
pub fn compress(codec: Codec, raw: &[u8], layout: &BlockLayout) -> Vec<u8> {
    if raw.is_empty() {
        return raw.to_vec();
    }
    match (codec.info().pack)(raw, layout, codec.level()) {
        Some(packed) if packed.len() < raw.len() => packed,
        _ => raw.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::MaybeUninit;

    /// A layout for the codecs that ignore it (ZSTD's own tests are in `super::zstd`).
    fn any_layout() -> BlockLayout {
        BlockLayout::count_table(0, 0)
    }

    fn sample_bytes() -> Vec<u8> {
        let mut v: Vec<u8> = (0..1000u32).flat_map(|i| (i / 7).to_le_bytes()).collect();
        v.extend(std::iter::repeat_n(9u8, 300));
        v.extend((0..77u8).map(|i| i.wrapping_mul(37)));
        v
    }

    #[test]
    fn every_codec_round_trips() {
        let raw = sample_bytes();
        for codec in [Codec::None, Codec::Rle, Codec::Zips, Codec::Zip] {
            let packed = compress(codec, &raw, &any_layout());
            if codec != Codec::None {
                assert!(packed.len() < raw.len(), "{codec:?} did not compress");
            }
            assert_eq!(
                decompress(codec, &packed, raw.len(), &any_layout(), "t").unwrap(),
                raw
            );
        }
    }

    /// Unpacked into segments, every codec gives the bytes it unpacks whole, wherever the
    /// segments lie (odd starts and lengths, both halves of the predictor, empty ones), and
    /// refuses what it refuses whole.
    #[test]
    fn every_codec_unpacks_into_segments_as_whole() {
        // Whole 4-byte values, so that ZSTD's preprocessing has a layout to go by.
        let mut raw = sample_bytes();
        raw.truncate(raw.len() / 4 * 4);
        let layout = BlockLayout::count_table(raw.len() / 4, 1);
        let cuts = [
            (0, 0),
            (0, 2),
            (6, 100),
            (107, 33),
            (2000, 1000),
            (3999, 377),
        ];
        for codec in [
            Codec::None,
            Codec::Rle,
            Codec::Zips,
            Codec::Zip,
            Codec::Zstd { level: 3 },
        ] {
            let packed = compress(codec, &raw, &layout);
            let mut bytes: Vec<Vec<MaybeUninit<u8>>> = cuts
                .iter()
                .map(|&(_, len)| vec![MaybeUninit::uninit(); len])
                .collect();
            let mut segments: Vec<Segment> = cuts
                .iter()
                .zip(&mut bytes)
                .map(|(&(at, _), out)| Segment { at, out })
                .collect();
            decompress_into(codec, &packed, raw.len(), &layout, "t", &mut segments).unwrap();
            for (&(at, len), out) in cuts.iter().zip(&bytes) {
                // SAFETY: decompress_into wrote every byte of every segment.
                let out: Vec<u8> = out.iter().map(|b| unsafe { b.assume_init() }).collect();
                assert_eq!(out, raw[at..at + len], "{codec:?} at {at}");
            }
            let mut beyond = [0u8; 8].map(MaybeUninit::new);
            let mut past_the_end = [Segment {
                at: raw.len() - 4,
                out: &mut beyond,
            }];
            assert!(
                decompress_into(codec, &packed, raw.len(), &layout, "t", &mut past_the_end)
                    .is_err()
            );
            if codec != Codec::None {
                let mut none: [Segment; 0] = [];
                let corrupt = &packed[..packed.len() / 2];
                assert_eq!(
                    decompress_into(codec, corrupt, raw.len(), &layout, "t", &mut none).is_err(),
                    decompress(codec, corrupt, raw.len(), &layout, "t").is_err(),
                    "{codec:?}"
                );
            }
        }
    }

    #[test]
    fn odd_lengths_round_trip() {
        for len in [1usize, 2, 3, 5, 128, 129, 255] {
            let raw: Vec<u8> = (0..len).map(|i| (i % 3) as u8).collect();
            for codec in [Codec::Rle, Codec::Zips] {
                let packed = compress(codec, &raw, &any_layout());
                assert_eq!(
                    decompress(codec, &packed, len, &any_layout(), "t").unwrap(),
                    raw
                );
            }
        }
    }

    #[test]
    fn corrupt_data_is_an_error_not_a_panic() {
        let raw = sample_bytes();
        let mut packed = compress(Codec::Rle, &raw, &any_layout());
        packed.truncate(packed.len() / 2);
        assert!(decompress(Codec::Rle, &packed, raw.len(), &any_layout(), "t").is_err());
        let mut z = compress(Codec::Zips, &raw, &any_layout());
        z[5] ^= 0xff;
        z.truncate(z.len() - 3);
        assert!(decompress(Codec::Zips, &z, raw.len(), &any_layout(), "t").is_err());
        // RLE that claims more output than expected is refused, not allocated.
        assert!(decompress(Codec::Rle, &[127, 1, 127, 1], 10, &any_layout(), "t").is_err());
    }

    /// Each way a zlib block can be wrong is named: a stream too short, a bad header (check
    /// bits, window size), bad deflate data, a wrong checksum, and a block that unpacks to
    /// fewer or more bytes than its chunk says.
    #[test]
    fn zlib_errors_name_what_is_wrong() {
        let raw = sample_bytes();
        let good = compress(Codec::Zips, &raw, &any_layout());
        let error = |packed: &[u8], expected: usize| {
            decompress(Codec::Zips, packed, expected, &any_layout(), "t")
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            error(&good[..5], raw.len()),
            "t: zlib data is corrupt (too short for a zlib stream)"
        );
        let mut check_bits = good.clone();
        check_bits[1] ^= 1;
        assert_eq!(
            error(&check_bits, raw.len()),
            "t: zlib data is corrupt (bad zlib header)"
        );
        // A window of 64 KiB (CINFO 8) with the check bits made right again.
        let mut window = good.clone();
        window[0] = 0x88;
        window[1] = (31 - (0x88u16 << 8) % 31) as u8 % 31;
        assert_eq!(
            error(&window, raw.len()),
            "t: zlib data is corrupt (bad zlib header)"
        );
        let mut checksum = good.clone();
        let last = checksum.len() - 1;
        checksum[last] ^= 0xff;
        assert_eq!(
            error(&checksum, raw.len()),
            "t: zlib data is corrupt (Adler-32 checksum mismatch)"
        );
        // A reserved block type (BTYPE 3) in the first deflate byte.
        let mut data = good.clone();
        data[2] |= 0b110;
        assert_eq!(
            error(&data, raw.len()),
            "t: zlib data is corrupt (bad deflate data)"
        );
        assert_eq!(
            error(&good, raw.len() + 1),
            format!(
                "t: unpacks to {} bytes, expected {}",
                raw.len(),
                raw.len() + 1
            )
        );
        assert_eq!(
            error(&good, raw.len() - 1),
            format!(
                "t: zlib data is corrupt (it unpacks to more than the {} bytes expected)",
                raw.len() - 1
            )
        );
    }

    #[test]
    fn zlib_errors_are_one_line() {
        let mut z = compress(Codec::Zips, &sample_bytes(), &any_layout());
        z[1] ^= 1; // the header's check bits
        let err =
            decompress(Codec::Zips, &z, sample_bytes().len(), &any_layout(), "t").unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("t: zlib data is corrupt ("), "{text}");
        assert_eq!(text.lines().count(), 1, "{text:?}");
        assert!(!text.ends_with('\n'), "{text:?}");
    }

    #[test]
    fn claims_beyond_what_the_packed_bytes_can_hold_are_refused_before_unpacking() {
        // A run of 128 bytes is the most two RLE bytes make; deflate tops out at 1032:1.
        assert!(decompress(Codec::Rle, &[127, 7], 128, &any_layout(), "t").is_ok());
        let err = decompress(Codec::Rle, &[127, 7], 129, &any_layout(), "t").unwrap_err();
        assert!(err
            .to_string()
            .contains("2 packed bytes of rle cannot unpack to the 129"));
        let zeros = vec![0u8; 1 << 20];
        let z = compress(Codec::Zip, &zeros, &any_layout());
        assert!(
            max_unpacked(Codec::Zip, z.len()) >= zeros.len(),
            "real data is plausible"
        );
        assert_eq!(
            decompress(Codec::Zip, &z, zeros.len(), &any_layout(), "t").unwrap(),
            zeros
        );
        assert!(decompress(Codec::Zip, &z, usize::MAX, &any_layout(), "t").is_err());
    }

    #[test]
    fn the_table_has_one_row_per_codec_and_distinct_names_and_ids() {
        let every = [
            Codec::None,
            Codec::Rle,
            Codec::Zips,
            Codec::Zip,
            Codec::Zstd { level: 1 },
        ];
        assert_eq!(every.len(), CODECS.len());
        for codec in every {
            let row = codec.info();
            assert_eq!(row.name.parse::<Codec>().unwrap(), row.codec);
            assert_eq!(Codec::from_id(row.id), Some(row.codec));
            assert_eq!(
                COMPRESSION_NAMES[row.id as usize], row.name,
                "OpenEXR's name"
            );
        }
        assert_eq!(CODEC_NAMES, ["none", "rle", "zips", "zip", "zstd"]);
        assert_eq!(Codec::Zstd { level: 9 }.level(), Some(9));
        assert_eq!(Codec::Zips.level(), None);
    }

    #[test]
    fn messages_list_the_deep_codecs() {
        let err = check_deep_output(Codec::Zip).unwrap_err().to_string();
        assert!(err.contains(
            "OpenEXR accepts none, rle, zips and zstd for deep parts (zip is for flat output)"
        ));
        let err = Codec::for_deep_part(4).unwrap_err().to_string();
        assert!(
            err.contains("(deep data is stored in NONE, RLE, ZIPS or ZSTD)"),
            "{err}"
        );
        let help = compression_help();
        assert!(
            help.contains("zip (zlib, 16 scanlines a chunk; flat output only"),
            "{help}"
        );
        assert!(help.ends_with("Default: zips for deep output, zip for flat output"));
    }

    /// The Python stub is a static file, so it is held to the table here: every `Literal[...]`
    /// of compression names in it lists exactly [`CODEC_NAMES`].
    #[test]
    fn the_python_stub_names_the_table_codecs() {
        let stub = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/python/deepmerge/_deepmerge.pyi"
        ));
        let expected: Vec<String> = CODEC_NAMES.iter().map(|n| format!("\"{n}\"")).collect();
        let expected = expected.join(", ");
        let mut seen = 0;
        for (at, _) in stub.match_indices("Literal[") {
            let list = &stub[at + "Literal[".len()..];
            let list = &list[..list.find(']').expect("a closed Literal")];
            if list.contains("\"zips\"") {
                assert_eq!(list, expected, "a compression Literal of the stub");
                seen += 1;
            }
        }
        assert!(seen > 0, "the stub names the codecs");
    }
}
