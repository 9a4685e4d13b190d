//! The GL merge against the reference `composite::merge_images`: every layout × {S, RBM} ×
//! block sizes × {flat, deep}, on the real Balls/Leaves/Trunks files and on synthetic edge cases.
//! Flat output must be bit-identical and deep output identical sample for sample.

// MergeOptions is built with `..Default::default()` even where every field is named today:
// other fields are being added to it.
#![allow(clippy::needless_update)]

mod gpu_common;

use deepmerge::composite::merge_images;
use deepmerge::composite::{MergeOptions, OutputKind};
use deepmerge::deep::{Bounds, DeepImage, FlatValues};
use deepmerge::gpu::{GlContext, GlOptions, Layout, MergeMethod, PixelOrder};
use gpu_common::{
    assert_deep_close, assert_gl_matches, assert_gl_matches_reference, crop, real, with_gl, Synth,
};

const BLOCKS: [u32; 4] = [1, 4, 8, 16];

fn outputs() -> [MergeOptions; 3] {
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

/// Every layout × method × block × output on `inputs`.
fn full_matrix(ctx: &GlContext, inputs: &[&DeepImage], name: &str, order: PixelOrder) {
    for layout in Layout::ALL {
        for method in [MergeMethod::Stepwise, MergeMethod::RegisterBlock] {
            for block_size in BLOCKS {
                for options in outputs() {
                    let gl = GlOptions {
                        layout,
                        method,
                        block_size,
                        pixel_order: order,
                        ..Default::default()
                    };
                    let what = format!(
                        "{name}: {} {} block {block_size} {:?} tidy {}",
                        layout.name(),
                        method.name(),
                        options.output,
                        options.tidy
                    );
                    assert_gl_matches_reference(ctx, inputs, &options, &gl, &what);
                }
            }
        }
    }
}

#[test]
fn real_pair_cropped_full_matrix() {
    with_gl(|ctx| {
        // A window that is not a multiple of 32 wide, crossing Balls' data-window edge.
        let window = Bounds {
            x0: 100,
            y0: 150,
            x1: 100 + 236,
            y1: 150 + 120,
        };
        let balls = crop(&real("Balls.exr"), window);
        let leaves = crop(&real("Leaves.exr"), window);
        assert!(
            balls.data_window != leaves.data_window,
            "crop should keep the windows different"
        );
        full_matrix(
            ctx,
            &[&balls, &leaves],
            "Balls+Leaves crop",
            PixelOrder::RowMajor,
        );
    });
}

#[test]
fn real_files_whole_pair_and_chain() {
    with_gl(|ctx| {
        let balls = real("Balls.exr");
        let leaves = real("Leaves.exr");
        let trunks = real("Trunks.exr");
        let flat = MergeOptions {
            output: OutputKind::Flat { z: false },
            ..Default::default()
        };
        let deep = MergeOptions {
            output: OutputKind::Deep,
            ..Default::default()
        };
        let pair: [&DeepImage; 2] = [&balls, &leaves];
        let chain: [&DeepImage; 3] = [&balls, &leaves, &trunks];
        let cases = [
            ("pair flat", &pair[..], flat, PixelOrder::Tiled),
            ("chain flat", &chain[..], flat, PixelOrder::RowMajor),
            ("chain deep", &chain[..], deep, PixelOrder::RowMajor),
        ];
        for (name, inputs, options, order) in cases {
            let reference = merge_images(inputs, &options).expect("reference merge");
            for layout in Layout::ALL {
                for (method, block_size) in
                    [(MergeMethod::Stepwise, 1), (MergeMethod::RegisterBlock, 8)]
                {
                    let gl = GlOptions {
                        layout,
                        method,
                        block_size,
                        pixel_order: order,
                        ..Default::default()
                    };
                    let what = format!("{name} {} {} {order:?}", layout.name(), method.name());
                    assert_gl_matches(ctx, inputs, &options, &gl, &reference, &what);
                }
            }
        }
    });
}

/// Long lists (beyond the largest block), ties, empty pixels, ids, a width of 45 and data
/// windows that only partly overlap.
#[test]
fn synthetic_edge_cases_full_matrix() {
    with_gl(|ctx| {
        let a = Synth::new(Bounds::from_origin_size(3, 2, 45, 9), 40, 1).build();
        let mut s = Synth::new(Bounds::from_origin_size(20, 5, 37, 11), 21, 2);
        s.messy = true;
        let b = s.build();
        full_matrix(ctx, &[&a, &b], "synthetic", PixelOrder::Tiled);
    });
}

#[test]
fn synthetic_special_inputs() {
    with_gl(|ctx| {
        let gl = |layout, method, block_size| GlOptions {
            layout,
            method,
            block_size,
            ..Default::default()
        };
        let long = Synth::new(Bounds::from_origin_size(0, 0, 33, 7), 70, 3).build();
        let empty = Synth {
            max_count: 0,
            ..Synth::new(Bounds::from_origin_size(0, 0, 33, 7), 0, 4)
        }
        .build();
        assert_eq!(empty.sample_count(), 0);
        let disjoint = Synth::new(Bounds::from_origin_size(50, 20, 10, 3), 5, 5).build();
        let volumes = Synth::new(Bounds::from_origin_size(0, 0, 33, 7), 9, 6)
            .with_volumes()
            .build();
        let single_pixel = Synth::new(Bounds::from_origin_size(7, 7, 1, 1), 3, 7).build();
        let cases: Vec<(&str, Vec<&DeepImage>)> = vec![
            ("one empty input", vec![&long, &empty]),
            ("empty first", vec![&empty, &long]),
            ("disjoint windows", vec![&long, &disjoint]),
            ("overlapping volumes", vec![&long, &volumes]),
            ("single input", vec![&volumes]),
            ("single pixel", vec![&single_pixel, &single_pixel]),
            (
                "chain of five",
                vec![&long, &volumes, &disjoint, &empty, &long],
            ),
        ];
        for (name, inputs) in &cases {
            for layout in Layout::ALL {
                for (method, block) in [
                    (MergeMethod::Stepwise, 1),
                    (MergeMethod::RegisterBlock, 4),
                    (MergeMethod::RegisterBlock, 32),
                ] {
                    for options in outputs() {
                        let what = format!(
                            "{name}: {} {} {block} {:?} tidy {}",
                            layout.name(),
                            method.name(),
                            options.output,
                            options.tidy
                        );
                        assert_gl_matches_reference(
                            ctx,
                            inputs,
                            &options,
                            &gl(layout, method, block),
                            &what,
                        );
                    }
                }
            }
        }
    });
}

#[test]
fn small_band_budget_forces_several_bands() {
    with_gl(|ctx| {
        let a = Synth::new(Bounds::from_origin_size(0, 0, 70, 40), 12, 8).build();
        let b = Synth::new(Bounds::from_origin_size(5, 3, 64, 40), 12, 9).build();
        for layout in Layout::ALL {
            for options in outputs() {
                let gl = GlOptions {
                    layout,
                    band_budget_bytes: 64 << 10,
                    ..Default::default()
                };
                let stats = assert_gl_matches_reference(
                    ctx,
                    &[&a, &b, &a],
                    &options,
                    &gl,
                    &format!("bands {}", layout.name()),
                );
                assert!(stats.bands >= 4, "only {} bands", stats.bands);
            }
        }
    });
}

#[test]
fn bad_block_size_is_a_usage_error() {
    with_gl(|ctx| {
        let a = Synth::new(Bounds::from_origin_size(0, 0, 4, 4), 3, 1).build();
        let gl = GlOptions {
            block_size: 33,
            ..Default::default()
        };
        let err = deepmerge::gpu::merge_images_gl(ctx, &[&a, &a], &MergeOptions::default(), &gl)
            .unwrap_err();
        assert!(err.to_string().contains("block size 33"), "{err}");
    });
}

/// Inputs whose pixels are not sorted (and whose files say nothing), with ties and lists longer
/// than the register sort block: sorted by the GPU stage (`sort.comp`) or on the host, both
/// must give the reference result, for every layout and method, flat and deep.
#[test]
fn messy_inputs_sorted_on_the_gpu_or_the_host() {
    with_gl(|ctx| {
        let mut a = Synth::new(Bounds::from_origin_size(0, 0, 45, 9), 40, 101);
        a.messy = true;
        a.depth_levels = 6;
        let mut b = Synth::new(Bounds::from_origin_size(-7, 3, 38, 11), 9, 202);
        b.messy = true;
        let (a, b) = (a.build(), b.build());
        assert!(!a.state.is_sorted() && !b.state.is_sorted());
        let inputs: [&DeepImage; 2] = [&a, &b];
        for options in [outputs()[0], outputs()[1]] {
            let reference = merge_images(&inputs, &options).expect("reference merge");
            for layout in Layout::ALL {
                for method in [MergeMethod::Stepwise, MergeMethod::RegisterBlock] {
                    for sort_on_gpu in [Some(true), Some(false)] {
                        let gl = GlOptions {
                            layout,
                            method,
                            sort_on_gpu,
                            ..Default::default()
                        };
                        let what = format!(
                            "messy {} {} gpu sort {sort_on_gpu:?} {:?}",
                            layout.name(),
                            method.name(),
                            options.output
                        );
                        assert_gl_matches(ctx, &inputs, &options, &gl, &reference, &what);
                    }
                }
            }
        }
    });
}

/// Flat pixels where volumes overlap, tidied and flattened by the GPU stage `tidy.comp` (f32)
/// instead of the host: within 1e-5 of the f64 reference (the stage's stated tolerance), ids and
/// everything else exact; and the host path really is bypassed.
#[test]
fn overlapping_volumes_tidied_on_the_gpu() {
    with_gl(|ctx| {
        let a = Synth::new(Bounds::from_origin_size(0, 0, 37, 7), 12, 303)
            .with_volumes()
            .build();
        let b = Synth::new(Bounds::from_origin_size(3, 1, 33, 8), 6, 404)
            .with_volumes()
            .build();
        let inputs: [&DeepImage; 2] = [&a, &b];
        let options = MergeOptions {
            output: OutputKind::Flat { z: true },
            ..Default::default()
        };
        let reference = match merge_images(&inputs, &options).unwrap() {
            deepmerge::composite::MergeOutput::Flat(f) => f,
            _ => unreachable!(),
        };
        for layout in Layout::ALL {
            let run = |tidy_on_gpu| {
                let gl = GlOptions {
                    layout,
                    tidy_on_gpu: Some(tidy_on_gpu),
                    ..Default::default()
                };
                deepmerge::gpu::merge_images_gl(ctx, &inputs, &options, &gl).unwrap()
            };
            let (_, host_stats) = run(false);
            assert!(host_stats.host_tidied_pixels > 0, "the inputs overlap");
            let (output, stats) = run(true);
            assert_eq!(
                stats.host_tidied_pixels,
                0,
                "{}: tidied on the GPU",
                layout.name()
            );
            assert_eq!(
                stats.gpu_tidied_pixels,
                host_stats.host_tidied_pixels,
                "{}: the same pixels, flagged and listed on the GPU",
                layout.name()
            );
            let deepmerge::composite::MergeOutput::Flat(flat) = output else {
                panic!("flat")
            };
            assert_eq!(flat.data_window, reference.data_window);
            for (ours, theirs) in flat.channels.iter().zip(&reference.channels) {
                assert_eq!(ours.name, theirs.name);
                match (&ours.values, &theirs.values) {
                    (FlatValues::F32(x), FlatValues::F32(y)) => {
                        for (i, (u, v)) in x.iter().zip(y).enumerate() {
                            assert!(
                                (u - v).abs() <= 1e-5 * v.abs().max(1.0),
                                "{} {} at {:?}: {u} vs {v}",
                                layout.name(),
                                ours.name,
                                flat.data_window.coords_of(i)
                            );
                        }
                    }
                    (x, y) => assert_eq!(x, y, "{}", ours.name),
                }
            }
        }
    });
}

/// Deep output with `tidy`, tidied on the GPU (gate, compaction, `tidy.comp` count and emit)
/// for every layout × method × block size, for a pair and a chain of three: same counts, depths
/// and sources as the reference, ids and untouched samples bit-exact, new values within the
/// stage's tolerance (f32 against f64; one half ulp more where the channel is half).
#[test]
fn deep_tidy_on_the_gpu_full_matrix() {
    with_gl(|ctx| {
        let a = Synth::new(Bounds::from_origin_size(0, 0, 37, 7), 9, 505)
            .with_volumes()
            .build();
        let b = Synth::new(Bounds::from_origin_size(3, 1, 33, 8), 6, 606)
            .with_volumes()
            .build();
        let c = Synth::new(Bounds::from_origin_size(-2, 2, 40, 3), 5, 707)
            .with_volumes()
            .build();
        let options = MergeOptions {
            output: OutputKind::Deep,
            tidy: true,
            ..Default::default()
        };
        for inputs in [vec![&a, &b], vec![&a, &b, &c]] {
            let reference = match merge_images(&inputs, &options).unwrap() {
                deepmerge::composite::MergeOutput::Deep(d) => d,
                _ => unreachable!(),
            };
            for layout in Layout::ALL {
                for method in [MergeMethod::Stepwise, MergeMethod::RegisterBlock] {
                    for block_size in BLOCKS {
                        let gl = GlOptions {
                            layout,
                            method,
                            block_size,
                            tidy_on_gpu: Some(true),
                            ..Default::default()
                        };
                        let what = format!(
                            "{} inputs: {} {} block {block_size}",
                            inputs.len(),
                            layout.name(),
                            method.name()
                        );
                        let (output, stats) =
                            deepmerge::gpu::merge_images_gl(ctx, &inputs, &options, &gl).unwrap();
                        assert_eq!(stats.host_tidied_pixels, 0, "{what}");
                        assert!(stats.gpu_tidied_pixels > 20, "{what}: volumes overlap");
                        let deepmerge::composite::MergeOutput::Deep(deep) = output else {
                            panic!("deep")
                        };
                        assert_deep_close(&deep, &reference, 1e-5, &what);
                    }
                }
            }
        }
    });
}

/// The GPU deep tidy band by band: each band's tidied pixels keep their new values in the right
/// place of the assembled output.
#[test]
fn deep_tidy_on_the_gpu_in_bands() {
    with_gl(|ctx| {
        let a = Synth::new(Bounds::from_origin_size(0, 0, 70, 40), 12, 18)
            .with_volumes()
            .build();
        let b = Synth::new(Bounds::from_origin_size(5, 3, 64, 40), 12, 19)
            .with_volumes()
            .build();
        let options = MergeOptions {
            output: OutputKind::Deep,
            tidy: true,
            ..Default::default()
        };
        let reference = match merge_images(&[&a, &b], &options).unwrap() {
            deepmerge::composite::MergeOutput::Deep(d) => d,
            _ => unreachable!(),
        };
        let gl = GlOptions {
            band_budget_bytes: 64 << 10,
            tidy_on_gpu: Some(true),
            ..Default::default()
        };
        let (output, stats) =
            deepmerge::gpu::merge_images_gl(ctx, &[&a, &b], &options, &gl).unwrap();
        assert!(stats.bands >= 4, "only {} bands", stats.bands);
        assert!(stats.gpu_tidied_pixels > 100 && stats.host_tidied_pixels == 0);
        let deepmerge::composite::MergeOutput::Deep(deep) = output else {
            panic!("deep")
        };
        assert_deep_close(&deep, &reference, 1e-5, "bands");
    });
}
