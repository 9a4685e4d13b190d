//! `deepmerge comp SCRIPT`: a deep compositing graph (merges, holdouts, slices, crops,
//! transforms, id selections, recolors, deepens, flattens, tidies) run in one streamed pass,
//! band by band within the memory budget: each input decoded once, no intermediate file, each
//! output encoded once, and the same bytes as the steps run one command at a time through
//! files (docs/operations.md, "comp").
//!
//! - [`script`]: the script format (TOML) read into a graph, refusals naming the line.
//! - [`graph`]: the graph's nodes and outputs, its checks (names, cycles, deep or flat) and
//!   its order; where a new operation is added.
//! - [`run`]: the streamed pass.

pub mod graph;
pub mod run;
pub mod script;

pub use graph::{op_names, Graph, Node, Op, Output};
pub use run::{run_graph, run_graph_with, GraphEngine, RunOptions};
pub use script::{parse_script, read_script, write_script, ScriptTable, ScriptValue};
