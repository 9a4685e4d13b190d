//! Writing deep scanline and flat EXR files.
//!
//! Deep headers are written attribute by attribute with the `exr` crate's attribute encoder (its
//! whole-header writer does not support deep parts yet); flat files go through the `exr` crate's
//! image writer. Every file is written to a temporary file beside the target and renamed into
//! place, so a failure never leaves a partial output (see [`write_atomically`] for the mode the
//! output gets and how leftovers of killed runs are cleaned).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use exr::meta::attribute::{
    self as attr, AttributeValue, BlockType, ChannelDescription, ChannelList, IntegerBounds,
    LineOrder, Text,
};
use exr::prelude::SmallVec;
use rayon::prelude::*;

mod behind;
mod chunks;

use super::attributes::{RawAttribute, REQUIRED_CARRIED, WRITER_OWNED};
use super::codec::{compress, BlockLayout, Codec};
use crate::cleanup::TempFileGuard;
use crate::deep::{Bounds, DeepImage, FlatImage, SampleType};
use crate::error::{Error, Result};
pub(crate) use behind::WriteBehind;
pub(crate) use chunks::{check_rows, span_message};
pub use chunks::{DeepChunkWriter, FlatChunkWriter};

/// Storage type of colour and alpha in a flat file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FlatType {
    /// 16-bit half floats (the default, as compositors expect).
    #[default]
    Half,
    /// 32-bit floats.
    Float,
}

impl FlatType {
    /// The storage that loses nothing of inputs with `channels`: float when a colour or alpha
    /// channel (one composited into the flat image) is float, half otherwise. Flat output
    /// follows its inputs unless a type is asked for (oiiotool keeps float too).
    pub fn following<'c>(channels: impl IntoIterator<Item = &'c crate::deep::Channel>) -> Self {
        use crate::deep::{ChannelRole, SampleType};
        let float = channels.into_iter().any(|c| {
            c.sample_type == SampleType::F32
                && !matches!(
                    c.role,
                    ChannelRole::Z | ChannelRole::ZBack | ChannelRole::Id
                )
        });
        if float {
            FlatType::Float
        } else {
            FlatType::Half
        }
    }
}

impl std::str::FromStr for FlatType {
    type Err = Error;

    /// `half` or `float`.
    fn from_str(s: &str) -> Result<Self> {
        crate::error::parse_name(
            "the flat type",
            s,
            [("half", FlatType::Half), ("float", FlatType::Float)],
        )
    }
}

/// When this run started: a temporary file of ours older than this was left by a run that was
/// killed (or is one still writing, started before us, that a rerun supersedes), and is removed
/// when this run writes the same output. [`mark_run_start`] sets it; else the first write does.
static RUN_START: std::sync::OnceLock<SystemTime> = std::sync::OnceLock::new();

/// Record now as the run's start (the CLI calls this first thing; see [`write_atomically`]).
pub fn mark_run_start() {
    RUN_START.get_or_init(SystemTime::now);
}

/// The prefix of the temporary files for output `name`: `.deepmerge-NAME.` followed by six
/// random characters and `.tmp`. Naming the output in it ties a leftover to the one output it
/// was for, so cleaning one output never touches the temporary file of another output being
/// written at the same time in the same directory (farm tasks writing other frames).
fn temp_prefix(name: &std::ffi::OsStr) -> String {
    format!(".deepmerge-{}.", name.to_string_lossy())
}

/// Whether `file` is one of our temporary files for the output whose prefix is `prefix`.
fn is_temp_of(file: &str, prefix: &str) -> bool {
    file.strip_prefix(prefix)
        .and_then(|rest| rest.strip_suffix(".tmp"))
        .is_some_and(|random| {
            random.len() == TEMP_RANDOM_LEN && random.bytes().all(|b| b.is_ascii_alphanumeric())
        })
}

const TEMP_RANDOM_LEN: usize = 6;

/// Remove temporary files for this output left by earlier runs (modified before this run
/// started). Best effort: a file that cannot be removed is left, as it would be without this.
fn remove_stale_temps(dir: &Path, prefix: &str) {
    let start = *RUN_START.get_or_init(SystemTime::now);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_str().is_some_and(|n| is_temp_of(n, prefix)) {
            continue;
        }
        let stale = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|modified| modified < start);
        if stale {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The operating system's error without the temporary file's path that `tempfile` appends to
/// its message (" at path \"...\""; its wrapper type is private, so the text is cut), so an
/// error names only the output the user gave. The kind is kept.
fn without_temp_path(e: std::io::Error) -> std::io::Error {
    if e.raw_os_error().is_some() {
        return e;
    }
    let text = e.to_string();
    match text.find(" at path \"") {
        Some(at) => std::io::Error::new(e.kind(), text[..at].to_string()),
        None => e,
    }
}

/// [`write_atomically`] of encoded bytes.
fn write_bytes_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomically(path, |w| {
        w.write_all(bytes).map_err(|e| Error::write(path, e))
    })
}

/// Write bytes to `path` through a temporary file in the same directory and a rename, so a
/// failure never leaves a partial output and readers never see one.
///
/// The output gets the mode a plain `create` would give it: a new file 0666 less the umask
/// (the temporary file is created with that mode, the kernel applying the umask), a replaced
/// file keeps its own mode. The temporary file is `.deepmerge-NAME.XXXXXX.tmp` beside the
/// output; leftovers of killed runs for the same output are removed first. Errors name `path`,
/// never the temporary file.
pub fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> Result<()>,
) -> Result<()> {
    let output = AtomicFile::create(path)?;
    {
        let mut buffered = std::io::BufWriter::new(output.file());
        write(&mut buffered)?;
        buffered.flush().map_err(|e| output.error(e))?;
    }
    output.commit()
}

/// An output being written: a temporary file beside `path` (see [`write_atomically`] for its
/// name, its mode and the cleaning of leftovers) that [`AtomicFile::commit`] renames into place.
/// Dropped without a commit, the temporary file is removed. Streaming writers write into
/// [`AtomicFile::file`] as data is ready and patch earlier bytes with positioned writes.
pub struct AtomicFile {
    path: std::path::PathBuf,
    tmp: tempfile::NamedTempFile,
    // Listed for removal on SIGINT/SIGTERM (`crate::cleanup`); declared after `tmp` so that it
    // is unlisted only after `tmp` is renamed or removed (fields drop in declaration order).
    _listed: TempFileGuard,
    existing_mode: Option<std::fs::Permissions>,
}

impl AtomicFile {
    /// Start writing `path`: remove stale temporary files of this output, create a new one.
    pub fn create(path: &Path) -> Result<AtomicFile> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let io_err = |e: std::io::Error| Error::write(path, without_temp_path(e));
        let Some(name) = path.file_name() else {
            return Err(Error::file(path, "output is not a file name"));
        };
        let prefix = temp_prefix(name);
        remove_stale_temps(dir, &prefix);
        // The mode of the file being replaced, if any (its permission bits only).
        let existing_mode = std::fs::metadata(path)
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.permissions());
        let mut builder = tempfile::Builder::new();
        builder
            .prefix(&prefix)
            .suffix(".tmp")
            .rand_bytes(TEMP_RANDOM_LEN);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            builder.permissions(std::fs::Permissions::from_mode(0o666));
        }
        let tmp = builder.tempfile_in(dir).map_err(io_err)?;
        let listed = TempFileGuard::new(tmp.path());
        Ok(AtomicFile {
            path: path.to_path_buf(),
            tmp,
            _listed: listed,
            existing_mode,
        })
    }

    /// The output's path, as given (not the temporary file's).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The temporary file.
    pub fn file(&self) -> &std::fs::File {
        self.tmp.as_file()
    }

    /// An I/O error while writing, naming the output (never the temporary file).
    pub fn error(&self, e: std::io::Error) -> Error {
        Error::write(&self.path, without_temp_path(e))
    }

    /// Give the file the replaced output's mode, flush it to disk and rename it into place.
    pub fn commit(self) -> Result<()> {
        let io_err = |e: std::io::Error| Error::write(&self.path, without_temp_path(e));
        if let Some(mode) = &self.existing_mode {
            self.tmp
                .as_file()
                .set_permissions(mode.clone())
                .map_err(io_err)?;
        }
        self.tmp.as_file().sync_all().map_err(io_err)?;
        self.tmp.persist(&self.path).map_err(|e| io_err(e.error))?;
        Ok(())
    }
}

fn exr_type(t: SampleType) -> attr::SampleType {
    match t {
        SampleType::U32 => attr::SampleType::U32,
        SampleType::F16 => attr::SampleType::F16,
        SampleType::F32 => attr::SampleType::F32,
    }
}

fn exr_bounds(b: Bounds) -> IntegerBounds {
    IntegerBounds::new((b.x0, b.y0), (b.width(), b.height()))
}

/// Start a single-part scanline header in `out` (magic number and version flags, `deep` or
/// flat) and return the attributes every such header has, in the order they are written;
/// the caller appends its own (deep: type, version, counts) and writes them.
pub(super) fn scanline_header_start(
    out: &mut Vec<u8>,
    channels: &[(&str, SampleType)],
    deep: bool,
    codec: Codec,
    data_window: Bounds,
    display_window: Bounds,
) -> Vec<(&'static str, AttributeValue)> {
    let long_names = channels.iter().any(|(name, _)| name.len() > 31);
    out.extend([0x76, 0x2f, 0x31, 0x01]);
    // Version 2, bit 10: long names, bit 11: deep data.
    let flags: u32 = 2 | (u32::from(long_names) << 10) | (u32::from(deep) << 11);
    out.extend(flags.to_le_bytes());
    let channels: SmallVec<[ChannelDescription; 5]> = channels
        .iter()
        .map(|&(name, t)| ChannelDescription::new(name, exr_type(t), false))
        .collect();
    vec![
        (
            "channels",
            AttributeValue::ChannelList(ChannelList::new(channels)),
        ),
        // Written by id: the `exr` crate's type has no ZSTD.
        (
            "compression",
            AttributeValue::Custom {
                kind: Text::from("compression"),
                bytes: SmallVec::from_slice(&[codec.id()]),
            },
        ),
        (
            "dataWindow",
            AttributeValue::IntegerBounds(exr_bounds(data_window)),
        ),
        (
            "displayWindow",
            AttributeValue::IntegerBounds(exr_bounds(display_window)),
        ),
        (
            "lineOrder",
            AttributeValue::LineOrder(LineOrder::Increasing),
        ),
        ("pixelAspectRatio", AttributeValue::F32(1.0)),
        (
            "screenWindowCenter",
            AttributeValue::FloatVec2((0.0, 0.0).into()),
        ),
        ("screenWindowWidth", AttributeValue::F32(1.0)),
    ]
}

/// Options for deep output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeepWriteOptions {
    /// Compression.
    pub codec: Codec,
    /// Record `deepImageState` (true by default). Some readers, PyPI OpenEXR 3.5 among them,
    /// refuse files that carry it; leaving it out claims nothing ("messy"), which is never false.
    pub write_state: bool,
    /// Attributes written after the ones the writer states (see [`super::carried_attributes`]);
    /// none by default.
    pub attributes: Vec<RawAttribute>,
}

impl Default for DeepWriteOptions {
    fn default() -> Self {
        DeepWriteOptions {
            codec: Codec::Zips,
            write_state: true,
            attributes: Vec::new(),
        }
    }
}

/// Options for flat output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlatWriteOptions {
    /// Storage of colour and alpha.
    pub flat_type: FlatType,
    /// Compression (ZIP by default, as flat output always was).
    pub codec: Codec,
    /// Attributes written after the ones the writer states; none by default.
    pub attributes: Vec<RawAttribute>,
}

impl Default for FlatWriteOptions {
    fn default() -> Self {
        FlatWriteOptions {
            flat_type: FlatType::Half,
            codec: Codec::Zip,
            attributes: Vec::new(),
        }
    }
}

/// Encode `attributes` (the writer's own, by name) and `carried`, in OpenEXR's order, and the
/// end of the header. A required attribute the writer states with a default value
/// (`pixelAspectRatio`, `screenWindowCenter`, `screenWindowWidth`) takes the value `carried`
/// holds for it (with its type), in the writer's place, so an input with the defaults gives the
/// bytes of an output that carries nothing. Returns where each of the writer's own attributes'
/// value ends.
///
/// OpenEXR's order is by name, byte by byte ([`in_openexr_order`]): its writer keeps a header's
/// attributes in a map sorted by name, and some of its readers depend on it. OpenEXR 3.1
/// (oiiotool 2.4) cannot read the sample counts of a deep file whose `idManifest` comes first
/// or last, as it did after the writer's own attributes here; sorted, it reads them.
pub(super) fn write_attributes(
    out: &mut Vec<u8>,
    attributes: &[(&'static str, AttributeValue)],
    carried: &[RawAttribute],
) -> Result<Vec<(&'static str, usize)>> {
    let carried_value = |name: &str| {
        REQUIRED_CARRIED
            .iter()
            .find(|&&(n, _)| n == name)
            .and_then(|&(n, kind)| carried.iter().find(|a| a.name == n && a.kind == kind))
    };
    // Each attribute encoded on its own, with the writer's own name when it is one of them.
    let mut encoded: Vec<(&str, Option<&'static str>, Vec<u8>)> = Vec::new();
    for (name, value) in attributes {
        let mut bytes = Vec::new();
        match carried_value(name) {
            Some(input) => input.write(&mut bytes),
            None => attr::write(name.as_bytes(), value, &mut bytes)
                .map_err(|e| Error::from_exr(format!("cannot encode attribute {name}"), e))?,
        }
        encoded.push((name, Some(*name), bytes));
    }
    for attribute in carried {
        let written = REQUIRED_CARRIED.iter().any(|&(n, _)| n == attribute.name);
        let owned = WRITER_OWNED.contains(&attribute.name.as_str())
            && !(attribute.name == "software" && attribute.kind == "string");
        if !written && !owned {
            let mut bytes = Vec::new();
            attribute.write(&mut bytes);
            encoded.push((&attribute.name, None, bytes));
        }
    }
    in_openexr_order(&mut encoded, |(name, _, _)| name.as_bytes());
    let mut ends = Vec::with_capacity(attributes.len());
    for (_, own, bytes) in encoded {
        out.extend(bytes);
        if let Some(name) = own {
            ends.push((name, out.len()));
        }
    }
    out.push(0);
    Ok(ends)
}

/// Sort a header's attributes into the order OpenEXR writes them: by name, compared byte by
/// byte as C's `strcmp` compares (its `std::map<Name, Attribute*>`), so upper case comes
/// before lower case. The sort is stable: attributes of one name (only a malformed input has
/// them) keep their order.
pub(super) fn in_openexr_order<T>(attributes: &mut [T], name: impl Fn(&T) -> &[u8]) {
    attributes.sort_by(|a, b| name(a).cmp(name(b)));
}

/// Write a deep scanline file with the given codec; `deepImageState` records the part of
/// `image.state` its pixels satisfy ([`DeepImage::held_state`]).
pub fn write_deep(path: &Path, image: &DeepImage, codec: Codec) -> Result<()> {
    let options = DeepWriteOptions {
        codec,
        ..DeepWriteOptions::default()
    };
    write_deep_with(path, image, &options)
}

/// Write a deep scanline file.
pub fn write_deep_with(path: &Path, image: &DeepImage, options: &DeepWriteOptions) -> Result<()> {
    if image.data_window.area() == 0 {
        return Err(Error::file(
            path,
            "cannot write an image with an empty data window",
        ));
    }
    let bytes = encode_deep_with(image, options)?;
    write_bytes_atomically(path, &bytes)
}

/// Encode a deep scanline file in memory, with `deepImageState`.
pub fn encode_deep(image: &DeepImage, codec: Codec) -> Result<Vec<u8>> {
    let options = DeepWriteOptions {
        codec,
        ..DeepWriteOptions::default()
    };
    encode_deep_with(image, &options)
}

/// Encode a deep scanline file in memory.
pub fn encode_deep_with(image: &DeepImage, options: &DeepWriteOptions) -> Result<Vec<u8>> {
    let codec = options.codec;
    let window = image.data_window;
    let lines = codec.lines_per_chunk();
    let chunk_count = window.height().div_ceil(lines);
    let mut out = Vec::new();
    write_deep_header(&mut out, image, options, chunk_count)?;

    let chunks: Vec<Vec<u8>> = (0..chunk_count)
        .into_par_iter()
        .map(|i| encode_chunk(image, codec, i * lines, lines))
        .collect();
    let table_at = out.len();
    let mut offset = (table_at + 8 * chunk_count) as u64;
    for c in &chunks {
        out.extend(offset.to_le_bytes());
        offset += c.len() as u64;
    }
    for c in chunks {
        out.extend(c);
    }
    Ok(out)
}

/// What the header of a deep scanline output states.
pub(crate) struct DeepHeader<'a> {
    pub(crate) channels: &'a [crate::deep::Channel],
    pub(crate) data_window: Bounds,
    pub(crate) display_window: Bounds,
    pub(crate) state: crate::deep::DeepState,
    pub(crate) max_samples: usize,
}

fn write_deep_header(
    out: &mut Vec<u8>,
    image: &DeepImage,
    options: &DeepWriteOptions,
    chunk_count: usize,
) -> Result<()> {
    let header = DeepHeader {
        channels: &image.channels,
        data_window: image.data_window,
        display_window: image.display_window,
        state: if options.write_state {
            image.held_state()
        } else {
            image.state
        },
        max_samples: image.max_count(),
    };
    encode_deep_header(out, &header, options, chunk_count).map(|_| ())
}

/// Append a deep scanline header to `out`; returns the position of the `maxSamplesPerPixel`
/// value (four bytes), which a streaming writer patches once the last chunk is written.
pub(crate) fn encode_deep_header(
    out: &mut Vec<u8>,
    header: &DeepHeader,
    options: &DeepWriteOptions,
    chunk_count: usize,
) -> Result<usize> {
    encode_deep_header_patchable(out, header, options, chunk_count).map(|at| at.max_samples)
}

/// Where the values a streaming deep writer patches at the end lie in its header.
pub(crate) struct DeepHeaderPatches {
    /// The `maxSamplesPerPixel` value (four bytes).
    pub(crate) max_samples: usize,
    /// The `deepImageState` value (one byte), when the header has one.
    pub(crate) state: Option<usize>,
}

/// [`encode_deep_header`], returning where both patchable values lie.
pub(crate) fn encode_deep_header_patchable(
    out: &mut Vec<u8>,
    header: &DeepHeader,
    options: &DeepWriteOptions,
    chunk_count: usize,
) -> Result<DeepHeaderPatches> {
    let channels: Vec<(&str, SampleType)> = header
        .channels
        .iter()
        .map(|c| (c.name.as_str(), c.sample_type))
        .collect();
    let max_samples = i32::try_from(header.max_samples)
        .map_err(|_| Error::format("a pixel holds more samples than EXR can count"))?;
    let mut attributes = scanline_header_start(
        out,
        &channels,
        true,
        options.codec,
        header.data_window,
        header.display_window,
    );
    attributes.extend([
        ("type", AttributeValue::BlockType(BlockType::DeepScanLine)),
        ("version", AttributeValue::I32(1)),
        ("maxSamplesPerPixel", AttributeValue::I32(max_samples)),
        ("chunkCount", AttributeValue::I32(chunk_count as i32)),
    ]);
    if options.write_state {
        // Its own attribute type: one byte, 0 messy, 1 sorted, 2 non-overlapping, 3 tidy.
        attributes.push((
            "deepImageState",
            AttributeValue::Custom {
                kind: Text::from("deepImageState"),
                bytes: SmallVec::from_slice(&[header.state as u8]),
            },
        ));
    }
    let ends = write_attributes(out, &attributes, &options.attributes)?;
    let value_at = |name: &str, size: usize| {
        ends.iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, end)| end - size)
    };
    Ok(DeepHeaderPatches {
        // An i32 attribute ends with its four value bytes, deepImageState with its one.
        max_samples: value_at("maxSamplesPerPixel", 4)
            .expect("the writer states maxSamplesPerPixel"),
        state: value_at("deepImageState", 1),
    })
}

/// One chunk: y, packed table size, packed data size, unpacked data size, table, data; the data
/// holds, for each line, for each channel, the samples of each pixel in turn.
pub(crate) fn encode_chunk(
    image: &DeepImage,
    codec: Codec,
    first_line: usize,
    lines: usize,
) -> Vec<u8> {
    let window = image.data_window;
    let w = window.width();
    let last_line = (first_line + lines).min(window.height());
    let first_pixel = first_line * w;
    let end_pixel = last_line * w;

    // The count table accumulates within each line, as OpenEXR writes it.
    let mut table = Vec::with_capacity((end_pixel - first_pixel) * 4);
    for p in first_pixel..end_pixel {
        let line_start = image.offsets[p - p % w];
        table.extend(((image.offsets[p + 1] - line_start) as i32).to_le_bytes());
    }
    let mut data = Vec::new();
    let mut line_samples = Vec::with_capacity(last_line - first_line);
    for line in first_line..last_line {
        let a = image.offsets[line * w] as usize;
        let b = image.offsets[(line + 1) * w] as usize;
        line_samples.push(b - a);
        for plane in &image.planes {
            plane.write_le(a..b, &mut data);
        }
    }
    let table_layout = BlockLayout::count_table(w, last_line - first_line);
    let data_layout = BlockLayout::deep_samples(&image.channels, line_samples);
    let packed_table = compress(codec, &table, &table_layout);
    let packed_data = compress(codec, &data, &data_layout);
    let mut out = Vec::with_capacity(28 + packed_table.len() + packed_data.len());
    out.extend((window.y0 + first_line as i32).to_le_bytes());
    out.extend((packed_table.len() as u64).to_le_bytes());
    out.extend((packed_data.len() as u64).to_le_bytes());
    out.extend((data.len() as u64).to_le_bytes());
    out.extend(packed_table);
    out.extend(packed_data);
    out
}

/// Write a flat scanline EXR (ZIP compressed): float channels as `flat_type`, except channels
/// named Z, which are always 32-bit float; uint channels stay uint.
pub fn write_flat(path: &Path, image: &FlatImage, flat_type: FlatType) -> Result<()> {
    let options = FlatWriteOptions {
        flat_type,
        ..FlatWriteOptions::default()
    };
    write_flat_with(path, image, &options)
}

/// Write a flat scanline EXR. This is the streaming [`super::FlatChunkWriter`] fed the whole
/// image as one band, so whole-image and streamed output are the same bytes.
pub fn write_flat_with(path: &Path, image: &FlatImage, options: &FlatWriteOptions) -> Result<()> {
    let mut writer = super::FlatChunkWriter::create(path, image.data_window, options)?;
    writer.write_band(image)?;
    writer.finish()
}

/// Refuse to overwrite an input: compare canonical paths where the output already exists.
pub fn check_output_is_not_an_input(output: &Path, inputs: &[PathBuf]) -> Result<()> {
    let Ok(out) = output.canonicalize() else {
        return Ok(());
    };
    for input in inputs {
        if input.canonicalize().is_ok_and(|i| i == out) {
            return Err(Error::file(
                output,
                "output path is also an input; refusing to overwrite it",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_names_are_tied_to_their_output() {
        let prefix = temp_prefix(std::ffi::OsStr::new("out.0001.exr"));
        assert_eq!(prefix, ".deepmerge-out.0001.exr.");
        assert!(is_temp_of(".deepmerge-out.0001.exr.a1B2c3.tmp", &prefix));
        // Another output's temporary file, or something else that merely looks alike.
        assert!(!is_temp_of(".deepmerge-out.0002.exr.a1B2c3.tmp", &prefix));
        assert!(!is_temp_of(
            ".deepmerge-out.0001.exr.a1B2c3.tmp.keep",
            &prefix
        ));
        assert!(!is_temp_of(".deepmerge-out.0001.exr.a1.B2c.tmp", &prefix));
        assert!(!is_temp_of(".deepmerge-out.0001.exr.tmp", &prefix));
    }

    #[test]
    fn errors_name_the_output_not_the_temporary_file() {
        let dir = tempfile::Builder::new().prefix("dm").tempdir().unwrap();
        let out = dir.path().join("missing-dir/out.exr");
        let err = write_atomically(&out, |_| Ok(())).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("{}: cannot write: ", out.display())),
            "{err}"
        );
        assert!(!err.contains(".tmp") && !err.contains(" at path "), "{err}");
        assert!(!err.contains(".deepmerge-"), "{err}");
    }
}
