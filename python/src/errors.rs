//! The library's [`deepmerge::Error`] as Python exceptions, by its [`ErrorKind`].
//!
//! The classes are defined in Python (`deepmerge/_errors.py`), because each derives from both
//! `deepmerge.Error` and a built-in (`OSError`, `ValueError`, `RuntimeError`) so that callers can
//! catch either; a class made in Rust can have only one base. The message is the error's
//! `Display`, the line the CLI prints after `deepmerge: error: `, except that a refusal of the
//! memory budget names the `memory_budget` keyword where the CLI names its flag. Which class
//! each kind raises is the table of docs/cli.md ("Exit codes"), beside the CLI's exit codes.

use deepmerge::error::ErrorKind;
use deepmerge::Error;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

/// The Python class for each kind of error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A file could not be read or written: `deepmerge.FileError` (an `OSError`).
    File,
    /// A malformed file or array: `deepmerge.FormatError` (a `ValueError`).
    Format,
    /// A valid file that uses what deepmerge does not read: `deepmerge.UnsupportedError` (a
    /// `FormatError`).
    Unsupported,
    /// Options or inputs that do not fit together: `deepmerge.UsageError` (a `ValueError`).
    Usage,
    /// A refusal of the memory budget: `deepmerge.BudgetError` (a `UsageError`).
    Budget,
    /// OpenGL could not be used or failed: `deepmerge.GLError` (a `RuntimeError`).
    Gl,
    /// A bug in deepmerge: `deepmerge.Error` itself.
    Internal,
}

impl Kind {
    fn of(error: &Error) -> Kind {
        match error.kind() {
            ErrorKind::Io => Kind::File,
            ErrorKind::Malformed => Kind::Format,
            ErrorKind::Unsupported => Kind::Unsupported,
            ErrorKind::OverBudget => Kind::Budget,
            ErrorKind::Usage => Kind::Usage,
            ErrorKind::Gl => Kind::Gl,
            ErrorKind::Internal => Kind::Internal,
        }
    }

    fn class_name(self) -> &'static str {
        match self {
            Kind::File => "FileError",
            Kind::Format => "FormatError",
            Kind::Unsupported => "UnsupportedError",
            Kind::Usage => "UsageError",
            Kind::Budget => "BudgetError",
            Kind::Gl => "GLError",
            Kind::Internal => "Error",
        }
    }
}

/// A Python exception of `kind` with `message`.
pub fn new_error(kind: Kind, message: impl Into<String>) -> PyErr {
    let message = message.into();
    Python::attach(|py| match error_class(py, kind) {
        Ok(class) => match class.call1((message,)) {
            Ok(value) => PyErr::from_value(value),
            Err(e) => e,
        },
        Err(e) => e,
    })
}

/// A usage error (a bad argument), as `deepmerge.UsageError`.
pub fn usage(message: impl Into<String>) -> PyErr {
    new_error(Kind::Usage, message)
}

/// A bad array or image, as `deepmerge.FormatError`.
pub fn format(message: impl Into<String>) -> PyErr {
    new_error(Kind::Format, message)
}

/// Convert a library error, keeping the OS error number of an I/O error in `errno`.
pub fn to_py(error: Error) -> PyErr {
    let errno = match &error {
        Error::Io { source, .. } => source.raw_os_error(),
        _ => None,
    };
    let kind = Kind::of(&error);
    let message = match kind {
        // The library names no option; Python's is the keyword.
        Kind::Budget => format!("{error} (raise it with the memory_budget keyword)"),
        _ => error.to_string(),
    };
    let err = new_error(kind, message);
    if let Some(errno) = errno {
        // Only `errno`: setting `filename` too would make OSError rewrite the message.
        Python::attach(|py| {
            let _ = err.value(py).setattr("errno", errno);
        });
    }
    err
}

fn error_class(py: Python<'_>, kind: Kind) -> PyResult<Bound<'_, PyType>> {
    static MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    let module =
        MODULE.get_or_try_init(py, || py.import("deepmerge._errors").map(Bound::unbind))?;
    Ok(module.bind(py).getattr(kind.class_name())?.cast_into()?)
}
