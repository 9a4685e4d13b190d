//! `deepmerge._deepmerge`: the native half of the `deepmerge` Python package.
//!
//! - [`image`]: the `DeepImage` and `FlatImage` classes, whose arrays are read-only numpy views
//!   of the Rust buffers (no copy), and building a `DeepImage` from arrays.
//! - [`functions`]: `read`, `merge`, `flatten`, `holdout`, `write`, `info`; each converts its
//!   arguments, releases the GIL and calls [`engine`], the one file that calls the library.
//! - [`ops`]: the deep operations (`deep_slice`, `crop`, ... one per row of the library's table
//!   `deepmerge::ops::OPERATIONS`), file to file as the CLI's commands.
//! - [`graph`]: `Graph`, a compositing graph built node by node (or read from a script), run in
//!   one streamed pass as `deepmerge comp`.
//! - [`errors`]: the library's errors as the `deepmerge.Error` family, with the CLI's messages.
//!
//! The Python half (`deepmerge/__init__.py`) re-exports these and adds the conversions to and
//! from the OpenEXR module's and OpenImageIO's deep forms.

mod engine;
mod errors;
mod functions;
mod graph;
mod image;
mod ops;

use pyo3::prelude::*;

/// Native part of the `deepmerge` package; import `deepmerge`, not this.
#[pymodule]
fn _deepmerge(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<image::PyDeepImage>()?;
    module.add_class::<image::PyFlatImage>()?;
    functions::register(module)?;
    ops::register(module)?;
    graph::register(module)?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    let operations: Vec<&str> = deepmerge::ops::OPERATIONS
        .iter()
        .map(|s| s.python)
        .collect();
    module.add(
        "OPERATIONS",
        pyo3::types::PyTuple::new(module.py(), operations)?,
    )?;
    module.add("GiB", 1u64 << 30)?;
    module.add(
        "DEFAULT_MEMORY_BUDGET",
        deepmerge::stream::DEFAULT_MEMORY_BUDGET,
    )?;
    warn_of_unknown_settings(module.py())?;
    Ok(())
}

/// A `DEEPMERGE_*` variable the library does not read, most likely a misspelt measurement
/// switch, said once at import as a `UserWarning` (the CLI says it at its start), naming the
/// nearest setting: otherwise it would be silently a run without the switch.
fn warn_of_unknown_settings(py: Python<'_>) -> PyResult<()> {
    let category = py.get_type::<pyo3::exceptions::PyUserWarning>();
    for (name, nearest) in deepmerge::env_setting::unknown_settings() {
        let message = deepmerge::env_setting::unknown_setting_warning(&name, nearest);
        let message = std::ffi::CString::new(message).expect("variable names hold no NUL");
        PyErr::warn(py, &category, &message, 1)?;
    }
    Ok(())
}
