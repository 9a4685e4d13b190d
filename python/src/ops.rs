//! The deep operations as Python functions: `deep_slice`, `crop`, `transform`, `idselect`,
//! `deepen` and `recolor`, file to file,
//! streamed in bands exactly as the `deepmerge slice|crop|transform` commands run them
//! ([`deepmerge::ops::run_op`] with the same [`OpOutput`]), so the files have the CLI's bytes.
//! The flatten of one file is `merge([path], out=...)`, as `deepmerge IN -o OUT`.

use std::path::PathBuf;

use deepmerge::ops::{
    run_deepen, run_idselect, run_op, run_recolor, Crop, DeepOp, Deepen, IdSelect, Recolor, Slice,
    Transform,
};
use deepmerge::request::OutputRequest;
use deepmerge::stream::DEFAULT_MEMORY_BUDGET;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{to_py, usage};
use crate::functions::{budget_bytes, part_selector, Keywords, PartArg};

/// Add the functions to the module.
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(deep_slice, module)?)?;
    module.add_function(wrap_pyfunction!(crop, module)?)?;
    module.add_function(wrap_pyfunction!(transform, module)?)?;
    module.add_function(wrap_pyfunction!(idselect, module)?)?;
    module.add_function(wrap_pyfunction!(deepen, module)?)?;
    module.add_function(wrap_pyfunction!(recolor, module)?)?;
    Ok(())
}

/// The output options every operation shares: the CLI's `--compression`, `--no-deep-state`,
/// `--tidy`, `--part` and `--memory-budget` (bytes here), checked against `out` in Python's
/// keywords.
fn output_request(
    out: &std::path::Path,
    compression: Option<&str>,
    no_deep_state: bool,
    tidy: bool,
    part: Option<PartArg>,
    memory_budget: Option<&Bound<'_, PyAny>>,
) -> PyResult<OutputRequest> {
    let request = OutputRequest {
        compression: compression.map(str::parse).transpose().map_err(to_py)?,
        deep_state: !no_deep_state,
        tidy,
        part: part_selector(part),
        memory_budget: budget_bytes(memory_budget)?.unwrap_or(DEFAULT_MEMORY_BUDGET),
        ..OutputRequest::default()
    };
    request.check(out, &Keywords).map_err(to_py)?;
    Ok(request)
}

fn run(
    py: Python<'_>,
    op: &dyn DeepOp,
    input: PathBuf,
    out: PathBuf,
    request: OutputRequest,
) -> PyResult<()> {
    py.detach(|| {
        let options = request.stream_options(&out)?;
        run_op(op, &input, &out, &options, None)
    })
    .map_err(to_py)
}

/// Keep the part of every sample of the deep file ``input`` inside the depth range
/// ``[near, far)`` and write it to ``out``, as ``deepmerge slice``: volumes crossing a plane are
/// split with the tidy's rule, points exactly at ``far`` belong to the back, ``keep_outside``
/// keeps the complement. ``out`` is a deep EXR, or ``*.png`` for a preview of its flat
/// composite. ``compression``, ``no_deep_state``, ``tidy``, ``part`` and ``memory_budget``
/// (bytes) are the CLI's options.
#[pyfunction]
#[pyo3(signature = (input, out, near=None, far=None, keep_outside=false, *, compression=None, no_deep_state=false, tidy=false, part=None, memory_budget=None))]
#[allow(clippy::too_many_arguments)]
fn deep_slice(
    py: Python<'_>,
    input: PathBuf,
    out: PathBuf,
    near: Option<f32>,
    far: Option<f32>,
    keep_outside: bool,
    compression: Option<&str>,
    no_deep_state: bool,
    tidy: bool,
    part: Option<PartArg>,
    memory_budget: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let slice = Slice::named(near, far, keep_outside, &Keywords).map_err(to_py)?;
    let request = output_request(&out, compression, no_deep_state, tidy, part, memory_budget)?;
    run(py, &slice, input, out, request)
}

/// Keep the pixels of ``input`` inside the inclusive box ``(x0, y0, x1, y1)`` (or, with
/// ``keep_outside``, outside it) and write them to ``out``, as ``deepmerge crop``; the data
/// window shrinks to what remains. Options as ``deep_slice``.
#[pyfunction]
#[pyo3(signature = (input, out, r#box, keep_outside=false, *, compression=None, no_deep_state=false, tidy=false, part=None, memory_budget=None))]
#[allow(clippy::too_many_arguments)]
fn crop(
    py: Python<'_>,
    input: PathBuf,
    out: PathBuf,
    r#box: (i32, i32, i32, i32),
    keep_outside: bool,
    compression: Option<&str>,
    no_deep_state: bool,
    tidy: bool,
    part: Option<PartArg>,
    memory_budget: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let (x0, y0, x1, y1) = r#box;
    let crop = Crop::parse_named(&format!("{x0},{y0},{x1},{y1}"), keep_outside, &Keywords)
        .map_err(to_py)?;
    let request = output_request(&out, compression, no_deep_state, tidy, part, memory_budget)?;
    run(py, &crop, input, out, request)
}

/// Move ``input`` by whole pixels (``translate=(x, y)``) and map its depths to
/// ``Z * z_scale + z_offset`` (``z_scale > 0``), writing ``out``, as ``deepmerge transform``.
/// Options as ``deep_slice``.
#[pyfunction]
#[pyo3(signature = (input, out, translate=None, z_offset=0.0, z_scale=1.0, *, compression=None, no_deep_state=false, tidy=false, part=None, memory_budget=None))]
#[allow(clippy::too_many_arguments)]
fn transform(
    py: Python<'_>,
    input: PathBuf,
    out: PathBuf,
    translate: Option<(i32, i32)>,
    z_offset: f64,
    z_scale: f64,
    compression: Option<&str>,
    no_deep_state: bool,
    tidy: bool,
    part: Option<PartArg>,
    memory_budget: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let translate = translate.map(|(x, y)| format!("{x},{y}"));
    let transform =
        Transform::named(translate.as_deref(), z_offset, z_scale, &Keywords).map_err(to_py)?;
    let request = output_request(&out, compression, no_deep_state, tidy, part, memory_budget)?;
    run(py, &transform, input, out, request)
}

/// The `ids` argument as `--id` texts: one `"CHANNEL=N[,N...]"`, a list of them, or a dict
/// `{channel: id or [ids]}` (one condition per entry).
fn id_texts(ids: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    if let Ok(one) = ids.extract::<String>() {
        return Ok(vec![one]);
    }
    if let Ok(dict) = ids.cast::<PyDict>() {
        return dict
            .iter()
            .map(|(channel, value)| {
                let channel: String = channel.extract()?;
                let list: Vec<u32> = match value.extract::<u32>() {
                    Ok(id) => vec![id],
                    Err(_) => value.extract().map_err(|_| {
                        usage(format!(
                            "ids[{channel:?}] must be an id or a list of ids (unsigned 32-bit)"
                        ))
                    })?,
                };
                let list: Vec<String> = list.iter().map(u32::to_string).collect();
                Ok(format!("{channel}={}", list.join(",")))
            })
            .collect();
    }
    ids.extract::<Vec<String>>()
        .map_err(|_| usage("ids must be \"CHANNEL=N[,N...]\", a list of them, or {channel: ids}"))
}

/// Keep the samples of ``input`` whose id channels hold the given ids and write them to
/// ``out``, as ``deepmerge idselect``. ``ids`` is ``"CHANNEL=N[,N...]"``, a list of them (the
/// CLI's ``--id`` options: ANDed across, the ids of one ORed), or ``{channel: id or [ids]}``.
/// uint channels are compared exactly; half and float channels hold ids as whole numbers.
/// ``invert`` keeps the other samples; ``mask=PATH`` also writes the flat alpha of the kept
/// samples (a flat EXR, or ``*.png``). Other options as ``deep_slice``.
#[pyfunction]
#[pyo3(signature = (input, out, ids, invert=false, mask=None, *, compression=None, no_deep_state=false, tidy=false, part=None, memory_budget=None))]
#[allow(clippy::too_many_arguments)]
fn idselect(
    py: Python<'_>,
    input: PathBuf,
    out: PathBuf,
    ids: &Bound<'_, PyAny>,
    invert: bool,
    mask: Option<PathBuf>,
    compression: Option<&str>,
    no_deep_state: bool,
    tidy: bool,
    part: Option<PartArg>,
    memory_budget: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let select = IdSelect::parse_named(&id_texts(ids)?, invert, &Keywords).map_err(to_py)?;
    let request = output_request(&out, compression, no_deep_state, tidy, part, memory_budget)?;
    py.detach(|| run_idselect(&select, &input, &out, mask.as_deref(), request))
        .map_err(to_py)
}

/// Make the flat EXR ``input`` deep, one sample per pixel, and write it to ``out``, as
/// ``deepmerge deepen``: the depth is the constant ``z`` or the channel ``z_channel`` (exactly
/// one of them), the back depth ``Z + thickness`` or the channel ``zback_channel`` (neither:
/// point samples). Pixels whose every channel is zero get no sample; the input needs an alpha
/// channel. ``part`` picks the flat part; other options as ``deep_slice``.
#[pyfunction]
#[pyo3(signature = (input, out, z=None, z_channel=None, thickness=None, zback_channel=None, *, compression=None, no_deep_state=false, tidy=false, part=None, memory_budget=None))]
#[allow(clippy::too_many_arguments)]
fn deepen(
    py: Python<'_>,
    input: PathBuf,
    out: PathBuf,
    z: Option<f32>,
    z_channel: Option<&str>,
    thickness: Option<f32>,
    zback_channel: Option<&str>,
    compression: Option<&str>,
    no_deep_state: bool,
    tidy: bool,
    part: Option<PartArg>,
    memory_budget: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let deepen = Deepen::named(z, z_channel, thickness, zback_channel, &Keywords).map_err(to_py)?;
    let request = output_request(&out, compression, no_deep_state, tidy, part, memory_budget)?;
    py.detach(|| run_deepen(&deepen, &input, &out, request))
        .map_err(to_py)
}

/// Give the deep EXR ``deep`` the colour of the flat EXR ``flat`` and write it to ``out``, as
/// ``deepmerge recolor``: the samples keep their depths and opacity, and each takes the share
/// ``C * a / A`` of the flat colour ``C`` (``A`` the pixel's flattened alpha), so that ``out``
/// flattens to the flat colour wherever ``A > 0``. ``target_alpha`` also scales the
/// opacities so that the flattened alpha is the flat alpha. Other options as ``deep_slice``
/// (``part`` picks the deep part).
#[pyfunction]
#[pyo3(signature = (deep, flat, out, target_alpha=false, *, compression=None, no_deep_state=false, tidy=false, part=None, memory_budget=None))]
#[allow(clippy::too_many_arguments)]
fn recolor(
    py: Python<'_>,
    deep: PathBuf,
    flat: PathBuf,
    out: PathBuf,
    target_alpha: bool,
    compression: Option<&str>,
    no_deep_state: bool,
    tidy: bool,
    part: Option<PartArg>,
    memory_budget: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let request = output_request(&out, compression, no_deep_state, tidy, part, memory_budget)?;
    py.detach(|| run_recolor(Recolor { target_alpha }, &deep, &flat, &out, request))
        .map_err(to_py)
}
