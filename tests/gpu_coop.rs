//! The cooperative schedule of the pairwise GL merge (`LongLists::Cooperative`,
//! `glsl/merge_coop.comp`) against the per-pixel one and the CPU engine (`composite::merge_images`,
//! whose pairwise step is the twin of both), bit for bit: every layout × method (S, RBM) ×
//! output (flat, deep), with lists longer than a register block and than the cooperative group,
//! counts that are not multiples of either, threshold 0 (every pixel with a fragment goes to a
//! workgroup) and thresholds that split the image, empty pixels and an empty input; three inputs,
//! so the chain's first merge runs back to front for LL; inputs that claim to be sorted and are
//! not (the group's fallback); the hairball scene's long lists; and the refusals.
//!
//! The tidy runs on the host (bit-identical to the CPU engine) except in one test that puts it on
//! the GPU and compares the two schedules with each other, both tidied there.

#![allow(clippy::needless_update)]

mod gpu_common;

use deepmerge::composite::{
    merge_images, MergeOptions, MergeOutput, MergeStrategy, OutputKind, SortPolicy,
};
use deepmerge::deep::{Bounds, DeepImage};
use deepmerge::gpu::{merge_images_gl, GlContext, GlOptions, Layout, LongLists, MergeMethod};
use gpu_common::{assert_merge_matches, with_gl, Reference, Stages, Synth};

fn chain(output: OutputKind) -> MergeOptions {
    MergeOptions {
        output,
        strategy: MergeStrategy::Chain,
        ..Default::default()
    }
}

const OUTPUTS: [OutputKind; 2] = [OutputKind::Flat { z: true }, OutputKind::Deep];

fn cooperative(threshold: u32) -> LongLists {
    LongLists::Cooperative { threshold }
}

/// Merge `inputs` per pixel and with each of `thresholds`; every one must equal the CPU engine
/// bit for bit (host tidy), and so each other.
fn assert_schedules_agree(
    ctx: &GlContext,
    inputs: &[&DeepImage],
    options: &MergeOptions,
    thresholds: &[u32],
    what: &str,
) {
    assert_schedules_agree_with(ctx, inputs, options, thresholds, true, what)
}

/// [`assert_schedules_agree`], or with `against_cpu` false only the cooperative merges against
/// the per-pixel one of the same layout and method (for inputs trusted to be sorted that are
/// not, where the engines' "garbage in, garbage out" differs).
fn assert_schedules_agree_with(
    ctx: &GlContext,
    inputs: &[&DeepImage],
    options: &MergeOptions,
    thresholds: &[u32],
    against_cpu: bool,
    what: &str,
) {
    let cpu = Reference::new(inputs, options);
    for layout in Layout::ALL {
        for method in [MergeMethod::Stepwise, MergeMethod::RegisterBlock] {
            let mut per_pixel = None;
            for long_lists in std::iter::once(LongLists::PerPixel)
                .chain(thresholds.iter().map(|&t| cooperative(t)))
            {
                let gl = Stages::Host.on(GlOptions {
                    layout,
                    method,
                    block_size: 4,
                    long_lists,
                    ..Default::default()
                });
                let what = format!(
                    "{what}, {layout:?} {method:?} {:?} {}",
                    options.output,
                    long_lists.name()
                );
                let (output, _) = merge_images_gl(ctx, inputs, options, &gl)
                    .unwrap_or_else(|e| panic!("{what}: GL merge failed: {e}"));
                match (&per_pixel, against_cpu) {
                    (_, true) => assert_merge_matches(&output, &cpu, Stages::Host, &what),
                    (Some(reference), false) => {
                        assert_merge_matches(&output, reference, Stages::Host, &what)
                    }
                    (None, false) => {}
                }
                if per_pixel.is_none() {
                    per_pixel = Some(Reference {
                        output,
                        tidied: cpu.tidied.clone(),
                    });
                }
            }
        }
    }
}

/// How many pixels of the merge of `inputs` hold more than `threshold` fragments in all.
fn long_pixels(inputs: &[&DeepImage], threshold: u32) -> (usize, usize) {
    let options = chain(OutputKind::Deep);
    let MergeOutput::Deep(deep) = merge_images(inputs, &options).expect("CPU merge") else {
        panic!("deep output expected");
    };
    let counts = deep.counts();
    (
        counts.iter().filter(|&&n| n > threshold).count(),
        counts.len(),
    )
}

#[test]
fn cooperative_equals_per_pixel_and_cpu_in_every_layout_method_and_output() {
    // Up to 150 fragments per pixel and input: lists of 2 to 5 register blocks of 4 and more
    // than the group of 64, counts mostly not multiples of either; 20% empty pixels; three
    // inputs, overlapping windows (pixels with one list empty), 16 depth levels (ties).
    let a = Synth::new(Bounds::from_origin_size(0, 0, 19, 5), 150, 11).build();
    let b = Synth::new(Bounds::from_origin_size(4, 1, 17, 5), 90, 12).build();
    let c = Synth::new(Bounds::from_origin_size(2, 0, 9, 7), 70, 13).build();
    let inputs = [&a, &b, &c];
    // 0: every pixel with a fragment; 64: a split (checked below); 100: fewer long ones.
    let thresholds = [0, 64, 100];
    let (long, pixels) = long_pixels(&inputs, 64);
    assert!(
        long > 0 && long < pixels,
        "threshold 64 must split the image: {long} long of {pixels}"
    );
    let (a, b, c) = (a.clone(), b.clone(), c.clone());
    with_gl(move |ctx| {
        let inputs = [&a, &b, &c];
        for output in OUTPUTS {
            assert_schedules_agree(ctx, &inputs, &chain(output), &thresholds, "three inputs");
        }
    });
}

#[test]
fn cooperative_handles_an_empty_input_volumes_and_unsorted_lists() {
    let long = Synth::new(Bounds::from_origin_size(0, 0, 11, 3), 130, 21).build();
    let empty = Synth {
        max_count: 0,
        ..Synth::new(Bounds::from_origin_size(0, 0, 11, 3), 0, 22)
    }
    .build();
    assert_eq!(empty.sample_count(), 0);
    let volumes = Synth::new(Bounds::from_origin_size(1, 0, 9, 3), 80, 23)
        .with_volumes()
        .build();
    // Claims to be sorted (trusted below) but is not: the group must notice and merge serially.
    let mut messy = Synth::new(Bounds::from_origin_size(0, 0, 11, 3), 100, 24);
    messy.messy = true;
    let messy = messy.build();
    with_gl(move |ctx| {
        for output in OUTPUTS {
            assert_schedules_agree(ctx, &[&long, &empty], &chain(output), &[0], "empty second");
            assert_schedules_agree(ctx, &[&empty, &long], &chain(output), &[0], "empty first");
            assert_schedules_agree(ctx, &[&long, &volumes], &chain(output), &[0, 60], "volumes");
            let trusted = MergeOptions {
                sort: SortPolicy::AssumeSorted,
                ..chain(output)
            };
            assert_schedules_agree_with(
                ctx,
                &[&messy, &long],
                &trusted,
                &[0],
                false,
                "unsorted, trusted",
            );
        }
    });
}

#[test]
fn cooperative_equals_per_pixel_on_the_hairball_scene() {
    let layers = deepmerge::scene::generate("hairball", 24, 16, 1).expect("hairball");
    let inputs: Vec<&DeepImage> = layers.iter().collect();
    let (long, _) = long_pixels(&inputs, 64);
    assert!(
        long > 0,
        "the small hairball has no pixel over 64 fragments"
    );
    with_gl(move |ctx| {
        let inputs: Vec<&DeepImage> = layers.iter().collect();
        for output in OUTPUTS {
            assert_schedules_agree(ctx, &inputs, &chain(output), &[64], "hairball");
        }
    });
}

#[test]
fn cooperative_with_the_gpu_tidy_equals_per_pixel() {
    let a = Synth::new(Bounds::from_origin_size(0, 0, 13, 4), 90, 31)
        .with_volumes()
        .build();
    let b = Synth::new(Bounds::from_origin_size(2, 1, 11, 4), 80, 32)
        .with_volumes()
        .build();
    with_gl(move |ctx| {
        for options in [
            chain(OutputKind::Flat { z: true }),
            MergeOptions {
                tidy: true,
                ..chain(OutputKind::Deep)
            },
        ] {
            for layout in Layout::ALL {
                let run = |long_lists| {
                    let gl = Stages::Gpu.on(GlOptions {
                        layout,
                        long_lists,
                        ..Default::default()
                    });
                    merge_images_gl(ctx, &[&a, &b], &options, &gl)
                        .expect("GL merge")
                        .0
                };
                // Exact everywhere: both schedules feed the same GPU tidy the same lists.
                let per_pixel = Reference {
                    output: run(LongLists::PerPixel),
                    tidied: Reference::new(&[&a, &b], &options).tidied,
                };
                let what = format!("GPU tidy, {layout:?} {:?}", options.output);
                assert_merge_matches(&run(cooperative(0)), &per_pixel, Stages::Host, &what);
            }
        }
    });
}

#[test]
fn cooperative_refuses_the_kway_merge_and_bad_spellings() {
    let a = Synth::new(Bounds::from_origin_size(0, 0, 4, 4), 3, 1).build();
    let err = with_gl(move |ctx| {
        let gl = GlOptions {
            long_lists: cooperative(8),
            ..Default::default()
        };
        let options = MergeOptions {
            strategy: MergeStrategy::KWay,
            ..Default::default()
        };
        match merge_images_gl(ctx, &[&a, &a], &options, &gl) {
            Ok(_) => panic!("a cooperative k-way merge must be refused"),
            Err(e) => e.to_string(),
        }
    });
    assert!(err.contains("merge with the chain strategy"), "{err}");
    // The CLI refuses it before any GL work, naming its flags.
    let cli = std::process::Command::new(env!("CARGO_BIN_EXE_deepmerge"))
        .args([
            "a.exr",
            "b.exr",
            "-o",
            "o.exr",
            "--gpu-long-lists",
            "cooperative",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&cli.stderr);
    assert_eq!(cli.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "--gpu-long-lists cooperative merges pairwise only: add --merge-strategy chain"
        ),
        "{stderr}"
    );
    assert_eq!("per-pixel".parse(), Ok(LongLists::PerPixel));
    assert_eq!("cooperative".parse(), Ok(cooperative(64)));
    assert_eq!("cooperative=0".parse(), Ok(cooperative(0)));
    for bad in ["cooperative=", "cooperative=-1", "coop", "per-pixel=3"] {
        assert!(bad.parse::<LongLists>().is_err(), "{bad}");
    }
}

/// The CLI flag end to end on real files (Balls and Trunks, every pixel with a fragment sent to
/// the workgroups): the same bytes as per-pixel, deep and flat.
#[test]
fn cli_cooperative_writes_the_same_bytes_as_per_pixel() {
    let dir = tempfile::tempdir().unwrap();
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/openexr-images");
    for deep in [false, true] {
        let mut written = Vec::new();
        for how in ["per-pixel", "cooperative=0"] {
            let out = dir.path().join(format!("{how}-{deep}.exr"));
            let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_deepmerge"));
            cmd.arg(format!("{data}/Balls.exr"))
                .arg(format!("{data}/Trunks.exr"))
                .args(["--backend", "gl", "--merge-strategy", "chain"])
                .args(["--gpu-stages", "host", "--gpu-long-lists", how])
                .arg("-o")
                .arg(&out);
            if deep {
                cmd.arg("--deep");
            }
            let run = cmd.output().unwrap();
            assert!(
                run.status.success(),
                "{how}: {}",
                String::from_utf8_lossy(&run.stderr)
            );
            written.push(std::fs::read(&out).unwrap());
        }
        assert!(written[0] == written[1], "deep {deep}: the files differ");
    }
}
