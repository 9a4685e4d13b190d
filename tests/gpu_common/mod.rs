//! Helpers shared by the GL tests: the real files, synthetic deep images with chosen edge cases,
//! and comparison against the reference merge.
//!
//! Where the tidy runs decides how close a GL merge must come to the reference
//! (`GlOptions::tidy_on_gpu`: `None` is the host, on every device; the sort is exact wherever
//! it runs). So every GL test states where they run ([`Stages`]), and [`assert_merge_matches`] is the one place that
//! turns that into a tolerance: bit-identical after the host's tidy (it is the reference's own
//! code), `deepmerge::verify::GPU_TIDY_TOLERANCE` on the pixels the GPU tidied (f32) and exact
//! everywhere else.
//! The same tests then check the same code on llvmpipe and on a hardware GPU.
#![allow(dead_code)]

use std::path::Path;

use deepmerge::composite::{
    merge_images, needs_deep_tidy, needs_tidy, MergeOptions, MergeOutput, MergePlan, MergeStrategy,
    OutputKind,
};
use deepmerge::deep::{
    Bounds, Channel, ChannelRole, DeepImage, DeepState, FlatImage, FlatValues, Plane, SampleType,
};
use deepmerge::exr::{read_deep, ReadOptions};
use deepmerge::gpu::{merge_images_gl, GlContext, GlOptions, GpuStats};
use deepmerge::scene::SceneRng;
use deepmerge::vocab::{Fragment, Layout, MergeMethod, PixelOrder};
use half::f16;

/// A real file from `tests/data/openexr-images`.
pub fn real(name: &str) -> DeepImage {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/openexr-images")
        .join(name);
    read_deep(&path, &ReadOptions::default()).expect("test file reads")
}

/// The tests' deterministic random numbers: the scene generator's own ([`SceneRng`]), so there
/// is one generator in the crate and a seed means the same data whatever crates resolve.
pub fn test_rng(seed: u64) -> SceneRng {
    SceneRng::new(seed, "tests")
}

/// Per pixel, a sorted list of depths (whole numbers below `depths`): `min..=max` of them, and
/// with `min` 0 a fifth of the pixels empty. The lists the layout stages' tests build from.
pub fn sorted_lists(
    pixels: usize,
    min: u32,
    max: u32,
    depths: usize,
    rng: &mut SceneRng,
) -> Vec<Vec<f32>> {
    (0..pixels)
        .map(|_| {
            let n = if min == 0 && rng.below(5) == 0 {
                0
            } else {
                min + rng.below((max - min) as usize + 1) as u32
            };
            let mut zs: Vec<f32> = (0..n).map(|_| rng.below(depths) as f32).collect();
            zs.sort_by(f32::total_cmp);
            zs
        })
        .collect()
}

/// A sorted stream for the merge stages' tests, pixel by pixel: a sixth of the pixels empty, the
/// others up to `max_at(p)` depths (whole numbers below 10, so ties are common), keys of input
/// `input` numbered in stream order, two values a sample (the key's number, a number below 100).
pub fn merge_stream(
    pixels: usize,
    max_at: impl Fn(usize) -> u32,
    seed: u64,
    input: u32,
) -> (Vec<u32>, Vec<Fragment>, Vec<f32>) {
    let mut rng = test_rng(seed);
    let (mut counts, mut keys, mut values) = (Vec::new(), Vec::new(), Vec::new());
    for p in 0..pixels {
        let n = if rng.below(6) == 0 {
            0
        } else {
            rng.below(max_at(p) as usize + 1) as u32
        };
        counts.push(n);
        let mut zs: Vec<f32> = (0..n).map(|_| rng.below(10) as f32).collect();
        zs.sort_by(f32::total_cmp);
        for z in zs {
            let index = keys.len() as u32;
            keys.push(Fragment {
                z,
                zback: z,
                input,
                index,
            });
            values.extend([index as f32, rng.below(100) as f32]);
        }
    }
    (counts, keys, values)
}

/// What a synthetic image looks like.
#[derive(Clone, Copy)]
pub struct Synth {
    pub window: Bounds,
    /// Samples per pixel are drawn from 0..=max_count.
    pub max_count: u32,
    /// Probability (percent) that a pixel is empty.
    pub empty_percent: u32,
    /// Depths are drawn from this many distinct values, so ties happen.
    pub depth_levels: u32,
    /// Add a ZBack channel with volumes (some of which overlap).
    pub volumes: bool,
    /// Store samples unsorted (state messy).
    pub messy: bool,
    /// Add a uint id channel.
    pub ids: bool,
    pub seed: u64,
}

impl Synth {
    pub fn new(window: Bounds, max_count: u32, seed: u64) -> Self {
        Synth {
            window,
            max_count,
            empty_percent: 20,
            depth_levels: 16,
            volumes: false,
            messy: false,
            ids: true,
            seed,
        }
    }

    /// The same, with a ZBack channel and volumes (some of which overlap).
    pub fn with_volumes(mut self) -> Self {
        self.volumes = true;
        self
    }

    pub fn build(&self) -> DeepImage {
        let mut rng = test_rng(self.seed);
        let pixels = self.window.area();
        let mut channels = vec![
            Channel::new("A", SampleType::F16),
            Channel::new("B", SampleType::F16),
            Channel::new("G", SampleType::F32),
            Channel::new("R", SampleType::F16),
            Channel::new("Z", SampleType::F32),
        ];
        if self.volumes {
            channels.push(Channel::new("ZBack", SampleType::F32));
        }
        if self.ids {
            channels.push(Channel::new("id", SampleType::U32));
        }
        channels.sort_by(|a, b| a.name.cmp(&b.name));
        let mut counts = Vec::with_capacity(pixels);
        let mut rows: Vec<Vec<f32>> = vec![Vec::new(); channels.len()];
        let mut ids = Vec::new();
        for _ in 0..pixels {
            let n = if rng.below(100) < self.empty_percent as usize {
                0
            } else {
                rng.below(self.max_count as usize + 1) as u32
            };
            counts.push(n);
            let mut samples: Vec<(f32, f32, f32, u32)> = (0..n)
                .map(|_| {
                    let z = 1.0 + rng.below(self.depth_levels as usize) as f32 * 0.5;
                    let zb = if self.volumes && rng.below(3) == 0 {
                        z + rng.below(4) as f32 * 0.25
                    } else {
                        z
                    };
                    let a = rng.below(5) as f32 / 4.0; // 0, .25, .5, .75, 1: opaque ones too
                    (z, zb, a, rng.next_u64() as u32)
                })
                .collect();
            if !self.messy {
                samples.sort_by(|x, y| {
                    x.0.partial_cmp(&y.0)
                        .unwrap()
                        .then(x.1.partial_cmp(&y.1).unwrap())
                });
            }
            for (z, zb, a, id) in samples {
                for (c, channel) in channels.iter().enumerate() {
                    let v = match channel.name.as_str() {
                        "A" => a,
                        "R" => a * 0.9,
                        "G" => a * (rng.below(1000) as f32 / 999.0),
                        "B" => a * 0.3,
                        "Z" => z,
                        "ZBack" => zb,
                        _ => 0.0,
                    };
                    rows[c].push(v);
                }
                ids.push(id);
            }
        }
        let planes = channels
            .iter()
            .zip(rows)
            .map(|(channel, values)| match channel.sample_type {
                SampleType::F16 => Plane::F16(values.into_iter().map(f16::from_f32).collect()),
                SampleType::F32 => Plane::F32(values),
                SampleType::U32 => Plane::U32(ids.clone()),
            })
            .collect();
        let display = Bounds::from_origin_size(0, 0, 256, 256);
        DeepImage::from_counts(
            display,
            self.window,
            channels,
            &counts,
            planes,
            if self.messy {
                DeepState::Messy
            } else {
                DeepState::Sorted
            },
        )
        .unwrap()
    }
}

/// The part of `image` inside `window` (intersected with its data window).
pub fn crop(image: &DeepImage, window: Bounds) -> DeepImage {
    image.cropped(window)
}

/// Where a GL merge runs its sort (`sort.comp`) and tidy (`tidy.comp`) stages, as a test states
/// it. Sorting is exact in both places; the tidy is f32 on the GPU and the reference's own f64
/// code on the host, which decides the tolerance ([`assert_merge_matches`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stages {
    /// `sort.comp` and `tidy.comp`, even on a software rasteriser.
    Gpu,
    /// The host (`composite`), even on a hardware GPU.
    Host,
}

impl Stages {
    /// Both, GPU first.
    pub const BOTH: [Stages; 2] = [Stages::Gpu, Stages::Host];

    /// The options of one cell of a test matrix: layout, method, block size and pixel order as
    /// given, the stages placed as `self` says, everything else default.
    pub fn cell(
        self,
        layout: Layout,
        method: MergeMethod,
        block_size: u32,
        pixel_order: PixelOrder,
    ) -> GlOptions {
        self.on(GlOptions {
            layout,
            method,
            block_size,
            pixel_order,
            ..Default::default()
        })
    }

    /// `gl` with its sort and tidy stages here.
    pub fn on(self, gl: GlOptions) -> GlOptions {
        let gpu = self == Stages::Gpu;
        GlOptions {
            sort_on_gpu: Some(gpu),
            tidy_on_gpu: Some(gpu),
            ..gl
        }
    }

    /// The CLI's words for the same: `--gpu-stages gpu|host`.
    pub fn cli(self) -> [&'static str; 2] {
        match self {
            Stages::Gpu => ["--gpu-stages", "gpu"],
            Stages::Host => ["--gpu-stages", "host"],
        }
    }

    /// Where `gl` tidies; `None` resolved as the engine resolves it (the host, on every
    /// device). Only tests of the defaults leave it `None`.
    pub fn tidy_of(gl: &GlOptions) -> Stages {
        if gl.tidies_on_gpu() {
            Stages::Gpu
        } else {
            Stages::Host
        }
    }
}

/// The reference merge of some inputs, with the pixels (of the output window, row-major) that
/// its tidy changed: those where volumes overlap, in flat output and in deep output with `tidy`,
/// and in a tidy deep output those with coincident points too (which it merges).
pub struct Reference {
    pub output: MergeOutput,
    pub tidied: Vec<bool>,
}

impl Reference {
    pub fn new(inputs: &[&DeepImage], options: &MergeOptions) -> Self {
        let output = merge_images(inputs, options).expect("reference merge");
        let flat = matches!(options.output, OutputKind::Flat { .. });
        let tidies = options.tidy || flat;
        let mut plan = MergePlan::new(inputs).expect("plan");
        plan.sort = options.sort;
        let window = plan.window;
        let mut samples = Vec::new();
        let mut tidied = Vec::with_capacity(window.area());
        for y in window.y0..=window.y1 {
            for x in window.x0..=window.x1 {
                tidied.push(
                    tidies && {
                        plan.ordered_samples(x, y, &mut samples);
                        if flat {
                            needs_tidy(&samples)
                        } else {
                            needs_deep_tidy(&samples)
                        }
                    },
                );
            }
        }
        Reference { output, tidied }
    }

    /// Pixels the tidy changed.
    pub fn tidied_pixels(&self) -> usize {
        self.tidied.iter().filter(|&&t| t).count()
    }
}

/// Merge with GL and compare with the reference at the tolerance that follows from where `gl`
/// tidies ([`assert_merge_matches`]); the stats must say the tidy ran there.
pub fn assert_gl_matches_reference(
    ctx: &GlContext,
    inputs: &[&DeepImage],
    options: &MergeOptions,
    gl: &GlOptions,
    what: &str,
) -> GpuStats {
    let reference = Reference::new(inputs, options);
    assert_gl_matches(ctx, inputs, options, gl, &reference, what)
}

/// Deep merges of `inputs` by `strategy` with `gl`, untidied and tidied, the tidy on the GPU and
/// on the host ([`Stages::BOTH`]), each against the reference; `each` gets every merge's
/// statistics and name, for what the caller checks beyond the bytes.
pub fn assert_deep_merges_match_reference(
    ctx: &GlContext,
    inputs: &[&DeepImage],
    strategy: MergeStrategy,
    gl: GlOptions,
    what: &str,
    mut each: impl FnMut(&GpuStats, &str),
) {
    for tidy in [false, true] {
        for stages in Stages::BOTH {
            let options = MergeOptions {
                output: OutputKind::Deep,
                strategy,
                tidy,
                ..Default::default()
            };
            let what = format!("{what} {strategy:?} tidy {tidy} {stages:?} stages");
            let stats = assert_gl_matches_reference(ctx, inputs, &options, &stages.on(gl), &what);
            each(&stats, &what);
        }
    }
}

/// As [`assert_gl_matches_reference`], with the reference computed once by the caller.
pub fn assert_gl_matches(
    ctx: &GlContext,
    inputs: &[&DeepImage],
    options: &MergeOptions,
    gl: &GlOptions,
    reference: &Reference,
    what: &str,
) -> GpuStats {
    let (output, stats) = merge_images_gl(ctx, inputs, options, gl)
        .unwrap_or_else(|e| panic!("{what}: GL merge failed: {e}"));
    let tidy = Stages::tidy_of(gl);
    let to_tidy = reference.tidied_pixels() as u64;
    match tidy {
        Stages::Host => assert!(
            stats.gpu_tidied_pixels == 0 && stats.host_tidied_pixels == to_tidy,
            "{what}: the host tidies the {to_tidy} pixels, not the GPU: {stats:?}"
        ),
        // The GPU leaves pixels too long for one pass of its walk to the host.
        Stages::Gpu => assert!(
            to_tidy == 0 || stats.gpu_tidied_pixels > 0,
            "{what}: the GPU tidies: {stats:?}"
        ),
    }
    assert_merge_matches(&output, reference, tidy, what);
    stats
}

/// THE tolerance of a GL merge against the reference, from where it tidied:
/// - host: bit-identical (flat bit for bit: the shaders keep the reference's order of operations
///   and `precise` forbids fma; deep: every channel copied from the sources);
/// - GPU: in the pixels the tidy changed, float values within the library's
///   `GPU_TIDY_TOLERANCE` (plus the rounding of half channels), with counts, depths (Z, ZBack), uint channels (ids) and the front
///   sample's Z exact; every other pixel bit-identical.
pub fn assert_merge_matches(got: &MergeOutput, reference: &Reference, tidy: Stages, what: &str) {
    let tidied = |p: usize| tidy == Stages::Gpu && reference.tidied[p];
    match (got, &reference.output) {
        (MergeOutput::Flat(a), MergeOutput::Flat(b)) => assert_flat_matches(a, b, tidied, what),
        (MergeOutput::Deep(a), MergeOutput::Deep(b)) => {
            assert_same_deep_shape(a, b, what);
            for (c, (pa, pb)) in a.planes.iter().zip(&b.planes).enumerate() {
                let channel = &a.channels[c];
                if pa == pb {
                    continue;
                }
                let exact = is_exact(&channel.name, channel.sample_type);
                for p in 0..b.pixel_count() {
                    for i in b.range(p) {
                        let (u, v) = (pa.get_f32(i), pb.get_f32(i));
                        let same = bits(pa, i) == bits(pb, i);
                        let half = matches!(pb, Plane::F16(_));
                        assert!(
                            same || (tidied(p) && !exact && close(u, v, half)),
                            "{what}: deep channel {} at pixel {:?} sample {}: {u} vs {v} ({})",
                            channel.name,
                            b.data_window.coords_of(p),
                            i - b.range(p).start,
                            if tidied(p) {
                                "tidied on the GPU"
                            } else {
                                "must be exact"
                            }
                        );
                    }
                }
            }
        }
        _ => panic!("{what}: output kinds differ"),
    }
}

/// The stored bits of value `i`.
fn bits(plane: &Plane, i: usize) -> u32 {
    match plane {
        Plane::U32(v) => v[i],
        Plane::F16(v) => v[i].to_bits() as u32,
        Plane::F32(v) => v[i].to_bits(),
    }
}

/// Depths and ids never pass through the GPU tidy's arithmetic: they must match exactly.
fn is_exact(name: &str, sample_type: SampleType) -> bool {
    matches!(
        ChannelRole::of(name, sample_type),
        ChannelRole::Z | ChannelRole::ZBack | ChannelRole::Id
    )
}

/// Within the GPU tidy's tolerance, the library's one definition
/// ([`deepmerge::verify::within_gpu_tidy_tolerance`], which `gpu-info --verify` applies too);
/// two NaNs match.
fn close(u: f32, v: f32, half: bool) -> bool {
    deepmerge::verify::within_gpu_tidy_tolerance(u, v, half) || (u.is_nan() && v.is_nan())
}

fn assert_flat_matches(a: &FlatImage, b: &FlatImage, tidied: impl Fn(usize) -> bool, what: &str) {
    assert_eq!(a.data_window, b.data_window, "{what}");
    assert_eq!(a.channels.len(), b.channels.len(), "{what}");
    for (ca, cb) in a.channels.iter().zip(&b.channels) {
        assert_eq!(ca.name, cb.name, "{what}");
        match (&ca.values, &cb.values) {
            (FlatValues::F32(x), FlatValues::F32(y)) => {
                let exact = is_exact(&ca.name, SampleType::F32);
                for (p, (u, v)) in x.iter().zip(y).enumerate() {
                    assert!(
                        u.to_bits() == v.to_bits() || (tidied(p) && !exact && close(*u, *v, false)),
                        "{what}: flat channel {} at pixel {:?}: gl {u} ({:#x}) reference {v} ({:#x}), {}",
                        ca.name,
                        a.data_window.coords_of(p),
                        u.to_bits(),
                        v.to_bits(),
                        if tidied(p) { "tidied on the GPU" } else { "must be exact" }
                    );
                }
            }
            (FlatValues::U32(x), FlatValues::U32(y)) => {
                assert!(x == y, "{what}: flat channel {} differs", ca.name)
            }
            _ => panic!("{what}: channel {} changed type", ca.name),
        }
    }
}

/// Same window, channels, state and per-pixel counts (naming the first pixel whose count
/// differs).
pub fn assert_same_deep_shape(a: &DeepImage, b: &DeepImage, what: &str) {
    assert_eq!(a.data_window, b.data_window, "{what}");
    assert_eq!(a.channels, b.channels, "{what}");
    assert_eq!(a.state, b.state, "{what}");
    if a.offsets != b.offsets {
        let p = a
            .offsets
            .iter()
            .zip(&b.offsets)
            .position(|(x, y)| x != y)
            .unwrap();
        panic!(
            "{what}: deep counts differ from pixel {:?}",
            a.data_window.coords_of(p.saturating_sub(1))
        );
    }
}

type GlJob = Box<dyn FnOnce(&GlContext) + Send>;

/// Run `job` on this test binary's one GL thread, which owns one strict-mode context for all
/// tests, so the compiled programs are shared (compiling on llvmpipe costs far more than the
/// small merges these tests run). A panic in the job, or anything strict mode found during it,
/// is raised in the calling test.
pub fn with_gl<R: Send + 'static>(job: impl FnOnce(&GlContext) -> R + Send + 'static) -> R {
    use std::sync::mpsc::{channel, Sender};
    use std::sync::{Mutex, OnceLock};
    static GL_THREAD: OnceLock<Mutex<Sender<GlJob>>> = OnceLock::new();
    let sender = GL_THREAD
        .get_or_init(|| {
            let (tx, rx) = channel::<GlJob>();
            std::thread::spawn(move || {
                // Strict mode (the hazard checker, poison, GL errors as failures): llvmpipe
                // as strict as a GPU.
                let ctx = GlContext::new_with(true).expect(
                    "a GL 4.3 context is required (GL tests fail without it): apt-get install libegl1 libgl1-mesa-dri",
                );
                for job in rx {
                    job(&ctx);
                }
            });
            Mutex::new(tx)
        })
        .lock()
        .unwrap()
        .clone();
    let (result_tx, result_rx) = std::sync::mpsc::channel();
    sender
        .send(Box::new(move |ctx: &GlContext| {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let value = job(ctx);
                // Whatever strict mode found and no call reported fails the test here.
                if let Err(e) = ctx.strict_report() {
                    panic!("{e}");
                }
                value
            }));
            let _ = result_tx.send(result);
        }))
        .expect("GL thread alive");
    match result_rx
        .recv()
        .expect("the GL thread died (no GL context?)")
    {
        Ok(value) => value,
        // Raised again here with its message: the GL thread's own panic output is captured
        // with whichever test first started that thread, not this one.
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic on the GL thread".into());
            panic!("{message}")
        }
    }
}

/// The three outputs every GL matrix runs: flat with Z, deep, deep tidy.
pub fn outputs() -> [MergeOptions; 3] {
    [
        MergeOptions {
            output: OutputKind::Flat { z: true },
            ..Default::default()
        },
        MergeOptions {
            output: OutputKind::Deep,
            ..Default::default()
        },
        MergeOptions {
            output: OutputKind::Deep,
            tidy: true,
            ..Default::default()
        },
    ]
}
