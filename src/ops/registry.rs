//! The one table of deep operations ([`super::OPERATIONS`]): each operation states once its
//! name, its help, its inputs and its options (name, type, default, help and the spelling of
//! each front end), and how its options make the operation ([`OpSpec::build`]). The front ends
//! are made from the table, none of them naming an operation: the CLI's subcommands
//! (`src/cli/ops.rs`, clap's builder), Python's functions and `Graph` methods
//! (`python/src/ops.rs`, `python/src/graph.rs`, one keyword parser) and the comp script's
//! nodes (`crate::comp::script`, one field parser). A front end reads its own syntax into
//! [`OpValues`] (canonical values: numbers, texts, flags) and calls `build` with its
//! [`OptionNames`], so refusals keep each front end's words.
//!
//! An operation made is an [`Operation`]: it runs file to file ([`Operation::run`]) and, for a
//! comp node, gives its band work ([`Operation::node`]).

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{DeepOp, DeepenRows};
use crate::error::{Error, Result};
use crate::exr::{IdManifest, PartSelector};
use crate::request::{OptionNames, OutputRequest};
use crate::stream::{plan_parts, write_part_by_part, PartPlan, PartRequest};

/// One deep operation in the table.
pub struct OpSpec {
    /// The CLI's subcommand, the comp script's `op` and the Python `Graph` method.
    pub name: &'static str,
    /// The Python function (`deep_slice`: `slice` is a Python builtin).
    pub python: &'static str,
    /// The CLI's one-line help (`deepmerge NAME --help`'s first line), without a final period.
    pub help: &'static str,
    /// The Python function's docstring (its keywords and types as Python passes them).
    pub doc: &'static str,
    /// The input files (nodes in a script), in order.
    pub inputs: &'static [InputSpec],
    /// The options, in the CLI's help order; those marked `positional` are also Python's
    /// positional parameters after the inputs and `out`, in this order.
    pub options: &'static [OptionSpec],
    /// What the output file is.
    pub produces: Produces,
    /// Whether a comp script (and Python's `Graph`) takes it as a node.
    pub comp: bool,
    /// The operation the values ask for, refusals in `names`' words.
    pub build: fn(&OpValues, &dyn OptionNames) -> Result<Arc<dyn Operation>>,
}

/// One input of an operation.
pub struct InputSpec {
    /// Its name in a script and as `Graph`'s parameter (`input`, `flat`).
    pub name: &'static str,
    /// Its name as the Python function's parameter and the CLI's positional (`deep`).
    pub python: &'static str,
    /// Whether it is a flat file (read band by band), not deep samples.
    pub flat: bool,
    /// The CLI's help.
    pub help: &'static str,
}

/// One deep input, the common case.
pub const DEEP_INPUT: &[InputSpec] = &[InputSpec {
    name: "input",
    python: "input",
    flat: false,
    help: "Deep EXR input",
}];

/// What an operation writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Produces {
    /// An image as every operation writes it: deep, flat or a PNG preview
    /// ([`OutputRequest`]'s options).
    Image,
    /// A file of its own kind (no image output options): `-o`'s value name and help.
    File {
        /// The CLI's value name of `-o`.
        value_name: &'static str,
        /// The CLI's help of `-o`.
        help: &'static str,
    },
}

/// The type of an option's value, which says how each front end takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    /// A switch: `--keep-outside`, `keep_outside=True`, `keep_outside = true`.
    Flag,
    /// A 32-bit number (parsed as such on the command line).
    F32,
    /// A 64-bit number.
    F64,
    /// A whole number of 0 or more.
    Count,
    /// Free text (a channel name).
    Text,
    /// One of these names.
    Name(&'static [&'static str]),
    /// A path (written by the operation beside its output).
    Path,
    /// `count` whole numbers: the CLI's text joined by `sep` (`X0,Y0,X1,Y1`, `WxH`), a tuple in
    /// Python, an array or the text in a script.
    Numbers {
        /// Between the numbers in the text.
        sep: &'static str,
        /// How many.
        count: usize,
    },
    /// Id conditions `CHANNEL=N|NAME[,...]`: repeated on the command line, a string, a list or
    /// `{channel: ids}` in Python, a string or a list in a script.
    Ids,
    /// A per-channel value `V|R,G,B|NAME=V`: the text, or in Python a number, `(r, g, b)` or
    /// `{channel: value}`, in a script a number.
    ChannelValues,
}

/// One option of an operation.
pub struct OptionSpec {
    /// Python's keyword (and the canonical name [`OpValues`] keys by).
    pub name: &'static str,
    /// The CLI's long flag without dashes; empty: `name` with `-` for `_`.
    pub flag: &'static str,
    /// The script's field; empty: `name`.
    pub field: &'static str,
    /// Its type.
    pub kind: ValueKind,
    /// Its default as the CLI shows it (`[default: ...]`), parsed as the value; `None`: unset.
    pub default: Option<&'static str>,
    /// The CLI's value name (`Z`, `X0,Y0,X1,Y1`).
    pub value_name: &'static str,
    /// The CLI's help, without a final period.
    pub help: &'static str,
    /// A Python positional parameter (else keyword-only).
    pub positional: bool,
    /// Every front end needs it.
    pub required: bool,
    /// The CLI needs this option or the one named (by `name`), not both.
    pub either: Option<&'static str>,
    /// The CLI refuses it with the option named (by `name`).
    pub conflicts_with: Option<&'static str>,
    /// The CLI takes values starting with `-` (negative numbers).
    pub hyphen_values: bool,
    /// A comp script takes it (a node writes no side file).
    pub in_script: bool,
}

impl OptionSpec {
    /// The fields most options leave as they are: start a row with `..OptionSpec::NEW`.
    pub const NEW: OptionSpec = OptionSpec {
        name: "",
        flag: "",
        field: "",
        kind: ValueKind::Flag,
        default: None,
        value_name: "",
        help: "",
        positional: false,
        required: false,
        either: None,
        conflicts_with: None,
        hyphen_values: false,
        in_script: true,
    };

    /// The CLI's long flag, without dashes.
    pub fn flag(&self) -> String {
        match self.flag {
            "" => self.name.replace('_', "-"),
            flag => flag.to_string(),
        }
    }

    /// The script's field.
    pub fn field(&self) -> &'static str {
        match self.field {
            "" => self.name,
            field => field,
        }
    }
}

impl fmt::Debug for OpSpec {
    /// Its name: the row is known by it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OpSpec({})", self.name)
    }
}

impl OpSpec {
    /// The option Python calls `name`.
    pub fn option(&self, name: &str) -> Option<&'static OptionSpec> {
        self.options.iter().find(|o| o.name == name)
    }
}

/// The operation named `name` (the CLI's and the script's name).
pub fn find(name: &str) -> Option<&'static OpSpec> {
    super::OPERATIONS.iter().copied().find(|s| s.name == name)
}

/// An option's value as a front end gave it, in canonical form.
#[derive(Clone, Debug, PartialEq)]
pub enum OpValue {
    /// A [`ValueKind::Flag`].
    Flag(bool),
    /// A number ([`ValueKind::F32`], [`ValueKind::F64`]).
    Number(f64),
    /// A [`ValueKind::Count`].
    Count(u64),
    /// Text: the CLI's form of [`ValueKind::Text`], [`ValueKind::Name`],
    /// [`ValueKind::Numbers`] and [`ValueKind::ChannelValues`].
    Text(String),
    /// The conditions of [`ValueKind::Ids`].
    Texts(Vec<String>),
    /// A [`ValueKind::Path`].
    Path(PathBuf),
}

/// The options given to one operation, by Python's name; what is not given reads as its
/// default.
pub struct OpValues {
    spec: &'static OpSpec,
    given: HashMap<&'static str, OpValue>,
}

impl OpValues {
    /// No option given yet.
    pub fn new(spec: &'static OpSpec) -> Self {
        OpValues {
            spec,
            given: HashMap::new(),
        }
    }

    /// Set the option `option` of this operation.
    pub fn set(&mut self, option: &'static OptionSpec, value: OpValue) {
        self.given.insert(option.name, value);
    }

    fn get(&self, name: &str) -> Option<&OpValue> {
        self.given.get(name)
    }

    fn default(&self, name: &str) -> Option<&'static str> {
        let option = self.spec.option(name);
        debug_assert!(option.is_some(), "{} has no option {name}", self.spec.name);
        option.and_then(|o| o.default)
    }

    /// A flag: given and true.
    pub fn flag(&self, name: &str) -> bool {
        matches!(self.get(name), Some(OpValue::Flag(true)))
    }

    /// A number, or its default.
    pub fn number(&self, name: &str) -> Option<f64> {
        match self.get(name) {
            Some(OpValue::Number(x)) => Some(*x),
            _ => self
                .default(name)
                .map(|d| d.parse().expect("a numeric default")),
        }
    }

    /// A 32-bit number (the CLI parsed it as one, so this is exact), or its default.
    pub fn f32(&self, name: &str) -> Option<f32> {
        self.number(name).map(|x| x as f32)
    }

    /// A whole number, or its default.
    pub fn count(&self, name: &str) -> Option<u64> {
        match self.get(name) {
            Some(OpValue::Count(n)) => Some(*n),
            _ => self
                .default(name)
                .map(|d| d.parse().expect("a whole default")),
        }
    }

    /// Text, or its default.
    pub fn text(&self, name: &str) -> Option<&str> {
        match self.get(name) {
            Some(OpValue::Text(t)) => Some(t),
            _ => self.default(name),
        }
    }

    /// The conditions given (none by default).
    pub fn texts(&self, name: &str) -> &[String] {
        match self.get(name) {
            Some(OpValue::Texts(t)) => t,
            _ => &[],
        }
    }

    /// A path, if given.
    pub fn path(&self, name: &str) -> Option<&Path> {
        match self.get(name) {
            Some(OpValue::Path(p)) => Some(p),
            _ => None,
        }
    }
}

/// What a run wrote, for the front ends that report it (Python returns the number of points).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ran {
    /// An image.
    Image,
    /// An image with no samples: nothing of the input remained (a crop beside the data
    /// window, a slice of empty depths), which the CLI notes.
    Empty,
    /// A point cloud of this many points.
    Points(u64),
}

impl Ran {
    /// An image of `samples` samples.
    pub fn image(samples: u64) -> Ran {
        if samples == 0 {
            Ran::Empty
        } else {
            Ran::Image
        }
    }
}

/// What a comp node's operation reads besides its input nodes' bands.
pub struct NodeInputs<'a> {
    /// The first input's `idManifest`, if it carries one (id names resolve against it).
    pub manifest: Option<IdManifest>,
    /// Each input's file and part where it is a flat file (read by the operation itself).
    pub flat_files: Vec<Option<(&'a Path, &'a PartSelector)>>,
    /// The graph's memory budget.
    pub budget: u64,
}

/// A comp node's work, as the graph's runner takes it.
pub enum NodeWork {
    /// A band operation on the first input's rows; `dy` moves rows down (a translation).
    Band {
        /// The operation.
        op: Box<dyn DeepOp + Send>,
        /// Output row = input row + `dy`.
        dy: i32,
    },
    /// Rows made from a flat file (deepen).
    FlatRows(Box<DeepenRows>),
}

/// [`Operation::run`] of a band operation with no inputs of its own beyond its deep one: the
/// streamed [`super::run_op`] over `inputs[0]`, as the request says.
pub fn run_band_op(
    op: &dyn DeepOp,
    inputs: &[PathBuf],
    output: &Path,
    request: OutputRequest,
) -> Result<Ran> {
    let options = request.stream_options(output)?;
    Ok(Ran::image(super::run_op(
        op, &inputs[0], output, &options, None,
    )?))
}

/// An operation made from its options.
pub trait Operation: Send + Sync + fmt::Debug {
    /// Run it on the files `inputs` (in [`OpSpec::inputs`]' order), writing `output` as
    /// `request` says.
    fn run(&self, inputs: &[PathBuf], output: &Path, request: OutputRequest) -> Result<Ran>;

    /// Its work as a comp node (for operations whose [`OpSpec::comp`] is true).
    fn node(&self, _inputs: &NodeInputs) -> Result<NodeWork> {
        Err(Error::internal("this operation is no comp node"))
    }

    /// Whether it runs part by part on a multi-part input ([`run`]); not where it writes a
    /// side file of one part (idselect's mask).
    fn part_by_part(&self) -> bool {
        true
    }

    /// A note the CLI prints once before running on `inputs` (what the user should know of
    /// their files), if any.
    fn note(&self, _inputs: &[PathBuf]) -> Result<Option<String>> {
        Ok(None)
    }
}

/// Run `operation` of `spec` as every front end does: on each deep part of a multi-part input
/// into a multi-part output (as the one-input merge writes it), unless `request.part` picks a
/// part; otherwise once.
pub fn run(
    spec: &OpSpec,
    operation: &dyn Operation,
    inputs: &[PathBuf],
    output: &Path,
    request: OutputRequest,
) -> Result<Ran> {
    let one_deep_input = matches!(spec.inputs, [input] if !input.flat);
    let part_chosen = request.part != PartSelector::FirstDeep;
    let each_part = spec.produces == Produces::Image && one_deep_input && operation.part_by_part();
    if !each_part && !part_chosen && matches!(spec.inputs.first(), Some(i) if !i.flat) {
        // An operation that reads one part says which, rather than taking the first silently.
        if let PartPlan::Each(parts) = plan_parts(&inputs[..1], &PartRequest::Auto)? {
            return Err(Error::Usage(format!(
                "{} has {} deep parts and {} reads one: choose it with --part",
                inputs[0].display(),
                parts.len(),
                spec.name
            )));
        }
    }
    if !each_part || part_chosen {
        return operation.run(inputs, output, request);
    }
    let PartPlan::Each(parts) = plan_parts(&inputs[..1], &PartRequest::Auto)? else {
        return operation.run(inputs, output, request);
    };
    if crate::preview::is_png_path(output) {
        return Err(Error::Usage(format!(
            "{} is a PNG preview of one image, and {} has {} deep parts: choose one with \
             --part",
            output.display(),
            inputs[0].display(),
            parts.len()
        )));
    }
    crate::exr::check_output_is_not_an_input(output, inputs)?;
    let mut ran = Ran::Empty;
    write_part_by_part(output, &parts, &mut |part, file| {
        let request = OutputRequest {
            part: PartSelector::Index(part.parts[0]),
            ..request.clone()
        };
        if operation.run(inputs, file, request)? != Ran::Empty {
            ran = Ran::Image;
        }
        Ok(())
    })?;
    Ok(ran)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every operation's options are well formed: defaults parse as their type, the names that
    /// options refer to exist, positional options come as Python would take them.
    #[test]
    fn the_table_is_well_formed() {
        for spec in super::super::OPERATIONS {
            for option in spec.options {
                if let Some(d) = option.default {
                    match option.kind {
                        ValueKind::F32 | ValueKind::F64 => assert!(d.parse::<f64>().is_ok()),
                        ValueKind::Count => assert!(d.parse::<u64>().is_ok()),
                        ValueKind::Name(names) => assert!(names.contains(&d)),
                        _ => {}
                    }
                }
                for other in [option.either, option.conflicts_with].into_iter().flatten() {
                    assert!(spec.option(other).is_some(), "{}: {other}", spec.name);
                }
            }
            let names: Vec<&str> = spec.options.iter().map(|o| o.name).collect();
            let mut unique = names.clone();
            unique.sort_unstable();
            unique.dedup();
            assert_eq!(unique.len(), names.len(), "{}", spec.name);
            assert!(find(spec.name).is_some());
        }
    }

    /// The stub `_deepmerge.pyi` declares every operation's Python function with its inputs,
    /// `out` and its options, and `Graph` a method for each comp node (as `codec/mod.rs` holds
    /// the codec names to the stub).
    #[test]
    fn the_python_stub_follows_the_table() {
        let stub = include_str!("../../python/deepmerge/_deepmerge.pyi");
        for spec in super::super::OPERATIONS {
            let start = stub
                .find(&format!("def {}(", spec.python))
                .unwrap_or_else(|| panic!("the stub has no def {}(", spec.python));
            let end = stub[start..].find(") ->").expect("a return type") + start;
            let def = &stub[start..end];
            // Inputs, `out` and the positional options in order; keyword-only ones anywhere.
            let mut ordered: Vec<&str> = spec.inputs.iter().map(|i| i.python).collect();
            ordered.push("out");
            ordered.extend(spec.options.iter().filter(|o| o.positional).map(|o| o.name));
            let mut at = 0;
            for p in ordered {
                let found = def[at..]
                    .find(&format!("{p}:"))
                    .unwrap_or_else(|| panic!("def {} lacks {p} (in order)", spec.python));
                at += found;
            }
            for option in spec.options {
                let name = option.name;
                assert!(
                    def.contains(&format!(" {name}:")) || def.contains(&format!("({name}:")),
                    "def {} lacks {name}",
                    spec.python
                );
            }
            if spec.comp {
                let method = format!("    def {}(self, ", spec.name);
                assert!(stub.contains(&method), "Graph lacks {}", spec.name);
            }
        }
    }
}
