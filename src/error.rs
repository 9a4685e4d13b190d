//! One error type for the whole crate.
//!
//! Every error a user can see names the file (or the option) it is about and says what is wrong
//! in one line, so the CLI can print it as it is. An I/O failure keeps its `std::io::Error` as
//! the [`source`](std::error::Error::source), so a caller can still ask what kind it was
//! (not found, permission denied, disk full) instead of parsing a message.

use std::fmt;
use std::path::{Path, PathBuf};

/// An error with the context a user needs to act on it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A named file could not be read or written.
    #[error("{}: cannot {action}: {source}", path.display())]
    Io {
        /// The file concerned.
        path: PathBuf,
        /// What was being done to it.
        action: IoAction,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// Something is wrong with a named file's contents: malformed or unsupported.
    #[error("{}: {message}", path.display())]
    File {
        /// The file concerned.
        path: PathBuf,
        /// What is wrong, in words.
        message: String,
    },
    /// A malformed or unsupported image, before a file name is known (in-memory decoding).
    #[error("{0}")]
    Format(String),
    /// Options or inputs that do not fit together.
    #[error("{0}")]
    Usage(String),
    /// The OpenGL backend could not be used or failed, or a GL limit was reached.
    #[error("OpenGL: {0}")]
    Gl(String),
    /// A GL buffer did not fit: `GL_OUT_OF_MEMORY`, or more bytes than the driver binds as one
    /// storage block. The GL merge retries such a band as smaller bands before giving up.
    #[error("OpenGL: {0}")]
    GlMemory(String),
    /// An invariant of this crate does not hold: a bug, not a problem with the inputs or the GL.
    #[error("internal error (a bug in deepmerge): {0}")]
    Internal(String),
    /// An error while merging named inputs that did not name a file itself (a GL limit, a
    /// usage error found by the engine): the inputs say what was being merged.
    #[error("merging {inputs}: {source}")]
    Merge {
        /// The inputs, comma-separated.
        inputs: String,
        /// What went wrong.
        #[source]
        source: Box<Error>,
    },
}

/// What was being done to a file when an I/O error struck ([`Error::Io`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoAction {
    /// Reading it.
    Read,
    /// Creating or writing it (or its temporary file).
    Write,
}

impl fmt::Display for IoAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IoAction::Read => "read",
            IoAction::Write => "write",
        })
    }
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// A format error before a file is known; [`Error::in_file`] attaches the file later.
    pub fn format(message: impl Into<String>) -> Self {
        Error::Format(message.into())
    }

    /// Attach a file name to a format error (other errors pass through unchanged).
    pub fn in_file(self, path: &Path) -> Self {
        match self {
            Error::Format(message) => Error::File {
                path: path.to_path_buf(),
                message,
            },
            other => other,
        }
    }

    /// Name the merge's `inputs` in an error that names no file (see [`Error::Merge`]).
    pub fn in_merge(self, inputs: &[&Path]) -> Self {
        match self {
            e @ (Error::Io { .. } | Error::File { .. } | Error::Merge { .. }) => e,
            other => Error::Merge {
                inputs: inputs
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                source: Box::new(other),
            },
        }
    }

    /// An I/O error while reading `path`.
    pub fn read(path: &Path, source: std::io::Error) -> Self {
        Error::Io {
            path: path.to_path_buf(),
            action: IoAction::Read,
            source,
        }
    }

    /// An I/O error while writing `path`.
    pub fn write(path: &Path, source: std::io::Error) -> Self {
        Error::Io {
            path: path.to_path_buf(),
            action: IoAction::Write,
            source,
        }
    }

    /// An invariant that does not hold (see [`Error::Internal`]).
    pub fn internal(message: impl Into<String>) -> Self {
        Error::Internal(message.into())
    }

    /// An error about a file.
    pub fn file(path: &Path, message: impl Into<String>) -> Self {
        Error::File {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn io_errors_keep_the_io_error_as_their_source() {
        let cause = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "no entry");
        let err = Error::write(Path::new("out/x.exr"), cause);
        assert_eq!(err.to_string(), "out/x.exr: cannot write: no entry");
        let source = err.source().expect("an I/O error has a source");
        let io = source
            .downcast_ref::<std::io::Error>()
            .expect("the source is the std::io::Error");
        assert_eq!(io.kind(), std::io::ErrorKind::PermissionDenied);
    }

    #[test]
    fn a_real_read_failure_names_the_file_on_one_line() {
        let path = Path::new("/nonexistent/deepmerge-test.exr");
        let err = Error::read(path, std::fs::read(path).unwrap_err());
        let text = err.to_string();
        assert!(text.starts_with("/nonexistent/deepmerge-test.exr: cannot read: "));
        assert_eq!(text.lines().count(), 1);
        let io = err.source().unwrap().downcast_ref::<std::io::Error>();
        assert_eq!(io.unwrap().kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn merge_errors_name_the_inputs_unless_they_name_a_file() {
        let inputs = [Path::new("a.exr"), Path::new("b.exr")];
        let gl = Error::Gl("a buffer of 9 bytes is too large".into()).in_merge(&inputs);
        assert_eq!(
            gl.to_string(),
            "merging a.exr, b.exr: OpenGL: a buffer of 9 bytes is too large"
        );
        assert!(gl.source().is_some(), "keeps the engine's error");
        let file = Error::file(Path::new("b.exr"), "bad").in_merge(&inputs);
        assert_eq!(file.to_string(), "b.exr: bad");
    }

    #[test]
    fn other_errors_have_no_source() {
        assert!(Error::file(Path::new("a.exr"), "malformed")
            .source()
            .is_none());
        assert!(Error::internal("x").source().is_none());
    }
}
