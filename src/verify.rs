//! `deepmerge gpu-info --verify`: the GL engine against the CPU engine on this machine's GPU,
//! byte for byte, for a user after a driver update and as the first thing run on any GPU the
//! project is tested on.
//!
//! Cases: the bundled real files (`tests/data/openexr-images`, or `--data DIR`), and procedural
//! ones that reach what the real files do not: the hairball scene's long messy lists, volumes
//! that overlap (the tidy), an empty input, disjoint data windows, and bands forced small (the
//! banded merge and its buffer reuse). Each case runs every layout x method (stepwise, RBM
//! indexed, RBM shifted) x strategy (k-way, chain) x output (flat, deep, deep tidy) x stage
//! placement (sort and tidy on the host, on the GPU) x long-list schedule (per pixel,
//! cooperative: chains only, the one path that has it) x two block sizes.
//!
//! Every output must equal the CPU engine's bit for bit, except where the GPU tidies (f32 against
//! the CPU's f64): there the flattened result may differ by at most [`GPU_TIDY_TOLERANCE`]
//! (relative to values above 1), plus, for a tidied deep output, one step of a half float in
//! the channels it stores as half (each tidied sample is rounded to half after the f32
//! arithmetic, as the GL tests allow too).
//! On a software rasteriser a smaller set runs (smaller images, one block size, no indexed RBM)
//! so that CI runs it in bounded time; `--full` runs everything anywhere.

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::composite::{merge_images, MergeOptions, MergeOutput, MergeStrategy, OutputKind};
use crate::deep::{
    Bounds, Channel, DeepImage, DeepState, FlatImage, FlatValues, Plane, SampleType,
};
use crate::error::{Error, Result};
use crate::exr::{read_deep, ReadOptions};
use crate::gpu::{
    merge_images_gl, GlContext, GlOptions, Layout, LongLists, MergeMethod, RbmBlocks,
};
use crate::scene::SceneRng;

/// The stated tolerance of the GPU tidy (`tidy.comp`, f32 with series `log1p`/`expm1`) against
/// the f64 reference: absolute, relative above magnitude 1 ([`within_gpu_tidy_tolerance`]).
pub const GPU_TIDY_TOLERANCE: f32 = 1e-5;

/// Whether `got` is within [`GPU_TIDY_TOLERANCE`] of `reference`; where the channel is stored
/// as `half`, each side was rounded to half by up to half a step after the arithmetic, so one
/// half-float step of `reference` more. The one definition of the tolerance: `--verify` and the
/// GL tests both ask here.
pub fn within_gpu_tidy_tolerance(got: f32, reference: f32, half: bool) -> bool {
    let mut allowed = GPU_TIDY_TOLERANCE * reference.abs().max(1.0);
    if half {
        let h = half::f16::from_f32(reference);
        allowed += (half::f16::from_bits(h.to_bits() + 1).to_f32() - h.to_f32()).abs();
    }
    (got - reference).abs() <= allowed
}

/// What `--verify` runs.
#[derive(Clone, Debug, Default)]
pub struct VerifyOptions {
    /// Where the real files are (`None`: the repository's `tests/data/openexr-images`).
    pub data_dir: Option<PathBuf>,
    /// Every case at full size whatever the device (the default on hardware).
    pub full: bool,
    /// Only the case sets whose name contains this text.
    pub only: Option<String>,
}

/// One group's result: a line of the table.
#[derive(Clone, Debug)]
pub struct GroupResult {
    /// Case and strategy, e.g. `hairball 480x270, chain`.
    pub group: String,
    /// Merges run.
    pub runs: usize,
    /// The most row bands one of them was cut into.
    pub bands: usize,
    /// The failing configurations, each with what differed.
    pub failures: Vec<String>,
    /// Seconds the group took (CPU reference included).
    pub seconds: f64,
}

/// The whole run.
#[derive(Clone, Debug)]
pub struct VerifyReport {
    /// Renderer, version and vendor of the GL device.
    pub device: String,
    /// Whether the reduced set ran (a software rasteriser without `--full`).
    pub reduced: bool,
    pub groups: Vec<GroupResult>,
    /// Cases not run, with why (the real files not found).
    pub skipped: Vec<String>,
}

impl VerifyReport {
    /// Every configuration that failed, with its group.
    pub fn failures(&self) -> Vec<String> {
        self.groups
            .iter()
            .flat_map(|g| g.failures.iter().map(move |f| format!("{}: {f}", g.group)))
            .collect()
    }
}

/// A named set of inputs, and the band budget to merge them with (0: the driver's).
struct Case {
    name: String,
    inputs: Vec<DeepImage>,
    band_budget_bytes: u64,
}

/// Where the bundled real files are when `--data` is not given: the repository this binary was
/// built from.
pub fn default_data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/openexr-images")
}

/// Run the comparison on `ctx`, printing one table line per group to `out` as it goes.
pub fn verify(
    ctx: &GlContext,
    options: &VerifyOptions,
    out: &mut dyn std::io::Write,
) -> Result<VerifyReport> {
    let info = ctx.info();
    let reduced = info.software && !options.full;
    let device = format!("{} ({}, {})", info.renderer, info.version, info.vendor);
    let mut skipped = Vec::new();
    let mut cases = cases(options, reduced, &mut skipped)?;
    if let Some(only) = &options.only {
        cases.retain(|c| c.name.contains(only.as_str()));
        skipped.retain(|s| s.contains(only.as_str()));
        if cases.is_empty() {
            return Err(Error::Usage(format!(
                "--only {only}: no case set's name contains it"
            )));
        }
    }
    let configs = configs(reduced);
    let _ = writeln!(
        out,
        "verifying the GL engine against the CPU engine on {device}{}",
        if reduced {
            " (software rasteriser: the reduced set; --full runs all)"
        } else {
            ""
        }
    );
    for s in &skipped {
        let _ = writeln!(out, "  skipped: {s}");
    }
    let mut groups = Vec::new();
    for case in &cases {
        let refs: Vec<&DeepImage> = case.inputs.iter().collect();
        for strategy in [MergeStrategy::KWay, MergeStrategy::Chain] {
            let start = Instant::now();
            let mut group = GroupResult {
                group: format!("{}, {}", case.name, strategy_name(strategy)),
                runs: 0,
                bands: 0,
                failures: Vec::new(),
                seconds: 0.0,
            };
            for (output, tidy) in [
                (OutputKind::Flat { z: true }, false),
                (OutputKind::Deep, false),
                (OutputKind::Deep, true),
            ] {
                let merge = MergeOptions {
                    output,
                    tidy,
                    strategy,
                    ..Default::default()
                };
                let reference = merge_images(&refs, &merge)?;
                let flat_reference = match &reference {
                    MergeOutput::Deep(d) if tidy => Some(flatten(d)?),
                    _ => None,
                };
                for config in configs.iter().filter(|c| {
                    strategy == MergeStrategy::Chain || c.long_lists == LongLists::PerPixel
                }) {
                    let gl = GlOptions {
                        band_budget_bytes: case.band_budget_bytes,
                        ..*config
                    };
                    let what = format!("{} {}", output_name(output, tidy), describe(&gl));
                    group.runs += 1;
                    // In strict mode the merge reports what strict mode found before it returns.
                    let got = merge_images_gl(ctx, &refs, &merge, &gl).map(|(got, stats)| {
                        group.bands = group.bands.max(stats.bands);
                        got
                    });
                    let gpu_tidy = gl.tidies_on_gpu();
                    let verdict = match got {
                        Err(e) => Err(format!("failed: {e}")),
                        Ok(got) => compare(&got, &reference, flat_reference.as_ref(), gpu_tidy),
                    };
                    if let Err(why) = verdict {
                        group.failures.push(format!("{what}: {why}"));
                    }
                }
            }
            group.seconds = start.elapsed().as_secs_f64();
            let _ = writeln!(
                out,
                "  {:<44} {:>4} runs, {:>2} band(s)  {}  {:.1} s",
                group.group,
                group.runs,
                group.bands,
                if group.failures.is_empty() {
                    "ok".to_string()
                } else {
                    format!("{} FAILED", group.failures.len())
                },
                group.seconds
            );
            groups.push(group);
        }
    }
    Ok(VerifyReport {
        device,
        reduced,
        groups,
        skipped,
    })
}

fn strategy_name(s: MergeStrategy) -> &'static str {
    match s {
        MergeStrategy::KWay => "k-way",
        MergeStrategy::Chain => "chain",
    }
}

fn output_name(output: OutputKind, tidy: bool) -> &'static str {
    match (output, tidy) {
        (OutputKind::Flat { .. }, _) => "flat",
        (OutputKind::Deep, false) => "deep",
        (OutputKind::Deep, true) => "deep tidy",
    }
}

fn describe(gl: &GlOptions) -> String {
    let method = match (gl.method, gl.rbm_blocks) {
        (MergeMethod::Stepwise, _) => "S".to_string(),
        (MergeMethod::RegisterBlock, RbmBlocks::Indexed) => "RBM indexed".to_string(),
        (MergeMethod::RegisterBlock, RbmBlocks::Shifted) => "RBM shifted".to_string(),
    };
    let stages = if gl.sort_on_gpu == Some(true) {
        "GPU stages"
    } else {
        "host stages"
    };
    let long = match gl.long_lists {
        LongLists::PerPixel => String::new(),
        LongLists::Cooperative { threshold } => format!(", cooperative>{threshold}"),
    };
    format!(
        "{} {method} block {}, {stages}{long}",
        gl.layout.name(),
        gl.block_size
    )
}

/// Every GL configuration a case runs under.
fn configs(reduced: bool) -> Vec<GlOptions> {
    let methods: &[(MergeMethod, RbmBlocks)] = if reduced {
        &[
            (MergeMethod::Stepwise, RbmBlocks::Shifted),
            (MergeMethod::RegisterBlock, RbmBlocks::Shifted),
        ]
    } else {
        &[
            (MergeMethod::Stepwise, RbmBlocks::Shifted),
            (MergeMethod::RegisterBlock, RbmBlocks::Indexed),
            (MergeMethod::RegisterBlock, RbmBlocks::Shifted),
        ]
    };
    let blocks: &[u32] = if reduced { &[4] } else { &[4, 16] };
    let mut out = Vec::new();
    for layout in Layout::ALL {
        for &(method, rbm_blocks) in methods {
            for &block_size in blocks {
                for on_gpu in [false, true] {
                    for long_lists in [LongLists::PerPixel, LongLists::Cooperative { threshold: 8 }]
                    {
                        out.push(GlOptions {
                            layout,
                            method,
                            block_size,
                            rbm_blocks,
                            sort_on_gpu: Some(on_gpu),
                            tidy_on_gpu: Some(on_gpu),
                            long_lists,
                            // The k-way kernel even for two long inputs (the pairwise kernel
                            // that would run instead is the chain's, checked beside it).
                            pairwise_long_pairs: Some(false),
                            ..GlOptions::default()
                        });
                    }
                }
            }
        }
    }
    out
}

/// The cases (see the module docs); real files that are not found are listed in `skipped`.
fn cases(options: &VerifyOptions, reduced: bool, skipped: &mut Vec<String>) -> Result<Vec<Case>> {
    let mut cases = Vec::new();
    let dir = options.data_dir.clone().unwrap_or_else(default_data_dir);
    let names: &[&[&str]] = &[
        &["Leaves.exr", "Trunks.exr"],
        &["Balls.exr", "Leaves.exr", "Trunks.exr"],
    ];
    for set in names {
        let paths: Vec<PathBuf> = set.iter().map(|n| dir.join(n)).collect();
        if let Some(missing) = paths.iter().find(|p| !p.is_file()) {
            skipped.push(format!(
                "{}: {} not found (pass --data DIR, the folder of the bundled files)",
                set.join(" + "),
                missing.display()
            ));
            continue;
        }
        let mut inputs = Vec::new();
        for path in &paths {
            let image = read_deep(path, &ReadOptions::default())
                .map_err(|e| Error::Usage(format!("{}: {e}", path.display())))?;
            // The reduced set merges a corner where every file has samples.
            inputs.push(if reduced { crop(&image, 48, 32) } else { image });
        }
        cases.push(Case {
            name: set.join(" + "),
            inputs,
            band_budget_bytes: 0,
        });
    }
    let (w, h) = if reduced { (48, 27) } else { (480, 270) };
    cases.push(Case {
        name: format!("hairball {w}x{h}"),
        inputs: crate::scene::generate("hairball", w, h, 3)?,
        band_budget_bytes: 0,
    });
    let volumes = bounds(
        0,
        0,
        if reduced { 23 } else { 95 },
        if reduced { 15 } else { 63 },
    );
    cases.push(Case {
        name: "overlapping volumes".into(),
        inputs: vec![
            synthetic(volumes, 6, 11, false)?,
            synthetic(volumes, 6, 12, false)?,
        ],
        band_budget_bytes: 0,
    });
    cases.push(Case {
        name: "an empty input".into(),
        inputs: vec![
            synthetic(volumes, 0, 13, false)?,
            synthetic(volumes, 6, 14, true)?,
        ],
        band_budget_bytes: 0,
    });
    let right = bounds(volumes.x1 + 5, 3, volumes.x1 + 20, volumes.y1 + 3);
    cases.push(Case {
        name: "disjoint windows".into(),
        inputs: vec![
            synthetic(volumes, 5, 15, true)?,
            synthetic(right, 5, 16, false)?,
        ],
        band_budget_bytes: 0,
    });
    let (w, h) = if reduced { (32, 18) } else { (160, 90) };
    cases.push(Case {
        name: format!("hairball {w}x{h} in small bands"),
        inputs: crate::scene::generate("hairball", w, h, 5)?,
        // Several bands, yet room for the longest row when overlapped bands halve the budget
        // (on an H200, 64 KiB at full size left 32 KiB, under one row of 2147 samples).
        band_budget_bytes: if reduced { 64 << 10 } else { 1 << 20 },
    });
    Ok(cases)
}

/// The box from (x0, y0) to (x1, y1), inclusive.
fn bounds(x0: i32, y0: i32, x1: i32, y1: i32) -> Bounds {
    Bounds { x0, y0, x1, y1 }
}

/// The top-left `w` x `h` pixels of `image`'s data window.
fn crop(image: &DeepImage, w: i32, h: i32) -> DeepImage {
    let dw = image.data_window;
    image.cropped(bounds(dw.x0, dw.y0, dw.x0 + w - 1, dw.y0 + h - 1))
}

/// A deep image over `window` with up to `max_count` samples per pixel, a third of them volumes
/// (ZBack past Z, so lists overlap and need the tidy), ties in depth, an id channel; stored out
/// of order when `messy`.
fn synthetic(window: Bounds, max_count: usize, seed: u64, messy: bool) -> Result<DeepImage> {
    let mut rng = SceneRng::new(seed, "verify");
    let names = [
        ("A", SampleType::F16),
        ("B", SampleType::F16),
        ("G", SampleType::F32),
        ("R", SampleType::F16),
        ("Z", SampleType::F32),
        ("ZBack", SampleType::F32),
        ("id", SampleType::U32),
    ];
    let channels: Vec<Channel> = names.iter().map(|(n, t)| Channel::new(*n, *t)).collect();
    let mut values: Vec<Vec<f32>> = vec![Vec::new(); 6];
    let mut ids = Vec::new();
    let mut counts = Vec::with_capacity(window.area());
    for _ in 0..window.area() {
        let n = if max_count == 0 {
            0
        } else {
            rng.below(max_count + 1)
        };
        counts.push(n as u32);
        let mut samples: Vec<[f32; 3]> = (0..n)
            .map(|_| {
                let z = 1.0 + rng.below(12) as f32 * 0.5;
                let zb = if rng.below(3) == 0 {
                    z + rng.below(4) as f32 * 0.3
                } else {
                    z
                };
                [z, zb, rng.below(5) as f32 / 4.0]
            })
            .collect();
        if !messy {
            samples.sort_by(|a, b| a[0].total_cmp(&b[0]).then(a[1].total_cmp(&b[1])));
        }
        for [z, zb, a] in samples {
            let g = a * (rng.below(1000) as f32 / 999.0);
            for (c, v) in [a, a * 0.3, g, a * 0.9, z, zb].into_iter().enumerate() {
                values[c].push(v);
            }
            ids.push(rng.next_u64() as u32);
        }
    }
    let mut planes: Vec<Plane> = names[..6]
        .iter()
        .zip(values)
        .map(|((_, t), v)| match t {
            SampleType::F16 => Plane::F16(v.into_iter().map(half::f16::from_f32).collect()),
            _ => Plane::F32(v),
        })
        .collect();
    planes.push(Plane::U32(ids));
    let state = if messy {
        DeepState::Messy
    } else {
        DeepState::Sorted
    };
    DeepImage::from_counts(window, window, channels, &counts, planes, state)
}

/// The CPU engine's flattening of a deep image (a merge of one input).
fn flatten(image: &DeepImage) -> Result<FlatImage> {
    let options = MergeOptions {
        output: OutputKind::Flat { z: true },
        ..Default::default()
    };
    match merge_images(&[image], &options)? {
        MergeOutput::Flat(f) => Ok(f),
        MergeOutput::Deep(_) => Err(Error::internal("a flat merge gave a deep image")),
    }
}

/// `got` against the CPU engine's `reference`: bit for bit, or, where the GPU tidied, the
/// flattened values within [`GPU_TIDY_TOLERANCE`] (`flat_reference`: the reference flattened,
/// for a tidied deep output).
fn compare(
    got: &MergeOutput,
    reference: &MergeOutput,
    flat_reference: Option<&FlatImage>,
    gpu_tidy: bool,
) -> std::result::Result<(), String> {
    match (got, reference) {
        (MergeOutput::Flat(a), MergeOutput::Flat(b)) => {
            compare_flat(a, b, gpu_tidy.then_some(&[][..]))
        }
        (MergeOutput::Deep(a), MergeOutput::Deep(b)) => {
            if same_deep_bits(a, b) {
                return Ok(());
            }
            match flat_reference {
                Some(flat) if gpu_tidy => {
                    {
                        // Channels the deep output stores as half were rounded to half sample by
                        // sample after the GPU's f32 tidy.
                        let half: Vec<&str> = a
                            .channels
                            .iter()
                            .filter(|c| c.sample_type == SampleType::F16)
                            .map(|c| c.name.as_str())
                            .collect();
                        compare_flat(&flatten(a).map_err(|e| e.to_string())?, flat, Some(&half))
                    }
                }
                _ => Err(first_deep_difference(a, b)),
            }
        }
        _ => Err("the output kinds differ".into()),
    }
}

fn same_deep_bits(a: &DeepImage, b: &DeepImage) -> bool {
    a.data_window == b.data_window
        && a.channels == b.channels
        && a.offsets == b.offsets
        && a.planes
            .iter()
            .zip(&b.planes)
            .all(|(pa, pb)| same_plane_bits(pa, pb))
}

fn same_plane_bits(a: &Plane, b: &Plane) -> bool {
    match (a, b) {
        (Plane::F16(a), Plane::F16(b)) => a
            .iter()
            .map(|v| v.to_bits())
            .eq(b.iter().map(|v| v.to_bits())),
        (Plane::F32(a), Plane::F32(b)) => a
            .iter()
            .map(|v| v.to_bits())
            .eq(b.iter().map(|v| v.to_bits())),
        (Plane::U32(a), Plane::U32(b)) => a == b,
        _ => false,
    }
}

fn first_deep_difference(a: &DeepImage, b: &DeepImage) -> String {
    if a.data_window != b.data_window {
        return format!(
            "data window {:?}, CPU engine {:?}",
            a.data_window, b.data_window
        );
    }
    if a.offsets != b.offsets {
        let p = (0..b.pixel_count())
            .find(|&p| a.count(p) != b.count(p))
            .unwrap_or(0);
        return format!(
            "pixel {:?} has {} samples, CPU engine {}",
            b.data_window.coords_of(p),
            a.count(p),
            b.count(p)
        );
    }
    for (c, (pa, pb)) in a.planes.iter().zip(&b.planes).enumerate() {
        if same_plane_bits(pa, pb) {
            continue;
        }
        for p in 0..b.pixel_count() {
            for i in b.range(p) {
                let (u, v) = (pa.get_f32(i), pb.get_f32(i));
                if u.to_bits() != v.to_bits() {
                    return format!(
                        "channel {} at pixel {:?} sample {}: {u}, CPU engine {v}",
                        b.channels[c].name,
                        b.data_window.coords_of(p),
                        i - b.range(p).start
                    );
                }
            }
        }
    }
    "the channels differ".into()
}

/// `a` against the CPU engine's `b`: bit for bit, or with `tolerance` (where the GPU tidied)
/// within [`GPU_TIDY_TOLERANCE`], plus one step of a half float in the channels it names.
fn compare_flat(
    a: &FlatImage,
    b: &FlatImage,
    tolerance: Option<&[&str]>,
) -> std::result::Result<(), String> {
    if a.data_window != b.data_window || a.channels.len() != b.channels.len() {
        return Err(format!(
            "flat window {:?} with {} channels, CPU engine {:?} with {}",
            a.data_window,
            a.channels.len(),
            b.data_window,
            b.channels.len()
        ));
    }
    for (ca, cb) in a.channels.iter().zip(&b.channels) {
        let differs = |i: usize, u: String, v: String| {
            let width = b.data_window.width().max(1);
            format!(
                "flat channel {} at pixel ({}, {}): {u}, CPU engine {v}",
                cb.name,
                b.data_window.x0 + (i % width) as i32,
                b.data_window.y0 + (i / width) as i32
            )
        };
        match (&ca.values, &cb.values) {
            (FlatValues::F32(u), FlatValues::F32(v)) => {
                let half = tolerance.is_some_and(|h| h.contains(&cb.name.as_str()));
                for (i, (x, y)) in u.iter().zip(v).enumerate() {
                    let exact = x.to_bits() == y.to_bits();
                    let close = tolerance.is_some() && within_gpu_tidy_tolerance(*x, *y, half);
                    if !exact && !close {
                        return Err(differs(i, x.to_string(), y.to_string()));
                    }
                }
            }
            (FlatValues::U32(u), FlatValues::U32(v)) => {
                if let Some(i) = u.iter().zip(v).position(|(x, y)| x != y) {
                    return Err(differs(i, u[i].to_string(), v[i].to_string()));
                }
            }
            _ => return Err(format!("flat channel {}: types differ", cb.name)),
        }
    }
    Ok(())
}
