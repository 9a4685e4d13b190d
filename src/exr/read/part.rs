//! The one part reader: what every decoder of a part reads first, read once and in one order,
//! as OpenEXRCore's `extract_chunk_table` does. It reads a file's headers (a growing prefix,
//! never the whole file), picks the part, lets the decoder check what it must know of the
//! part (its codec, its tiles, its channels), works out the block geometry, holds the window
//! against the memory budget before anything per row is reserved, checks the chunk count the
//! header states against the window's, and reads the part's offset table.
//!
//! The deep decoder ([`super::deep`], `ChunkSource`) and the flat one ([`super::flat`],
//! `FlatSource`) sit on top: each is a [`PartKind`], which says the few things that differ
//! (which parts it reads, which codecs and tilings, what it holds per row), and each takes the
//! [`PartReader`] this module opens apart into its own fields.

use std::path::{Path, PathBuf};

use exr::meta::header::Header;
use exr::meta::{BlockDescription, MetaData};

use super::bytes::ByteSource;
use super::header::{expected_chunk_count, read_headers_of, PartInfo, PartSelector};
use crate::deep::Bounds;
use crate::error::{Error, Result};

/// What differs between the decoders on top of the part reader.
pub(crate) trait PartKind {
    /// What the decoder keeps of the part's compression (a codec, or who unpacks it).
    type Codec;

    /// The part `selector` picks among `infos`, or why none fits this decoder.
    fn select(infos: &[PartInfo], selector: &PartSelector) -> Result<usize>;

    /// The decoder's own checks of the picked part (codec, tiling, channels), in its order;
    /// the codec it will unpack with.
    fn check(header: &Header, info: &PartInfo) -> Result<Self::Codec>;

    /// Bytes the decoder holds for the whole run whatever the samples (per-row tables, a few
    /// rows of pixels), for a part of `block_height` rows per block. Checked against the
    /// budget before the offset table is read.
    fn held_bytes(info: &PartInfo, block_height: usize) -> u64;

    /// Whether the offset table may go on past the level-0 chunks (a flat mip-mapped part):
    /// then only level 0's entries are read; otherwise the count must be the window's exactly.
    const LEVELS_AFTER_LEVEL0: bool;
}

/// One part of a file, opened: its bytes, every header, the part picked, its block geometry
/// and its (level-0) offset table.
pub(crate) struct PartReader {
    /// The file's path for messages (empty for bytes in memory).
    pub path: PathBuf,
    /// The file's bytes, read where asked.
    pub bytes: ByteSource,
    /// Every part's header.
    pub meta: MetaData,
    /// The index of the part picked.
    pub part: usize,
    /// What the part's header says.
    pub info: PartInfo,
    /// Whether the file is multi-part (each chunk then starts with its part number).
    pub multipart: bool,
    /// Rows per block row (the scanline block height or the tile height), at least 1.
    pub block_height: usize,
    /// The tile width of a tiled part.
    pub tile_width: Option<usize>,
    /// The part's offset table (level 0's entries).
    pub offsets: Vec<u64>,
}

impl PartReader {
    /// Open the part of `bytes` (the file `path`) that `selector` picks for the decoder `K`,
    /// within `budget` bytes (see the module docs for the order of the steps); the part and
    /// the codec `K` checked.
    pub fn open<K: PartKind>(
        path: &Path,
        bytes: ByteSource,
        selector: &PartSelector,
        budget: u64,
    ) -> Result<(PartReader, K::Codec)> {
        let file_len = bytes.len();
        let headers = read_headers_of(&bytes)?;
        let mut infos = headers.part_infos();
        let part = K::select(&infos, selector)?;
        let header = &headers.meta.headers[part];
        let codec = K::check(header, &infos[part])?;
        let (block_height, tile_width) = match header.blocks {
            BlockDescription::Tiles(t) => (t.tile_size.y(), Some(t.tile_size.x())),
            BlockDescription::ScanLines => (header.compression.scan_lines_per_block(), None),
        };
        let info = infos.swap_remove(part);
        let window = info.data_window;
        // A window is hostile until checked: what reading it holds whatever its samples must
        // fit the budget before anything per row is reserved.
        let held = K::held_bytes(&info, block_height);
        if held > budget {
            return Err(window_over_budget(window, held, budget));
        }
        let stated = header.chunk_count;
        let level0 = expected_chunk_count(header, window);
        let count_fits = if K::LEVELS_AFTER_LEVEL0 {
            stated >= level0
        } else {
            stated == level0
        };
        if !count_fits {
            return Err(Error::format(format!(
                "header says {stated} chunks, the data window needs {level0}"
            )));
        }
        // The offset tables of all parts follow the headers, in part order.
        let mut table_at = headers.table_start as u64;
        for h in &headers.meta.headers[..part] {
            table_at = table_at.saturating_add((h.chunk_count as u64).saturating_mul(8));
        }
        let table_bytes = (level0 as u64).saturating_mul(8);
        if table_at.saturating_add(table_bytes) > file_len {
            return Err(Error::format(
                "file is truncated inside the chunk offset table",
            ));
        }
        let table = bytes.read_exact_at(table_at, table_bytes as usize)?;
        let offsets = table
            .chunks_exact(8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
            .collect();
        Ok((
            PartReader {
                path: path.to_path_buf(),
                bytes,
                multipart: headers.meta.requirements.is_multilayer(),
                meta: headers.meta,
                part,
                info,
                block_height: block_height.max(1),
                tile_width,
                offsets,
            },
            codec,
        ))
    }
}

/// The one wording of a window the budget cannot hold.
fn window_over_budget(window: Bounds, held: u64, budget: u64) -> Error {
    Error::over_budget(
        format_args!(
            "its data window of {} x {} pixels",
            window.width(),
            window.height()
        ),
        held,
        budget,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exr::read::deep::ChunkSource;
    use crate::exr::read::flat::FlatSource;

    fn data(file: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(file)
    }

    /// Each part of a multi-part file is found with its own offset table: the part reader
    /// skips the tables of the parts before it, and the table it reads is the part's own
    /// (every offset lies past the headers and tables, inside the file).
    #[test]
    fn each_part_gets_its_own_offset_table() {
        let path = data("openexr-images/Stereo-Trunks-multipart.exr");
        let mut tables = Vec::new();
        for part in 0..2 {
            let source = ChunkSource::open(&path, &PartSelector::Index(part), 1 << 30).unwrap();
            let info = &crate::exr::read_parts_info(&path).unwrap()[part];
            assert_eq!(source.window, info.data_window);
            let bytes = ByteSource::open(&path).unwrap();
            let (reader, _) = PartReader::open::<super::super::deep::Deep>(
                &path,
                bytes,
                &PartSelector::Index(part),
                1 << 30,
            )
            .unwrap();
            assert_eq!(reader.part, part);
            assert!(reader.multipart);
            assert_eq!(reader.offsets.len(), reader.meta.headers[part].chunk_count);
            assert!(reader.offsets.iter().all(|&at| at < reader.bytes.len()));
            tables.push(reader.offsets);
        }
        // The two parts' chunks are different chunks of the file.
        assert!(tables[0].iter().all(|at| !tables[1].contains(at)));
    }

    /// The deep and the flat decoder refuse a window the budget cannot hold in the part
    /// reader's one wording, and each refuses the other's kind of part.
    #[test]
    fn both_decoders_share_the_budget_check_and_pick_their_own_parts() {
        let deep = data("openexr-images/Balls.exr");
        let flat = data("openexr-images/composited.exr");
        let deep_err = ChunkSource::open(&deep, &PartSelector::FirstDeep, 100)
            .err()
            .unwrap();
        let flat_err = FlatSource::open(&flat, &PartSelector::FirstDeep, 100)
            .err()
            .unwrap();
        for (e, window) in [(&deep_err, "764 x 406"), (&flat_err, "1022 x 574")] {
            assert_eq!(e.kind(), crate::error::ErrorKind::OverBudget, "{e}");
            let text = e.to_string();
            assert!(
                text.contains(&format!("its data window of {window} pixels")),
                "{text}"
            );
        }
        let e = FlatSource::open(&deep, &PartSelector::FirstDeep, 1 << 30)
            .err()
            .unwrap();
        assert!(
            e.to_string().contains("this command needs a flat image"),
            "{e}"
        );
        assert!(ChunkSource::open(&flat, &PartSelector::FirstDeep, 1 << 30).is_err());
    }
}
