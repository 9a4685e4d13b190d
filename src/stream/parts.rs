//! Multi-part inputs: which part of each input a merge reads, and merges part by part (stereo).
//!
//! A merge reads one deep part per input. `--part` names it for every input, or once per input
//! (a stereo file's right eye with a single-part element: `--part rgba.right --part 0`).
//! Inputs that all hold the same two or more deep parts (a left and a right eye) merge part by
//! part without being asked, as `--all-parts` asks for: each deep part of the first input, with
//! the part of every other input that has its name, or else its `view` (left with left), is a
//! merge of its own, streamed band by band, and the output has one part per merge, with the
//! first input's part names and views ([`merge_parts`]). Under `--all-parts` a part missing from
//! an input is an error naming the file and the part. Otherwise each input's first deep part is
//! merged, and an input with several says so on stderr ([`PartPlan::One`]'s notes), so a right
//! eye is never dropped without a word.

use std::path::{Path, PathBuf};

use super::{MergeEngine, StreamMerge, StreamOptions, StreamReport};
use crate::composite::OutputKind;
use crate::error::{Error, Result};
use crate::exr::{join_parts, PartFile, PartInfo, PartSelector};
use crate::run_stats::RunStats;

/// Which parts of the inputs a merge reads (`--part`, `--all-parts`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum PartRequest {
    /// Nothing chosen: part by part when every input holds the same two or more deep parts,
    /// else each input's first deep part (with a note for an input that has several).
    #[default]
    Auto,
    /// This part of every input (`--part P` given once).
    Every(PartSelector),
    /// One part per input, in input order (`--part` given once per input).
    PerInput(Vec<PartSelector>),
    /// Part by part: every deep part of the first input, with the part of each other input
    /// that has its name or view; one missing is an error (`--all-parts`).
    All,
}

/// One part of a part-by-part output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputPart {
    /// The part's name: the first input's part's.
    pub name: String,
    /// The first input's part's `view`, if it has one.
    pub view: Option<String>,
    /// The index of the part merged, per input.
    pub parts: Vec<usize>,
}

/// What a merge reads, once the inputs' headers are known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PartPlan {
    /// One single-part output, from `parts[i]` of input `i`; `notes` are the lines to print
    /// on stderr (an input with several deep parts of which the first is merged).
    One {
        /// Per input, the part read.
        parts: Vec<PartSelector>,
        /// What to say about the choice.
        notes: Vec<String>,
    },
    /// A multi-part output, a merge per part.
    Each(Vec<OutputPart>),
}

/// A part's `view` attribute.
fn view_of(part: &PartInfo) -> Option<String> {
    part.attributes
        .iter()
        .find(|a| a.name == "view")
        .and_then(|a| a.text())
}

/// How a part is named in messages: `"rgba.right"`, or its index when it has no name.
fn label(part: &PartInfo) -> String {
    match &part.name {
        Some(name) => format!("{name:?}"),
        None => format!("{}", part.index),
    }
}

/// The deep part of `parts` that goes with `wanted`: the one of the same name, else the one
/// (only one) of the same view.
fn matching(parts: &[PartInfo], wanted: &PartInfo) -> Option<usize> {
    let deep = || parts.iter().filter(|p| p.deep);
    if let Some(name) = &wanted.name {
        if let Some(p) = deep().find(|p| p.name.as_ref() == Some(name)) {
            return Some(p.index);
        }
    }
    let view = view_of(wanted)?;
    let mut same_view = deep().filter(|p| view_of(p).as_ref() == Some(&view));
    match (same_view.next(), same_view.next()) {
        (Some(p), None) => Some(p.index),
        _ => None,
    }
}

/// Decide what a merge of `inputs` reads (see [`PartRequest`]); reads the headers of every
/// input for [`PartRequest::Auto`] and [`PartRequest::All`], none otherwise.
pub fn plan_parts(inputs: &[PathBuf], request: &PartRequest) -> Result<PartPlan> {
    let one = |parts: Vec<PartSelector>| PartPlan::One {
        parts,
        notes: Vec::new(),
    };
    match request {
        PartRequest::Every(p) => return Ok(one(vec![p.clone(); inputs.len()])),
        PartRequest::PerInput(parts) if parts.len() == inputs.len() => {
            return Ok(one(parts.clone()))
        }
        PartRequest::PerInput(parts) => {
            return Err(Error::Usage(format!(
                "{} parts chosen for {} inputs",
                parts.len(),
                inputs.len()
            )))
        }
        PartRequest::Auto | PartRequest::All => {}
    }
    let lists: Vec<Vec<PartInfo>> = inputs
        .iter()
        .map(|p| crate::exr::read_parts_info(p))
        .collect::<Result<_>>()?;
    let deep_count = |list: &[PartInfo]| list.iter().filter(|p| p.deep).count();
    let first_deep: Vec<&PartInfo> = lists[0].iter().filter(|p| p.deep).collect();
    let all = *request == PartRequest::All;
    // Every part of the first input with its match in each input, or the first part missing.
    let mut each = Vec::new();
    let mut missing = None;
    for part in &first_deep {
        let mut parts = Vec::with_capacity(inputs.len());
        for (path, list) in inputs.iter().zip(&lists) {
            match matching(list, part) {
                Some(index) => parts.push(index),
                None => {
                    missing.get_or_insert((path, list, *part));
                }
            }
        }
        each.push(OutputPart {
            name: part
                .name
                .clone()
                .unwrap_or_else(|| format!("part{}", part.index)),
            view: view_of(part),
            parts,
        });
    }
    if all {
        if let Some((path, list, part)) = missing {
            let have: Vec<String> = list.iter().filter(|p| p.deep).map(label).collect();
            let view = view_of(part).map_or(String::new(), |v| format!(" (view {v:?})"));
            // A part the file lacks is a usage error (exit 2), as with --part.
            return Err(Error::of_kind(
                crate::error::ErrorKind::Usage,
                format!(
                    "has no deep part {}{view} to merge part by part with {}; its deep parts: {}",
                    label(part),
                    inputs[0].display(),
                    have.join(", ")
                ),
            )
            .in_file(path));
        }
        if first_deep.is_empty() {
            // The reader's own refusal of a file without a deep part.
            crate::exr::select_part(&lists[0], &PartSelector::FirstDeep)
                .map_err(|e| e.in_file(&inputs[0]))?;
        }
    } else {
        let same_parts = missing.is_none()
            && first_deep.len() >= 2
            && lists.iter().all(|l| deep_count(l) == first_deep.len());
        if !same_parts {
            return Ok(first_parts(inputs, &lists));
        }
    }
    match <[OutputPart; 1]>::try_from(each) {
        // One part: a single-part output, as any merge.
        Ok([only]) => Ok(one(only
            .parts
            .into_iter()
            .map(PartSelector::Index)
            .collect())),
        Err(each) => Ok(PartPlan::Each(each)),
    }
}

/// Each input's first deep part, with a note for each input that has more than one.
fn first_parts(inputs: &[PathBuf], lists: &[Vec<PartInfo>]) -> PartPlan {
    let mut notes = Vec::new();
    for (path, list) in inputs.iter().zip(lists) {
        let deep: Vec<&PartInfo> = list.iter().filter(|p| p.deep).collect();
        if deep.len() >= 2 {
            let others: Vec<String> = deep[1..].iter().map(|p| label(p)).collect();
            notes.push(format!(
                "deepmerge: {}: merging its first deep part {} of {} (not {}); choose one with \
                 --part, or every part with --all-parts",
                path.display(),
                label(deep[0]),
                deep.len(),
                others.join(", ")
            ));
        }
    }
    PartPlan::One {
        parts: vec![PartSelector::FirstDeep; inputs.len()],
        notes,
    }
}

/// Run `plan`: one streamed merge of `inputs` into `output`, or, part by part, a streamed merge
/// per output part into a file beside `output` and then the multi-part file joined from them
/// ([`join_parts`]). Returns the report of each merge. `options.input_parts` is set here.
pub fn merge_parts(
    inputs: &[PathBuf],
    output: &Path,
    plan: &PartPlan,
    options: &StreamOptions,
    engine: MergeEngine,
    stats: Option<&RunStats>,
) -> Result<Vec<StreamReport>> {
    let with_parts = |parts: Vec<PartSelector>| StreamOptions {
        input_parts: parts,
        ..options.clone()
    };
    let each = match plan {
        PartPlan::One { parts, .. } => {
            let options = with_parts(parts.clone());
            let report = StreamMerge::open(inputs, &options, stats)?.run(output, engine, stats)?;
            return Ok(vec![report]);
        }
        PartPlan::Each(each) => each,
    };
    if options.merge.output != OutputKind::Deep && crate::preview::is_png_path(output) {
        return Err(Error::Usage(format!(
            "{} is a PNG preview of one image, and the inputs have {} parts: choose one with \
             --part",
            output.display(),
            each.len()
        )));
    }
    // One part's merge at a time, each in the whole budget: a part is opened (its count tables
    // read) only once the previous one is written.
    let mut files = Vec::with_capacity(each.len());
    let mut reports = Vec::with_capacity(each.len());
    for (number, part) in each.iter().enumerate() {
        let parts = part.parts.iter().copied().map(PartSelector::Index);
        let options = with_parts(parts.collect());
        let merge = StreamMerge::open(inputs, &options, stats)?;
        let file = PartScratch::create(output, number)?;
        reports.push(merge.run(file.path(), engine, stats)?);
        files.push((file, part));
    }
    let parts: Vec<PartFile> = files
        .iter()
        .map(|(file, part)| PartFile {
            path: file.path().to_path_buf(),
            name: part.name.clone(),
            view: part.view.clone(),
        })
        .collect();
    let timed = &mut || join_parts(output, &parts);
    match stats {
        Some(s) => s.time(crate::run_stats::Stage::Write, timed)?,
        None => timed()?,
    }
    Ok(reports)
}

/// Write a part-by-part output: `write` makes each part of `parts` (its index and a scratch
/// file beside `output`), one after another, then `output` is joined from them (the
/// operations' multi-part output, as [`merge_parts`] writes the merge's).
pub fn write_part_by_part(
    output: &Path,
    parts: &[OutputPart],
    write: &mut dyn FnMut(&OutputPart, &Path) -> Result<()>,
) -> Result<()> {
    // The scratch files live (and are removed when dropped, or on a signal) until the join.
    let mut scratches = Vec::with_capacity(parts.len());
    for (number, part) in parts.iter().enumerate() {
        let file = PartScratch::create(output, number)?;
        write(part, file.path())?;
        scratches.push(file);
    }
    let files: Vec<PartFile> = scratches
        .iter()
        .zip(parts)
        .map(|(file, part)| PartFile {
            path: file.path().to_path_buf(),
            name: part.name.clone(),
            view: part.view.clone(),
        })
        .collect();
    join_parts(output, &files)
}

/// The file one part of a part-by-part output is streamed into before the join: a name of its
/// own beside the output (`.deepmerge-OUT.partN.XXXXXX.exr`), reserved empty, replaced by the
/// part writer's rename, removed when dropped and on a terminating signal.
struct PartScratch {
    // Unlisted after the file is removed (fields drop in declaration order).
    file: tempfile::TempPath,
    _listed: crate::cleanup::TempFileGuard,
}

impl PartScratch {
    fn create(output: &Path, number: usize) -> Result<PartScratch> {
        let dir = match output.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let name = output
            .file_name()
            .ok_or_else(|| Error::file(output, "output is not a file name"))?;
        let file = tempfile::Builder::new()
            .prefix(&format!(
                ".deepmerge-{}.part{number}.",
                name.to_string_lossy()
            ))
            .suffix(".exr")
            .tempfile_in(dir)
            .map_err(|e| Error::write(output, e))?
            .into_temp_path();
        let listed = crate::cleanup::TempFileGuard::new(&file);
        Ok(PartScratch {
            file,
            _listed: listed,
        })
    }

    fn path(&self) -> &Path {
        &self.file
    }
}
