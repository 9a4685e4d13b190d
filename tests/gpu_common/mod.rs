//! Helpers shared by the GL tests: the real files, synthetic deep images with chosen edge cases,
//! and comparison against the reference merge.
#![allow(dead_code)]

use std::path::Path;

use deepmerge::composite::{merge_images, MergeOptions, MergeOutput};
use deepmerge::deep::{Bounds, Channel, DeepImage, DeepState, Plane, SampleType};
use deepmerge::exr::{read_deep, ReadOptions};
use deepmerge::gpu::{merge_images_gl, GlContext, GlOptions, GpuStats};
use deepmerge::scene::SceneRng;
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
    let dw = image.data_window;
    let window = Bounds {
        x0: window.x0.max(dw.x0),
        y0: window.y0.max(dw.y0),
        x1: window.x1.min(dw.x1),
        y1: window.y1.min(dw.y1),
    };
    let mut counts = Vec::new();
    let mut planes: Vec<Plane> = image
        .channels
        .iter()
        .map(|c| Plane::with_capacity(c.sample_type, 0))
        .collect();
    for y in window.y0..=window.y1 {
        for x in window.x0..=window.x1 {
            let p = image.pixel_index(x, y).unwrap();
            counts.push(image.count(p) as u32);
            for i in image.range(p) {
                for (c, plane) in planes.iter_mut().enumerate() {
                    plane.push_from(&image.planes[c], i);
                }
            }
        }
    }
    DeepImage::from_counts(
        image.display_window,
        window,
        image.channels.clone(),
        &counts,
        planes,
        image.state,
    )
    .unwrap()
}

/// Merge with GL and with the reference; the outputs must be identical. Flat output compares
/// bit for bit: the shader keeps the reference's order of operations and `precise` forbids fma.
pub fn assert_gl_matches_reference(
    ctx: &GlContext,
    inputs: &[&DeepImage],
    options: &MergeOptions,
    gl: &GlOptions,
    what: &str,
) -> GpuStats {
    let reference = merge_images(inputs, options).expect("reference merge");
    assert_gl_matches(ctx, inputs, options, gl, &reference, what)
}

/// As [`assert_gl_matches_reference`], with the reference output computed once by the caller.
pub fn assert_gl_matches(
    ctx: &GlContext,
    inputs: &[&DeepImage],
    options: &MergeOptions,
    gl: &GlOptions,
    reference: &MergeOutput,
    what: &str,
) -> GpuStats {
    let (output, stats) = merge_images_gl(ctx, inputs, options, gl)
        .unwrap_or_else(|e| panic!("{what}: GL merge failed: {e}"));
    match (&output, reference) {
        (MergeOutput::Flat(a), MergeOutput::Flat(b)) => {
            assert_eq!(a.data_window, b.data_window, "{what}");
            assert_eq!(a.channels.len(), b.channels.len(), "{what}");
            for (ca, cb) in a.channels.iter().zip(&b.channels) {
                assert_eq!(ca.name, cb.name, "{what}");
                if ca.values != cb.values {
                    let (va, vb) = match (&ca.values, &cb.values) {
                        (
                            deepmerge::deep::FlatValues::F32(x),
                            deepmerge::deep::FlatValues::F32(y),
                        ) => (
                            x.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                            y.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                        ),
                        (
                            deepmerge::deep::FlatValues::U32(x),
                            deepmerge::deep::FlatValues::U32(y),
                        ) => (x.clone(), y.clone()),
                        _ => panic!("{what}: channel {} changed type", ca.name),
                    };
                    let i = va.iter().zip(&vb).position(|(x, y)| x != y).unwrap();
                    panic!(
                        "{what}: flat channel {} differs first at pixel {:?}: gl bits {:#x} reference bits {:#x}",
                        ca.name,
                        a.data_window.coords_of(i),
                        va[i],
                        vb[i]
                    );
                }
            }
        }
        (MergeOutput::Deep(a), MergeOutput::Deep(b)) => {
            assert_same_deep_shape(a, b, what);
            for (c, (pa, pb)) in a.planes.iter().zip(&b.planes).enumerate() {
                assert!(
                    pa == pb,
                    "{what}: deep channel {} differs",
                    a.channels[c].name
                );
            }
        }
        _ => panic!("{what}: output kinds differ"),
    }
    stats
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

/// Deep images alike up to `tolerance` in their float values (absolute, relative above 1; plus
/// one half ulp for half channels, whose rounding a tiny difference can flip): same window,
/// channels, counts and state, uint channels exact.
pub fn assert_deep_close(a: &DeepImage, b: &DeepImage, tolerance: f32, what: &str) {
    assert_same_deep_shape(a, b, what);
    for (c, (pa, pb)) in a.planes.iter().zip(&b.planes).enumerate() {
        let name = &a.channels[c].name;
        match (pa, pb) {
            (Plane::U32(x), Plane::U32(y)) => assert_eq!(x, y, "{what}: channel {name}"),
            _ => {
                let half = matches!(pb, Plane::F16(_));
                for i in 0..pb.len() {
                    let (u, v) = (pa.get_f32(i), pb.get_f32(i));
                    let mut allowed = tolerance * v.abs().max(1.0);
                    if half {
                        let h = f16::from_f32(v);
                        allowed += (f16::from_bits(h.to_bits() + 1).to_f32() - h.to_f32()).abs();
                    }
                    assert!(
                        (u - v).abs() <= allowed || (u.is_nan() && v.is_nan()),
                        "{what}: channel {name} sample {i}: {u} vs {v}"
                    );
                }
            }
        }
    }
}

type GlJob = Box<dyn FnOnce(&GlContext) + Send>;

/// Run `job` on this test binary's one GL thread, which owns one context for all tests, so
/// the compiled programs are shared (compiling on llvmpipe costs far more than the small merges
/// these tests run). A panic in the job is re-raised in the calling test.
pub fn with_gl<R: Send + 'static>(job: impl FnOnce(&GlContext) -> R + Send + 'static) -> R {
    use std::sync::mpsc::{channel, Sender};
    use std::sync::{Mutex, OnceLock};
    static GL_THREAD: OnceLock<Mutex<Sender<GlJob>>> = OnceLock::new();
    let sender = GL_THREAD
        .get_or_init(|| {
            let (tx, rx) = channel::<GlJob>();
            std::thread::spawn(move || {
                let ctx = GlContext::new().expect(
                    "a GL 4.3 context (install libegl1 libgl1-mesa-dri); GL tests fail without it",
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
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(ctx)));
            let _ = result_tx.send(result);
        }))
        .expect("GL thread alive");
    match result_rx
        .recv()
        .expect("the GL thread died (no GL context?)")
    {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}
