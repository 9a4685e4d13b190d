//! The engines the bench compares, behind one small trait, and the inputs they are given.
//!
//! Implemented now: [`CpuColumn`] (the reference engine, `composite::merge_images`, on data in
//! host memory) and [`OiiotoolColumn`] (OpenImageIO's `oiiotool --deepmerge`, end to end on EXR
//! files, as the peer). The GL engine is one [`BenchColumn`] per (layout, method) column, in
//! `bench/gl.rs`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::composite::{merge_images, MergeOptions, MergeOutput, OutputKind};
use crate::deep::DeepImage;
use crate::error::{Error, Result};

/// One scene's inputs, in memory and (for engines that read files) on disk.
pub struct BenchCase {
    /// Scene name.
    pub scene: String,
    /// The two-input scene (Tables 1, 2 and 4).
    pub pair: Vec<DeepImage>,
    /// The four-input scene (Table 3: (0 + 1) + (2 + 3)).
    pub quad: Vec<DeepImage>,
    /// `pair` and `quad` written as deep EXR files, when some engine needs files.
    pub files: Option<CaseFiles>,
    /// A folder the engines may write outputs into.
    pub work_dir: PathBuf,
}

/// Paths of a case's inputs on disk.
#[derive(Clone, Debug)]
pub struct CaseFiles {
    /// The two inputs.
    pub pair: Vec<PathBuf>,
    /// The four inputs.
    pub quad: Vec<PathBuf>,
}

/// What is timed: the paper's three merges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// Table 1: merge two inputs, compositing to a flat image as it goes.
    Composite,
    /// Table 2: merge two inputs and keep the merged deep image.
    SaveDeep,
    /// Table 3: merge four inputs pairwise, (0 + 1) + (2 + 3), compositing the last merge.
    Pairwise4,
}

impl Operation {
    /// All three, in table order.
    pub const ALL: [Operation; 3] = [
        Operation::Composite,
        Operation::SaveDeep,
        Operation::Pairwise4,
    ];

    /// Short name (criterion group names).
    pub fn name(self) -> &'static str {
        match self {
            Operation::Composite => "composite",
            Operation::SaveDeep => "save_deep",
            Operation::Pairwise4 => "pairwise4",
        }
    }
}

/// An engine under test. Each method runs its merge once and returns the time it took by the
/// engine's own clock (wall clock after the work is complete: for a GPU engine, after
/// `glFinish`), so that untimed set-up (uploading, building a layout) stays out of the number
/// where the paper keeps it out.
pub trait BenchColumn {
    /// Column label, e.g. `cpu`, `oiiotool e2e`, `BIA RBM`.
    fn name(&self) -> String;

    /// Untimed set-up for a case (a GPU engine uploads the inputs and builds its layout here).
    fn prepare(&mut self, _case: &BenchCase) -> Result<()> {
        Ok(())
    }

    /// Whether this column times `operation` (a column that varies only how deep output is
    /// written has nothing to say of a flat one: its cell reads `-`).
    fn times(&self, _operation: Operation) -> bool {
        true
    }

    /// Whether the case's inputs must be on disk ([`BenchCase::files`]).
    fn needs_files(&self) -> bool {
        false
    }

    /// Table 1: merge `case.pair` and composite.
    fn merge_flat(&mut self, case: &BenchCase) -> Result<Duration>;

    /// Table 2: merge `case.pair` and keep the deep result.
    fn merge_deep(&mut self, case: &BenchCase) -> Result<Duration>;

    /// Table 3: merge `case.quad` pairwise and composite the last merge.
    fn merge_pairwise(&mut self, case: &BenchCase) -> Result<Duration>;

    /// One untimed warm-up run of `operation`, then `repeats` timed runs. Engines whose set-up
    /// per run is costly but untimed (a GPU engine uploading and building its layout) override
    /// this to set up once and time `repeats` merges on the same resident data.
    fn time_operation(
        &mut self,
        operation: Operation,
        case: &BenchCase,
        repeats: usize,
    ) -> Result<Vec<Duration>> {
        let once = |engine: &mut Self| match operation {
            Operation::Composite => engine.merge_flat(case),
            Operation::SaveDeep => engine.merge_deep(case),
            Operation::Pairwise4 => engine.merge_pairwise(case),
        };
        once(self)?;
        (0..repeats).map(|_| once(self)).collect()
    }

    /// Table 4: bytes the engine holds for the two inputs, when it can say.
    fn memory_bytes(&self, case: &BenchCase) -> Option<u64>;

    /// Free what `prepare` made (GPU buffers) before the next case.
    fn release(&mut self) {}

    /// Per-stage GPU times (timer queries) of one untimed run of the last operation timed,
    /// when the engine profiles (GL with [`super::BenchConfig::stages`]); taken once.
    fn take_stage_profile(&mut self) -> Option<crate::gpu::GpuProfile> {
        None
    }
}

/// Run `operation` once on `engine`.
pub fn run_operation(
    engine: &mut dyn BenchColumn,
    operation: Operation,
    case: &BenchCase,
) -> Result<Duration> {
    match operation {
        Operation::Composite => engine.merge_flat(case),
        Operation::SaveDeep => engine.merge_deep(case),
        Operation::Pairwise4 => engine.merge_pairwise(case),
    }
}

/// Bytes of a deep image as the CPU holds it: u64 offsets plus every plane.
pub fn csr_bytes(image: &DeepImage) -> u64 {
    let planes: u64 = image
        .planes
        .iter()
        .map(|p| (p.len() * p.sample_type().size()) as u64)
        .sum();
    image.offsets.len() as u64 * 8 + planes
}

/// The CPU reference engine (`composite::merge_images`, rayon over rows) on host memory.
#[derive(Default)]
pub struct CpuColumn;

impl CpuColumn {
    fn merge(inputs: &[&DeepImage], output: OutputKind) -> Result<MergeOutput> {
        merge_images(
            inputs,
            &MergeOptions {
                output,
                ..MergeOptions::default()
            },
        )
    }
}

impl BenchColumn for CpuColumn {
    fn name(&self) -> String {
        "cpu".into()
    }

    fn merge_flat(&mut self, case: &BenchCase) -> Result<Duration> {
        let inputs: Vec<&DeepImage> = case.pair.iter().collect();
        let start = Instant::now();
        let out = Self::merge(&inputs, OutputKind::Flat { z: false })?;
        let time = start.elapsed();
        drop(out); // freeing the result is not part of the merge
        Ok(time)
    }

    fn merge_deep(&mut self, case: &BenchCase) -> Result<Duration> {
        let inputs: Vec<&DeepImage> = case.pair.iter().collect();
        let start = Instant::now();
        let out = Self::merge(&inputs, OutputKind::Deep)?;
        let time = start.elapsed();
        drop(out);
        Ok(time)
    }

    fn merge_pairwise(&mut self, case: &BenchCase) -> Result<Duration> {
        let q: Vec<&DeepImage> = case.quad.iter().collect();
        let start = Instant::now();
        let deep = |a: &DeepImage, b: &DeepImage| match Self::merge(&[a, b], OutputKind::Deep)? {
            MergeOutput::Deep(image) => Ok(image),
            MergeOutput::Flat(_) => Err(Error::Usage("deep merge gave a flat image".into())),
        };
        let left = deep(q[0], q[1])?;
        let right = deep(q[2], q[3])?;
        let out = Self::merge(&[&left, &right], OutputKind::Flat { z: false })?;
        let time = start.elapsed();
        drop((left, right, out));
        Ok(time)
    }

    fn memory_bytes(&self, case: &BenchCase) -> Option<u64> {
        Some(case.pair.iter().map(csr_bytes).sum())
    }
}

/// `oiiotool --deepmerge` end to end: process start, reading the EXR inputs, merging, writing
/// the output. It is the peer: a widely used tool doing the same job, timed in the same run.
pub struct OiiotoolColumn {
    program: PathBuf,
}

impl OiiotoolColumn {
    /// Use the `oiiotool` at `program`.
    pub fn new(program: PathBuf) -> Self {
        OiiotoolColumn { program }
    }

    /// The `oiiotool` on PATH with its version, if it is installed and runs.
    pub fn detect() -> Option<(PathBuf, String)> {
        Self::probe(Path::new("oiiotool"))
    }

    /// Check that `program` runs; returns it with its version.
    pub fn probe(program: &Path) -> Option<(PathBuf, String)> {
        let out = Command::new(program).arg("--version").output().ok()?;
        out.status.success().then(|| {
            let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
            (program.to_path_buf(), version)
        })
    }

    fn files(case: &BenchCase) -> Result<&CaseFiles> {
        case.files
            .as_ref()
            .ok_or_else(|| Error::Usage("oiiotool needs the inputs written to files".into()))
    }

    fn time(&self, args: &[&Path], extra: &[&str], output: &Path) -> Result<Duration> {
        let mut command = Command::new(&self.program);
        command.args(args).args(extra).arg("-o").arg(output);
        self.run_timed(command)
    }

    /// Run one whole oiiotool command and time it (process start to exit).
    fn run_timed(&self, mut command: Command) -> Result<Duration> {
        let start = Instant::now();
        let out = command
            .output()
            .map_err(|e| Error::Usage(format!("cannot run {}: {e}", self.program.display())))?;
        let time = start.elapsed();
        if !out.status.success() {
            return Err(Error::Usage(format!(
                "oiiotool failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(time)
    }
}

impl BenchColumn for OiiotoolColumn {
    fn name(&self) -> String {
        "oiiotool e2e".into()
    }

    fn needs_files(&self) -> bool {
        true
    }

    fn merge_flat(&mut self, case: &BenchCase) -> Result<Duration> {
        let f = Self::files(case)?;
        let out = case.work_dir.join("oiiotool-flat.exr");
        let args = [f.pair[0].as_path(), f.pair[1].as_path()];
        self.time(&args, &["--deepmerge", "--flatten"], &out)
    }

    fn merge_deep(&mut self, case: &BenchCase) -> Result<Duration> {
        let f = Self::files(case)?;
        let out = case.work_dir.join("oiiotool-deep.exr");
        let args = [f.pair[0].as_path(), f.pair[1].as_path()];
        self.time(&args, &["--deepmerge"], &out)
    }

    fn merge_pairwise(&mut self, case: &BenchCase) -> Result<Duration> {
        let f = Self::files(case)?;
        let out = case.work_dir.join("oiiotool-pairwise.exr");
        // oiiotool is a stack machine: a b --deepmerge c d --deepmerge --deepmerge merges
        // (a + b) + (c + d).
        let mut command = Command::new(&self.program);
        command
            .arg(&f.quad[0])
            .arg(&f.quad[1])
            .arg("--deepmerge")
            .arg(&f.quad[2])
            .arg(&f.quad[3])
            .args(["--deepmerge", "--deepmerge", "--flatten", "-o"])
            .arg(&out);
        self.run_timed(command)
    }

    fn memory_bytes(&self, _case: &BenchCase) -> Option<u64> {
        None
    }
}
