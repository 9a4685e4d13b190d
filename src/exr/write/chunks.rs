//! Chunk-level output: deep and flat scanline files written a band of rows at a time.
//!
//! A writer is created for the whole output window and fed bands top to bottom. It writes the
//! header when the first band arrives (the channels come from the merge), a placeholder offset
//! table, then every output chunk as soon as its rows are complete; [`DeepChunkWriter::finish`]
//! and [`FlatChunkWriter::finish`] patch the offset table (and deep output's
//! `maxSamplesPerPixel` and `deepImageState`, only known at the end: the state stamped is the
//! part of the bands' claim every band's pixels satisfy, [`DeepImage::held_state`]) with
//! positioned writes and rename the temporary file into place ([`AtomicFile`]). When band edges do not fall on chunk edges (ZIP holds 16
//! lines), the writer keeps the rows of at most one partial chunk until the next band completes
//! it, so the chunks are exactly those of a writer that saw the whole image at once: the
//! whole-image writers ([`crate::exr::write_flat`], and [`crate::exr::encode_deep_with`] for deep) are
//! this with one band, and the tests compare the bytes.
//!
//! Chunks of a band are compressed in parallel (rayon) and written in order. Rows without a
//! sample ([`DeepChunkWriter::write_empty_rows`], [`FlatChunkWriter::write_empty_rows`]) are
//! never materialised beyond one partial chunk: an empty chunk is packed once per height and
//! its bytes written again with each chunk's y, the same bytes packing every such chunk gives.
//!
//! A writer used out of order (a band that does not continue the rows written, does not span
//! the window, has other channels than the first, or `finish` before the last row) is refused
//! with a usage error ([`ErrorKind::Usage`]) naming the output, before anything is written, and
//! never panics: a partial file would be a corrupt one.

use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::exr::attributes as exr_attributes;
use rayon::prelude::*;

use super::{
    encode_chunk, encode_deep_header_patchable, scanline_header_start, write_attributes,
    AtomicFile, DeepHeader, DeepHeaderPatches, FlatWriteOptions, WriteBehind,
};
use super::{DeepWriteOptions, FlatType};
use crate::deep::{
    Bounds, Channel, DeepImage, DeepState, FlatImage, FlatValues, Plane, SampleType,
};
use crate::error::{Error, ErrorKind, Result};
use crate::exr::codec::{compress, BlockLayout, Codec};

/// What both writers share: the temporary file, where the offset table is, and the chunks'
/// offsets so far.
struct ChunkFile {
    output: AtomicFile,
    writer: WriteBehind<std::fs::File>,
    /// Bytes written so far (the position of the next chunk).
    written: u64,
    table_at: u64,
    offsets: Vec<u64>,
}

impl ChunkFile {
    fn create(path: &Path) -> Result<ChunkFile> {
        let output = AtomicFile::create(path)?;
        let file = output.file().try_clone().map_err(|e| output.error(e))?;
        Ok(ChunkFile {
            output,
            writer: WriteBehind::new(file),
            written: 0,
            table_at: 0,
            offsets: Vec::new(),
        })
    }

    /// A usage error about this output: the writer was used out of order.
    fn misuse(&self, message: String) -> Error {
        Error::of_kind(ErrorKind::Usage, message).in_file(self.output.path())
    }

    /// Refuse rows `y0..=y1` unless they are the next rows (`next_row` on) inside `window`.
    fn check_rows(&self, window: Bounds, next_row: i32, y0: i32, y1: i32) -> Result<()> {
        check_rows(window, next_row, y0, y1).map_err(|m| self.misuse(m))
    }

    /// Refuse to finish unless every row of `window` was written (`next_row` is the next).
    fn check_finished(&self, window: Bounds, next_row: i32) -> Result<()> {
        if next_row <= window.y1 {
            return Err(self.misuse(format!(
                "finished with rows {next_row} to {} not written",
                window.y1
            )));
        }
        Ok(())
    }

    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.writer
            .write_all(bytes)
            .map_err(|e| self.output.error(e))?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// The header, then a zeroed offset table of `chunks` entries.
    fn start(&mut self, header: &[u8], chunks: usize) -> Result<()> {
        self.write(header)?;
        self.table_at = self.written;
        self.write(&vec![0u8; chunks * 8])
    }

    fn chunk(&mut self, bytes: &[u8]) -> Result<()> {
        self.offsets.push(self.written);
        self.write(bytes)
    }

    /// Flush, patch the offset table and `patches`, rename into place.
    fn finish(mut self, patches: &[(u64, Vec<u8>)]) -> Result<()> {
        self.writer.flush().map_err(|e| self.output.error(e))?;
        let table: Vec<u8> = self.offsets.iter().flat_map(|o| o.to_le_bytes()).collect();
        let file = self.output.file();
        file.write_all_at(&table, self.table_at)
            .map_err(|e| self.output.error(e))?;
        for (at, bytes) in patches {
            file.write_all_at(bytes, *at)
                .map_err(|e| self.output.error(e))?;
        }
        self.output.commit()
    }
}

/// A deep scanline output written band by band.
pub struct DeepChunkWriter {
    file: ChunkFile,
    window: Bounds,
    options: DeepWriteOptions,
    chunk_count: usize,
    /// Positions of the `maxSamplesPerPixel` and `deepImageState` values, once the header is
    /// written.
    patches_at: Option<DeepHeaderPatches>,
    max_samples: usize,
    /// The state every band written so far satisfies (the bands' claim until the first).
    held_state: DeepState,
    /// Rows of a chunk not yet complete (their first row starts a chunk).
    partial: Option<DeepImage>,
    /// The first row not yet received.
    next_row: i32,
    /// An empty chunk of n lines, encoded once: (n, its bytes from its packed sizes on).
    empty_chunks: Vec<(usize, Vec<u8>)>,
    /// The channels of the header (the first band's), once written.
    channels: Option<Vec<Channel>>,
}

impl DeepChunkWriter {
    /// Start writing a deep scanline file over `window` to `path`.
    pub fn create(path: &Path, window: Bounds, options: &DeepWriteOptions) -> Result<Self> {
        if window.area() == 0 {
            return Err(Error::file(
                path,
                "cannot write an image with an empty data window",
            ));
        }
        Ok(DeepChunkWriter {
            file: ChunkFile::create(path)?,
            window,
            options: options.clone(),
            chunk_count: window.height().div_ceil(options.codec.lines_per_chunk()),
            patches_at: None,
            max_samples: 0,
            held_state: DeepState::Tidy,
            partial: None,
            next_row: window.y0,
            empty_chunks: Vec::new(),
            channels: None,
        })
    }

    /// Refuse `band` (rows `y0..=y1`; only its channels and columns when they are a template's)
    /// unless it continues the rows written, spans the window and has the header's channels.
    fn check_band(&self, band: &DeepImage, y0: i32, y1: i32) -> Result<()> {
        self.file.check_rows(self.window, self.next_row, y0, y1)?;
        let (x0, x1) = (band.data_window.x0, band.data_window.x1);
        if (x0, x1) != (self.window.x0, self.window.x1) {
            return Err(self.file.misuse(span_message(x0, x1, self.window)));
        }
        if let Some(channels) = &self.channels {
            if *channels != band.channels {
                let names = |c: &[Channel]| {
                    c.iter()
                        .map(|c| format!("{} ({})", c.name, c.sample_type.name()))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                return Err(self.file.misuse(format!(
                    "a band with the channels {}, not the first band's {}; every band has the \
                     same channels",
                    names(&band.channels),
                    names(channels)
                )));
            }
        }
        Ok(())
    }

    /// The header, from the first band (its channels, display window and state).
    fn start(&mut self, band: &DeepImage) -> Result<()> {
        if self.patches_at.is_none() {
            self.held_state = band.state;
            self.channels = Some(band.channels.clone());
            let mut header = Vec::new();
            let at = encode_deep_header_patchable(
                &mut header,
                &DeepHeader {
                    channels: &band.channels,
                    data_window: self.window,
                    display_window: band.display_window,
                    state: band.state,
                    max_samples: 0,
                },
                &self.options,
                self.chunk_count,
            )?;
            self.file.start(&header, self.chunk_count)?;
            self.patches_at = Some(at);
        }
        Ok(())
    }

    /// Write rows `y0..=y1` (after the previous band's) without a sample in any pixel:
    /// `template` is any band of this output (its rows are not used, only its channels,
    /// display window and state). A chunk of such rows is encoded once and its bytes written
    /// again for every other, so the cost is in chunks, not in pixels.
    pub fn write_empty_rows(&mut self, template: &DeepImage, y0: i32, y1: i32) -> Result<()> {
        self.check_band(template, y0, y1)?;
        self.start(template)?;
        let lines = self.options.codec.lines_per_chunk() as i32;
        let last = self.window.y1;
        let chunk_end = |y0: i32| (y0 + lines - 1).min(last);
        let mut y = y0;
        // The partial chunk earlier bands left, completed (or continued) by empty rows.
        if let Some(partial) = self.partial.take() {
            let start = partial.data_window.y0;
            let end = chunk_end(start).min(y1);
            let joined = join_rows(&partial, &empty_rows(template, self.window, y, end));
            self.next_row = start;
            self.write_band(&joined)?;
            y = end + 1;
        }
        while y <= y1 && chunk_end(y) <= y1 {
            let tail = self.empty_chunk(template, y, chunk_end(y));
            let mut chunk = Vec::with_capacity(4 + tail.len());
            chunk.extend(y.to_le_bytes());
            chunk.extend_from_slice(tail);
            self.file.chunk(&chunk)?;
            y = chunk_end(y) + 1;
        }
        // Rows that start a chunk the next band completes.
        if y <= y1 {
            self.partial = Some(empty_rows(template, self.window, y, y1));
        }
        self.next_row = y1 + 1;
        Ok(())
    }

    /// The bytes of an empty chunk of rows `y0..=y1` (a whole chunk) from its packed sizes on,
    /// packed the first time a chunk of that height is asked for (`template` gives the
    /// channels).
    fn empty_chunk(&mut self, template: &DeepImage, y0: i32, y1: i32) -> &[u8] {
        let n = (y1 - y0 + 1) as usize;
        let at = match self.empty_chunks.iter().position(|(k, _)| *k == n) {
            Some(at) => at,
            None => {
                let empty = empty_rows(template, self.window, y0, y1);
                let chunk = encode_chunk(&empty, self.options.codec, 0, n);
                self.empty_chunks.push((n, chunk[4..].to_vec()));
                self.empty_chunks.len() - 1
            }
        };
        &self.empty_chunks[at].1
    }

    /// Write the rows of `band`: the output window's full width, the rows after the previous
    /// band's. Its channels and state must be the same in every band.
    pub fn write_band(&mut self, band: &DeepImage) -> Result<()> {
        self.check_band(band, band.data_window.y0, band.data_window.y1)?;
        self.next_row = band.data_window.y1 + 1;
        self.start(band)?;
        self.max_samples = self.max_samples.max(band.max_count());
        if self.options.write_state && self.held_state != DeepState::Messy {
            self.held_state = self.held_state.meet(band.held_state());
        }
        let lines = self.options.codec.lines_per_chunk() as i32;
        let last = self.window.y1;
        // A chunk is complete when its last line (or the window's last) has arrived.
        let chunk_end = |y0: i32| (y0 + lines - 1).min(last);
        let mut y = band.data_window.y0;
        let band_end = band.data_window.y1;
        let codec = self.options.codec;
        // First, the partial chunk the previous bands left, completed by this band's rows.
        if let Some(partial) = self.partial.take() {
            let start = partial.data_window.y0;
            let end = chunk_end(start).min(band_end);
            let joined = join_rows(&partial, &rows_of(band, y, end));
            y = end + 1;
            if end == chunk_end(start) {
                let chunk = encode_chunk(&joined, codec, 0, lines as usize);
                self.file.chunk(&chunk)?;
            } else {
                self.partial = Some(joined);
                return Ok(());
            }
        }
        // Then every chunk wholly inside the band, in parallel.
        let mut starts = Vec::new();
        while y <= band_end && chunk_end(y) <= band_end {
            starts.push(y);
            y = chunk_end(y) + 1;
        }
        // A chunk without a sample is the packed empty chunk of its height with its own y
        // (the same bytes packing it gives), so a sparse band costs per chunk, not per pixel.
        let w = band.data_window.width();
        let line_at = |y: i32| band.offsets[(y - band.data_window.y0) as usize * w];
        let is_empty = |s: i32| line_at(s) == line_at(chunk_end(s) + 1);
        for &s in &starts {
            if is_empty(s) {
                self.empty_chunk(band, s, chunk_end(s));
            }
        }
        let empty_chunks = &self.empty_chunks;
        let chunks: Vec<Vec<u8>> = starts
            .par_iter()
            .map(|&s| {
                let n = (chunk_end(s) - s + 1) as usize;
                match empty_chunks.iter().find(|(k, _)| *k == n) {
                    Some((_, tail)) if is_empty(s) => {
                        let mut chunk = Vec::with_capacity(4 + tail.len());
                        chunk.extend(s.to_le_bytes());
                        chunk.extend_from_slice(tail);
                        chunk
                    }
                    _ => encode_chunk(
                        band,
                        codec,
                        (s - band.data_window.y0) as usize,
                        lines as usize,
                    ),
                }
            })
            .collect();
        for chunk in &chunks {
            self.file.chunk(chunk)?;
        }
        // Rows that start a chunk the next band completes.
        if y <= band_end {
            self.partial = Some(rows_of(band, y, band_end));
        }
        Ok(())
    }

    /// Patch the offset table, `maxSamplesPerPixel` and `deepImageState`, and rename the file
    /// into place.
    pub fn finish(self) -> Result<()> {
        self.file.check_finished(self.window, self.next_row)?;
        let (None, Some(at)) = (&self.partial, self.patches_at.as_ref()) else {
            return Err(Error::internal(
                "every row was written, yet a chunk or the header was not",
            ));
        };
        let max = i32::try_from(self.max_samples)
            .map_err(|_| Error::format("a pixel holds more samples than EXR can count"))?;
        let mut patches = vec![(at.max_samples as u64, max.to_le_bytes().to_vec())];
        if let Some(state_at) = at.state {
            patches.push((state_at as u64, vec![self.held_state as u8]));
        }
        self.file.finish(&patches)
    }
}

/// Why rows `y0..=y1` are not the next rows of an output over `window` whose next row is
/// `next_row`, if they are not (shared with the PNG preview's writer).
pub(crate) fn check_rows(
    window: Bounds,
    next_row: i32,
    y0: i32,
    y1: i32,
) -> std::result::Result<(), String> {
    if y0 != next_row {
        Err(format!(
            "rows {y0} to {y1} were given where row {next_row} is next; bands come top to \
             bottom, each after the previous one"
        ))
    } else if y1 < y0 || y1 > window.y1 {
        Err(format!(
            "rows {y0} to {y1} are not rows of the output's data window {window}"
        ))
    } else {
        Ok(())
    }
}

/// The refusal of a band over columns `x0..=x1` for an output over `window`.
pub(crate) fn span_message(x0: i32, x1: i32, window: Bounds) -> String {
    format!(
        "a band over columns {x0} to {x1}, not the output's {} to {}; a band spans the output's \
         data window",
        window.x0, window.x1
    )
}

/// Rows `y0..=y1` of `window` without samples, with `template`'s channels and state.
fn empty_rows(template: &DeepImage, window: Bounds, y0: i32, y1: i32) -> DeepImage {
    let rows = Bounds { y0, y1, ..window };
    let planes = template
        .channels
        .iter()
        .map(|c| Plane::with_capacity(c.sample_type, 0))
        .collect();
    DeepImage::from_counts(
        template.display_window,
        rows,
        template.channels.clone(),
        &vec![0; rows.area()],
        planes,
        template.state,
    )
    .expect("no samples, no values")
}

/// Rows `y0..=y1` (absolute) of `image` as an image of their own.
fn rows_of(image: &DeepImage, y0: i32, y1: i32) -> DeepImage {
    let w = image.data_window.width();
    let first = (y0 - image.data_window.y0) as usize * w;
    let end = (y1 - image.data_window.y0 + 1) as usize * w;
    let range = image.offsets[first] as usize..image.offsets[end] as usize;
    let counts: Vec<u32> = (first..end).map(|p| image.count(p) as u32).collect();
    let planes = image
        .planes
        .iter()
        .map(|p| slice_plane(p, range.clone()))
        .collect();
    let window = Bounds {
        y0,
        y1,
        ..image.data_window
    };
    DeepImage::from_counts(
        image.display_window,
        window,
        image.channels.clone(),
        &counts,
        planes,
        image.state,
    )
    .expect("a slice of a consistent image")
}

/// `top`'s rows followed by `bottom`'s (same channels and columns).
fn join_rows(top: &DeepImage, bottom: &DeepImage) -> DeepImage {
    let mut counts = top.counts();
    counts.extend(bottom.counts());
    let planes = top
        .planes
        .iter()
        .zip(&bottom.planes)
        .map(|(a, b)| {
            let mut joined = slice_plane(a, 0..a.len());
            joined.append(b);
            joined
        })
        .collect();
    let window = Bounds {
        y1: bottom.data_window.y1,
        ..top.data_window
    };
    DeepImage::from_counts(
        top.display_window,
        window,
        top.channels.clone(),
        &counts,
        planes,
        top.state,
    )
    .expect("rows of one image")
}

fn slice_plane(plane: &Plane, range: std::ops::Range<usize>) -> Plane {
    match plane {
        Plane::U32(v) => Plane::U32(v[range].to_vec()),
        Plane::F16(v) => Plane::F16(v[range].to_vec()),
        Plane::F32(v) => Plane::F32(v[range].to_vec()),
    }
}

// Flat lines are appended as native slices (`bytemuck`), which are EXR's little-endian bytes
// only on a little-endian machine.
const _: () = assert!(
    cfg!(target_endian = "little"),
    "flat output assumes little-endian"
);

/// A flat scanline output written band by band in the codec of its [`FlatWriteOptions`] (ZIP
/// by default): float channels as the [`FlatType`], Z always as 32-bit float, uint channels as
/// uint.
pub struct FlatChunkWriter {
    file: ChunkFile,
    window: Bounds,
    flat_type: FlatType,
    codec: Codec,
    /// Lines per chunk of the codec.
    lines: usize,
    attributes: Vec<exr_attributes::RawAttribute>,
    started: bool,
    /// Raw lines of a chunk not yet complete.
    partial: Vec<Vec<u8>>,
    /// First row of `partial`, or of the next band.
    partial_y: i32,
    /// An all-zero chunk of n lines, packed once: (n, its packed bytes).
    empty_chunks: Vec<(usize, Vec<u8>)>,
    /// The channels of the header (the first band's names and how each is stored).
    channels: Option<Vec<(String, SampleType)>>,
}

impl FlatChunkWriter {
    /// Start writing a flat scanline file over `window` to `path`.
    pub fn create(path: &Path, window: Bounds, options: &FlatWriteOptions) -> Result<Self> {
        if window.area() == 0 {
            return Err(Error::file(
                path,
                "cannot write an image with an empty data window",
            ));
        }
        Ok(FlatChunkWriter {
            file: ChunkFile::create(path)?,
            window,
            flat_type: options.flat_type,
            codec: options.codec,
            lines: options.codec.lines_per_chunk(),
            attributes: options.attributes.clone(),
            started: false,
            partial: Vec::new(),
            partial_y: window.y0,
            empty_chunks: Vec::new(),
            channels: None,
        })
    }

    /// The next row to write.
    fn next_row(&self) -> i32 {
        self.partial_y + self.partial.len() as i32
    }

    /// Each channel of `band` by name with how it is stored.
    fn stored_channels(&self, band: &FlatImage) -> Vec<(String, SampleType)> {
        band.channels
            .iter()
            .map(|c| (c.name.clone(), self.storage(&c.name, &c.values)))
            .collect()
    }

    /// Refuse `band` (rows `y0..=y1`; only its channels and columns when it is a template)
    /// unless it continues the rows written, spans the window and has the header's channels.
    fn check_band(&self, band: &FlatImage, y0: i32, y1: i32) -> Result<()> {
        self.file.check_rows(self.window, self.next_row(), y0, y1)?;
        let (x0, x1) = (band.data_window.x0, band.data_window.x1);
        if (x0, x1) != (self.window.x0, self.window.x1) {
            return Err(self.file.misuse(span_message(x0, x1, self.window)));
        }
        if let Some(channels) = &self.channels {
            let given = self.stored_channels(band);
            if *channels != given {
                let names = |c: &[(String, SampleType)]| {
                    c.iter()
                        .map(|(n, t)| format!("{n} ({})", t.name()))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                return Err(self.file.misuse(format!(
                    "a band with the channels {}, not the first band's {}; every band has the \
                     same channels",
                    names(&given),
                    names(channels)
                )));
            }
        }
        Ok(())
    }

    fn storage(&self, name: &str, values: &FlatValues) -> SampleType {
        match values {
            FlatValues::U32(_) => SampleType::U32,
            FlatValues::F32(_) if name == "Z" || self.flat_type == FlatType::Float => {
                SampleType::F32
            }
            FlatValues::F32(_) => SampleType::F16,
        }
    }

    /// The header and the placeholder offset table, from the first band's channels.
    fn start(&mut self, band: &FlatImage) -> Result<()> {
        if !self.started {
            self.channels = Some(self.stored_channels(band));
            let header = self.header(band)?;
            let chunks = self.window.height().div_ceil(self.lines);
            self.file.start(&header, chunks)?;
            self.started = true;
        }
        Ok(())
    }

    /// How each channel of `band` is stored.
    fn types(&self, band: &FlatImage) -> Vec<SampleType> {
        band.channels
            .iter()
            .map(|c| self.storage(&c.name, &c.values))
            .collect()
    }

    /// Write the rows of `band` (the window's full width, after the previous band's rows; its
    /// channels sorted by name, the same in every band).
    pub fn write_band(&mut self, band: &FlatImage) -> Result<()> {
        self.check_band(band, band.data_window.y0, band.data_window.y1)?;
        self.start(band)?;
        let w = band.data_window.width();
        let types = self.types(band);
        let line_len: usize = types.iter().map(|t| t.size() * w).sum();
        let value_sizes: Vec<usize> = types.iter().map(|t| t.size()).collect();
        // One line of the chunk: each channel's values of the line in turn, little-endian.
        // Whole slices are appended at once (a value at a time was a tenth of a small merge).
        let line_bytes = |line: usize| -> Vec<u8> {
            let mut out = Vec::with_capacity(line_len);
            let range = line * w..(line + 1) * w;
            for (c, t) in band.channels.iter().zip(&types) {
                match (&c.values, t) {
                    (FlatValues::U32(v), _) => {
                        out.extend_from_slice(bytemuck::cast_slice(&v[range.clone()]))
                    }
                    (FlatValues::F32(v), SampleType::F32) => {
                        out.extend_from_slice(bytemuck::cast_slice(&v[range.clone()]))
                    }
                    (FlatValues::F32(v), _) => {
                        let halves: Vec<half::f16> = v[range.clone()]
                            .iter()
                            .map(|&x| half::f16::from_f32(x))
                            .collect();
                        out.extend_from_slice(bytemuck::cast_slice(&halves))
                    }
                }
            }
            out
        };
        self.write_rows(
            band.data_window.y0,
            band.data_window.y1,
            &value_sizes,
            &line_bytes,
            false,
        )
    }

    /// Write rows `y0..=y1` (after the previous band's) in which every value is 0, as a merge
    /// writes pixels without samples: `template` is any band of this output (only its channels
    /// and display window are used). A chunk of such rows is packed once and its bytes written
    /// again for every other, so the cost is in chunks, not in pixels.
    pub fn write_empty_rows(&mut self, template: &FlatImage, y0: i32, y1: i32) -> Result<()> {
        self.check_band(template, y0, y1)?;
        self.start(template)?;
        let w = self.window.width();
        let value_sizes: Vec<usize> = self.types(template).iter().map(|t| t.size()).collect();
        let line_len: usize = value_sizes.iter().sum::<usize>() * w;
        self.write_rows(y0, y1, &value_sizes, &|_| vec![0u8; line_len], true)
    }

    /// Write rows `band_y0..=band_end` whose lines `line_bytes` gives (indexed from `band_y0`;
    /// each channel's values of `value_sizes` bytes): first the partial chunk earlier bands left,
    /// then every chunk wholly inside (in parallel, or from the cache of packed empty chunks when
    /// `empty` says every line is zeros), then the rows that start the next partial chunk.
    fn write_rows(
        &mut self,
        band_y0: i32,
        band_end: i32,
        value_sizes: &[usize],
        line_bytes: &(dyn Fn(usize) -> Vec<u8> + Sync),
        empty: bool,
    ) -> Result<()> {
        debug_assert_eq!(band_y0, self.next_row(), "checked by `check_band`");
        let (codec, lines, w) = (self.codec, self.lines, self.window.width());
        let line_len: usize = value_sizes.iter().sum::<usize>() * w;
        // The lines of one chunk, packed with the output's codec (its layout: the value sizes).
        let pack = |raw: &[u8]| {
            let layout = BlockLayout::flat(value_sizes.to_vec(), w, raw.len() / line_len.max(1));
            compress(codec, raw, &layout)
        };
        let last = self.window.y1;
        let chunk_end = |y0: i32| (y0 + lines as i32 - 1).min(last);
        let mut y = band_y0;
        if !self.partial.is_empty() {
            let end = chunk_end(self.partial_y).min(band_end);
            for line in y..=end {
                self.partial.push(line_bytes((line - band_y0) as usize));
            }
            y = end + 1;
            if end == chunk_end(self.partial_y) {
                let raw: Vec<u8> = std::mem::take(&mut self.partial).concat();
                let chunk = flat_chunk(self.partial_y, &pack(&raw));
                self.file.chunk(&chunk)?;
                self.partial_y = y;
            } else {
                return Ok(());
            }
        }
        let mut starts = Vec::new();
        while y <= band_end && chunk_end(y) <= band_end {
            starts.push(y);
            y = chunk_end(y) + 1;
        }
        if empty {
            for &s in &starts {
                let n = (chunk_end(s) - s + 1) as usize;
                let packed = match self.empty_chunks.iter().find(|(k, _)| *k == n) {
                    Some((_, packed)) => packed,
                    None => {
                        let packed = pack(&vec![0u8; n * line_len]);
                        self.empty_chunks.push((n, packed));
                        &self.empty_chunks.last().expect("just pushed").1
                    }
                };
                let chunk = flat_chunk(s, packed);
                self.file.chunk(&chunk)?;
            }
        } else {
            let chunks: Vec<Vec<u8>> = starts
                .par_iter()
                .map(|&s| {
                    let mut raw = Vec::with_capacity(line_len * lines);
                    for line in s..=chunk_end(s) {
                        raw.extend_from_slice(&line_bytes((line - band_y0) as usize));
                    }
                    flat_chunk(s, &pack(&raw))
                })
                .collect();
            for chunk in &chunks {
                self.file.chunk(chunk)?;
            }
        }
        self.partial_y = y;
        for line in y..=band_end {
            self.partial.push(line_bytes((line - band_y0) as usize));
        }
        Ok(())
    }

    fn header(&self, band: &FlatImage) -> Result<Vec<u8>> {
        let channels: Vec<(&str, SampleType)> = band
            .channels
            .iter()
            .map(|c| (c.name.as_str(), self.storage(&c.name, &c.values)))
            .collect();
        let mut out = Vec::new();
        let attributes = scanline_header_start(
            &mut out,
            &channels,
            false,
            self.codec,
            self.window,
            band.display_window,
        );
        write_attributes(&mut out, &attributes, &self.attributes)?;
        Ok(out)
    }

    /// Patch the offset table and rename the file into place.
    pub fn finish(self) -> Result<()> {
        self.file.check_finished(self.window, self.next_row())?;
        if !self.partial.is_empty() {
            return Err(Error::internal(
                "every row was written, yet the last chunk was not",
            ));
        }
        self.file.finish(&[])
    }
}

/// A flat scanline chunk: y, packed size, the lines as packed (by the output's codec, raw when
/// not smaller: [`compress`]).
fn flat_chunk(y: i32, packed: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + packed.len());
    out.extend(y.to_le_bytes());
    out.extend((packed.len() as i32).to_le_bytes());
    out.extend_from_slice(packed);
    out
}
