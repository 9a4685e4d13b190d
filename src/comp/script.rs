//! The comp script: a TOML file naming inputs, nodes and outputs, read into a [`Graph`] with
//! every refusal naming the script's line, before any image file is opened.
//!
//! ```toml
//! [input.balls]                 # an input: a deep EXR (or a flat one, for recolor and deepen)
//! path = "Balls.####.exr"       # frame tokens as in the merge; `part` picks a part
//!
//! [node.comp]                   # a node: `op` is the operation, the rest are its options,
//! op = "merge"                  # spelled as the command's flags without the dashes
//! inputs = ["balls", "leaves"]  # (`--keep-outside` is `keep_outside`)
//! deep = true
//!
//! [[output]]                    # an output: a node written to a file
//! node = "comp"
//! path = "comp.####.exr"
//! compression = "zips"
//! ```
//!
//! Each node's options and their meaning are its command's (docs/operations.md); the output
//! options are the writer's (`compression`, `zstd_level`, `metadata`, `deep_state`). The
//! parsing is here, the checks that need the whole graph (names, cycles, kinds) in
//! [`super::graph`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use toml::{Spanned, Value};

use super::graph::{Graph, Node, Op, Output, ScriptNames};
use crate::composite::{HoldoutMode, Pruning};
use crate::error::{Error, Result};
use crate::exr::{Codec, FlatType, MetadataMode, PartSelector};
use crate::ops::registry::{OpSpec, OpValue, OpValues, ValueKind};
use crate::request::{Backend, GlRequest, MergeRequest};
use crate::vocab::MergeStrategy;

/// A table of the script: its fields with their places in the text.
type Table = BTreeMap<String, Spanned<Value>>;

/// The script as TOML gives it, before any meaning.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScript {
    #[serde(default)]
    input: BTreeMap<String, Spanned<Table>>,
    #[serde(default)]
    node: BTreeMap<String, Spanned<Table>>,
    #[serde(default)]
    output: Vec<Spanned<Table>>,
}

/// Where a refusal points: the script's name and text (for line numbers).
pub(crate) struct Place<'a> {
    name: &'a str,
    text: &'a str,
}

impl Place<'_> {
    /// The 1-based line of byte `offset`.
    pub(crate) fn line(&self, offset: usize) -> usize {
        self.text[..offset.min(self.text.len())]
            .bytes()
            .filter(|&b| b == b'\n')
            .count()
            + 1
    }

    /// A usage error at `line`.
    pub(crate) fn error(&self, line: usize, message: impl std::fmt::Display) -> Error {
        Error::Usage(format!("{}:{line}: {message}", self.name))
    }
}

/// Read the script at `path` into a checked graph. Paths in it are taken relative to the
/// script's folder.
pub fn read_script(path: &Path) -> Result<Graph> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        action: crate::error::IoAction::Read,
        source,
    })?;
    let base = path.parent().unwrap_or(Path::new("")).to_path_buf();
    parse_script(&text, &path.display().to_string(), &base)
}

/// Parse script `text` (named `name` in refusals; relative paths are relative to `base`).
pub fn parse_script(text: &str, name: &str, base: &Path) -> Result<Graph> {
    let place = Place { name, text };
    let raw: RawScript = toml::from_str(text).map_err(|e| {
        let line = e.span().map_or(1, |s| place.line(s.start));
        // One line: TOML's message may run over several.
        let message: Vec<&str> = e.message().lines().map(str::trim).collect();
        place.error(line, message.join("; "))
    })?;
    let mut nodes = Vec::new();
    for (name, table) in raw.input {
        let line = place.line(table.span().start);
        let mut fields = Fields::new(&place, table.into_inner(), line);
        let path = fields
            .string("path")?
            .ok_or_else(|| place.error(line, format!("input {name} needs a path")))?;
        let part = fields.part()?;
        fields.finish()?;
        nodes.push(Node {
            name,
            line,
            op: Op::Read {
                path: base.join(path),
                part,
            },
        });
    }
    for (name, table) in raw.node {
        let line = place.line(table.span().start);
        let mut fields = Fields::new(&place, table.into_inner(), line);
        fields.context = format!("node {name}: ");
        let op = node_op(&name, &mut fields)?;
        fields.finish()?;
        nodes.push(Node { name, line, op });
    }
    let mut outputs = Vec::new();
    for table in raw.output {
        let line = place.line(table.span().start);
        let mut fields = Fields::new(&place, table.into_inner(), line);
        let node = fields
            .string("node")?
            .ok_or_else(|| place.error(line, "an output needs the node it writes: node = NAME"))?;
        let path = fields
            .string("path")?
            .ok_or_else(|| place.error(line, "an output needs a path"))?;
        let output = Output {
            node_name: node,
            node: usize::MAX,
            path: base.join(path),
            compression: fields.parsed::<Codec>("compression")?,
            zstd_level: fields.integer("zstd_level")?.map(|l| l as i32),
            metadata: fields.parsed::<MetadataMode>("metadata")?,
            deep_state: fields.bool("deep_state")?.unwrap_or(true),
            line,
        };
        fields.finish()?;
        outputs.push(output);
    }
    Graph::new(nodes, outputs, &|line, message| place.error(line, message))
}

/// The operation of node `name` from its fields.
fn node_op(name: &str, f: &mut Fields) -> Result<Op> {
    let line = f.line;
    let op = f
        .string("op")?
        .ok_or_else(|| f.place.error(line, format!("node {name} needs an op")))?;
    let usage = |e: Error| match e {
        Error::Usage(m) => f.place.error(line, format!("node {name}: {m}")),
        other => other,
    };
    Ok(match op.as_str() {
        "merge" => {
            let inputs = f.names("inputs")?;
            let stages = f.string("gpu_stages")?;
            let method = f.string("method")?;
            let request = MergeRequest {
                deep: f.bool("deep")?.unwrap_or(false),
                flat_z: f.bool("flat_z")?.unwrap_or(false),
                flat_type: f.parsed::<FlatType>("flat_type")?,
                tidy: f.bool("tidy")?.unwrap_or(false),
                sort: f.bool("sort")?.unwrap_or(false),
                assume_sorted: f.bool("assume_sorted")?.unwrap_or(false),
                strategy: f
                    .parsed::<MergeStrategy>("merge_strategy")?
                    .unwrap_or(MergeStrategy::KWay),
                pruning: Pruning {
                    drop_transparent: f.number("drop_transparent")?.map(|v| v as f32),
                    drop_hidden: f.number("drop_hidden")?.map(|v| v as f32),
                },
                bbox: match f.string("bbox")? {
                    Some(b) => b.parse().map_err(usage)?,
                    None => Default::default(),
                },
                backend: f.parsed::<Backend>("backend")?.unwrap_or_default(),
                gl: GlRequest {
                    layout: f.parsed("layout")?,
                    method: method
                        .map(|m| match m.as_str() {
                            "rbm" => Ok(crate::vocab::MergeMethod::RegisterBlock),
                            other => other.parse(),
                        })
                        .transpose()
                        .map_err(usage)?,
                    block_size: f
                        .integer("block")?
                        .map(|b| b.clamp(0, u32::MAX as i64) as u32),
                    rbm_blocks: f.parsed("rbm_blocks")?,
                    long_lists: f.parsed("gpu_long_lists")?,
                    pixel_order: f.parsed("pixel_order")?,
                    stages_on_gpu: match stages.as_deref() {
                        None | Some("auto") => None,
                        Some("gpu") => Some(true),
                        Some("host") => Some(false),
                        Some(other) => {
                            return Err(usage(Error::Usage(format!(
                                "gpu_stages must be auto, gpu or host, not {other:?}"
                            ))))
                        }
                    },
                    stats: false,
                    gpu_memory: f
                        .string("gpu_memory")?
                        .map(|text| crate::size::parse_memory(&text))
                        .transpose()
                        .map_err(|e| usage(Error::Usage(format!("gpu_memory: {e}"))))?,
                },
                ..MergeRequest::default()
            };
            request.check(inputs.len(), &ScriptNames).map_err(usage)?;
            if inputs.is_empty() {
                return Err(f.place.error(line, format!("node {name}: inputs is empty")));
            }
            Op::Merge { inputs, request }
        }
        "holdout" => Op::Holdout {
            input: f.name("input")?,
            holdout: f.name("holdout")?,
            mode: if f.bool("cull")?.unwrap_or(false) {
                HoldoutMode::Cull
            } else {
                HoldoutMode::Attenuate
            },
        },
        "flatten" => Op::Flatten {
            input: f.name("input")?,
            flat_z: f.bool("flat_z")?.unwrap_or(false),
            flat_type: f.parsed::<FlatType>("flat_type")?,
        },
        "tidy" => Op::Tidy {
            input: f.name("input")?,
        },
        other => match crate::ops::find(other).filter(|spec| spec.comp) {
            Some(spec) => operation_node(name, spec, f)?,
            None => {
                return Err(f.place.error(
                    line,
                    format!(
                        "node {name}: unknown op {other:?}; the ops are {}",
                        super::graph::op_names().join(", ")
                    ),
                ))
            }
        },
    })
}

/// Node `name` of the table's operation `spec`: its inputs by their names, its options by
/// their fields, each as its type takes it (the CLI's text for what the CLI writes as text).
fn operation_node(name: &str, spec: &'static OpSpec, f: &mut Fields) -> Result<Op> {
    let line = f.line;
    let inputs = spec
        .inputs
        .iter()
        .map(|input| f.name(input.name))
        .collect::<Result<Vec<_>>>()?;
    let mut values = OpValues::new(spec);
    for option in spec.options.iter().filter(|o| o.in_script) {
        let key = option.field();
        let value = match option.kind {
            ValueKind::Flag => f.bool(key)?.map(OpValue::Flag),
            ValueKind::F32 | ValueKind::F64 => f.number(key)?.map(OpValue::Number),
            ValueKind::Count => match f.integer(key)? {
                Some(n) if n < 0 => {
                    return Err(f.place.error(
                        line,
                        format!("{key} takes a whole number of 0 or more, not {n}"),
                    ))
                }
                n => n.map(|n| OpValue::Count(n as u64)),
            },
            ValueKind::Text | ValueKind::Name(_) => f.string(key)?.map(OpValue::Text),
            ValueKind::Path => f.string(key)?.map(|p| OpValue::Path(p.into())),
            ValueKind::Numbers { sep, .. } => f
                .corners(key)?
                .map(|text| OpValue::Text(text.replace(',', sep))),
            ValueKind::Ids => Some(f.strings(key)?)
                .filter(|ids| !ids.is_empty())
                .map(OpValue::Texts),
            ValueKind::ChannelValues => f.values(key)?.map(OpValue::Text),
        };
        match value {
            Some(value) => values.set(option, value),
            None if option.required => {
                return Err(f.place.error(
                    line,
                    format!(
                        "node {name}: {} needs {key} = \"{}\"",
                        spec.name, option.value_name
                    ),
                ))
            }
            None => {}
        }
    }
    let operation = (spec.build)(&values, &ScriptNames).map_err(|e| match e {
        Error::Usage(m) => f.place.error(line, format!("node {name}: {m}")),
        other => other,
    })?;
    Ok(Op::Operation {
        spec,
        inputs,
        operation,
    })
}

/// A table's fields, taken one by one; what is left at the end is an unknown option.
struct Fields<'a> {
    place: &'a Place<'a>,
    table: Table,
    line: usize,
    taken: BTreeSet<String>,
    /// What the table is, in front of refusals that name no field's value (`node x: `).
    context: String,
}

impl<'a> Fields<'a> {
    fn new(place: &'a Place<'a>, table: Table, line: usize) -> Self {
        // A table's own span starts at its first field in some TOML forms: take the earliest
        // place the table shows.
        let first = table.values().map(|v| place.line(v.span().start)).min();
        let line = first.map_or(line, |f| f.min(line).max(1));
        Fields {
            place,
            table,
            line,
            taken: BTreeSet::new(),
            context: String::new(),
        }
    }

    fn take(&mut self, key: &str) -> Option<(usize, Value)> {
        self.taken.insert(key.to_string());
        self.table.remove(key).map(|v| {
            let line = self.place.line(v.span().start);
            (line, v.into_inner())
        })
    }

    fn wrong(&self, line: usize, key: &str, what: &str, value: &Value) -> Error {
        self.place
            .error(line, format!("{key} takes {what}, not {value}"))
    }

    fn string(&mut self, key: &str) -> Result<Option<String>> {
        match self.take(key) {
            None => Ok(None),
            Some((_, Value::String(s))) => Ok(Some(s)),
            Some((line, v)) => Err(self.wrong(line, key, "a string", &v)),
        }
    }

    fn bool(&mut self, key: &str) -> Result<Option<bool>> {
        match self.take(key) {
            None => Ok(None),
            Some((_, Value::Boolean(b))) => Ok(Some(b)),
            Some((line, v)) => Err(self.wrong(line, key, "true or false", &v)),
        }
    }

    fn number(&mut self, key: &str) -> Result<Option<f64>> {
        match self.take(key) {
            None => Ok(None),
            Some((_, Value::Float(x))) => Ok(Some(x)),
            Some((_, Value::Integer(i))) => Ok(Some(i as f64)),
            Some((line, v)) => Err(self.wrong(line, key, "a number", &v)),
        }
    }

    /// A number, or the CLI's text for per-channel values (`"1,2,3"`, `"R=2"`), as that text.
    fn values(&mut self, key: &str) -> Result<Option<String>> {
        match self.take(key) {
            None => Ok(None),
            Some((_, Value::String(s))) => Ok(Some(s)),
            Some((_, Value::Float(x))) => Ok(Some(x.to_string())),
            Some((_, Value::Integer(i))) => Ok(Some(i.to_string())),
            Some((line, v)) => Err(self.wrong(line, key, "a number or a string", &v)),
        }
    }

    fn integer(&mut self, key: &str) -> Result<Option<i64>> {
        match self.take(key) {
            None => Ok(None),
            Some((_, Value::Integer(i))) => Ok(Some(i)),
            Some((line, v)) => Err(self.wrong(line, key, "a whole number", &v)),
        }
    }

    /// A value parsed by its type's own names (the CLI's and Python's).
    fn parsed<T>(&mut self, key: &str) -> Result<Option<T>>
    where
        T: std::str::FromStr,
        T::Err: std::fmt::Display,
    {
        match self.take(key) {
            None => Ok(None),
            Some((line, Value::String(s))) => s
                .parse()
                .map(Some)
                .map_err(|e| self.place.error(line, format!("{key}: {e}"))),
            Some((line, v)) => Err(self.wrong(line, key, "a name", &v)),
        }
    }

    /// The part of an input: an index or a name.
    fn part(&mut self) -> Result<PartSelector> {
        match self.take("part") {
            None => Ok(PartSelector::FirstDeep),
            Some((_, Value::String(s))) => Ok(s.parse().expect("infallible")),
            Some((_, Value::Integer(i))) if i >= 0 => Ok(PartSelector::Index(i as usize)),
            Some((line, v)) => Err(self.wrong(line, "part", "an index or a name", &v)),
        }
    }

    /// Numbers given as "X,Y,..." or as an array of whole numbers, as the command's text.
    fn corners(&mut self, key: &str) -> Result<Option<String>> {
        match self.take(key) {
            None => Ok(None),
            Some((_, Value::String(s))) => Ok(Some(s)),
            Some((line, Value::Array(items))) => {
                let numbers: Option<Vec<String>> = items
                    .iter()
                    .map(|v| v.as_integer().map(|i| i.to_string()))
                    .collect();
                numbers
                    .map(|n| Some(n.join(",")))
                    .ok_or_else(|| self.place.error(line, format!("{key} takes whole numbers")))
            }
            Some((line, v)) => Err(self.wrong(line, key, "\"X,Y,...\" or [X, Y, ...]", &v)),
        }
    }

    /// One string or a list of them.
    fn strings(&mut self, key: &str) -> Result<Vec<String>> {
        match self.take(key) {
            None => Ok(Vec::new()),
            Some((_, Value::String(s))) => Ok(vec![s]),
            Some((line, Value::Array(items))) => items
                .into_iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s),
                    other => Err(self.wrong(line, key, "strings", &other)),
                })
                .collect(),
            Some((line, v)) => Err(self.wrong(line, key, "a string or a list of strings", &v)),
        }
    }

    /// The node or input named by `key` (resolved by the graph), with its line.
    fn name(&mut self, key: &str) -> Result<(String, usize)> {
        let line = self.line;
        match self.take(key) {
            None => Err(self.place.error(
                line,
                format!(
                    "{}{key} is missing: the node or input it reads",
                    self.context
                ),
            )),
            Some((line, Value::String(s))) => Ok((s, line)),
            Some((line, v)) => Err(self.wrong(line, key, "a node or input name", &v)),
        }
    }

    /// The nodes or inputs named by the list `key`.
    fn names(&mut self, key: &str) -> Result<Vec<(String, usize)>> {
        let line = self.line;
        match self.take(key) {
            None => Err(self.place.error(
                line,
                format!(
                    "{}{key} is missing: the nodes or inputs it reads",
                    self.context
                ),
            )),
            Some((line, Value::Array(items))) => items
                .into_iter()
                .map(|v| match v {
                    Value::String(s) => Ok((s, line)),
                    other => Err(self.wrong(line, key, "names", &other)),
                })
                .collect(),
            Some((line, v)) => Err(self.wrong(line, key, "a list of names", &v)),
        }
    }

    /// Refuse the fields nobody took.
    fn finish(self) -> Result<()> {
        match self.table.into_iter().next() {
            None => Ok(()),
            Some((key, value)) => Err(self.place.error(
                self.place.line(value.span().start),
                format!("unknown option {key}"),
            )),
        }
    }
}

/// A value of a script's field, as TOML writes it (for front ends that build scripts).
pub use toml::Value as ScriptValue;

/// One table of a script being written: its header (`input.NAME`, `node.NAME`, or `output`
/// for an `[[output]]`) and its fields in order.
#[derive(Clone, Debug, Default)]
pub struct ScriptTable {
    /// `input.NAME`, `node.NAME` or `output`.
    pub header: String,
    /// The fields, in order.
    pub fields: Vec<(String, ScriptValue)>,
}

/// The text of a script holding `tables`, in order: what [`parse_script`] reads back.
pub fn write_script(tables: &[ScriptTable]) -> String {
    let mut text = String::new();
    for table in tables {
        if !text.is_empty() {
            text.push('\n');
        }
        if table.header == "output" {
            text.push_str("[[output]]\n");
        } else {
            text.push_str(&format!("[{}]\n", table.header));
        }
        for (key, value) in &table.fields {
            text.push_str(&format!("{key} = {value}\n"));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_scripts_read_back() {
        let tables = vec![
            ScriptTable {
                header: "input.a".into(),
                fields: vec![("path".into(), ScriptValue::String("a \"1\".exr".into()))],
            },
            ScriptTable {
                header: "node.s".into(),
                fields: vec![
                    ("op".into(), ScriptValue::String("slice".into())),
                    ("input".into(), ScriptValue::String("a".into())),
                    ("far".into(), ScriptValue::Float(2.5)),
                ],
            },
            ScriptTable {
                header: "output".into(),
                fields: vec![
                    ("node".into(), ScriptValue::String("s".into())),
                    ("path".into(), ScriptValue::String("o.exr".into())),
                ],
            },
        ];
        let text = write_script(&tables);
        let graph = parse_script(&text, "built", Path::new("")).unwrap();
        assert_eq!(graph.nodes.len(), 2);
        assert_eq!(graph.outputs[0].path, Path::new("o.exr"));
        let e = parse_script("[node.x]\nop = \"slice\"\n", "s.toml", Path::new(""))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "s.toml:1: node x: input is missing: the node or input it reads"
        );
    }
}
