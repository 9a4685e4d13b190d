//! The module's functions: argument conversion around [`crate::engine`], with the GIL released
//! (`Python::detach`) for as long as the engine runs, so other Python threads go on meanwhile.

use std::path::PathBuf;

use deepmerge::backend::Backend;
use deepmerge::composite::{HoldoutMode, MergeOutput, Pruning};
use deepmerge::exr::{ChannelSelection, FlatType, OutputOptions, PartSelector};
use deepmerge::info::COMPLEXITY_BINS;
use deepmerge::ops::holdout::check_backend as check_holdout_backend;
use deepmerge::ops::run_holdout;
use deepmerge::request::{GlRequest, MergeOption, MergeRequest, OptionNames, OutputRequest};
use deepmerge::stream::{OutputWindow, DEFAULT_MEMORY_BUDGET};
use pyo3::exceptions::PyUserWarning;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PyString};

use crate::engine::{self, Input, ReadRequest};
use crate::errors::{to_py, usage};
use crate::image::{PyDeepImage, PyFlatImage, Window};

/// Add the functions to the module.
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(read, module)?)?;
    module.add_function(wrap_pyfunction!(merge, module)?)?;
    module.add_function(wrap_pyfunction!(flatten, module)?)?;
    module.add_function(wrap_pyfunction!(holdout, module)?)?;
    module.add_function(wrap_pyfunction!(write, module)?)?;
    module.add_function(wrap_pyfunction!(info, module)?)?;
    module.add_function(wrap_pyfunction!(info_text, module)?)?;
    Ok(())
}

/// An option enum's value from its name (the CLI's names, parsed by the enum's `FromStr`).
fn parse<T: std::str::FromStr<Err = deepmerge::Error>>(name: Option<&str>) -> PyResult<Option<T>> {
    name.map(str::parse).transpose().map_err(to_py)
}

/// The merge's keywords, as the library's refusals name them.
pub(crate) struct Keywords;

impl OptionNames for Keywords {
    fn spell(&self, option: MergeOption) -> &'static str {
        match option {
            MergeOption::Deep => "output=\"deep\"",
            MergeOption::FlatZ => "flat_z",
            MergeOption::FlatType => "flat_type",
            MergeOption::Tidy => "tidy",
            MergeOption::NoDeepState => "deep_state=False",
            MergeOption::Compression => "compression",
            MergeOption::ZstdLevel => "zstd_level",
            MergeOption::Metadata => "metadata",
            MergeOption::OutputFile => "out=PATH (or use write())",
            MergeOption::Backend => "backend",
            MergeOption::Layout => "layout",
            MergeOption::Method => "method",
            MergeOption::Block => "block",
            MergeOption::RbmBlocks => "rbm_blocks",
            MergeOption::LongLists => "gpu_long_lists",
            MergeOption::PixelOrder => "pixel_order",
            MergeOption::GpuStages => "gpu_stages",
            MergeOption::Stats => "stats",
            MergeOption::GpuMemory => "gpu_memory",
            MergeOption::Strategy => "merge_strategy",
            MergeOption::Sort => "sort",
            MergeOption::AssumeSorted => "assume_sorted",
            MergeOption::Part => "part",
            MergeOption::AllParts => "all_parts",
            MergeOption::MemoryBudget => "memory_budget",
            MergeOption::DropTransparent => "drop_transparent",
            MergeOption::DropHidden => "drop_hidden",
            MergeOption::Jobs => "jobs",
            MergeOption::Flat => "flat",
            MergeOption::Near => "near",
            MergeOption::Far => "far",
            MergeOption::Box => "box",
            MergeOption::Translate => "translate",
            MergeOption::ZOffset => "z_offset",
            MergeOption::ZScale => "z_scale",
            MergeOption::Id => "ids",
            MergeOption::Mask => "mask",
            MergeOption::Z => "z",
            MergeOption::ZChannel => "z_channel",
            MergeOption::Thickness => "thickness",
            MergeOption::ZBackChannel => "zback_channel",
        }
    }

    fn setting(&self, option: MergeOption, value: &str) -> String {
        format!("{}=\"{value}\"", self.spell(option))
    }
}

/// A part selector from Python: an index, a name, or `None` for the first deep part.
#[derive(FromPyObject)]
pub(crate) enum PartArg {
    Index(usize),
    Name(String),
}

/// `merge`'s `part`: one part for every input, or a list of one per input.
#[derive(FromPyObject)]
pub(crate) enum PartsArg {
    Every(PartArg),
    PerInput(Vec<PartArg>),
}

pub(crate) fn part_selector(part: Option<PartArg>) -> PartSelector {
    match part {
        None => PartSelector::FirstDeep,
        Some(PartArg::Index(i)) => PartSelector::Index(i),
        Some(PartArg::Name(n)) => PartSelector::Name(n),
    }
}

/// A memory budget from Python: bytes, an int or a float (``1.5 * deepmerge.GiB``, truncated
/// to whole bytes as the CLI converts ``--memory-budget 1.5``); `None` for the default.
pub(crate) fn budget_bytes(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<u64>> {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    let refuse = || {
        usage(format!(
            "memory_budget must be a positive number of bytes (2 * deepmerge.GiB for the CLI's \
             --memory-budget 2), not {}",
            value
                .repr()
                .map(|r| r.to_string())
                .unwrap_or_else(|_| "that".into())
        ))
    };
    if value.is_instance_of::<PyBool>() {
        return Err(refuse());
    }
    if let Ok(bytes) = value.extract::<u64>() {
        return if bytes > 0 {
            Ok(Some(bytes))
        } else {
            Err(refuse())
        };
    }
    match value.extract::<f64>() {
        Ok(bytes) if bytes.is_finite() && bytes >= 1.0 => Ok(Some(bytes as u64)),
        _ => Err(refuse()),
    }
}

/// A channel list from Python: a sequence of names, or one comma-separated string as the CLI's
/// `--channels R,G,B`.
fn channel_list(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<ChannelSelection>> {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    let selection = if let Ok(list) = value.cast::<PyString>() {
        ChannelSelection::parse(&list.to_cow()?)
    } else {
        let names: Vec<String> = value.extract().map_err(|_| {
            usage("channels must be a list of channel names or one \"R,G,B\" string")
        })?;
        engine::channel_selection(&names)
    };
    selection.map(Some).map_err(to_py)
}

/// A path or an image, where either will do.
enum PathOrImage<'py> {
    Path(PathBuf),
    Image(Bound<'py, PyDeepImage>),
}

fn path_or_image<'py>(value: &Bound<'py, PyAny>, what: &str) -> PyResult<PathOrImage<'py>> {
    if let Ok(image) = value.cast::<PyDeepImage>() {
        return Ok(PathOrImage::Image(image.clone()));
    }
    value
        .extract::<PathBuf>()
        .map(PathOrImage::Path)
        .map_err(|_| {
            usage(format!(
                "{what} must be a path (str or os.PathLike) or a deepmerge.DeepImage, not a {}",
                value
                    .get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ))
        })
}

/// The image `value` stands for, reading it (GIL released) when it is a path.
fn image_of<'py>(
    py: Python<'py>,
    value: &Bound<'py, PyAny>,
    what: &str,
) -> PyResult<Py<PyDeepImage>> {
    match path_or_image(value, what)? {
        PathOrImage::Image(image) => Ok(image.unbind()),
        PathOrImage::Path(path) => {
            let image = py
                .detach(|| engine::read(&path, &ReadRequest::default()))
                .map_err(to_py)?;
            Py::new(py, PyDeepImage::new(image))
        }
    }
}

/// Read a deep part of an OpenEXR file.
///
/// ``part`` is an index or a part name (default: the first deep part). ``channels`` (a list of
/// names, or one ``"R,G,B"`` string) keeps what the CLI's ``--channels`` keeps: the named
/// channels, Z and ZBack always, and every alpha (A, RA, GA, BA) when a colour channel is
/// named; the others are never stored (the part is read chunk by chunk keeping only these), and
/// a name the part lacks is a ``UsageError`` listing its channels. ``memory_budget`` (bytes; default 8 GiB, the
/// CLI's ``--max-memory``) refuses files whose decoded counts and (kept) samples would take
/// more. NaN depths are refused, as the CLI refuses them. Raises ``deepmerge.FileError`` (an
/// ``OSError``) when the file cannot be read and ``deepmerge.FormatError`` (a ``ValueError``)
/// when it is malformed or unsupported.
#[pyfunction]
#[pyo3(signature = (path, part=None, channels=None, *, memory_budget=None))]
fn read(
    py: Python<'_>,
    path: PathBuf,
    part: Option<PartArg>,
    channels: Option<&Bound<'_, PyAny>>,
    memory_budget: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyDeepImage> {
    let request = ReadRequest {
        part: part_selector(part),
        channels: channel_list(channels)?,
        memory_budget: budget_bytes(memory_budget)?,
    };
    let image = py.detach(|| engine::read(&path, &request)).map_err(to_py)?;
    Ok(PyDeepImage::new(image))
}

/// Merge deep inputs in depth order, as ``deepmerge IN... -o OUT`` does.
///
/// ``inputs`` is a list of paths and ``DeepImage``\ s (the first input wins depth ties).
/// ``output="flat"`` composites front to back (``flat_z=True`` adds the Z of the front-most
/// contributing sample); ``output="deep"`` keeps the samples (``tidy=True`` splits overlapping
/// volumes). ``backend`` is ``"auto"`` (OpenGL for deep output on a GPU host at 4 to 8
/// threads, as the CLI but with no size bound, since a thread keeps its context for its next
/// merges; else the CPU engine), ``"cpu"`` or ``"gl"``; ``layout`` (``"ll"``, ``"la"``,
/// ``"ia"``, ``"bia"``) and ``method`` (``"rbm"``, ``"stepwise"``) choose how the GPU merges and so select GL under ``"auto"``. ``part`` picks
/// the part of path inputs: one index or name for every input, or a list of one per input, as
/// ``--part`` given once or once per input; ``channels`` keeps only those channels of path
/// inputs, as ``--channels`` (see ``read``).
///
/// Stereo and multi-part inputs, with ``out=PATH``: when no ``part`` is given and every input
/// holds the same deep parts (matched by name, else by ``view``), the output is a multi-part
/// file merged part by part, as the CLI writes it, and the returned dict's ``parts`` lists its
/// part names; ``all_parts=True`` asks for that and raises ``FormatError`` naming the file and
/// the part an input lacks (``--all-parts``). An input whose first deep part is merged among
/// several gives a ``UserWarning`` saying so (the CLI's stderr line). Without ``out`` one part
/// per input is merged (``all_parts`` needs ``out``).
///
/// With ``out=PATH`` and every input a path, this is the CLI's streamed merge: inputs are read,
/// merged and written a band of rows at a time within ``memory_budget`` bytes (default 1 GiB,
/// the CLI's ``--memory-budget 1``; ``2 * deepmerge.GiB`` is ``--memory-budget 2``), a row
/// too dense for its share is refused with the CLI's line, and the file has the CLI's bytes.
/// ``compression`` (``"none"``, ``"rle"``, ``"zips"`` (deep default), ``"zstd"``, and
/// ``"zip"`` (flat default) for flat output only), ``zstd_level`` (1 to 22, default 5),
/// ``metadata`` (``"first"`` default: the first input's header attributes; ``"none"``) and
/// ``flat_type`` (flat: ``"half"`` or ``"float"``; by default float where an input's colour
/// or alpha is float, half otherwise) are the CLI's ``--compression``,
/// ``--zstd-level``, ``--metadata`` and ``--flat-type``. Returns a dict: ``streamed``, ``bands``, ``max_band_rows``,
/// ``data_window``, ``memory_budget`` (bytes), ``backend`` (``"cpu"`` or ``"gl"``). With
/// ``out`` and a ``DeepImage`` input the merge runs in memory and is then written.
///
/// Without ``out`` the result comes back in memory: a ``FlatImage`` or a ``DeepImage``. Whole
/// inputs and the whole result are then held, so ``memory_budget`` (bytes, default 8 GiB as
/// ``--max-memory`` for ``read``) only refuses: the most one decoded input or the result may
/// take.
///
/// ``bbox`` chooses the output data window, as ``--bbox``: ``"union"`` (default) of the
/// inputs' data windows, ``"intersection"``, ``"first"`` (the first input's), or a box
/// ``(x0, y0, x1, y1)`` (inclusive); pixels inside are the union merge's.
///
/// Every other merge option of the CLI has its keyword, with the CLI's names for values:
/// ``deep_state=False`` (``--no-deep-state``: leave ``deepImageState`` out of deep output, for
/// readers such as PyPI ``OpenEXR`` that refuse it), ``sort=True`` (``--sort``: sort every
/// input pixel whatever its file says) and ``assume_sorted=True`` (``--assume-sorted``),
/// ``merge_strategy`` (``"kway"`` default, ``"chain"``), ``drop_transparent=EPS`` and
/// ``drop_hidden=THRESHOLD`` (deep output), and the GPU's ``block`` (1 to 32),
/// ``rbm_blocks`` (``"shifted"``, ``"indexed"``), ``pixel_order`` (``"row"``, ``"tiled"``) and
/// ``gpu_stages`` (``"auto"``, ``"gpu"``, ``"host"``) and ``gpu_long_lists`` (``"per-pixel"``,
/// ``"cooperative"`` or ``"cooperative=N"``), which select GL under ``"auto"`` as
/// ``layout`` and ``method`` do. Options that do not fit together or do not apply (``tidy``
/// with flat output, ``layout`` with ``backend="cpu"``, writing options without ``out``) raise
/// ``UsageError`` naming these keywords; a ``channels`` name no input has raises
/// ``UsageError`` listing the inputs' channels.
#[pyfunction]
#[pyo3(signature = (inputs, output="flat", tidy=false, backend="auto", layout=None, method=None, memory_budget=None, *, part=None, flat_z=false, out=None, compression=None, flat_type=None, channels=None, zstd_level=None, metadata=None, bbox=None, all_parts=false, deep_state=true, sort=false, assume_sorted=false, merge_strategy="kway", drop_transparent=None, drop_hidden=None, block=None, rbm_blocks=None, pixel_order=None, gpu_stages=None, gpu_long_lists=None))]
#[allow(clippy::too_many_arguments)]
fn merge<'py>(
    py: Python<'py>,
    inputs: &Bound<'py, PyAny>,
    output: &str,
    tidy: bool,
    backend: &str,
    layout: Option<&str>,
    method: Option<&str>,
    memory_budget: Option<&Bound<'py, PyAny>>,
    part: Option<PartsArg>,
    flat_z: bool,
    out: Option<PathBuf>,
    compression: Option<&str>,
    flat_type: Option<&str>,
    channels: Option<&Bound<'py, PyAny>>,
    zstd_level: Option<i32>,
    metadata: Option<&str>,
    bbox: Option<&Bound<'py, PyAny>>,
    all_parts: bool,
    deep_state: bool,
    sort: bool,
    assume_sorted: bool,
    merge_strategy: &str,
    drop_transparent: Option<f32>,
    drop_hidden: Option<f32>,
    block: Option<u32>,
    rbm_blocks: Option<&str>,
    pixel_order: Option<&str>,
    gpu_stages: Option<&str>,
    gpu_long_lists: Option<&str>,
) -> PyResult<Bound<'py, PyAny>> {
    let deep = match output {
        "flat" => false,
        "deep" => true,
        other => {
            return Err(usage(format!(
                "output must be \"flat\" or \"deep\", not {other:?}"
            )))
        }
    };
    // A str is iterable too: its characters would be taken for paths.
    if inputs.is_instance_of::<PyString>() {
        return Err(usage(
            "inputs must be a list of paths or DeepImages, not one string",
        ));
    }
    let items: Vec<PathOrImage<'py>> = inputs
        .try_iter()
        .map_err(|_| usage("inputs must be a list of paths or DeepImages"))?
        .enumerate()
        .map(|(i, item)| path_or_image(&item?, &format!("input {i}")))
        .collect::<PyResult<_>>()?;
    if items.is_empty() {
        return Err(usage("merge needs at least one input"));
    }
    let paths: Option<Vec<PathBuf>> = items
        .iter()
        .map(|item| match item {
            PathOrImage::Path(path) => Some(path.clone()),
            PathOrImage::Image(_) => None,
        })
        .collect();
    // Streamed when written with every input a file; else in memory, where the budget only
    // refuses (default 8 GiB, the most one decoded input or the result may take).
    let streamed = out.is_some() && paths.is_some();
    let default_budget = if streamed {
        DEFAULT_MEMORY_BUDGET
    } else {
        deepmerge::exr::DEFAULT_MAX_MEMORY
    };
    let part = match part {
        None => Vec::new(),
        Some(PartsArg::Every(p)) => vec![part_selector(Some(p))],
        Some(PartsArg::PerInput(list)) => {
            list.into_iter().map(|p| part_selector(Some(p))).collect()
        }
    };
    let request = MergeRequest {
        deep,
        flat_z,
        flat_type: parse(flat_type)?,
        tidy,
        deep_state,
        sort,
        assume_sorted,
        strategy: merge_strategy.parse().map_err(to_py)?,
        pruning: Pruning {
            drop_transparent,
            drop_hidden,
        },
        bbox: output_window(bbox)?,
        part,
        all_parts,
        channels: channel_list(channels)?,
        memory_budget: budget_bytes(memory_budget)?.unwrap_or(default_budget),
        band_rows: None,
        backend: backend.parse().map_err(to_py)?,
        gl: GlRequest {
            layout: parse(layout)?,
            method: parse(method)?,
            block_size: block,
            rbm_blocks: parse(rbm_blocks)?,
            long_lists: gpu_long_lists
                .map(str::parse::<deepmerge::gpu::LongLists>)
                .transpose()
                .map_err(usage)?,
            pixel_order: parse(pixel_order)?,
            stages_on_gpu: match gpu_stages {
                None | Some("auto") => None,
                Some("gpu") => Some(true),
                Some("host") => Some(false),
                Some(other) => {
                    return Err(usage(format!(
                        "gpu_stages must be \"auto\", \"gpu\" or \"host\", not {other:?}"
                    )))
                }
            },
            stats: false,
            gpu_memory: None,
        },
        compression: parse(compression)?,
        zstd_level,
        metadata: parse(metadata)?,
        writes_file: out.is_some(),
        jobs: None,
    };
    request.check(items.len(), &Keywords).map_err(to_py)?;
    if request.channels.is_some() && paths.is_none() {
        return Err(usage(
            "channels applies to path inputs; read DeepImages with read(path, channels=...)",
        ));
    }
    if let (Some(out), Some(paths)) = (&out, &paths) {
        let report = py
            .detach(|| engine::merge_to_file(paths, out, &request))
            .map_err(to_py)?;
        // Which part of an input with several was merged, as the CLI says on stderr.
        for note in &report.notes {
            let note =
                std::ffi::CString::new(note.trim_start_matches("deepmerge: ")).unwrap_or_default();
            PyErr::warn(py, &py.get_type::<PyUserWarning>(), &note, 1)?;
        }
        let dict = PyDict::new(py);
        dict.set_item("streamed", true)?;
        if !report.parts.is_empty() {
            dict.set_item("parts", &report.parts)?;
        }
        dict.set_item("bands", report.bands)?;
        dict.set_item("max_band_rows", report.max_band_rows)?;
        dict.set_item("data_window", window_of(report.window))?;
        dict.set_item("memory_budget", report.memory_budget)?;
        dict.set_item("backend", report.engine)?;
        return Ok(dict.into_any());
    }
    let engine_inputs: Vec<Input> = items
        .iter()
        .enumerate()
        .map(|(i, item)| match item {
            PathOrImage::Path(path) => Input::Path(path.clone()),
            PathOrImage::Image(image) => Input::Image {
                image: &image.get().image,
                name: format!("<input {i}>"),
            },
        })
        .collect();
    let merged = py
        .detach(|| engine::merge(&engine_inputs, &request))
        .map_err(to_py)?;
    if let Some(out) = &out {
        // The first input's attributes are carried when it is a file.
        let first_file = match items.first() {
            Some(PathOrImage::Path(path)) => Some(path),
            _ => None,
        };
        let parts = request
            .part_request(items.len(), &Keywords)
            .map_err(to_py)?;
        let part = engine::in_memory_part(&parts, 0).map_err(to_py)?;
        py.detach(|| {
            engine::write_merged(
                out,
                &merged,
                &request,
                first_file.map(|p| (p.as_path(), &part)),
            )
        })
        .map_err(to_py)?;
        let window = match &merged {
            MergeOutput::Flat(image) => image.data_window,
            MergeOutput::Deep(image) => image.data_window,
        };
        let dict = PyDict::new(py);
        dict.set_item("streamed", false)?;
        dict.set_item("bands", 1)?;
        dict.set_item("max_band_rows", window.height())?;
        dict.set_item("data_window", window_of(window))?;
        dict.set_item("memory_budget", request.memory_budget)?;
        dict.set_item(
            "backend",
            py.detach(|| engine::engine_name(&request)).map_err(to_py)?,
        )?;
        return Ok(dict.into_any());
    }
    Ok(match merged {
        MergeOutput::Flat(image) => Bound::new(py, PyFlatImage { image })?.into_any(),
        MergeOutput::Deep(image) => Bound::new(py, PyDeepImage::new(image))?.into_any(),
    })
}

fn window_of(b: deepmerge::deep::Bounds) -> Window {
    ((b.x0, b.y0), (b.x1, b.y1))
}

/// The CLI's `--flat-type` (default half).
fn flat_type_of(flat_type: Option<&str>) -> PyResult<FlatType> {
    Ok(match flat_type.unwrap_or("half") {
        "half" => FlatType::Half,
        "float" => FlatType::Float,
        other => {
            return Err(usage(format!(
                "flat_type must be \"half\" or \"float\", not {other:?}"
            )))
        }
    })
}

/// Composite a deep image (or the deep file at a path) front to back into a ``FlatImage``;
/// ``z=True`` adds the Z of the front-most contributing sample. As OIIO's ``flatten``.
#[pyfunction]
#[pyo3(signature = (image, z=false))]
fn flatten(py: Python<'_>, image: &Bound<'_, PyAny>, z: bool) -> PyResult<PyFlatImage> {
    let image = image_of(py, image, "image")?;
    let deep = &image.get().image;
    let flat = py.detach(|| engine::flatten(deep, z)).map_err(to_py)?;
    Ok(PyFlatImage { image: flat })
}

/// Hold ``image`` out by ``holdout`` (each a ``DeepImage`` or a path), as ``deepmerge holdout``:
/// every sample is scaled by the holdout's transmittance at its depth, or with ``cull=True``
/// samples behind the holdout's opaque depth are dropped. Returns a ``DeepImage``.
///
/// With ``out=PATH`` (both inputs paths) this is the CLI's streamed holdout, with its bytes: the
/// two files are read, held out and written a band of rows at a time within ``memory_budget``
/// bytes (default 1 GiB), and ``None`` is returned. ``part``, ``compression``, ``zstd_level``,
/// ``metadata``, ``no_deep_state`` and ``tidy`` are the CLI's options; ``flat=True`` writes the
/// flat composite of the held-out image (``flat_z``, ``flat_type`` as ``--flat-z``,
/// ``--flat-type``), as does ``out="*.png"`` (a preview). ``backend`` is ``"auto"`` or
/// ``"cpu"``; ``"gl"`` is refused with the CLI's line (there is no OpenGL holdout).
#[pyfunction]
#[pyo3(signature = (image, holdout, cull=false, *, out=None, flat=false, flat_z=false, flat_type=None, compression=None, zstd_level=None, metadata=None, no_deep_state=false, tidy=false, part=None, memory_budget=None, backend="auto"))]
#[allow(clippy::too_many_arguments)]
fn holdout(
    py: Python<'_>,
    image: &Bound<'_, PyAny>,
    holdout: &Bound<'_, PyAny>,
    cull: bool,
    out: Option<PathBuf>,
    flat: bool,
    flat_z: bool,
    flat_type: Option<&str>,
    compression: Option<&str>,
    zstd_level: Option<i32>,
    metadata: Option<&str>,
    no_deep_state: bool,
    tidy: bool,
    part: Option<PartArg>,
    memory_budget: Option<&Bound<'_, PyAny>>,
    backend: &str,
) -> PyResult<Option<PyDeepImage>> {
    let backend = match backend {
        "auto" => Backend::Auto,
        "cpu" => Backend::Cpu,
        "gl" => Backend::Gl,
        other => {
            return Err(usage(format!(
                "backend must be \"auto\", \"cpu\" or \"gl\", not {other:?}"
            )))
        }
    };
    check_holdout_backend(backend).map_err(to_py)?;
    if !flat && (flat_z || flat_type.is_some()) {
        return Err(usage(
            "flat_z and flat_type apply to flat output: pass flat=True",
        ));
    }
    let Some(out) = out else {
        let file_options = flat
            || compression.is_some()
            || zstd_level.is_some()
            || metadata.is_some()
            || no_deep_state
            || tidy
            || part.is_some()
            || memory_budget.is_some_and(|b| !b.is_none());
        if file_options {
            return Err(usage(
                "flat, compression, zstd_level, metadata, no_deep_state, tidy, part and \
                 memory_budget apply when writing: pass out=PATH",
            ));
        }
        let image = image_of(py, image, "image")?;
        let holdout = image_of(py, holdout, "holdout")?;
        let (input, mask) = (&image.get().image, &holdout.get().image);
        let result = py
            .detach(|| engine::holdout(input, mask, cull))
            .map_err(to_py)?;
        return Ok(Some(PyDeepImage::new(result)));
    };
    let (PathOrImage::Path(input), PathOrImage::Path(mask)) = (
        path_or_image(image, "image")?,
        path_or_image(holdout, "holdout")?,
    ) else {
        return Err(usage(
            "holdout with out=PATH streams files: pass image and holdout as paths \
             (write a DeepImage's result with write())",
        ));
    };
    let request = OutputRequest {
        flat,
        flat_z,
        flat_type: flat_type.map(|t| flat_type_of(Some(t))).transpose()?,
        tidy,
        deep_state: !no_deep_state,
        compression: parse(compression)?,
        zstd_level,
        metadata: parse(metadata)?,
        part: part_selector(part),
        memory_budget: budget_bytes(memory_budget)?.unwrap_or(DEFAULT_MEMORY_BUDGET),
        band_rows: None,
        channels: None,
        quiet: false,
    };
    request.check(&out, &Keywords).map_err(to_py)?;
    let mode = if cull {
        HoldoutMode::Cull
    } else {
        HoldoutMode::Attenuate
    };
    py.detach(|| {
        let options = request.stream_options(&out)?;
        run_holdout(&input, &mask, &out, mode, &options, None)
    })
    .map_err(to_py)?;
    Ok(None)
}

/// Write ``image`` to ``path`` as the CLI writes its output: a ``DeepImage`` as deep scanline
/// with ``compression`` ``"none"``, ``"rle"``, ``"zips"`` (default) or ``"zstd"``; a
/// ``FlatImage`` as flat scanline with those or ``"zip"`` (default), colour and alpha stored as
/// ``flat_type`` ``"half"`` (default) or ``"float"``. ``zstd_level`` (1 to 22, default 5) goes
/// with ``"zstd"``. Written to a temporary file beside ``path`` and renamed.
#[pyfunction]
#[pyo3(signature = (image, path, compression=None, *, flat_type=None, zstd_level=None, deep_state=true))]
fn write(
    py: Python<'_>,
    image: &Bound<'_, PyAny>,
    path: PathBuf,
    compression: Option<&str>,
    flat_type: Option<&str>,
    zstd_level: Option<i32>,
    deep_state: bool,
) -> PyResult<()> {
    let output = OutputOptions::parse(compression, zstd_level, None).map_err(to_py)?;
    if let Ok(deep) = image.cast::<PyDeepImage>() {
        if flat_type.is_some() {
            return Err(usage("flat_type applies to a FlatImage, not a DeepImage"));
        }
        let deep = &deep.get().image;
        return py
            .detach(|| engine::write_deep(&path, deep, &output, deep_state))
            .map_err(to_py);
    }
    if let Ok(flat) = image.cast::<PyFlatImage>() {
        if !deep_state {
            return Err(usage("deep_state applies to a DeepImage, not a FlatImage"));
        }
        let flat_type = flat_type_of(flat_type)?;
        let flat = &flat.get().image;
        return py
            .detach(|| engine::write_flat(&path, flat, flat_type, &output))
            .map_err(to_py);
    }
    Err(usage(
        "write takes a deepmerge.DeepImage or a deepmerge.FlatImage",
    ))
}

/// What ``deepmerge info FILE`` reports, as a list with one dict per part: ``index``, ``name``,
/// ``deep``, ``tiles`` (``(w, h)`` or ``None``), ``data_window``, ``display_window``,
/// ``channels`` (``[(name, "half"|"float"|"uint")]``), ``compression``, ``line_order``,
/// ``deep_image_state``, and for deep parts ``samples``: ``total``, ``max``, ``mean``,
/// ``empty`` and ``histogram`` (pixels per depth-complexity bin).
#[pyfunction]
#[pyo3(signature = (path, *, memory_budget=None))]
fn info<'py>(
    py: Python<'py>,
    path: PathBuf,
    memory_budget: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyList>> {
    let memory_budget = budget_bytes(memory_budget)?;
    let parts = py
        .detach(|| engine::info(&path, memory_budget))
        .map_err(to_py)?;
    let list = PyList::empty(py);
    for part in parts {
        let h = &part.header;
        let dict = PyDict::new(py);
        dict.set_item("index", h.index)?;
        dict.set_item("name", h.name.clone())?;
        dict.set_item("deep", h.deep)?;
        dict.set_item("tiles", h.tiles)?;
        dict.set_item("data_window", window_of(h.data_window))?;
        dict.set_item("display_window", window_of(h.display_window))?;
        let channels: Vec<(String, &str)> = h
            .channels
            .iter()
            .map(|c| (c.name.clone(), c.sample_type.name()))
            .collect();
        dict.set_item("channels", channels)?;
        dict.set_item("compression", h.compression.clone())?;
        dict.set_item("line_order", h.line_order.clone())?;
        dict.set_item("deep_image_state", h.state.name())?;
        if let Some(s) = &part.samples {
            let samples = PyDict::new(py);
            samples.set_item("total", s.total)?;
            samples.set_item("max", s.max)?;
            samples.set_item("mean", s.mean)?;
            samples.set_item("empty", s.empty)?;
            let histogram = PyDict::new(py);
            for ((bin, _), n) in COMPLEXITY_BINS.iter().zip(s.histogram) {
                histogram.set_item(*bin, n)?;
            }
            samples.set_item("histogram", histogram)?;
            dict.set_item("samples", samples)?;
        }
        list.append(dict)?;
    }
    Ok(list)
}

/// ``deepmerge info FILE``'s report, word for word, as one string; ``channels`` (a list or
/// ``"R,G,B"``) adds what a sample costs keeping only those, as ``--channels``.
#[pyfunction]
#[pyo3(signature = (path, *, memory_budget=None, channels=None))]
fn info_text(
    py: Python<'_>,
    path: PathBuf,
    memory_budget: Option<&Bound<'_, PyAny>>,
    channels: Option<&Bound<'_, PyAny>>,
) -> PyResult<String> {
    let memory_budget = budget_bytes(memory_budget)?;
    let channels = channel_list(channels)?;
    py.detach(|| engine::info_text(&path, memory_budget, channels.as_ref()))
        .map_err(to_py)
}

/// The `bbox` keyword: a mode name or an inclusive box `(x0, y0, x1, y1)`, as `--bbox`.
fn output_window(bbox: Option<&Bound<'_, PyAny>>) -> PyResult<OutputWindow> {
    let Some(bbox) = bbox else {
        return Ok(OutputWindow::Union);
    };
    let text = if let Ok(name) = bbox.extract::<String>() {
        name
    } else if let Ok((x0, y0, x1, y1)) = bbox.extract::<(i32, i32, i32, i32)>() {
        format!("{x0},{y0},{x1},{y1}")
    } else {
        return Err(usage(
            "bbox must be \"union\", \"intersection\", \"first\" or (x0, y0, x1, y1)",
        ));
    };
    text.parse().map_err(|e| usage(format!("bbox: {e}")))
}
