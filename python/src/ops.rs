//! The deep operations as Python functions, one for each row of the table
//! [`deepmerge::ops::OPERATIONS`] (`deep_slice`, `crop`, `transform`, `idselect`, `deepen`,
//! `recolor`, `grade`, `reformat`, `points`): file to file, streamed in bands exactly as the
//! CLI's commands run them (the same [`deepmerge::ops::Operation`] and [`OutputRequest`]), so
//! the files have the CLI's bytes. Each function is made from its row ([`register`]): its
//! name, docstring and signature, and one keyword parser ([`call`]) takes its arguments.
//! The flatten of one file is `merge([path], out=...)`, as `deepmerge IN -o OUT`.

use std::ffi::CString;
use std::path::PathBuf;
use std::sync::OnceLock;

use deepmerge::ops::registry::{
    self, OpSpec, OpValue, OpValues, OptionSpec, Produces, Ran, ValueKind,
};
use deepmerge::ops::OPERATIONS;
use deepmerge::request::OutputRequest;
use deepmerge::stream::DEFAULT_MEMORY_BUDGET;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyCFunction, PyDict, PyTuple};

use crate::errors::{to_py, usage};
use crate::functions::{budget_bytes, part_selector, Keywords, PartArg};

/// Add the functions to the module.
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    for (spec, text) in OPERATIONS.iter().zip(texts()) {
        let function = PyCFunction::new_closure(
            module.py(),
            Some(text.function),
            Some(text.function_doc),
            move |args, kwargs| call(spec, args, kwargs),
        )?;
        function.setattr("__module__", "deepmerge")?;
        module.add(spec.python, function)?;
    }
    Ok(())
}

/// The names and docstrings Python keeps for the life of the interpreter, made once.
pub(crate) struct Texts {
    /// The function's name.
    pub function: &'static std::ffi::CStr,
    /// Its signature line (which `help()` and `inspect` read) and docstring.
    pub function_doc: &'static std::ffi::CStr,
    /// The `Graph` method's name.
    pub method: &'static std::ffi::CStr,
    /// Its signature line and docstring.
    pub method_doc: &'static std::ffi::CStr,
}

/// The texts of every operation, in the table's order.
pub(crate) fn texts() -> &'static [Texts] {
    static TEXTS: OnceLock<Vec<Texts>> = OnceLock::new();
    TEXTS.get_or_init(|| {
        let leak = |text: String| -> &'static std::ffi::CStr {
            Box::leak(CString::new(text).expect("no NUL").into_boxed_c_str())
        };
        OPERATIONS
            .iter()
            .map(|spec| {
                let options: Vec<String> = spec
                    .options
                    .iter()
                    .filter(|o| o.in_script)
                    .map(|o| format!("``{}``", o.field()))
                    .collect();
                let inputs: Vec<&str> = spec.inputs.iter().map(|i| i.name).collect();
                Texts {
                    function: leak(spec.python.into()),
                    function_doc: leak(format!(
                        "{}{}\n--\n\n{}",
                        spec.python,
                        signature(spec),
                        spec.doc
                    )),
                    method: leak(spec.name.into()),
                    method_doc: leak(format!(
                        "{}($self, {}, name=None, **options)\n--\n\nA node of ``deepmerge {}`` \
                         ({}).",
                        spec.name,
                        inputs.join(", "),
                        spec.name,
                        options.join(", ")
                    )),
                }
            })
            .collect()
    })
}

/// The keyword-only options every operation writing an image takes (the CLI's
/// `--compression`, `--no-deep-state`, `--tidy`, `--part`, `--memory-budget`), and those of an
/// operation writing a file of its own (`--part`, `--memory-budget`).
fn common_keywords(spec: &OpSpec) -> &'static [&'static str] {
    match spec.produces {
        Produces::Image => &[
            "compression",
            "no_deep_state",
            "tidy",
            "part",
            "memory_budget",
        ],
        Produces::File { .. } => &["part", "memory_budget"],
    }
}

/// The parameters in order: the inputs, `out`, the positional options.
fn positional(spec: &OpSpec) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = spec.inputs.iter().map(|i| i.python).collect();
    names.push("out");
    names.extend(spec.options.iter().filter(|o| o.positional).map(|o| o.name));
    names
}

/// The function's signature as Python writes it.
fn signature(spec: &OpSpec) -> String {
    let default = |o: &OptionSpec| match (o.kind, o.default) {
        (_, None) if o.required => String::new(),
        (ValueKind::Flag, _) => "=False".into(),
        (ValueKind::Name(_), Some(d)) => format!("=\"{d}\""),
        (ValueKind::F32 | ValueKind::F64, Some(d)) if !d.contains('.') => format!("={d}.0"),
        (_, Some(d)) => format!("={d}"),
        (_, None) => "=None".into(),
    };
    let mut parts: Vec<String> = Vec::new();
    for name in positional(spec) {
        match spec.option(name) {
            Some(o) => parts.push(format!("{name}{}", default(o))),
            None => parts.push(name.into()),
        }
    }
    parts.push("*".into());
    for o in spec.options.iter().filter(|o| !o.positional) {
        parts.push(format!("{}{}", o.name, default(o)));
    }
    for &k in common_keywords(spec) {
        let d = if matches!(k, "no_deep_state" | "tidy") {
            "False"
        } else {
            "None"
        };
        parts.push(format!("{k}={d}"));
    }
    format!("({})", parts.join(", "))
}

/// The arguments of one call by parameter name, as Python binds them (`None` is not given).
fn bind<'py>(
    spec: &OpSpec,
    args: &Bound<'py, PyTuple>,
    kwargs: Option<&Bound<'py, PyDict>>,
) -> PyResult<Vec<(&'static str, Bound<'py, PyAny>)>> {
    let f = spec.python;
    let positional = positional(spec);
    if args.len() > positional.len() {
        return Err(PyTypeError::new_err(format!(
            "{f}() takes at most {} positional arguments ({} given)",
            positional.len(),
            args.len()
        )));
    }
    let mut bound: Vec<(&'static str, Bound<'py, PyAny>)> =
        positional.iter().copied().zip(args.iter()).collect();
    let keywords = spec
        .options
        .iter()
        .map(|o| o.name)
        .chain(positional.iter().copied())
        .chain(common_keywords(spec).iter().copied());
    let keywords: Vec<&'static str> = keywords.collect();
    for (key, value) in kwargs.into_iter().flat_map(|k| k.iter()) {
        let key: String = key.extract()?;
        let Some(&name) = keywords.iter().find(|&&k| k == key) else {
            return Err(PyTypeError::new_err(format!(
                "{f}() got an unexpected keyword argument '{key}'"
            )));
        };
        if bound.iter().any(|(n, _)| *n == name) {
            return Err(PyTypeError::new_err(format!(
                "{f}() got multiple values for argument '{name}'"
            )));
        }
        bound.push((name, value));
    }
    bound.retain(|(_, v)| !v.is_none());
    let required = spec
        .inputs
        .iter()
        .map(|i| i.python)
        .chain(["out"])
        .chain(spec.options.iter().filter(|o| o.required).map(|o| o.name));
    for name in required {
        if !bound.iter().any(|(n, _)| *n == name) {
            return Err(PyTypeError::new_err(format!(
                "{f}() missing required argument '{name}'"
            )));
        }
    }
    Ok(bound)
}

/// A Python value of option `option` in the table's canonical form.
fn value_of(spec: &OpSpec, option: &OptionSpec, value: &Bound<'_, PyAny>) -> PyResult<OpValue> {
    let wrong = |what: &str| {
        PyTypeError::new_err(format!(
            "{}() argument '{}' must be {what}, not {}",
            spec.python,
            option.name,
            value
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    };
    Ok(match option.kind {
        ValueKind::Flag => OpValue::Flag(value.extract().map_err(|_| wrong("a bool"))?),
        ValueKind::F32 | ValueKind::F64 => {
            OpValue::Number(value.extract().map_err(|_| wrong("a number"))?)
        }
        ValueKind::Count => OpValue::Count(value.extract().map_err(|_| wrong("a whole number"))?),
        ValueKind::Text | ValueKind::Name(_) => {
            OpValue::Text(value.extract().map_err(|_| wrong("a string"))?)
        }
        ValueKind::Path => OpValue::Path(value.extract().map_err(|_| wrong("a path"))?),
        ValueKind::Numbers { sep, count } => {
            let numbers: Vec<i64> = value.extract().map_err(|_| wrong("a tuple of integers"))?;
            if numbers.len() != count {
                return Err(wrong(&format!("a tuple of {count} integers")));
            }
            let texts: Vec<String> = numbers.iter().map(i64::to_string).collect();
            OpValue::Text(texts.join(sep))
        }
        ValueKind::Ids => OpValue::Texts(id_texts(value)?),
        ValueKind::ChannelValues => OpValue::Text(channel_values(value, option.name)?),
    })
}

/// Call the function of operation `spec` (see the module docs).
fn call(
    spec: &'static OpSpec,
    args: &Bound<'_, PyTuple>,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<Py<PyAny>> {
    let py = args.py();
    let bound = bind(spec, args, kwargs)?;
    let given = |name: &str| bound.iter().find(|(n, _)| *n == name).map(|(_, v)| v);
    let mut values = OpValues::new(spec);
    for option in spec.options {
        if let Some(value) = given(option.name) {
            values.set(option, value_of(spec, option, value)?);
        }
    }
    let path = |name: &str| -> PyResult<PathBuf> {
        given(name).expect("bound").extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "{}() argument '{name}' must be a path",
                spec.python
            ))
        })
    };
    let inputs: Vec<PathBuf> = spec
        .inputs
        .iter()
        .map(|i| path(i.python))
        .collect::<PyResult<_>>()?;
    let out = path("out")?;
    let operation = (spec.build)(&values, &Keywords).map_err(to_py)?;
    let flag = |name: &str| -> PyResult<bool> { given(name).map_or(Ok(false), |v| v.extract()) };
    let part: Option<PartArg> = given("part").map(|p| p.extract()).transpose()?;
    let mut request = OutputRequest {
        part: part_selector(part),
        memory_budget: budget_bytes(given("memory_budget"))?.unwrap_or(DEFAULT_MEMORY_BUDGET),
        ..OutputRequest::default()
    };
    if spec.produces == Produces::Image {
        let compression: Option<String> = given("compression").map(|c| c.extract()).transpose()?;
        request.compression = compression
            .as_deref()
            .map(str::parse)
            .transpose()
            .map_err(to_py)?;
        request.deep_state = !flag("no_deep_state")?;
        request.tidy = flag("tidy")?;
        request.check(&out, &Keywords).map_err(to_py)?;
    }
    let ran = py
        .detach(|| registry::run(spec, operation.as_ref(), &inputs, &out, request))
        .map_err(to_py)?;
    Ok(match ran {
        Ran::Image | Ran::Empty => py.None(),
        Ran::Points(n) => n.into_pyobject(py)?.into_any().unbind(),
    })
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

/// A per-channel value as the CLI's text: a number, three numbers ``(r, g, b)``, a
/// ``{channel: value}`` dict, or the CLI's text itself.
fn channel_values(value: &Bound<'_, PyAny>, name: &str) -> PyResult<String> {
    if let Ok(text) = value.extract::<String>() {
        return Ok(text);
    }
    if let Ok(v) = value.extract::<f64>() {
        return Ok(v.to_string());
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
        return Ok(items.join(","));
    }
    if let Ok(list) = value.extract::<Vec<f64>>() {
        let items: Vec<String> = list.iter().map(f64::to_string).collect();
        return Ok(items.join(","));
    }
    Err(usage(format!(
        "{name} is a number, (r, g, b), {{channel: value}} or the CLI's text"
    )))
}
