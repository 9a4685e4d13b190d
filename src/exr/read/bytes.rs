//! Where a reader's bytes come from: a file read with positioned reads (`pread`, not mapped:
//! mapped pages would count in the resident set the memory budget is about), or bytes already
//! in memory (a fuzzer's input, a test's encoded file). Every read is checked against the
//! source's length, so a hostile offset gives an error, never a short read.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The bytes of one EXR file.
pub enum ByteSource {
    /// A file on disk, read where asked.
    File { path: PathBuf, file: File, len: u64 },
    /// A whole file's bytes, held.
    Memory(Vec<u8>),
}

impl ByteSource {
    /// Open `path` for positioned reads.
    pub fn open(path: &Path) -> Result<ByteSource> {
        let file = File::open(path).map_err(|e| Error::read(path, e))?;
        let len = file.metadata().map_err(|e| Error::read(path, e))?.len();
        Ok(ByteSource::File {
            path: path.to_path_buf(),
            file,
            len,
        })
    }

    /// The file whose bytes are `bytes`.
    pub fn from_bytes(bytes: Vec<u8>) -> ByteSource {
        ByteSource::Memory(bytes)
    }

    /// Bytes in the source.
    pub fn len(&self) -> u64 {
        match self {
            ByteSource::File { len, .. } => *len,
            ByteSource::Memory(bytes) => bytes.len() as u64,
        }
    }

    /// Whether the source holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The file's path; `None` for bytes in memory.
    pub fn path(&self) -> Option<&Path> {
        match self {
            ByteSource::File { path, .. } => Some(path),
            ByteSource::Memory(_) => None,
        }
    }

    /// `len` bytes from `at`; reading past the end is the file's fault (truncated).
    pub fn read_exact_at(&self, at: u64, len: usize) -> Result<Vec<u8>> {
        let end = at.checked_add(len as u64);
        if end.is_none_or(|end| end > self.len()) {
            return Err(Error::format(
                "file is truncated: a read reaches past the end",
            ));
        }
        match self {
            ByteSource::File { path, file, .. } => {
                let mut buf = vec![0u8; len];
                file.read_exact_at(&mut buf, at)
                    .map_err(|e| Error::read(path, e))?;
                Ok(buf)
            }
            ByteSource::Memory(bytes) => Ok(bytes[at as usize..at as usize + len].to_vec()),
        }
    }
}
