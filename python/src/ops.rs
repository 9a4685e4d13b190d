//! The deep operations as Python functions: `deep_slice`, `crop`, `transform`, `idselect`,
//! `deepen`, `recolor`, `grade`, `reformat` and `points`, file to file,
//! streamed in bands exactly as the `deepmerge slice|crop|transform` commands run them
//! ([`deepmerge::ops::run_op`] with the same [`OpOutput`]), so the files have the CLI's bytes.
//! The flatten of one file is `merge([path], out=...)`, as `deepmerge IN -o OUT`.

use std::path::PathBuf;

use deepmerge::ops::reformat::DEFAULT_MAX_GATHER;
use deepmerge::ops::{
    run_deepen, run_grade, run_idselect, run_op, run_points, run_recolor, run_reformat, CameraMode,
    Crop, DeepOp, Deepen, Filter, Grade, GradeArgs, IdSelect, Points, Recolor, Reformat, Slice,
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
    module.add_function(wrap_pyfunction!(grade, module)?)?;
    module.add_function(wrap_pyfunction!(reformat, module)?)?;
    module.add_function(wrap_pyfunction!(points, module)?)?;
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

/// Move ``input`` by whole pixels (``translate=(x, y)``; the display window stays unless
/// ``move_display``) and map its depths to ``Z * z_scale + z_offset`` (``z_scale > 0``; half
/// depths are written as float), writing ``out``, as ``deepmerge transform``. Options as
/// ``deep_slice``.
#[pyfunction]
#[pyo3(signature = (input, out, translate=None, z_offset=0.0, z_scale=1.0, *, move_display=false, compression=None, no_deep_state=false, tidy=false, part=None, memory_budget=None))]
#[allow(clippy::too_many_arguments)]
fn transform(
    py: Python<'_>,
    input: PathBuf,
    out: PathBuf,
    translate: Option<(i32, i32)>,
    z_offset: f64,
    z_scale: f64,
    move_display: bool,
    compression: Option<&str>,
    no_deep_state: bool,
    tidy: bool,
    part: Option<PartArg>,
    memory_budget: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let translate = translate.map(|(x, y)| format!("{x},{y}"));
    let transform = Transform::named(translate.as_deref(), z_offset, z_scale, &Keywords)
        .map_err(to_py)?
        .moving_display(move_display);
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

/// A per-channel value as the CLI's text: a number, three numbers ``(r, g, b)``, a
/// ``{channel: value}`` dict, or the CLI's text itself.
fn channel_values(value: Option<&Bound<'_, PyAny>>, name: &str) -> PyResult<Option<String>> {
    let Some(value) = value else { return Ok(None) };
    if let Ok(text) = value.extract::<String>() {
        return Ok(Some(text));
    }
    if let Ok(v) = value.extract::<f64>() {
        return Ok(Some(v.to_string()));
    }
    if let Ok(dict) = value.cast::<PyDict>() {
        let items: Vec<String> = dict
            .iter()
            .map(|(k, v)| {
                Ok(format!(
                    "{}={}",
                    k.extract::<String>()?,
                    v.extract::<f64>()?
                ))
            })
            .collect::<PyResult<_>>()
            .map_err(|_: PyErr| usage(format!("{name} as a dict maps channel names to numbers")))?;
        return Ok(Some(items.join(",")));
    }
    if let Ok(list) = value.extract::<Vec<f64>>() {
        let items: Vec<String> = list.iter().map(f64::to_string).collect();
        return Ok(Some(items.join(",")));
    }
    Err(usage(format!(
        "{name} is a number, (r, g, b), {{channel: value}} or the CLI's text"
    )))
}

/// Colour-correct every sample of ``input`` and write ``out``, as ``deepmerge grade``:
/// ``lift``, ``gain``, ``offset``, ``gamma`` and ``contrast`` each take a number (every colour
/// channel), ``(r, g, b)``, ``{channel: value}`` or the CLI's text; ``saturation`` a number.
/// The correction works on unpremultiplied colour and is mixed by the depth mask ``near``,
/// ``far``, ``ramp`` and the id mask ``ids`` (as ``idselect``'s). Other options as
/// ``deep_slice``.
#[pyfunction]
#[pyo3(signature = (input, out, *, lift=None, gain=None, offset=None, gamma=None, contrast=None, saturation=None, near=None, far=None, ramp=0.0, ids=None, compression=None, no_deep_state=false, tidy=false, part=None, memory_budget=None))]
#[allow(clippy::too_many_arguments)]
fn grade(
    py: Python<'_>,
    input: PathBuf,
    out: PathBuf,
    lift: Option<&Bound<'_, PyAny>>,
    gain: Option<&Bound<'_, PyAny>>,
    offset: Option<&Bound<'_, PyAny>>,
    gamma: Option<&Bound<'_, PyAny>>,
    contrast: Option<&Bound<'_, PyAny>>,
    saturation: Option<f64>,
    near: Option<f64>,
    far: Option<f64>,
    ramp: f64,
    ids: Option<&Bound<'_, PyAny>>,
    compression: Option<&str>,
    no_deep_state: bool,
    tidy: bool,
    part: Option<PartArg>,
    memory_budget: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let (lift, gain, offset, gamma, contrast) = (
        channel_values(lift, "lift")?,
        channel_values(gain, "gain")?,
        channel_values(offset, "offset")?,
        channel_values(gamma, "gamma")?,
        channel_values(contrast, "contrast")?,
    );
    let ids = match ids {
        Some(ids) => id_texts(ids)?,
        None => Vec::new(),
    };
    let grade = Grade::parse(&GradeArgs {
        lift: lift.as_deref(),
        gain: gain.as_deref(),
        offset: offset.as_deref(),
        gamma: gamma.as_deref(),
        contrast: contrast.as_deref(),
        saturation,
        near,
        far,
        ramp,
        ids: &ids,
    })
    .map_err(to_py)?;
    let request = output_request(&out, compression, no_deep_state, tidy, part, memory_budget)?;
    py.detach(|| run_grade(&grade, &input, &out, request))
        .map_err(to_py)
}

/// Change the resolution of ``input`` and write ``out``, as ``deepmerge reformat``: ``size``
/// is ``(width, height)`` or ``scale`` a factor (exactly one); ``filter`` is ``"box"`` (the
/// footprint's pixels gathered so that flattening commutes with resizing) or ``"nearest"``;
/// ``max_gather`` bounds the samples one output pixel gathers. Other options as
/// ``deep_slice``.
#[pyfunction]
#[pyo3(signature = (input, out, size=None, scale=None, *, filter="box", max_gather=DEFAULT_MAX_GATHER, compression=None, no_deep_state=false, tidy=false, part=None, memory_budget=None))]
#[allow(clippy::too_many_arguments)]
fn reformat(
    py: Python<'_>,
    input: PathBuf,
    out: PathBuf,
    size: Option<(u32, u32)>,
    scale: Option<f64>,
    filter: &str,
    max_gather: u64,
    compression: Option<&str>,
    no_deep_state: bool,
    tidy: bool,
    part: Option<PartArg>,
    memory_budget: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let size = size.map(|(w, h)| format!("{w}x{h}"));
    let filter: Filter = filter.parse().map_err(to_py)?;
    let reformat = Reformat::new(size.as_deref(), scale, filter, max_gather).map_err(to_py)?;
    let request = output_request(&out, compression, no_deep_state, tidy, part, memory_budget)?;
    py.detach(|| run_reformat(&reformat, &input, &out, request))
        .map_err(to_py)
}

/// Write every sample of ``input`` with alpha at least ``min_alpha`` as a point of the binary
/// PLY file ``out``, as ``deepmerge points``: placed by the header's camera (``camera="auto"``
/// falls back to pixel coordinates, ``"file"`` requires the camera, ``"pixels"`` ignores it),
/// ``frame=(x0, y0, x1, y1)`` the render's display window for a cut-out image,
/// ``top_view=PATH`` also a PNG of the points seen from above. Returns the number of points.
#[pyfunction]
#[pyo3(signature = (input, out, min_alpha=0.0, *, camera="auto", frame=None, top_view=None, part=None, memory_budget=None))]
#[allow(clippy::too_many_arguments)]
fn points(
    py: Python<'_>,
    input: PathBuf,
    out: PathBuf,
    min_alpha: f32,
    camera: &str,
    frame: Option<(i32, i32, i32, i32)>,
    top_view: Option<PathBuf>,
    part: Option<PartArg>,
    memory_budget: Option<&Bound<'_, PyAny>>,
) -> PyResult<u64> {
    let camera: CameraMode = camera.parse().map_err(to_py)?;
    let frame = frame.map(|(a, b, c, d)| format!("{a},{b},{c},{d}"));
    let points = Points::new(min_alpha, camera, frame.as_deref())
        .and_then(|p| p.with_top_view(top_view.as_deref()))
        .map_err(to_py)?;
    let part = part_selector(part);
    let budget = budget_bytes(memory_budget)?.unwrap_or(DEFAULT_MEMORY_BUDGET);
    py.detach(|| run_points(&points, &input, &out, &part, budget, None))
        .map_err(to_py)
}
