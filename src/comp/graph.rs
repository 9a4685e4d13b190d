//! The compositing graph: named nodes, each one operation of the tool, and the outputs that
//! write them. [`Graph::new`] resolves the names, refuses what cannot run (a name that is
//! nothing, a cycle, a flat result where deep samples are needed, options that do not fit
//! together) naming the script's line, and orders the nodes so that every node comes after
//! what it reads. Nothing here opens a file.
//!
//! The deep operations of the table ([`crate::ops::OPERATIONS`]) are one variant,
//! [`Op::Operation`]: a new operation is a node by its row alone (its options parsed by
//! `script.rs` from the row, its band given by [`crate::ops::Operation::node`]). The merge,
//! holdout, flatten and tidy, which are the merge's own, have variants of their own.

use std::collections::HashMap;
use std::path::PathBuf;

use crate::composite::HoldoutMode;
use crate::error::{Error, Result};
use crate::exr::{Codec, FlatType, MetadataMode, PartSelector};
use crate::ops::{OpSpec, Operation};
use crate::request::{MergeOption, MergeRequest, OptionNames};
use std::sync::Arc;

/// The ops a node can run, as scripts name them: the merge's own and the table's.
pub fn op_names() -> Vec<&'static str> {
    let table = crate::ops::OPERATIONS
        .iter()
        .filter(|s| s.comp)
        .map(|s| s.name);
    ["merge", "holdout"]
        .into_iter()
        .chain(table)
        .chain(["flatten", "tidy"])
        .collect()
}

/// A node's reference to another node (or input): its name and the script line naming it,
/// then, once the graph is checked, its index in [`Graph::nodes`].
pub type NodeRef = (String, usize);

/// What a node does.
#[derive(Clone, Debug)]
pub enum Op {
    /// An input file's part (deep, or flat for `recolor`'s `flat` and `deepen`).
    Read {
        /// The file (with frame tokens, resolved per frame).
        path: PathBuf,
        /// Which part.
        part: PartSelector,
    },
    /// `deepmerge IN... -o OUT` with the request's options.
    Merge {
        /// The inputs, front-most first.
        inputs: Vec<NodeRef>,
        /// Every option of the merge (its writing options are the output's).
        request: MergeRequest,
    },
    /// `deepmerge holdout IN HOLDOUT`.
    Holdout {
        /// IN.
        input: NodeRef,
        /// HOLDOUT.
        holdout: NodeRef,
        /// Attenuate or cull.
        mode: HoldoutMode,
    },
    /// An operation of the table (`deepmerge slice`, `crop`, ...).
    Operation {
        /// Its row of the table.
        spec: &'static OpSpec,
        /// The nodes it reads, in the row's order of inputs.
        inputs: Vec<NodeRef>,
        /// The operation its options made.
        operation: Arc<dyn Operation>,
    },
    /// `deepmerge flatten` (the merge of one input, flat).
    Flatten {
        /// The node flattened.
        input: NodeRef,
        /// Add the front-most Z.
        flat_z: bool,
        /// The storage of colour (`None`: half).
        flat_type: Option<FlatType>,
    },
    /// `deepmerge IN --deep --tidy` (the merge of one input, tidied).
    Tidy {
        /// The node tidied.
        input: NodeRef,
    },
}

impl Op {
    /// The op's name in scripts.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Read { .. } => "input",
            Op::Merge { .. } => "merge",
            Op::Holdout { .. } => "holdout",
            Op::Operation { spec, .. } => spec.name,
            Op::Flatten { .. } => "flatten",
            Op::Tidy { .. } => "tidy",
        }
    }

    /// The nodes this one reads, in order, with whether each must be flat (else deep).
    pub fn inputs(&self) -> Vec<(&NodeRef, bool)> {
        match self {
            Op::Read { .. } => Vec::new(),
            Op::Merge { inputs, .. } => inputs.iter().map(|i| (i, false)).collect(),
            Op::Holdout { input, holdout, .. } => vec![(input, false), (holdout, false)],
            Op::Operation { spec, inputs, .. } => inputs
                .iter()
                .zip(spec.inputs)
                .map(|(i, kind)| (i, kind.flat))
                .collect(),
            Op::Flatten { input, .. } | Op::Tidy { input } => vec![(input, false)],
        }
    }

    /// Whether the node's result is flat (a flat composite), not deep samples.
    pub fn is_flat(&self) -> bool {
        match self {
            Op::Merge { request, .. } => !request.deep,
            Op::Flatten { .. } => true,
            _ => false,
        }
    }
}

/// One node of the graph.
#[derive(Clone, Debug)]
pub struct Node {
    /// Its name in the script.
    pub name: String,
    /// The script line declaring it (0 for a graph built in code).
    pub line: usize,
    /// What it does.
    pub op: Op,
}

/// One output: a node written to a file.
#[derive(Clone, Debug)]
pub struct Output {
    /// The node's name as written.
    pub node_name: String,
    /// The node's index in [`Graph::nodes`].
    pub node: usize,
    /// The file (frame tokens resolved per frame).
    pub path: PathBuf,
    /// The compression (`None`: ZIPS for deep output, ZIP for flat).
    pub compression: Option<Codec>,
    /// The zstd level, with zstd.
    pub zstd_level: Option<i32>,
    /// Which attributes are carried (`None`: the first input's).
    pub metadata: Option<MetadataMode>,
    /// Whether deep output records `deepImageState`.
    pub deep_state: bool,
    /// The script line declaring it.
    pub line: usize,
}

/// A checked graph: every reference resolved, no cycle, every node after what it reads.
#[derive(Clone, Debug)]
pub struct Graph {
    /// The nodes (inputs included), each after the nodes it reads.
    pub nodes: Vec<Node>,
    /// The outputs, in script order.
    pub outputs: Vec<Output>,
    /// For each node, the indices of the nodes it reads (in [`Op::inputs`] order).
    pub reads: Vec<Vec<usize>>,
}

/// How a refusal is placed: a usage error at a script line.
pub type Refuse<'a> = &'a dyn Fn(usize, String) -> Error;

impl Graph {
    /// Check `nodes` and `outputs` (see the module docs) and order them.
    pub fn new(nodes: Vec<Node>, mut outputs: Vec<Output>, refuse: Refuse) -> Result<Graph> {
        let mut index: HashMap<&str, usize> = HashMap::new();
        for (i, node) in nodes.iter().enumerate() {
            if let Some(&first) = index.get(node.name.as_str()) {
                return Err(refuse(
                    node.line,
                    format!(
                        "{} is declared twice (first on line {})",
                        node.name, nodes[first].line
                    ),
                ));
            }
            index.insert(&node.name, i);
        }
        let mut reads: Vec<Vec<usize>> = Vec::with_capacity(nodes.len());
        for node in &nodes {
            let mut mine = Vec::new();
            for ((name, line), flat) in node.op.inputs() {
                let Some(&i) = index.get(name.as_str()) else {
                    return Err(refuse(
                        *line,
                        format!("node {}: no input or node is named {name}", node.name),
                    ));
                };
                let is_read = matches!(nodes[i].op, Op::Read { .. });
                if flat && !is_read {
                    return Err(refuse(
                        *line,
                        format!(
                            "node {}: {name} must be an input (a flat file read band by band), \
                             not a node",
                            node.name
                        ),
                    ));
                }
                if !flat && nodes[i].op.is_flat() {
                    return Err(refuse(
                        *line,
                        format!(
                            "node {}: {name} is a flat composite; {} reads deep samples",
                            node.name,
                            node.op.name()
                        ),
                    ));
                }
                mine.push(i);
            }
            reads.push(mine);
        }
        // An input read both as a deep and as a flat file cannot be both.
        for (i, node) in nodes.iter().enumerate() {
            if !matches!(node.op, Op::Read { .. }) {
                continue;
            }
            let uses: Vec<bool> = nodes
                .iter()
                .zip(&reads)
                .flat_map(|(n, r)| {
                    n.op.inputs()
                        .into_iter()
                        .zip(r.clone())
                        .filter(|&(_, j)| j == i)
                        .map(|((_, flat), _)| flat)
                        .collect::<Vec<_>>()
                })
                .collect();
            if uses.contains(&true) && uses.contains(&false) {
                return Err(refuse(
                    node.line,
                    format!(
                        "input {} is read both as a flat file and as a deep one",
                        node.name
                    ),
                ));
            }
        }
        for output in &mut outputs {
            let Some(&i) = index.get(output.node_name.as_str()) else {
                return Err(refuse(
                    output.line,
                    format!("output: no node is named {}", output.node_name),
                ));
            };
            output.node = i;
        }
        if outputs.is_empty() {
            return Err(refuse(
                1,
                "the script writes nothing: add an [[output]] with node and path".into(),
            ));
        }
        // Depth-first order, refusing a cycle at the first node found on it.
        let order = topological(&nodes, &reads, refuse)?;
        let mut position = vec![0; nodes.len()];
        for (new, &old) in order.iter().enumerate() {
            position[old] = new;
        }
        let mut ordered: Vec<Option<Node>> = nodes.into_iter().map(Some).collect();
        let nodes: Vec<Node> = order
            .iter()
            .map(|&old| ordered[old].take().expect("each once"))
            .collect();
        let reads = order
            .iter()
            .map(|&old| reads[old].iter().map(|&r| position[r]).collect())
            .collect();
        for output in &mut outputs {
            output.node = position[output.node];
        }
        let graph = Graph {
            nodes,
            outputs,
            reads,
        };
        graph.check_outputs(refuse)?;
        Ok(graph)
    }

    /// Refuse output options that do not fit the node written.
    fn check_outputs(&self, refuse: Refuse) -> Result<()> {
        for output in &self.outputs {
            let node = &self.nodes[output.node];
            let flat = node.op.is_flat();
            let png = crate::preview::is_png_path(&output.path);
            let at = |e: Error| match e {
                Error::Usage(m) => refuse(output.line, m),
                other => other,
            };
            crate::preview::check_output_name(&output.path, !flat && !png).map_err(at)?;
            let given: Vec<&str> = [
                (output.compression.is_some(), "compression"),
                (output.zstd_level.is_some(), "zstd_level"),
                (output.metadata.is_some(), "metadata"),
                (!output.deep_state, "deep_state = false"),
            ]
            .into_iter()
            .filter_map(|(g, n)| g.then_some(n))
            .collect();
            if png && !given.is_empty() {
                return Err(refuse(
                    output.line,
                    format!(
                        "{} applies to EXR output, not a PNG preview",
                        given.join(", ")
                    ),
                ));
            }
            if flat && !output.deep_state {
                return Err(refuse(
                    output.line,
                    format!(
                        "deep_state = false applies to deep output; {} is flat",
                        node.name
                    ),
                ));
            }
            let options = crate::exr::OutputOptions::new(
                output.compression,
                output.zstd_level,
                output.metadata,
            )
            .map_err(at)?;
            if !flat && !png {
                options.deep(output.deep_state).map_err(at)?;
            }
        }
        Ok(())
    }

    /// The graph for one frame: every path with a frame token takes `frame`.
    pub fn for_frame(&self, frame: i64) -> Result<Graph> {
        let mut graph = self.clone();
        let resolve = |path: &mut PathBuf| -> Result<()> {
            if let Some(pattern) = crate::sequence::FramePattern::parse(path)? {
                *path = pattern.path(frame);
            }
            Ok(())
        };
        for node in &mut graph.nodes {
            if let Op::Read { path, .. } = &mut node.op {
                resolve(path)?;
            }
        }
        for output in &mut graph.outputs {
            resolve(&mut output.path)?;
        }
        Ok(graph)
    }

    /// Whether any path holds a frame token (then the graph runs over `--frames`).
    pub fn has_frame_tokens(&self) -> Result<bool> {
        let mut paths = self
            .nodes
            .iter()
            .filter_map(|n| match &n.op {
                Op::Read { path, .. } => Some(path),
                _ => None,
            })
            .chain(self.outputs.iter().map(|o| &o.path));
        paths.try_fold(false, |any, p| {
            Ok(any || crate::sequence::FramePattern::parse(p)?.is_some())
        })
    }
}

/// Nodes in an order where each comes after what it reads; a cycle is refused at the line of
/// a node on it.
fn topological(nodes: &[Node], reads: &[Vec<usize>], refuse: Refuse) -> Result<Vec<usize>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let mut mark = vec![Mark::New; nodes.len()];
    let mut order = Vec::with_capacity(nodes.len());
    for start in 0..nodes.len() {
        if mark[start] != Mark::New {
            continue;
        }
        // An explicit stack: (node, next input to visit).
        let mut stack = vec![(start, 0)];
        mark[start] = Mark::Open;
        while let Some(&mut (n, ref mut next)) = stack.last_mut() {
            if let Some(&r) = reads[n].get(*next) {
                *next += 1;
                match mark[r] {
                    Mark::New => {
                        mark[r] = Mark::Open;
                        stack.push((r, 0));
                    }
                    Mark::Open => {
                        let cycle: Vec<&str> = stack
                            .iter()
                            .skip_while(|&&(s, _)| s != r)
                            .map(|&(s, _)| nodes[s].name.as_str())
                            .chain([nodes[r].name.as_str()])
                            .collect();
                        return Err(refuse(
                            nodes[n].line,
                            format!(
                                "node {} is in a cycle: {}",
                                nodes[n].name,
                                cycle.join(" -> ")
                            ),
                        ));
                    }
                    Mark::Done => {}
                }
            } else {
                mark[n] = Mark::Done;
                order.push(n);
                stack.pop();
            }
        }
    }
    Ok(order)
}

/// The script's spelling of the merge's options, for [`MergeRequest::check`]'s refusals.
pub struct ScriptNames;

impl OptionNames for ScriptNames {
    fn spell(&self, option: MergeOption) -> &'static str {
        match option {
            MergeOption::Deep => "deep = true",
            MergeOption::NoDeepState => "deep_state = false",
            MergeOption::OutputFile => "an [[output]]",
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
            MergeOption::DropTransparent => "drop_transparent",
            MergeOption::DropHidden => "drop_hidden",
            other => crate::request::FieldNames.spell(other),
        }
    }

    fn setting(&self, option: MergeOption, value: &str) -> String {
        format!("{} = {value:?}", self.spell(option))
    }

    fn operation_option(&self, option: &crate::ops::registry::OptionSpec) -> String {
        option.field().to_string()
    }
}
