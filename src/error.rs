//! One error type for the whole crate, and the kinds a caller tells errors apart by.
//!
//! Every error a user can see names the file (or the option) it is about and says what is wrong
//! in one line, so the CLI can print it as it is. [`Error::kind`] says what sort of failure it is
//! ([`ErrorKind`]: unsupported, malformed, over the memory budget, usage, I/O, OpenGL, a bug),
//! which is what the CLI's exit codes and the Python exception classes are mapped from. A
//! foreign cause (the operating system's `std::io::Error`, the `exr` crate's header error, an
//! error of this crate given more context) is kept as the
//! [`source`](std::error::Error::source), so a caller can still ask what it was instead of
//! parsing a message; the message prints the cause's text too, so the one line is complete.

use std::fmt;
use std::path::{Path, PathBuf};

/// A foreign error kept as an [`Error`]'s source.
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What sort of failure an [`Error`] is: what a caller decides on (retry with more memory,
/// convert the file with another tool, fix the options) without parsing the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A file could not be read or written; the operating system's error is the source.
    Io,
    /// A file (or an in-memory image) is corrupt or inconsistent: truncated, bad tables,
    /// packed data that does not unpack, counts that disagree, NaN depths.
    Malformed,
    /// A valid file that uses what deepmerge does not read: a compression it has no codec for
    /// in deep parts (PIZ, HTJ2K, ...), mip or rip levels, a flat file where deep input is
    /// needed.
    Unsupported,
    /// Refused because it would need more memory than the memory budget allows; a larger budget
    /// lets it run.
    OverBudget,
    /// Options or arguments that do not fit together or do not fit the inputs, bad values, and
    /// a library API used out of order (a writer fed bands out of order).
    Usage,
    /// OpenGL could not be used or failed.
    Gl,
    /// An invariant of this crate does not hold: a bug in deepmerge.
    Internal,
}

impl ErrorKind {
    /// The kind's name in words, as the documentation's table gives it.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Io => "I/O",
            ErrorKind::Malformed => "malformed",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::OverBudget => "over budget",
            ErrorKind::Usage => "usage",
            ErrorKind::Gl => "OpenGL",
            ErrorKind::Internal => "internal",
        }
    }
}

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
    /// Something is wrong with a named file's contents (malformed, unsupported, over the memory
    /// budget), or with what was asked of it.
    #[error("{}: {message}{}", path.display(), CauseText(source))]
    File {
        /// The file concerned.
        path: PathBuf,
        /// What sort of problem it is.
        kind: ErrorKind,
        /// What is wrong, in words.
        message: String,
        /// The foreign error behind it, if any (its text ends the message).
        source: Option<Cause>,
    },
    /// A problem with an image before a file name is known (in-memory decoding), or about
    /// several inputs at once; [`Error::in_file`] turns it into [`Error::File`].
    #[error("{message}{}", CauseText(source))]
    Format {
        /// What sort of problem it is.
        kind: ErrorKind,
        /// What is wrong, in words.
        message: String,
        /// The foreign error behind it, if any (its text ends the message).
        source: Option<Cause>,
    },
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

/// `": cause"` after a message when there is a cause, else nothing.
struct CauseText<'a>(&'a Option<Cause>);

impl fmt::Display for CauseText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(cause) => write!(f, ": {cause}"),
            None => Ok(()),
        }
    }
}

/// What was being done to a file when an I/O error struck ([`Error::Io`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoAction {
    /// Reading it.
    Read,
    /// Creating or writing it (or its temporary file).
    Write,
    /// Creating it as a folder.
    CreateFolder,
}

impl fmt::Display for IoAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IoAction::Read => "read",
            IoAction::Write => "write",
            IoAction::CreateFolder => "create folder",
        })
    }
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// What sort of failure this is. A merge error ([`Error::Merge`]) is of the kind of what
    /// went wrong inside it.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Io { .. } => ErrorKind::Io,
            Error::File { kind, .. } | Error::Format { kind, .. } => *kind,
            Error::Usage(_) => ErrorKind::Usage,
            Error::Gl(_) | Error::GlMemory(_) => ErrorKind::Gl,
            Error::Internal(_) => ErrorKind::Internal,
            Error::Merge { source, .. } => source.kind(),
        }
    }

    /// A malformed image before a file is known; [`Error::in_file`] attaches the file later.
    pub fn format(message: impl Into<String>) -> Self {
        Self::of_kind(ErrorKind::Malformed, message)
    }

    /// A valid image that uses what deepmerge does not read ([`ErrorKind::Unsupported`]),
    /// before a file is known.
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::of_kind(ErrorKind::Unsupported, message)
    }

    /// A refusal of the memory budget ([`ErrorKind::OverBudget`]): `what` would need `needed`
    /// bytes, over the `budget`. Every refusal reads the same way: "WHAT would need SIZE, over
    /// the memory budget of SIZE". The library names no option to raise it: the front ends add
    /// their own words for that (the CLI's flag, Python's keyword).
    pub fn over_budget(what: impl fmt::Display, needed: u64, budget: u64) -> Self {
        Self::of_kind(
            ErrorKind::OverBudget,
            format!(
                "{what} would need {}, over the memory budget of {}",
                crate::size::human_bytes(needed),
                crate::size::human_bytes(budget)
            ),
        )
    }

    /// An image error of `kind` with `message` and no file yet ([`Error::in_file`] attaches one).
    pub fn of_kind(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error::Format {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// The `exr` crate's `error` with `context` ("cannot parse the EXR header"), kept as the
    /// source: what it does not support is [`ErrorKind::Unsupported`], anything else
    /// (invalid data, a read past the end of the bytes) [`ErrorKind::Malformed`].
    pub fn from_exr(context: impl Into<String>, error: exr::error::Error) -> Self {
        let kind = match error {
            exr::error::Error::NotSupported(_) => ErrorKind::Unsupported,
            _ => ErrorKind::Malformed,
        };
        Error::Format {
            kind,
            message: context.into(),
            source: Some(Box::new(error)),
        }
    }

    /// This error with `context` in front ("chunk 7: ..."), of the same kind. A file or image
    /// error keeps its own source and gets the context in its message; any other error becomes
    /// the source of an image error that says where it struck.
    pub fn context(self, context: impl fmt::Display) -> Self {
        match self {
            Error::Format {
                kind,
                message,
                source,
            } => Error::Format {
                kind,
                message: format!("{context}: {message}"),
                source,
            },
            Error::File {
                path,
                kind,
                message,
                source,
            } => Error::File {
                path,
                kind,
                message: format!("{context}: {message}"),
                source,
            },
            other => Error::Format {
                kind: other.kind(),
                message: context.to_string(),
                source: Some(Box::new(other)),
            },
        }
    }

    /// Attach a file name to an image error (other errors pass through unchanged).
    pub fn in_file(self, path: &Path) -> Self {
        match self {
            Error::Format {
                kind,
                message,
                source,
            } => Error::File {
                path: path.to_path_buf(),
                kind,
                message,
                source,
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

    /// A malformed file: something wrong with its contents ([`ErrorKind::Malformed`]).
    pub fn file(path: &Path, message: impl Into<String>) -> Self {
        Error::format(message).in_file(path)
    }

    /// An I/O error while creating the folder `path`.
    pub fn create_folder(path: &Path, source: std::io::Error) -> Self {
        Error::Io {
            path: path.to_path_buf(),
            action: IoAction::CreateFolder,
            source,
        }
    }
}

/// The value named `text` among `choices` (name, value), case-insensitively; else a usage error
/// that says what `what` takes. Every option enum's `FromStr` is this, so the CLI, Python and
/// the viewer accept the same names and refuse others in the same words.
pub(crate) fn parse_name<T: Copy, const N: usize>(
    what: &str,
    text: &str,
    choices: [(&str, T); N],
) -> Result<T> {
    choices
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(text))
        .map(|&(_, value)| value)
        .ok_or_else(|| {
            let names: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
            Error::Usage(format!(
                "{what} must be one of {}, not {text:?}",
                names.join(", ")
            ))
        })
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
    fn foreign_causes_are_kept_as_the_source_and_printed() {
        let unsupported = exr::error::Error::NotSupported("deep mip maps".into());
        let err =
            Error::from_exr("cannot parse the EXR header", unsupported).in_file(Path::new("a.exr"));
        assert_eq!(err.kind(), ErrorKind::Unsupported);
        assert_eq!(
            err.to_string(),
            format!(
                "a.exr: cannot parse the EXR header: {}",
                exr::error::Error::NotSupported("deep mip maps".into())
            )
        );
        let cause = err.source().expect("the exr crate's error");
        assert!(cause.downcast_ref::<exr::error::Error>().is_some());
        let invalid = exr::error::Error::Invalid("window".into());
        assert_eq!(
            Error::from_exr("header", invalid).kind(),
            ErrorKind::Malformed
        );
    }

    #[test]
    fn context_keeps_the_kind_and_the_cause() {
        let inner = Error::unsupported("PIZ compression is not supported for deep parts");
        let err = inner.context("chunk 3").in_file(Path::new("a.exr"));
        assert_eq!(err.kind(), ErrorKind::Unsupported);
        assert_eq!(
            err.to_string(),
            "a.exr: chunk 3: PIZ compression is not supported for deep parts"
        );
        // An error that is not about an image becomes the cause, of the same kind.
        let io = Error::read(
            Path::new("b.exr"),
            std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "short"),
        );
        let err = io.context("block (0, 0)");
        assert_eq!(err.kind(), ErrorKind::Io);
        assert_eq!(err.to_string(), "block (0, 0): b.exr: cannot read: short");
        assert!(err.source().unwrap().downcast_ref::<Error>().is_some());
    }

    #[test]
    fn a_budget_refusal_names_no_flag_and_shows_small_sizes() {
        let err = Error::over_budget("its data window of 4 x 4 pixels", 1536, 512);
        assert_eq!(err.kind(), ErrorKind::OverBudget);
        assert_eq!(
            err.to_string(),
            "its data window of 4 x 4 pixels would need 1.5 KiB, over the memory budget of \
             512 bytes"
        );
        let merged = err.in_merge(&[Path::new("a.exr")]);
        assert_eq!(
            merged.kind(),
            ErrorKind::OverBudget,
            "a merge error has its cause's kind"
        );
    }

    #[test]
    fn other_errors_have_no_source() {
        assert!(Error::file(Path::new("a.exr"), "malformed")
            .source()
            .is_none());
        assert!(Error::internal("x").source().is_none());
    }
}
