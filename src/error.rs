//! One error type for the whole crate.
//!
//! Every error a user can see names the file (or the option) it is about and says what is wrong
//! in one line, so the CLI can print it as it is.

use std::path::{Path, PathBuf};

/// An error with the context a user needs to act on it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Something is wrong with a named file: unreadable, malformed or unsupported.
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
    /// The OpenGL backend could not be used or failed.
    #[error("OpenGL: {0}")]
    Gl(String),
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

    /// An error about a file.
    pub fn file(path: &Path, message: impl Into<String>) -> Self {
        Error::File {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }
}
