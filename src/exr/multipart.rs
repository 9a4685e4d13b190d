//! Multi-part output: single-part scanline files joined into one multi-part file, one part each.
//!
//! A part-by-part merge (stereo: a left and a right part) streams each output part band by band
//! through the single-part writers ([`super::DeepChunkWriter`], [`super::FlatChunkWriter`]) into a
//! file of its own beside the output, then [`join_parts`] copies those files' chunks into the
//! multi-part output, a chunk at a time. The parts' pixels are therefore exactly the bytes a
//! single-part merge of the same inputs writes, whatever the writers learn to do, and the only
//! new format code is the multi-part framing, which OpenEXR defines as:
//!
//! - the version field's multi-part bit (0x1000), and its "non-image" bit (0x800) when a part is
//!   deep;
//! - every header, each ended by an empty name, then one more empty name ending the list; each
//!   header has `name`, `type` (`scanlineimage` or `deepscanline`) and `chunkCount`;
//! - every part's offset table, in part order;
//! - the chunks, each preceded by the number of its part (an `int`); offsets point at that number.
//!
//! The price is that each part's bytes are written twice (into its file, then into the output);
//! memory stays a chunk.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::attributes::{read_headers, RawAttribute};
use super::write::{in_openexr_order, AtomicFile, WriteBehind};
use crate::error::{Error, Result};

/// The version field's flags (OpenEXR's `ImfVersion.h`).
const LONG_NAMES_FLAG: u32 = 0x400;
const NON_IMAGE_FLAG: u32 = 0x800;
const MULTI_PART_FLAG: u32 = 0x1000;
const TILED_FLAG: u32 = 0x200;

/// First guess at a part file's header size; doubled until the header fits.
const HEADER_PREFIX_BYTES: usize = 64 << 10;

/// Headers larger than this are refused (the part files are ours, so this is a sanity bound).
const MAX_HEADER_BYTES: usize = 64 << 20;

/// One part of a multi-part output: a finished single-part scanline file and what the part is
/// called.
#[derive(Clone, Debug)]
pub struct PartFile {
    /// The single-part scanline file (deep or flat) holding the part's pixels.
    pub path: PathBuf,
    /// The part's `name` (unique in the output).
    pub name: String,
    /// The part's `view` (`left`, `right`), written when the file does not carry one already.
    pub view: Option<String>,
}

/// What joining needs of one part file: its header, where its chunks are, its flags.
struct ScannedPart {
    attributes: Vec<RawAttribute>,
    flags: u32,
    /// Every chunk's offset in the part file, in table (= file) order.
    offsets: Vec<u64>,
    file_len: u64,
}

/// Read the header and offset table of a single-part scanline file written by this crate's
/// writers: the chunks follow the offset table directly, in table order.
fn scan_part(path: &Path) -> Result<ScannedPart> {
    let broken = |what: &str| Error::file(path, format!("cannot join it as a part: {what}"));
    let file = File::open(path).map_err(|e| Error::read(path, e))?;
    let file_len = file.metadata().map_err(|e| Error::read(path, e))?.len();
    let mut size = HEADER_PREFIX_BYTES;
    let (bytes, walk) = loop {
        let len = (file_len as usize).min(size);
        let mut prefix = vec![0u8; len];
        file.read_exact_at(&mut prefix, 0)
            .map_err(|e| Error::read(path, e))?;
        if let Some(walk) = (len >= 8).then(|| read_headers(&prefix, false)).flatten() {
            break (prefix, walk);
        }
        if len as u64 == file_len || size >= MAX_HEADER_BYTES {
            return Err(broken("its header is truncated"));
        }
        size *= 2;
    };
    let flags = u32::from_le_bytes(bytes[4..8].try_into().expect("eight bytes"));
    if flags & (MULTI_PART_FLAG | TILED_FLAG) != 0 || walk.headers.len() != 1 {
        return Err(broken("it is not a single-part scanline file"));
    }
    // The table runs from the end of the header to the first chunk.
    let mut first = [0u8; 8];
    file.read_exact_at(&mut first, walk.end as u64)
        .map_err(|e| Error::read(path, e))?;
    let first = u64::from_le_bytes(first);
    let table_bytes = first
        .checked_sub(walk.end as u64)
        .filter(|n| *n > 0 && n % 8 == 0 && first <= file_len)
        .ok_or_else(|| broken("its offset table is not where this crate's writers put it"))?;
    let mut table = vec![0u8; table_bytes as usize];
    file.read_exact_at(&mut table, walk.end as u64)
        .map_err(|e| Error::read(path, e))?;
    let offsets: Vec<u64> = table
        .chunks_exact(8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("eight bytes")))
        .collect();
    if offsets.windows(2).any(|w| w[0] >= w[1]) || offsets.last() >= Some(&file_len) {
        return Err(broken("its chunks are not in table order"));
    }
    let attributes = walk.headers.into_iter().next().expect("one header");
    let stated = attributes
        .iter()
        .find(|a| a.name == "chunkCount" && a.kind == "int" && a.value.len() == 4)
        .map(|a| i32::from_le_bytes(a.value[..].try_into().expect("four bytes")));
    if stated.is_some_and(|n| n as usize != offsets.len()) {
        return Err(broken("its chunkCount disagrees with its offset table"));
    }
    Ok(ScannedPart {
        attributes,
        flags,
        offsets,
        file_len,
    })
}

fn string_attribute(name: &str, value: &str) -> RawAttribute {
    RawAttribute {
        name: name.into(),
        kind: "string".into(),
        value: value.as_bytes().to_vec(),
    }
}

/// The part's header in the multi-part file: the part file's attributes, `name`, and
/// `type`, `chunkCount` and `view` where the part file has none (flat files have no `type` nor
/// `chunkCount`; a merge carrying the first input's attributes carries its `view`).
fn part_header(part: &PartFile, scanned: &ScannedPart) -> Vec<RawAttribute> {
    let has = |name: &str| scanned.attributes.iter().any(|a| a.name == name);
    let mut attributes: Vec<RawAttribute> = scanned
        .attributes
        .iter()
        .filter(|a| a.name != "name")
        .cloned()
        .collect();
    attributes.push(string_attribute("name", &part.name));
    if !has("type") {
        let deep = scanned.flags & NON_IMAGE_FLAG != 0;
        let kind = if deep {
            "deepscanline"
        } else {
            "scanlineimage"
        };
        attributes.push(string_attribute("type", kind));
    }
    if !has("chunkCount") {
        attributes.push(RawAttribute {
            name: "chunkCount".into(),
            kind: "int".into(),
            value: (scanned.offsets.len() as i32).to_le_bytes().to_vec(),
        });
    }
    if let (Some(view), false) = (&part.view, has("view")) {
        attributes.push(string_attribute("view", view));
    }
    attributes
}

/// Write `output` as a multi-part file whose parts are `parts` in order (through a temporary
/// file and a rename, as every output). The part files are left as they are.
pub fn join_parts(output: &Path, parts: &[PartFile]) -> Result<()> {
    let scanned: Vec<ScannedPart> = parts
        .iter()
        .map(|p| scan_part(&p.path))
        .collect::<Result<_>>()?;
    let mut flags = 2 | MULTI_PART_FLAG;
    let mut headers = Vec::new();
    for (part, scan) in parts.iter().zip(&scanned) {
        flags |= scan.flags & (LONG_NAMES_FLAG | NON_IMAGE_FLAG);
        // In OpenEXR's order, as the single-part writers write them (and as some of OpenEXR's
        // readers need: see `write_attributes`).
        let mut attributes = part_header(part, scan);
        in_openexr_order(&mut attributes, |a| a.name.as_bytes());
        for attribute in attributes {
            attribute.write(&mut headers);
        }
        headers.push(0);
    }
    headers.push(0);
    let chunks: usize = scanned.iter().map(|s| s.offsets.len()).sum();
    // Where each chunk lands: after the magic, flags, headers and tables, each chunk four bytes
    // longer (its part number).
    let mut at = (8 + headers.len() + 8 * chunks) as u64;
    let mut tables = Vec::with_capacity(8 * chunks);
    for scan in &scanned {
        for (i, &offset) in scan.offsets.iter().enumerate() {
            let end = scan.offsets.get(i + 1).copied().unwrap_or(scan.file_len);
            tables.extend(at.to_le_bytes());
            at += 4 + (end - offset);
        }
    }
    let file = AtomicFile::create(output)?;
    {
        let mut out = WriteBehind::new(file.file());
        let put = |bytes: &[u8], out: &mut WriteBehind<&File>| {
            out.write_all(bytes).map_err(|e| file.error(e))
        };
        put(&[0x76, 0x2f, 0x31, 0x01], &mut out)?;
        put(&flags.to_le_bytes(), &mut out)?;
        put(&headers, &mut out)?;
        put(&tables, &mut out)?;
        for (number, (part, scan)) in parts.iter().zip(&scanned).enumerate() {
            let mut input = BufReader::with_capacity(
                1 << 20,
                File::open(&part.path).map_err(|e| Error::read(&part.path, e))?,
            );
            input
                .seek(SeekFrom::Start(scan.offsets[0]))
                .map_err(|e| Error::read(&part.path, e))?;
            let number = (number as i32).to_le_bytes();
            let mut chunk = Vec::new();
            for (i, &offset) in scan.offsets.iter().enumerate() {
                let end = scan.offsets.get(i + 1).copied().unwrap_or(scan.file_len);
                chunk.resize((end - offset) as usize, 0);
                input
                    .read_exact(&mut chunk)
                    .map_err(|e| Error::read(&part.path, e))?;
                put(&number, &mut out)?;
                put(&chunk, &mut out)?;
            }
        }
        out.flush().map_err(|e| file.error(e))?;
    }
    file.commit()
}
