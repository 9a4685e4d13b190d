//! `deepmerge.Graph`: a compositing graph built one node at a time from Python (each method
//! adds a node and returns its handle), read from a script or written to one, and run by the
//! library's one streamed pass (`deepmerge::comp`), so it writes the bytes `deepmerge comp`
//! writes. The operations of the table (`deepmerge::ops::OPERATIONS`) are methods made from it
//! (`Graph.__getattr__`). The graph is kept as the script's tables: `to_script()` is exactly what `run()`
//! parses, so a pipeline can generate scripts for a farm, and every refusal is the script's.

use std::path::{Path, PathBuf};

use deepmerge::comp::{
    parse_script, run_graph, run_graph_with, write_script, Graph, GraphEngine, RunOptions,
    ScriptTable, ScriptValue,
};
use deepmerge::ops::{OpSpec, OPERATIONS};
use deepmerge::sequence::parse_frames;
use deepmerge::stream::DEFAULT_MEMORY_BUDGET;
use pyo3::exceptions::{PyAttributeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyCFunction, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::errors::{to_py, usage};
use crate::functions::budget_bytes;

/// Add the classes to the module.
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<PyGraph>()?;
    module.add_class::<PyNode>()?;
    Ok(())
}

/// A node of a graph, as its methods return it: pass it to later nodes and to `output`.
#[pyclass(name = "Node", module = "deepmerge", frozen)]
pub struct PyNode {
    /// The node's name in the script.
    #[pyo3(get)]
    name: String,
}

#[pymethods]
impl PyNode {
    fn __repr__(&self) -> String {
        format!("Node({:?})", self.name)
    }
}

/// A compositing graph (see the module docs).
#[pyclass(name = "Graph", module = "deepmerge")]
pub struct PyGraph {
    tables: Vec<ScriptTable>,
    /// Where relative paths are resolved (a script's folder; empty: the working directory).
    base: PathBuf,
    /// The script's text when read from a file (kept as written, comments included).
    text: Option<String>,
    /// The name refusals give the script.
    label: String,
}

/// A Python value as a script's value.
fn value_of(value: &Bound<'_, PyAny>) -> PyResult<ScriptValue> {
    if value.is_instance_of::<PyBool>() {
        return Ok(ScriptValue::Boolean(value.extract()?));
    }
    if value.is_instance_of::<PyInt>() {
        return Ok(ScriptValue::Integer(value.extract()?));
    }
    if value.is_instance_of::<PyFloat>() {
        return Ok(ScriptValue::Float(value.extract()?));
    }
    if let Ok(node) = value.cast::<PyNode>() {
        return Ok(ScriptValue::String(node.get().name.clone()));
    }
    if value.is_instance_of::<PyString>() {
        return Ok(ScriptValue::String(value.extract()?));
    }
    if let Ok(path) = value.extract::<PathBuf>() {
        return Ok(ScriptValue::String(path.display().to_string()));
    }
    if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
        return value
            .try_iter()?
            .map(|item| value_of(&item?))
            .collect::<PyResult<Vec<_>>>()
            .map(ScriptValue::Array);
    }
    Err(usage(format!(
        "a graph option takes a bool, a number, a string, a node or a list of them, not {}",
        value.repr().map(|r| r.to_string()).unwrap_or_default()
    )))
}

impl PyGraph {
    /// Only graphs built here can take more nodes (a script read from a file is kept as written).
    fn editable(&self) -> PyResult<()> {
        match self.text {
            None => Ok(()),
            Some(_) => Err(usage(
                "a graph read from a script is run or written as it is; build a new Graph() to \
                 add nodes",
            )),
        }
    }

    /// A name for a new node of op `op`: the one asked for, or `op` numbered.
    fn name_for(&self, op: &str, name: Option<String>) -> String {
        name.unwrap_or_else(|| {
            let taken = |n: &str| {
                self.tables
                    .iter()
                    .any(|t| t.header.split_once('.').is_some_and(|(_, have)| have == n))
            };
            (1..)
                .map(|i| format!("{op}{i}"))
                .find(|n| !taken(n))
                .expect("a free name")
        })
    }

    /// Add node `op` reading `reads` (field, value) with `options` (the script's fields).
    fn node(
        &mut self,
        op: &str,
        name: Option<String>,
        reads: Vec<(&str, ScriptValue)>,
        options: Vec<(String, ScriptValue)>,
    ) -> PyResult<PyNode> {
        self.editable()?;
        let name = self.name_for(op, name);
        let mut fields = vec![("op".to_string(), ScriptValue::String(op.into()))];
        fields.extend(reads.into_iter().map(|(k, v)| (k.to_string(), v)));
        fields.extend(options);
        self.tables.push(ScriptTable {
            header: format!("node.{name}"),
            fields,
        });
        Ok(PyNode { name })
    }

    /// Add a node of the table's operation `spec`: its inputs by position or by name, `name`,
    /// and its options by Python's keyword or the script's field.
    fn operation_node(
        &mut self,
        spec: &'static OpSpec,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyNode> {
        let method = format!("Graph.{}()", spec.name);
        if args.len() > spec.inputs.len() {
            return Err(PyTypeError::new_err(format!(
                "{method} takes {} nodes by position; give the options by keyword",
                spec.inputs.len()
            )));
        }
        let mut given: Vec<(String, Bound<'_, PyAny>)> = Vec::new();
        for (key, value) in kwargs.into_iter().flat_map(|k| k.iter()) {
            given.push((key.extract()?, value));
        }
        let mut take = |key: &str| {
            let at = given.iter().position(|(k, _)| k == key)?;
            Some(given.remove(at).1)
        };
        let mut reads = Vec::new();
        for (k, input) in spec.inputs.iter().enumerate() {
            let value = match args.get_item(k).ok() {
                Some(value) => value,
                None => take(input.name).ok_or_else(|| {
                    PyTypeError::new_err(format!("{method} missing required node '{}'", input.name))
                })?,
            };
            reads.push((input.name, value_of(&value)?));
        }
        let name = match take("name") {
            Some(n) if !n.is_none() => Some(n.extract()?),
            _ => None,
        };
        let options = options_of(spec, given)?;
        self.node(spec.name, name, reads, options)
    }
    fn text(&self) -> String {
        self.text
            .clone()
            .unwrap_or_else(|| write_script(&self.tables))
    }

    /// The checked graph.
    fn graph(&self) -> PyResult<Graph> {
        parse_script(&self.text(), &self.label, &self.base).map_err(to_py)
    }
}

fn node_value(node: &Bound<'_, PyAny>) -> PyResult<ScriptValue> {
    value_of(node)
}

/// Keyword options as a script's fields, as they are named.
fn fields_of(options: Option<&Bound<'_, PyDict>>) -> PyResult<Vec<(String, ScriptValue)>> {
    let mut fields = Vec::new();
    for (key, value) in options.into_iter().flat_map(|o| o.iter()) {
        fields.push((key.extract()?, value_of(&value)?));
    }
    Ok(fields)
}

/// An operation's keyword options as the script's fields: Python's keyword (`ids`) becomes the
/// script's field (`id`); what is no option of it is left for the script's refusal.
fn options_of(
    spec: &OpSpec,
    given: Vec<(String, Bound<'_, PyAny>)>,
) -> PyResult<Vec<(String, ScriptValue)>> {
    given
        .into_iter()
        .map(|(key, value)| {
            let field = spec.option(&key).map_or(key, |o| o.field().to_string());
            Ok((field, value_of(&value)?))
        })
        .collect()
}

#[pymethods]
impl PyGraph {
    #[new]
    fn new() -> Self {
        PyGraph {
            tables: Vec::new(),
            base: PathBuf::new(),
            text: None,
            label: "graph".into(),
        }
    }

    /// The graph of the script at ``path`` (its relative paths are its folder's), as
    /// ``deepmerge comp`` reads it; refusals name the script's line.
    #[staticmethod]
    fn from_script(path: PathBuf) -> PyResult<Self> {
        let text =
            std::fs::read_to_string(&path).map_err(|e| to_py(deepmerge::Error::read(&path, e)))?;
        let graph = PyGraph {
            tables: Vec::new(),
            base: path.parent().unwrap_or(Path::new("")).to_path_buf(),
            text: Some(text),
            label: path.display().to_string(),
        };
        graph.graph()?;
        Ok(graph)
    }

    /// An input file (deep, or flat for ``recolor``'s ``flat`` and ``deepen``).
    #[pyo3(signature = (path, part=None, name=None))]
    fn input(
        &mut self,
        path: PathBuf,
        part: Option<&Bound<'_, PyAny>>,
        name: Option<String>,
    ) -> PyResult<PyNode> {
        self.editable()?;
        let name = self.name_for("input", name);
        let mut fields = vec![(
            "path".to_string(),
            ScriptValue::String(path.display().to_string()),
        )];
        if let Some(part) = part.filter(|p| !p.is_none()) {
            fields.push(("part".into(), value_of(part)?));
        }
        self.tables.push(ScriptTable {
            header: format!("input.{name}"),
            fields,
        });
        Ok(PyNode { name })
    }

    /// ``deepmerge IN... -o OUT``'s merge of ``inputs`` (front-most first), with its options
    /// as keywords (``deep=True``, ``tidy=True``, ``backend="gl"``...).
    #[pyo3(signature = (inputs, name=None, **options))]
    fn merge(
        &mut self,
        inputs: &Bound<'_, PyAny>,
        name: Option<String>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyNode> {
        let inputs = node_value(inputs)?;
        self.node("merge", name, vec![("inputs", inputs)], fields_of(options)?)
    }

    /// ``deepmerge holdout``: ``input`` held out by ``holdout`` (``cull=True`` to cull).
    #[pyo3(signature = (input, holdout, name=None, **options))]
    fn holdout(
        &mut self,
        input: &Bound<'_, PyAny>,
        holdout: &Bound<'_, PyAny>,
        name: Option<String>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyNode> {
        let reads = vec![
            ("input", node_value(input)?),
            ("holdout", node_value(holdout)?),
        ];
        self.node("holdout", name, reads, fields_of(options)?)
    }

    /// ``deepmerge flatten`` (``flat_z``, ``flat_type``).
    #[pyo3(signature = (input, name=None, **options))]
    fn flatten(
        &mut self,
        input: &Bound<'_, PyAny>,
        name: Option<String>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyNode> {
        let options = fields_of(options)?;
        self.node(
            "flatten",
            name,
            vec![("input", node_value(input)?)],
            options,
        )
    }

    /// The merge of one input with ``--deep --tidy``.
    #[pyo3(signature = (input, name=None))]
    fn tidy(&mut self, input: &Bound<'_, PyAny>, name: Option<String>) -> PyResult<PyNode> {
        self.node(
            "tidy",
            name,
            vec![("input", node_value(input)?)],
            Vec::new(),
        )
    }

    /// The node method of an operation of the table (``slice``, ``crop``, ``transform``,
    /// ``idselect``, ``grade``, ``recolor``, ``deepen``): ``graph.slice(input, name=None,
    /// **options)`` adds the node and returns it.
    fn __getattr__(slf: &Bound<'_, Self>, attribute: &str) -> PyResult<Py<PyAny>> {
        let found = OPERATIONS
            .iter()
            .zip(crate::ops::texts())
            .find(|(spec, _)| spec.comp && spec.name == attribute);
        let Some((spec, texts)) = found else {
            return Err(PyAttributeError::new_err(format!(
                "'Graph' object has no attribute '{attribute}'"
            )));
        };
        let graph: Py<PyGraph> = slf.clone().unbind();
        let method = PyCFunction::new_closure(
            slf.py(),
            Some(texts.method),
            Some(texts.method_doc),
            move |args, kwargs| -> PyResult<PyNode> {
                let mut graph = graph.bind(args.py()).try_borrow_mut()?;
                graph.operation_node(spec, args, kwargs)
            },
        )?;
        Ok(method.into_any().unbind())
    }

    /// Write ``node`` to ``path`` (``compression``, ``zstd_level``, ``metadata``,
    /// ``deep_state``).
    #[pyo3(signature = (node, path, **options))]
    fn output(
        &mut self,
        node: &Bound<'_, PyAny>,
        path: PathBuf,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<()> {
        self.editable()?;
        let mut fields = vec![
            ("node".to_string(), node_value(node)?),
            (
                "path".to_string(),
                ScriptValue::String(path.display().to_string()),
            ),
        ];
        if let Some(options) = options {
            for (key, value) in options.iter() {
                fields.push((key.extract()?, value_of(&value)?));
            }
        }
        self.tables.push(ScriptTable {
            header: "output".into(),
            fields,
        });
        Ok(())
    }

    /// The script of this graph (what ``deepmerge comp`` reads).
    fn to_script(&self) -> String {
        self.text()
    }

    /// Run the graph in one streamed pass, as ``deepmerge comp``: once, or once per frame of
    /// ``frames`` (a range such as ``"1-10"`` or a list of frames) for paths with frame tokens.
    #[pyo3(signature = (frames=None, memory_budget=None))]
    fn run(
        &self,
        py: Python<'_>,
        frames: Option<&Bound<'_, PyAny>>,
        memory_budget: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let graph = self.graph()?;
        let options = RunOptions {
            budget: budget_bytes(memory_budget)?.unwrap_or(DEFAULT_MEMORY_BUDGET),
            band_rows: None,
        };
        let frames: Option<Vec<i64>> = match frames.filter(|f| !f.is_none()) {
            None => None,
            Some(f) if f.is_instance_of::<PyString>() => {
                Some(parse_frames(&f.extract::<String>()?).map_err(to_py)?)
            }
            Some(f) => Some(f.extract()?),
        };
        let tokens = graph.has_frame_tokens().map_err(to_py)?;
        py.detach(|| match (frames, tokens) {
            (None, false) => run_graph(&graph, &options),
            (Some(frames), true) => {
                // One GL context for every frame (where the graph merges on GL).
                let engine = GraphEngine::new();
                frames
                    .iter()
                    .try_for_each(|&f| run_graph_with(&graph.for_frame(f)?, &options, &engine))
            }
            (None, true) => Err(deepmerge::Error::Usage(
                "the graph's paths have frame tokens: pass frames=".into(),
            )),
            (Some(_), false) => Err(deepmerge::Error::Usage(
                "frames= needs a frame token (####, %04d, $F4) in a path of the graph".into(),
            )),
        })
        .map_err(to_py)
    }
}
