//! One streamed pass over a graph: every input decoded once, band by band, every node worked
//! on each band as it comes, every output encoded once; no intermediate file.
//!
//! - **Plan.** The inputs are opened (headers, offset and count tables only) and each node's
//!   windows, channels and carried attributes follow from its inputs' as its command would
//!   find them from its input files (`Runner::plan_node`): a merge covers the union of its
//!   inputs' windows (or its `bbox`), an operation the windows [`crate::ops::DeepOp::windows`]
//!   gives, a holdout IN's. Channel conflicts, missing ids and the like are refused here,
//!   before a sample is decoded.
//! - **Bands.** The rows of the outputs' windows are cut into bands by the band planner over
//!   the inputs' count tables ([`crate::stream::plan_bands`]), in the budget's share of each
//!   node (every node may hold a band).
//! - **Rows.** For each band each output asks its node for the band's rows; a node asks its
//!   inputs for the rows it needs (the same rows, except `transform`, which asks for the rows
//!   its translation brings into the band, and `reformat`, which asks for the rows its output
//!   rows' footprints cover: [`crate::ops::DeepOp::rows_read`]) and works on them as its
//!   command works on a band. Results are kept for the band, so a node read by several is worked once.
//!   Each input keeps the decoded rows that a later request of the band may still need
//!   (`RowCache`): from the lowest row any path of mappings from an output asks of it
//!   (`Runner::lowest_rows`), so a reformat's footprints that straddle two bands find their
//!   rows.
//! - **Threads.** As in the streamed merge, a writer thread encodes band k-1's outputs while the
//!   calling thread (which owns the GL context) works band k and, where no translation moves
//!   rows, a reader thread decodes the input rows of the bands after it (`Runner::run`): up to
//!   the three bands the plan counts alive, with tokens as in `stream::pipeline`, so that it
//!   decodes ahead while the calling thread waits (for the GL context, made on a helper thread
//!   while the inputs are opened: [`GraphEngine`], one for every frame of a sequence).
//! - A node's deep rows carry the `deepImageState` its operation claims, which is what its
//!   pixels hold (every operation claims only what it keeps), so a node reading them sees what
//!   it would read from the file the command writes: the same bytes as the steps through files.
//!   One difference remains possible: a file's state is the meet over all its bands, so where
//!   one band of a node is messy (two samples with equal depths) a command reading the file
//!   treats every band as messy, while the graph treats the other bands as sorted. Only
//!   `slice` depends on the claim beyond sorting (it re-sorts pixels of sorted inputs after
//!   clipping), so only a slice of such an input can differ; the tests meet no such case.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use super::graph::{Graph, Op, Output};
use crate::composite::{check_compatible, holdout, MergeOptions, MergeOutput, OutputKind, Pruning};
use crate::deep::{Bounds, DeepImage, DeepState, Plane};
use crate::error::{Error, Result};
use crate::exr::{
    carried_attributes, ChunkSource, DeepChunkWriter, FlatChunkWriter, FlatType, IdManifest,
    MetadataMode, OutputOptions, RawAttribute,
};
use crate::ops::deepen::DeepenRows;
use crate::ops::registry::{NodeInputs, NodeWork};
use crate::ops::{DeepOp, OpWindows};
use crate::preview::{is_png_path, PngBandWriter};
use crate::stream::plan::OutputShape;
use crate::stream::{merge_checked, plan_bands, MergeEngine, StreamOptions};

/// How a graph runs: its memory budget and, for tests, fixed bands.
#[derive(Clone, Copy, Debug)]
pub struct RunOptions {
    /// The memory the whole graph works in, in bytes.
    pub budget: u64,
    /// Bands of exactly this many rows (tests and measurements).
    pub band_rows: Option<usize>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            budget: crate::stream::DEFAULT_MEMORY_BUDGET,
            band_rows: None,
        }
    }
}

/// The GL engine of a graph's GL merges, kept across runs: a frame sequence run with one
/// (`run_graph_with`, as `deepmerge comp --frames` and the Python module do) makes one GL context
/// for all its frames, not one a frame (on an NVIDIA H100 host a context costs 64-97 ms before
/// the first merge can use it). The context is started on a helper thread when the first graph
/// that merges on GL is planned, and made current on the calling thread by its first GL merge,
/// so that making it overlaps the inputs' opening, planning and first decoded bands
/// ([`crate::gpu::StartingGl`]). A context that cannot be made is said again by every later
/// run. Keep it on the thread that runs the graphs: the context is current there.
#[derive(Default)]
pub struct GraphEngine {
    #[cfg(feature = "gl")]
    gl: std::cell::OnceCell<crate::backend::EngineChoice>,
}

impl GraphEngine {
    /// An engine with no GL context yet (one is started when a graph first asks for it).
    pub fn new() -> Self {
        Self::default()
    }
}

/// Run `graph` (its paths resolved: one frame) in one streamed pass, writing every output, with
/// a GL context of its own where it merges on GL ([`run_graph_with`] shares one between runs).
pub fn run_graph(graph: &Graph, options: &RunOptions) -> Result<()> {
    run_graph_with(graph, options, &GraphEngine::new())
}

/// [`run_graph`] on `engine`'s GL context, made by the first run that needs it and kept for
/// the next (the frames of a sequence).
pub fn run_graph_with(graph: &Graph, options: &RunOptions, engine: &GraphEngine) -> Result<()> {
    // Refused before any input is opened (the pass reads it again when it starts).
    crate::stream::pipeline::read_ahead_from_env()?;
    let inputs: Vec<PathBuf> = graph
        .nodes
        .iter()
        .filter_map(|n| match &n.op {
            Op::Read { path, .. } => Some(path.clone()),
            _ => None,
        })
        .collect();
    for (k, output) in graph.outputs.iter().enumerate() {
        crate::exr::check_output_is_not_an_input(&output.path, &inputs)?;
        if graph.outputs[..k].iter().any(|o| o.path == output.path) {
            return Err(Error::Usage(format!(
                "{}: two outputs write this file",
                output.path.display()
            )));
        }
    }
    let mut runner = Runner::open(graph, options, engine)?;
    runner.run()
}

/// What a node is, once planned: its windows, its channels (deep nodes: an image of no rows),
/// the attributes an output of it carries, and how it makes a band.
struct NodePlan {
    window: Bounds,
    display: Bounds,
    head: Option<DeepImage>,
    attributes: Vec<RawAttribute>,
    flat_type: FlatType,
    work: Work,
}

/// How a node makes its rows.
enum Work {
    /// A deep input's rows.
    Read(Box<RowCache>),
    /// A flat input: read by the node that uses it.
    FlatInput,
    /// The merge (also flatten and tidy: the merge of one input) with these options.
    Merge {
        options: MergeOptions,
        pruning: Pruning,
        gl: bool,
    },
    /// A holdout.
    Holdout(crate::composite::HoldoutMode),
    /// A band operation of the table (slice, crop, transform, idselect, grade, recolor); `dy` is
    /// the rows its output moves by.
    Op {
        op: Box<dyn DeepOp + Send>,
        windows: OpWindows,
        dy: i32,
    },
    /// A flat file made deep.
    Deepen(Box<DeepenRows>),
    /// An operation that leaves nothing of its input (a crop outside it): its window with no
    /// samples, as the command writes it.
    Empty,
}

/// A deep input's decoded rows, kept while a reader of this band may still need them.
struct RowCache {
    /// The reader (lent out only while the bands are planned over every input at once).
    source: Option<ChunkSource>,
    /// The rows held, top to bottom (none before the first band).
    held: Option<Rc<DeepImage>>,
    /// The lowest row a reader of the current band may ask for.
    lowest: i32,
    /// How far above a band its readers reach: the largest shift of rows on a path from an
    /// output to this input (translations down move the rows read up).
    reach: i32,
    /// Whether every reader asks for the same rows of a band (no translation or change of
    /// resolution tells them apart): the rows handed out then need not be kept.
    one_shift: bool,
}

impl RowCache {
    /// Forget the rows above `lowest`; a band's readers ask for nothing above it.
    fn start_band(&mut self, lowest: i32) {
        self.lowest = lowest;
        if let Some(held) = &self.held {
            let w = held.data_window;
            if w.y1 < self.lowest {
                self.held = None;
            } else if w.y0 < self.lowest {
                self.held = Some(Rc::new(held.cropped(Bounds {
                    y0: self.lowest,
                    ..w
                })));
            }
        }
    }

    /// Rows `y0..=y1` (inside the input's window).
    fn rows(&mut self, y0: i32, y1: i32) -> Result<Rc<DeepImage>> {
        let held_to = self.held.as_ref().map_or(i32::MIN, |h| h.data_window.y1);
        if y1 > held_to {
            // Decode from the lowest row this band may need, so none is passed over.
            let source = self.source.as_mut().expect("the reader is back");
            let from = held_to
                .saturating_add(1)
                .max(self.lowest)
                .max(source.window.y0);
            let fresh = source.take_rows(from..=y1)?;
            self.held = Some(Rc::new(match self.held.take() {
                Some(held) if held.data_window.height() > 0 => stack_rows(&held, fresh),
                _ => fresh,
            }));
        }
        let held = self.held.as_ref().expect("rows decoded");
        let w = held.data_window;
        if (w.y0, w.y1) == (y0, y1) {
            // Without translations every reader of the band asks for these rows (and gets the
            // band's one result), so the cache need not keep them.
            if self.one_shift {
                return Ok(self.held.take().expect("held"));
            }
            return Ok(held.clone());
        }
        Ok(Rc::new(held.cropped(Bounds { y0, y1, ..w })))
    }
}

/// `lower`'s rows under `upper`'s (same columns and channels).
fn stack_rows(upper: &DeepImage, lower: DeepImage) -> DeepImage {
    let counts: Vec<u32> = upper.counts().into_iter().chain(lower.counts()).collect();
    let planes = upper
        .planes
        .iter()
        .zip(lower.planes)
        .map(|(a, b)| match (a, b) {
            (Plane::F32(a), Plane::F32(b)) => Plane::F32([a.as_slice(), &b].concat()),
            (Plane::F16(a), Plane::F16(b)) => Plane::F16([a.as_slice(), &b].concat()),
            (Plane::U32(a), Plane::U32(b)) => Plane::U32([a.as_slice(), &b].concat()),
            _ => unreachable!("one input's bands have one channel list"),
        })
        .collect();
    DeepImage::from_counts(
        upper.display_window,
        Bounds {
            y1: lower.data_window.y1,
            ..upper.data_window
        },
        upper.channels.clone(),
        &counts,
        planes,
        upper.state.meet(lower.state),
    )
    .expect("stacked rows agree")
}

/// The rows worked in the current band, each kept until its last reader has it: with every
/// node's band alive at once, a graph would hold a band per node.
struct Memo {
    done: HashMap<(usize, i32, i32), Rc<MergeOutput>>,
    /// Readers of each node still to come in this band.
    left: Vec<usize>,
}

impl Memo {
    fn new(readers: &[usize]) -> Self {
        Memo {
            done: HashMap::new(),
            left: readers.to_vec(),
        }
    }

    /// One reader of node `n` has its rows; after the last one they go.
    fn used(&mut self, n: usize) {
        self.left[n] = self.left[n].saturating_sub(1);
        if self.left[n] == 0 {
            self.done.retain(|k, _| k.0 != n);
        }
    }
}

/// What the reader thread hands over per band: each deep input's rows of the band (node, rows).
type InputRows = Result<Vec<(usize, DeepImage)>>;

/// What the calling thread hands the writer thread.
enum ToWriter {
    /// Output `k`'s rows of a band, over its window.
    Rows(usize, MergeOutput, Bounds),
    /// Every output's rows of a band are sent: the reader may decode another in its place.
    BandDone,
    /// Every band is sent: finish the files.
    Finish,
}

/// A writer of one output.
enum Sink {
    Deep(DeepChunkWriter),
    Flat(FlatChunkWriter),
    Png(PngBandWriter),
}

/// The graph being run.
struct Runner<'g> {
    graph: &'g Graph,
    plans: Vec<NodePlan>,
    bands: Vec<crate::stream::Band>,
    /// Where the GL merges get their context.
    #[cfg_attr(not(feature = "gl"), allow(dead_code))]
    gl: &'g GraphEngine,
}

/// A node's place in refusals: the script line and its name.
fn at_node(graph: &Graph, n: usize) -> impl Fn(Error) -> Error + '_ {
    move |e| match e {
        Error::Usage(m) => {
            let node = &graph.nodes[n];
            Error::Usage(format!("node {} (line {}): {m}", node.name, node.line))
        }
        other => other,
    }
}

impl<'g> Runner<'g> {
    /// Open the inputs, plan every node and the bands.
    fn open(graph: &'g Graph, options: &RunOptions, gl: &'g GraphEngine) -> Result<Self> {
        let mut runner = Runner {
            graph,
            plans: Vec::with_capacity(graph.nodes.len()),
            bands: Vec::new(),
            gl,
        };
        for n in 0..graph.nodes.len() {
            let plan = runner.plan_node(n, options).map_err(at_node(graph, n))?;
            runner.plans.push(plan);
        }
        runner.set_reach();
        runner.plan_bands(options)?;
        Ok(runner)
    }

    /// The input `k` of node `n`'s plan.
    fn input(&self, n: usize, k: usize) -> &NodePlan {
        &self.plans[self.graph.reads[n][k]]
    }

    /// The `idManifest` of node `n`'s first input, if it carries one (id names in idselect and
    /// grade nodes resolve against it).
    fn input_manifest(&self, n: usize) -> Result<Option<IdManifest>> {
        self.input(n, 0)
            .attributes
            .iter()
            .find(|a| a.name == "idManifest" && a.kind == "idmanifest")
            .map(|a| IdManifest::from_attribute(&a.value))
            .transpose()
    }

    fn head(&self, n: usize, k: usize) -> &DeepImage {
        self.input(n, k).head.as_ref().expect("a deep input")
    }

    /// Node `n`'s windows, channels and work (its inputs are planned).
    fn plan_node(&mut self, n: usize, options: &RunOptions) -> Result<NodePlan> {
        let graph = self.graph;
        let node = &graph.nodes[n];
        // An input is opened as a deep file when a node reads its samples or an output writes
        // it as it is; one only read as a flat file is opened by its reader.
        let deep_read = graph.outputs.iter().any(|o| o.node == n)
            || graph.reads.iter().zip(&graph.nodes).any(|(r, m)| {
                m.op.inputs()
                    .iter()
                    .zip(r)
                    .any(|(&(_, flat), &i)| i == n && !flat)
            });
        let same_as_input = |this: &Self, work: Work, head: Option<DeepImage>| NodePlan {
            window: this.input(n, 0).window,
            display: this.input(n, 0).display,
            head,
            attributes: this.input(n, 0).attributes.clone(),
            flat_type: FlatType::Half,
            work,
        };
        Ok(match &node.op {
            Op::Read { path, part } => {
                if !deep_read {
                    // Flat inputs are opened by the node reading them (recolor, deepen).
                    return Ok(NodePlan {
                        window: Bounds::from_origin_size(0, 0, 0, 0),
                        display: Bounds::from_origin_size(0, 0, 0, 0),
                        head: None,
                        attributes: Vec::new(),
                        flat_type: FlatType::Half,
                        work: Work::FlatInput,
                    });
                }
                let mut source = ChunkSource::open(path, part, options.budget)?;
                source.count_rows(options.budget)?;
                NodePlan {
                    window: source.window,
                    display: source.display_window,
                    head: Some(source.no_rows(source.window.y0)),
                    attributes: source.attributes.clone(),
                    flat_type: FlatType::Half,
                    work: Work::Read(Box::new(RowCache {
                        source: Some(source),
                        held: None,
                        lowest: i32::MIN,
                        reach: 0,
                        one_shift: true,
                    })),
                }
            }
            Op::Merge { request, .. } => {
                let k = graph.reads[n].len();
                let heads: Vec<&DeepImage> = (0..k).map(|i| self.head(n, i)).collect();
                let names: Vec<PathBuf> = graph.reads[n]
                    .iter()
                    .map(|&i| PathBuf::from(&graph.nodes[i].name))
                    .collect();
                let paths: Vec<&std::path::Path> = names.iter().map(PathBuf::as_path).collect();
                let merge = request.merge_options();
                check_compatible(&heads, &paths, &merge)?;
                let windows: Vec<Bounds> = (0..k).map(|i| self.input(n, i).window).collect();
                let window = request.bbox.resolve(&windows)?;
                let gl = request.uses_gl();
                if gl {
                    self.make_gl(request)?;
                }
                let head = self.merged_head(n, &merge, window)?;
                // Flat output follows the inputs' colour types, as the command's.
                let flat_type = request.flat_type.unwrap_or_else(|| {
                    FlatType::following((0..k).flat_map(|i| &self.head(n, i).channels))
                });
                NodePlan {
                    window,
                    display: self.input(n, 0).display,
                    head,
                    attributes: self.input(n, 0).attributes.clone(),
                    flat_type,
                    work: Work::Merge {
                        options: merge,
                        pruning: request.pruning,
                        gl,
                    },
                }
            }
            Op::Holdout { mode, .. } => {
                let head = holdout(self.head(n, 0), self.head(n, 1), *mode)?;
                same_as_input(self, Work::Holdout(*mode), Some(head))
            }
            Op::Operation {
                spec, operation, ..
            } => {
                // Flat inputs are files the operation reads itself (the graph checked that they
                // are inputs).
                let flat_files = graph.reads[n]
                    .iter()
                    .zip(spec.inputs)
                    .map(|(&i, input)| match &graph.nodes[i].op {
                        Op::Read { path, part } if input.flat => Some((path.as_path(), part)),
                        _ => None,
                    })
                    .collect();
                let inputs = NodeInputs {
                    manifest: self.input_manifest(n)?,
                    flat_files,
                    budget: options.budget,
                };
                match operation.node(&inputs)? {
                    NodeWork::Band { op, dy } => self.plan_op(n, op, dy)?,
                    NodeWork::FlatRows(mut rows) => {
                        let (window, display) = rows.windows();
                        let head = rows.rows(window.y0..=window.y0 - 1)?;
                        NodePlan {
                            window,
                            display,
                            head: Some(head),
                            attributes: rows.attributes().to_vec(),
                            flat_type: FlatType::Half,
                            work: Work::Deepen(rows),
                        }
                    }
                }
            }
            Op::Flatten {
                flat_z, flat_type, ..
            } => {
                let merge = MergeOptions {
                    output: OutputKind::Flat { z: *flat_z },
                    ..MergeOptions::default()
                };
                let heads = [self.head(n, 0)];
                check_compatible(&heads, &[std::path::Path::new(&node.name)], &merge)?;
                if crate::composite::CompositeChannels::of(&heads).is_empty() {
                    return Err(Error::Usage(
                        "its input holds no colour or alpha channel, so a flat composite has \
                         nothing to show"
                            .into(),
                    ));
                }
                let mut plan = same_as_input(
                    self,
                    Work::Merge {
                        options: merge,
                        pruning: Pruning::default(),
                        gl: false,
                    },
                    None,
                );
                plan.flat_type =
                    flat_type.unwrap_or_else(|| FlatType::following(&self.head(n, 0).channels));
                plan
            }
            Op::Tidy { .. } => {
                let merge = MergeOptions {
                    output: OutputKind::Deep,
                    tidy: true,
                    ..MergeOptions::default()
                };
                let window = self.input(n, 0).window;
                let head = self.merged_head(n, &merge, window)?;
                same_as_input(
                    self,
                    Work::Merge {
                        options: merge,
                        pruning: Pruning::default(),
                        gl: false,
                    },
                    head,
                )
            }
        })
    }

    /// The deep head (no rows) of a merge of node `n`'s inputs, or none for flat output.
    fn merged_head(
        &self,
        n: usize,
        merge: &MergeOptions,
        window: Bounds,
    ) -> Result<Option<DeepImage>> {
        if merge.output != OutputKind::Deep {
            return Ok(None);
        }
        let heads: Vec<&DeepImage> = (0..self.graph.reads[n].len())
            .map(|i| self.head(n, i))
            .collect();
        let none = Bounds {
            y1: window.y0 - 1,
            ..window
        };
        match crate::composite::merge_images_over(&heads, merge, Some(none))? {
            MergeOutput::Deep(image) => Ok(Some(image)),
            MergeOutput::Flat(_) => Err(Error::internal("a deep merge gave a flat image")),
        }
    }

    /// A band operation's plan: its windows from its input's, its channels from a band of no
    /// rows (which refuses what the command would: a missing id channel, no alpha).
    fn plan_op(&self, n: usize, op: Box<dyn DeepOp + Send>, dy: i32) -> Result<NodePlan> {
        let input = self.input(n, 0);
        let windows = op.windows(input.window, input.display)?;
        if windows.read.area() == 0 {
            // Nothing of the input is read: the node's rows are its window with no samples,
            // the image the command writes.
            let head = input.head.as_ref().expect("deep");
            let mut empty = DeepImage::empty(
                windows.display,
                Bounds {
                    y1: windows.data.y0 - 1,
                    ..windows.data
                },
                head.channels.clone(),
            );
            // An image with no samples is tidy, as the command writes it.
            empty.state = DeepState::Tidy;
            return Ok(NodePlan {
                window: windows.data,
                display: windows.display,
                head: Some(empty),
                attributes: input.attributes.clone(),
                flat_type: input.flat_type,
                work: Work::Empty,
            });
        }
        let empty_rows = Bounds {
            y1: windows.read.y0 - 1,
            y0: windows.read.y0,
            ..input.window
        };
        let head_in = input.head.as_ref().expect("deep").cropped(empty_rows);
        let mut head = op.apply_rows(&head_in, &windows, windows.data.y0..=windows.data.y0 - 1)?;
        head.display_window = windows.display;
        Ok(NodePlan {
            window: windows.data,
            display: windows.display,
            head: Some(head),
            attributes: input.attributes.clone(),
            flat_type: FlatType::Half,
            work: Work::Op { op, windows, dy },
        })
    }

    /// Start the GL context the first GL merge asks for, on a helper thread (one for the
    /// engine: every run on it shares it).
    #[cfg_attr(not(feature = "gl"), allow(unused_variables))]
    fn make_gl(&mut self, request: &crate::request::MergeRequest) -> Result<()> {
        #[cfg(feature = "gl")]
        {
            if self.gl.gl.get().is_none() {
                let chosen = crate::backend::choose_engine_with(
                    crate::request::Backend::Gl,
                    request.gl.is_given(),
                    request.deep,
                    None,
                    crate::backend::ContextStart::OnHelper,
                )?;
                let _ = self.gl.gl.set(chosen);
            }
            Ok(())
        }
        #[cfg(not(feature = "gl"))]
        Err(Error::Usage(
            "this build has no OpenGL engine (the gl feature); use backend = \"cpu\"".into(),
        ))
    }

    /// How far above a band each input's readers reach (see [`RowCache::reach`]).
    fn set_reach(&mut self) {
        let graph = self.graph;
        let mut shifts: Vec<Vec<i32>> = vec![Vec::new(); graph.nodes.len()];
        for output in &graph.outputs {
            shifts[output.node].push(0);
        }
        // Whether a node's rows are read through a change of resolution somewhere above it.
        let mut scaled = vec![false; graph.nodes.len()];
        for n in (0..graph.nodes.len()).rev() {
            let (dy, scales) = match &self.plans[n].work {
                Work::Op { dy, op, .. } => (*dy, op.scales_rows()),
                _ => (0, false),
            };
            let mine: Vec<i32> = shifts[n].iter().map(|s| s.saturating_add(dy)).collect();
            let below_scaled = scaled[n] || scales;
            for &i in &graph.reads[n] {
                shifts[i].extend(&mine);
                shifts[i].sort_unstable();
                shifts[i].dedup();
                scaled[i] |= below_scaled;
            }
        }
        for ((plan, shifts), scaled) in self.plans.iter_mut().zip(shifts).zip(scaled) {
            if let Work::Read(cache) = &mut plan.work {
                // The reader shifted most moves the rows it reads up the most.
                cache.reach = shifts.iter().copied().max().unwrap_or(0);
                // A change of resolution asks for rows other than the band's (and for some
                // twice, across bands): they are kept, and read on demand.
                cache.one_shift = shifts.len() <= 1 && !scaled;
            }
        }
    }

    /// Per node, the lowest row a band whose outputs start at `band_top` may ask of it: the
    /// band's top carried down every path from an output through each node's mapping of
    /// rows (a translation's shift, a reformat's footprints).
    fn lowest_rows(&self, band_top: i32) -> Vec<i32> {
        let graph = self.graph;
        let mut lowest = vec![i32::MAX; graph.nodes.len()];
        for output in &graph.outputs {
            lowest[output.node] = lowest[output.node].min(band_top);
        }
        for n in (0..graph.nodes.len()).rev() {
            if lowest[n] == i32::MAX {
                continue;
            }
            let (first, _) = self.rows_read(n, lowest[n], lowest[n]);
            for &i in &graph.reads[n] {
                lowest[i] = lowest[i].min(first);
            }
        }
        lowest
    }

    /// The rows of its deep inputs node `n` reads for its output rows `y0..=y1` (before
    /// clipping to their windows).
    fn rows_read(&self, n: usize, y0: i32, y1: i32) -> (i32, i32) {
        match &self.plans[n].work {
            Work::Op { op, windows, dy } => {
                let display = self.input(n, 0).display;
                op.rows_read(
                    display,
                    windows,
                    y0.saturating_sub(*dy),
                    y1.saturating_sub(*dy),
                )
            }
            _ => (y0, y1),
        }
    }

    /// The bands: the outputs' rows, cut by the planner over the inputs' count tables in each
    /// node's share of the budget.
    fn plan_bands(&mut self, options: &RunOptions) -> Result<()> {
        let windows: Vec<Bounds> = self
            .graph
            .outputs
            .iter()
            .map(|o| self.plans[o.node].window)
            .collect();
        let window = windows[1..].iter().fold(windows[0], |a, b| a.union(b));
        let workers = self
            .plans
            .iter()
            .filter(|p| !matches!(p.work, Work::Read(_) | Work::FlatInput))
            .count() as u64
            + 1;
        // The planner costs the rows of every input together; it takes the readers as a
        // slice, so they are lent to it and put back.
        let sources: Vec<ChunkSource> = self
            .plans
            .iter_mut()
            .filter_map(|p| match &mut p.work {
                Work::Read(cache) => cache.source.take(),
                _ => None,
            })
            .collect();
        // A reformat that shrinks reads several input rows per output row, which the planner
        // (costing each input row at its own row) does not see: the bands shrink by as much.
        let spread = (0..self.plans.len())
            .filter_map(|n| match &self.plans[n].work {
                Work::Op { op, .. } if op.scales_rows() => {
                    let w = self.plans[n].window;
                    let y = w.y0 + (w.height() / 2) as i32;
                    let (a, b) = self.rows_read(n, y, y);
                    Some((b as i64 - a as i64 + 1).max(1) as u64)
                }
                _ => None,
            })
            .max()
            .unwrap_or(1);
        // Every node may hold a band: each gets its share of the budget.
        let stream = StreamOptions {
            budget: options.budget / workers / spread,
            band_rows: options.band_rows,
            merge: MergeOptions {
                output: OutputKind::Deep,
                ..MergeOptions::default()
            },
            ..StreamOptions::default()
        };
        let shape = OutputShape {
            deep_value_bytes: sources.iter().map(|s| s.sample_bytes()).sum(),
            columns: 8,
            ids: 1,
        };
        let planned = plan_bands(&sources, window, &shape, &stream);
        let mut lent = sources.into_iter();
        for plan in &mut self.plans {
            if let Work::Read(cache) = &mut plan.work {
                cache.source = lent.next();
            }
        }
        self.bands = planned?;
        Ok(())
    }

    /// Every band through every output. As in the streamed merge (`stream::pipeline`), three
    /// stages overlap: a writer thread encodes band k-1's outputs while the calling thread (which
    /// owns a GL context, if any) works band k, and, where every input's readers ask for the
    /// band's own rows (no translation), a reader thread decodes band k+1's input rows.
    fn run(&mut self) -> Result<()> {
        let mut sinks = Vec::with_capacity(self.graph.outputs.len());
        for output in &self.graph.outputs {
            sinks.push(self.sink(output)?);
        }
        let bands = std::mem::take(&mut self.bands);
        // Readers of each node in a band: the outputs writing it and the nodes reading its
        // samples.
        let mut readers = vec![0; self.graph.nodes.len()];
        for output in &self.graph.outputs {
            readers[output.node] += 1;
        }
        for n in 0..self.graph.nodes.len() {
            for &i in &self.graph.reads[n][..self.deep_inputs(n)] {
                readers[i] += 1;
            }
        }
        let prefetch = self.plans.iter().all(|p| match &p.work {
            Work::Read(cache) => cache.one_shift && cache.reach == 0,
            _ => true,
        });
        let mut sources: Vec<(usize, ChunkSource)> = Vec::new();
        if prefetch {
            for (n, plan) in self.plans.iter_mut().enumerate() {
                if let Work::Read(cache) = &mut plan.work {
                    sources.push((n, cache.source.take().expect("a reader")));
                }
            }
        }
        let read_bands = bands.clone();
        // One token per band the plan lets be alive, as in the streamed merge: the reader takes
        // one before it decodes a band, the writer gives it back once the band is written, so
        // the reader decodes ahead while the calling thread waits (for a GL context made on a
        // helper, say), never further than the plan counted.
        let alive = crate::exr::BANDS_IN_FLIGHT as usize;
        let queued = if crate::stream::pipeline::read_ahead_from_env()? {
            alive
        } else {
            0
        };
        std::thread::scope(|scope| {
            let (read_tx, read_rx) = sync_channel::<InputRows>(queued);
            let (write_tx, write_rx) = sync_channel::<ToWriter>(0);
            let (token_tx, token_rx) = sync_channel::<()>(alive);
            for _ in 0..alive {
                token_tx.send(()).expect("room for every token");
            }
            if prefetch {
                scope.spawn(move || {
                    crate::timeline::name_thread("reader");
                    for band in read_bands {
                        // No token: the writer stopped (the run failed).
                        if token_rx.recv().is_err() {
                            break;
                        }
                        let _span = crate::timeline::span(|| format!("decode rows {band:?}"));
                        let rows: InputRows = sources
                            .iter_mut()
                            .filter_map(|(n, source)| {
                                let w = source.window;
                                let (a, b) = ((*band.start()).max(w.y0), (*band.end()).min(w.y1));
                                (a <= b).then(|| source.take_rows(a..=b).map(|i| (*n, i)))
                            })
                            .collect();
                        let failed = rows.is_err();
                        if read_tx.send(rows).is_err() || failed {
                            break;
                        }
                    }
                });
            }
            let writer = scope.spawn(move || -> Result<()> {
                crate::timeline::name_thread("writer");
                let mut sinks = sinks;
                for message in write_rx {
                    match message {
                        ToWriter::Rows(k, rows, window) => {
                            let _span = crate::timeline::span(|| {
                                let w = match &rows {
                                    MergeOutput::Deep(image) => image.data_window,
                                    MergeOutput::Flat(image) => image.data_window,
                                };
                                format!("encode rows {}..={} of output {k}", w.y0, w.y1)
                            });
                            write_band(&mut sinks[k], &rows, window)?;
                        }
                        // Never blocks: every token out is a band's; the reader may have
                        // stopped.
                        ToWriter::BandDone => {
                            let _ = token_tx.try_send(());
                        }
                        ToWriter::Finish => {
                            let _span = crate::timeline::span(|| "finish the output files".into());
                            for sink in sinks {
                                match sink {
                                    Sink::Deep(w) => w.finish()?,
                                    Sink::Flat(w) => w.finish()?,
                                    Sink::Png(w) => w.finish()?,
                                }
                            }
                            return Ok(());
                        }
                    }
                }
                // The work ended early: its error is the one to report; the temporary files go
                // with the writers.
                Ok(())
            });
            let worked = self.work_bands(bands, &readers, prefetch.then_some(&read_rx), &write_tx);
            let worked = worked.and_then(|()| {
                write_tx
                    .send(ToWriter::Finish)
                    .map_err(|_| Error::internal("the writer stopped"))
            });
            drop(write_tx);
            drop(read_rx);
            let written = writer.join().expect("writer thread");
            // A writer's error is the cause of a failed send.
            written.and(worked)
        })
    }

    /// The calling thread's part of [`Self::run`]: each band's outputs worked and handed to the
    /// writer, the inputs' rows taken from the reader thread when there is one.
    fn work_bands(
        &mut self,
        bands: Vec<crate::stream::Band>,
        readers: &[usize],
        read_rx: Option<&Receiver<InputRows>>,
        write_tx: &SyncSender<ToWriter>,
    ) -> Result<()> {
        for band in bands {
            let _span = crate::timeline::span(|| format!("work rows {band:?}"));
            match read_rx {
                Some(rx) => {
                    let rows = rx
                        .recv()
                        .map_err(|_| Error::internal("the reader stopped"))??;
                    for (n, image) in rows {
                        if let Work::Read(cache) = &mut self.plans[n].work {
                            cache.held = Some(Rc::new(image));
                        }
                    }
                }
                None => {
                    let lowest = self.lowest_rows(*band.start());
                    for (plan, lowest) in self.plans.iter_mut().zip(lowest) {
                        if let Work::Read(cache) = &mut plan.work {
                            cache.start_band(lowest);
                        }
                    }
                }
            }
            let mut memo = Memo::new(readers);
            for (k, output) in self.graph.outputs.iter().enumerate() {
                let w = self.plans[output.node].window;
                let (y0, y1) = ((*band.start()).max(w.y0), (*band.end()).min(w.y1));
                if y0 > y1 {
                    memo.used(output.node);
                    continue;
                }
                let rows = self.rows(output.node, y0, y1, &mut memo)?;
                memo.used(output.node);
                // Usually the last reader: the rows move to the writer without a copy.
                let rows = Rc::try_unwrap(rows).unwrap_or_else(|kept| kept.as_ref().clone());
                if write_tx.send(ToWriter::Rows(k, rows, w)).is_err() {
                    return Err(Error::internal("the writer stopped"));
                }
            }
            if write_tx.send(ToWriter::BandDone).is_err() {
                return Err(Error::internal("the writer stopped"));
            }
        }
        Ok(())
    }

    /// The writer of `output`, with the options it asks for and the attributes its node carries.
    fn sink(&self, output: &Output) -> Result<Sink> {
        let plan = &self.plans[output.node];
        let options = OutputOptions::new(output.compression, output.zstd_level, output.metadata)?;
        let carried = match output.metadata.unwrap_or_default() {
            MetadataMode::First => carried_attributes(&plan.attributes),
            MetadataMode::None => Vec::new(),
        };
        if is_png_path(&output.path) {
            return Ok(Sink::Png(PngBandWriter::create(&output.path, plan.window)?));
        }
        if plan.head.is_some() {
            let mut deep = options.deep(output.deep_state)?;
            deep.attributes.extend(carried);
            Ok(Sink::Deep(DeepChunkWriter::create(
                &output.path,
                plan.window,
                &deep,
            )?))
        } else {
            let mut flat = options.flat(plan.flat_type);
            flat.attributes.extend(carried);
            Ok(Sink::Flat(FlatChunkWriter::create(
                &output.path,
                plan.window,
                &flat,
            )?))
        }
    }

    /// Node `n`'s rows `y0..=y1` (inside its window), worked once per band.
    fn rows(&mut self, n: usize, y0: i32, y1: i32, memo: &mut Memo) -> Result<Rc<MergeOutput>> {
        if let Some(done) = memo.done.get(&(n, y0, y1)) {
            return Ok(done.clone());
        }
        let made = self.make_rows(n, y0, y1, memo)?;
        let made = Rc::new(made);
        memo.done.insert((n, y0, y1), made.clone());
        Ok(made)
    }

    /// Input `k` of node `n`, rows `y0..=y1` of the reader cut to the input's window (an image
    /// of no rows where they do not meet).
    fn input_rows(
        &mut self,
        n: usize,
        k: usize,
        y0: i32,
        y1: i32,
        memo: &mut Memo,
    ) -> Result<Rc<MergeOutput>> {
        let i = self.graph.reads[n][k];
        let plan = &self.plans[i];
        let (a, b) = (y0.max(plan.window.y0), y1.min(plan.window.y1));
        if a > b {
            let head = plan.head.as_ref().expect("deep inputs have heads");
            let none = Bounds {
                y0,
                y1: y0 - 1,
                ..plan.window
            };
            let mut empty = DeepImage::empty(plan.display, none, head.channels.clone());
            empty.state = head.state;
            memo.used(i);
            return Ok(Rc::new(MergeOutput::Deep(empty)));
        }
        let rows = self.rows(i, a, b, memo)?;
        memo.used(i);
        Ok(rows)
    }

    fn make_rows(&mut self, n: usize, y0: i32, y1: i32, memo: &mut Memo) -> Result<MergeOutput> {
        let window = self.plans[n].window;
        let band_window = Bounds { y0, y1, ..window };
        let deep_inputs = self.deep_inputs(n);
        let (a, b) = self.rows_read(n, y0, y1);
        let mut got = Vec::with_capacity(deep_inputs);
        for k in 0..deep_inputs {
            got.push(self.input_rows(n, k, a, b, memo)?);
        }
        let engine_gl;
        let out = match &mut self.plans[n].work {
            Work::Read(cache) => MergeOutput::Deep(
                Rc::try_unwrap(cache.rows(y0, y1)?).unwrap_or_else(|kept| kept.as_ref().clone()),
            ),
            Work::FlatInput => return Err(Error::internal("a flat input read as a node")),
            Work::Merge {
                options,
                pruning,
                gl,
            } => {
                engine_gl = *gl;
                let images: Vec<Cow<DeepImage>> = got
                    .iter()
                    .map(|m| match m.as_ref() {
                        MergeOutput::Deep(image) => Ok(Cow::Borrowed(image)),
                        MergeOutput::Flat(_) => Err(Error::internal("a flat node read as deep")),
                    })
                    .collect::<Result<_>>()?;
                let options = *options;
                let pruning = *pruning;
                let engine = self.engine(n, engine_gl);
                merge_checked(engine, images, &options, &pruning, Some(band_window))?.0
            }
            Work::Holdout(mode) => {
                MergeOutput::Deep(holdout(deep(&got[0])?, deep(&got[1])?, *mode)?)
            }
            Work::Op { op, windows, .. } => {
                let mut image = op.apply_rows(deep(&got[0])?, windows, y0..=y1)?;
                image.display_window = windows.display;
                MergeOutput::Deep(image)
            }
            Work::Deepen(rows) => MergeOutput::Deep(rows.rows(y0..=y1)?),
            Work::Empty => {
                let head = self.plans[n]
                    .head
                    .as_ref()
                    .expect("an empty node has a head");
                MergeOutput::Deep(DeepImage::empty(
                    self.plans[n].display,
                    band_window,
                    head.channels.clone(),
                ))
            }
        };
        Ok(out)
    }

    /// How many of its inputs node `n` reads deep rows of (the first ones; a recolor's flat
    /// input is read by its op, a deepen's by the node).
    fn deep_inputs(&self, n: usize) -> usize {
        match &self.plans[n].work {
            Work::Op { .. } => 1,
            Work::Read(_) | Work::FlatInput | Work::Deepen(_) | Work::Empty => 0,
            _ => self.graph.reads[n].len(),
        }
    }

    /// The engine of node `n`'s merge.
    #[cfg_attr(not(feature = "gl"), allow(unused_variables))]
    fn engine(&self, n: usize, gl: bool) -> MergeEngine<'_> {
        #[cfg(feature = "gl")]
        if gl {
            if let (Some(engine), Op::Merge { request, .. }) =
                (self.gl.gl.get(), &self.graph.nodes[n].op)
            {
                return engine.merging(request.gl_options());
            }
        }
        MergeEngine::Cpu
    }
}

/// The deep image of a node's rows.
fn deep(rows: &MergeOutput) -> Result<&DeepImage> {
    match rows {
        MergeOutput::Deep(image) => Ok(image),
        MergeOutput::Flat(_) => Err(Error::internal("a flat node read as deep")),
    }
}

/// Write one band of a node to its output's writer (a deep node to a PNG: its flat composite,
/// as the operations' `-o *.png` does).
fn write_band(sink: &mut Sink, rows: &MergeOutput, window: Bounds) -> Result<()> {
    match (sink, rows) {
        (Sink::Deep(w), MergeOutput::Deep(image)) => w.write_band(image),
        (Sink::Flat(w), MergeOutput::Flat(image)) => w.write_band(image),
        (Sink::Png(w), MergeOutput::Flat(image)) => w.write_band(image),
        (Sink::Png(w), MergeOutput::Deep(image)) => {
            let merge = MergeOptions {
                output: OutputKind::Flat { z: false },
                ..MergeOptions::default()
            };
            let band = Bounds {
                y0: image.data_window.y0,
                y1: image.data_window.y1,
                ..window
            };
            match crate::composite::merge_images_over(&[image], &merge, Some(band))? {
                MergeOutput::Flat(flat) => w.write_band(&flat),
                MergeOutput::Deep(_) => Err(Error::internal("a flat merge gave deep samples")),
            }
        }
        _ => Err(Error::internal("an output's writer does not fit its node")),
    }
}
