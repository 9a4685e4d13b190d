//! The GL merge against the reference `composite::merge_images`: every layout × {S, RBM} ×
//! block sizes × {flat, deep, deep tidy} × {k-way, chain}, on the real Balls/Leaves/Trunks files
//! and on synthetic edge cases; and the k-way merge against the chain, bit for bit, on both
//! engines for 1 to 9 inputs (9: more than one k-way dispatch takes, so the chain runs).
//!
//! The k-way kernel reads stepwise whatever the method (see `glsl/merge_kway.comp`), so the
//! matrices run it with one method, and over every block size only for BIA, the one layout
//! the block size changes.
//!
//! Every test states where the sort and tidy stages run (`gpu_common::Stages`), never leaving it
//! to the defaults, which differ between llvmpipe and a hardware GPU; the tolerance follows in
//! `gpu_common::assert_merge_matches`: bit-identical with the host stages, the GPU tidy's 1e-5 on
//! tidied pixels (exact elsewhere) with the GPU stages.
//!
//! To keep the suite's time on llvmpipe in check, not every combination runs with both: the
//! full matrices and the special inputs run the GPU stages over every combination and the host
//! stages over every layout × method × output at one block size (8 in the matrices, 4 for the
//! special inputs), as both share every merge shader; the whole files run each layout once with
//! each (GPU stages with RBM block 8, the default on hardware; host stages with stepwise), as
//! `sort.comp` on whole images is slow on llvmpipe; the smaller tests run both everywhere. The
//! one test of the defaults says so.

// MergeOptions is built with `..Default::default()` even where every field is named today:
// other fields are being added to it.
#![allow(clippy::needless_update)]

mod gpu_common;

use deepmerge::composite::{merge_images, MergeOptions, MergeStrategy, OutputKind};
use deepmerge::deep::{Bounds, DeepImage};
use deepmerge::gpu::{
    merge_images_gl, GlContext, GlOptions, Layout, MergeMethod, PixelOrder, RbmBlocks,
};
use gpu_common::{
    assert_gl_matches, assert_gl_matches_reference, assert_merge_matches, crop, outputs, real,
    with_gl, Reference, Stages, Synth,
};

const BLOCKS: [u32; 4] = [1, 4, 8, 16];
/// The block size the host stages run at in the full matrices (the default).
const HOST_BLOCK: u32 = 8;

/// Every layout × method × block × output on `inputs` with the GPU stages, chained; the k-way
/// merge over every layout × output, every block for BIA (module doc); the host stages at block
/// size [`HOST_BLOCK`] only (see the module doc).
fn full_matrix(ctx: &GlContext, inputs: &[&DeepImage], name: &str, order: PixelOrder) {
    for options in outputs() {
        let reference = Reference::new(inputs, &options);
        for strategy in MergeStrategy::ALL {
            let options = MergeOptions {
                strategy,
                ..options
            };
            for layout in Layout::ALL {
                for method in [MergeMethod::Stepwise, MergeMethod::RegisterBlock] {
                    for block_size in BLOCKS {
                        let kway = strategy == MergeStrategy::KWay;
                        if kway
                            && (method == MergeMethod::RegisterBlock
                                || (layout != Layout::BlockedInterleaved
                                    && block_size != HOST_BLOCK))
                        {
                            continue;
                        }
                        for stages in Stages::BOTH {
                            if stages == Stages::Host && block_size != HOST_BLOCK {
                                continue;
                            }
                            // Both register-block indexings with the GPU stages; the host
                            // stages do not depend on it.
                            let indexings: &[RbmBlocks] = match (method, stages) {
                                (MergeMethod::RegisterBlock, Stages::Gpu) => &RbmBlocks::ALL,
                                _ => &[RbmBlocks::Indexed],
                            };
                            for &rbm_blocks in indexings {
                                let gl = GlOptions {
                                    rbm_blocks,
                                    ..stages.cell(layout, method, block_size, order)
                                };
                                let what = format!(
                                    "{name}: {} {} {} {} block {block_size} {:?} tidy {} {stages:?} stages",
                                    strategy.name(),
                                    layout.name(),
                                    method.name(),
                                    rbm_blocks.name(),
                                    options.output,
                                    options.tidy
                                );
                                assert_gl_matches(ctx, inputs, &options, &gl, &reference, &what);
                            }
                        }
                    }
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
        let chained = |options| MergeOptions {
            strategy: MergeStrategy::Chain,
            ..options
        };
        let cases = [
            ("pair flat k-way", &pair[..], flat, PixelOrder::Tiled),
            ("three flat k-way", &chain[..], flat, PixelOrder::RowMajor),
            ("three deep k-way", &chain[..], deep, PixelOrder::RowMajor),
            (
                "three flat chained",
                &chain[..],
                chained(flat),
                PixelOrder::RowMajor,
            ),
            (
                "three deep chained",
                &chain[..],
                chained(deep),
                PixelOrder::RowMajor,
            ),
        ];
        // The files carry no deepImageState, so both stages sort them. Each layout once with the
        // GPU stages and once with the host's (module doc).
        for (name, inputs, options, order) in cases {
            let reference = Reference::new(inputs, &options);
            for layout in Layout::ALL {
                for (method, block_size, stages) in [
                    (MergeMethod::RegisterBlock, 8, Stages::Gpu),
                    (MergeMethod::Stepwise, 1, Stages::Host),
                ] {
                    let gl = stages.cell(layout, method, block_size, order);
                    let what = format!(
                        "{name} {} {} {order:?} {stages:?} stages",
                        layout.name(),
                        method.name()
                    );
                    assert_gl_matches(ctx, inputs, &options, &gl, &reference, &what);
                }
            }
        }
    });
}

/// Long lists (beyond the largest block), ties, empty pixels, ids, a width of 45, data windows
/// that only partly overlap, and an unsorted input with volumes: the full matrix sorts and
/// tidies (flat and deep with `tidy`) in every combination.
#[test]
fn synthetic_edge_cases_full_matrix() {
    with_gl(|ctx| {
        let a = Synth::new(Bounds::from_origin_size(3, 2, 45, 9), 40, 1).build();
        let mut s = Synth::new(Bounds::from_origin_size(20, 5, 37, 11), 21, 2).with_volumes();
        s.messy = true;
        let b = s.build();
        let tidied = Reference::new(&[&a, &b], &outputs()[0]).tidied_pixels();
        assert!(
            tidied > 50,
            "volumes overlap in {tidied} pixels: too few to test the tidy"
        );
        full_matrix(ctx, &[&a, &b], "synthetic", PixelOrder::Tiled);
    });
}

#[test]
fn synthetic_special_inputs() {
    with_gl(|ctx| {
        let gl = |layout, method, block_size, stages: Stages| {
            stages.cell(layout, method, block_size, PixelOrder::RowMajor)
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
        // GPU stages for every method and block, host stages for one (module doc).
        for (name, inputs) in &cases {
            for options in outputs() {
                let reference = Reference::new(inputs, &options);
                for layout in Layout::ALL {
                    for (method, block, stages) in [
                        (MergeMethod::Stepwise, 1, Stages::Gpu),
                        (MergeMethod::RegisterBlock, 4, Stages::Gpu),
                        (MergeMethod::RegisterBlock, 32, Stages::Gpu),
                        (MergeMethod::RegisterBlock, 4, Stages::Host),
                    ] {
                        let what = format!(
                            "{name}: {} {} {block} {:?} tidy {} {stages:?} stages",
                            layout.name(),
                            method.name(),
                            options.output,
                            options.tidy
                        );
                        let gl = gl(layout, method, block, stages);
                        assert_gl_matches(ctx, inputs, &options, &gl, &reference, &what);
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
                for stages in Stages::BOTH {
                    let mut gl = stages.on(GlOptions {
                        layout,
                        ..Default::default()
                    });
                    // 64 KiB a band; overlapped bands (a GPU's default) share twice that.
                    gl.band_budget_bytes = if gl.overlaps_bands(ctx) { 128 } else { 64 } << 10;
                    let stats = assert_gl_matches_reference(
                        ctx,
                        &[&a, &b, &a],
                        &options,
                        &gl,
                        &format!("bands {} {stages:?} stages", layout.name()),
                    );
                    assert!(stats.bands >= 4, "only {} bands", stats.bands);
                }
            }
        }
    });
}

#[test]
fn bad_block_size_is_a_usage_error() {
    with_gl(|ctx| {
        let a = Synth::new(Bounds::from_origin_size(0, 0, 4, 4), 3, 1).build();
        // Refused before any stage runs: where they would run does not matter.
        let gl = Stages::Gpu.on(GlOptions {
            block_size: 33,
            ..Default::default()
        });
        let err = deepmerge::gpu::merge_images_gl(ctx, &[&a, &a], &MergeOptions::default(), &gl)
            .unwrap_err();
        assert!(err.to_string().contains("block size 33"), "{err}");
    });
}

/// Inputs whose pixels are not sorted (and whose files say nothing), with ties and lists longer
/// than the register sort block: sorted by the GPU stage (`sort.comp`) or on the host, both
/// must give the reference result exactly (sorting computes nothing), for every layout and
/// method, flat and deep. No volumes, so the tidy (stated with the sort) changes nothing.
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
            let reference = Reference::new(&inputs, &options);
            assert_eq!(reference.tidied_pixels(), 0);
            for layout in Layout::ALL {
                for method in [MergeMethod::Stepwise, MergeMethod::RegisterBlock] {
                    for stages in Stages::BOTH {
                        let gl = stages.on(GlOptions {
                            layout,
                            method,
                            ..Default::default()
                        });
                        let what = format!(
                            "messy {} {} sorted with the {stages:?} stages {:?}",
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
/// or by the host: the GPU within 1e-5 of the f64 reference there, the host bit-identical, and
/// both exact elsewhere; the same pixels are tidied, and the other side really is bypassed.
#[test]
fn overlapping_volumes_tidied_on_the_gpu_or_the_host() {
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
        let reference = Reference::new(&inputs, &options);
        let tidied = reference.tidied_pixels() as u64;
        assert!(tidied > 20, "the inputs overlap in {tidied} pixels");
        for layout in Layout::ALL {
            let gl = |stages: Stages| {
                stages.on(GlOptions {
                    layout,
                    ..Default::default()
                })
            };
            let what = |stages| format!("{} {stages:?} stages", layout.name());
            // The host count is checked in `assert_gl_matches`.
            assert_gl_matches(
                ctx,
                &inputs,
                &options,
                &gl(Stages::Host),
                &reference,
                &what(Stages::Host),
            );
            let gpu = assert_gl_matches(
                ctx,
                &inputs,
                &options,
                &gl(Stages::Gpu),
                &reference,
                &what(Stages::Gpu),
            );
            assert_eq!(
                (gpu.gpu_tidied_pixels, gpu.host_tidied_pixels),
                (tidied, 0),
                "{}: the same pixels, flagged and listed on the GPU",
                what(Stages::Gpu)
            );
        }
    });
}

/// The defaults on purpose (`sort_on_gpu`, `tidy_on_gpu`: `None`): the sort on the GPU (exact)
/// and the tidy on the host on every device, so that the output is the CPU engine's bytes.
#[test]
fn default_stages_sort_on_the_gpu_and_tidy_on_the_host() {
    with_gl(|ctx| {
        let a = Synth::new(Bounds::from_origin_size(0, 0, 37, 7), 12, 808)
            .with_volumes()
            .build();
        let mut b = Synth::new(Bounds::from_origin_size(3, 1, 33, 8), 6, 909).with_volumes();
        b.messy = true;
        let b = b.build();
        let gl = GlOptions::default();
        assert_eq!((gl.sort_on_gpu, gl.tidy_on_gpu), (None, None));
        // The host tidies by default on every device: the CPU engine's bytes.
        assert_eq!(Stages::tidy_of(&gl), Stages::Host);
        for options in outputs() {
            let what = format!("defaults {:?} tidy {}", options.output, options.tidy);
            let stats = assert_gl_matches_reference(ctx, &[&a, &b], &options, &gl, &what);
            if options.tidy || options.output != OutputKind::Deep {
                let (on_gpu, on_host) = (stats.gpu_tidied_pixels, stats.host_tidied_pixels);
                assert!(on_gpu == 0 && on_host > 0, "{what}: {stats:?}");
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
            let reference = Reference::new(&inputs, &options);
            for layout in Layout::ALL {
                for method in [MergeMethod::Stepwise, MergeMethod::RegisterBlock] {
                    for block_size in BLOCKS {
                        let gl = Stages::Gpu.on(GlOptions {
                            layout,
                            method,
                            block_size,
                            ..Default::default()
                        });
                        let what = format!(
                            "{} inputs: {} {} block {block_size}",
                            inputs.len(),
                            layout.name(),
                            method.name()
                        );
                        let stats =
                            assert_gl_matches(ctx, &inputs, &options, &gl, &reference, &what);
                        assert_eq!(stats.host_tidied_pixels, 0, "{what}");
                        assert!(stats.gpu_tidied_pixels > 20, "{what}: volumes overlap");
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
        let gl = Stages::Gpu.on(GlOptions {
            band_budget_bytes: 64 << 10,
            ..Default::default()
        });
        let stats = assert_gl_matches_reference(ctx, &[&a, &b], &options, &gl, "bands");
        assert!(stats.bands >= 4, "only {} bands", stats.bands);
        assert!(stats.gpu_tidied_pixels > 100 && stats.host_tidied_pixels == 0);
    });
}

/// The k-way merge gives the chain's output bit for bit on each engine: flat values, fronts and
/// flags alike, deep lists sample for sample, and the GPU tidy's f32 results too (it sees the
/// same lists). N = 1, 2, 3, 4, 8 and 9 (beyond `MAX_KWAY_INPUTS`: the chain), with empty
/// pixels, an empty input, lists longer than the largest block, widths of 33 and 45, disjoint
/// and partly overlapping windows, overlapping volumes and an unsorted input; the GL result
/// also against the reference at the stages' tolerance.
#[test]
fn kway_equals_the_chain_bit_for_bit() {
    with_gl(|ctx| {
        let long = Synth::new(Bounds::from_origin_size(0, 0, 33, 7), 70, 31).build();
        let empty = Synth {
            max_count: 0,
            ..Synth::new(Bounds::from_origin_size(0, 0, 33, 7), 0, 32)
        }
        .build();
        let disjoint = Synth::new(Bounds::from_origin_size(50, 20, 10, 3), 5, 33).build();
        let volumes = Synth::new(Bounds::from_origin_size(2, 1, 45, 6), 9, 34)
            .with_volumes()
            .build();
        let mut messy = Synth::new(Bounds::from_origin_size(-3, 2, 38, 5), 12, 35).with_volumes();
        messy.messy = true;
        let messy = messy.build();
        let ties = Synth {
            depth_levels: 2,
            ..Synth::new(Bounds::from_origin_size(1, 0, 33, 8), 6, 36)
        }
        .build();
        let sets: Vec<Vec<&DeepImage>> = vec![
            vec![&volumes],
            vec![&long, &ties],
            vec![&long, &empty, &volumes],
            vec![&ties, &volumes, &disjoint, &messy],
            vec![
                &long, &ties, &volumes, &empty, &disjoint, &messy, &ties, &volumes,
            ],
            vec![
                &ties, &long, &volumes, &empty, &disjoint, &messy, &ties, &volumes, &long,
            ],
        ];
        for inputs in &sets {
            for options in outputs() {
                let kway = MergeOptions {
                    strategy: MergeStrategy::KWay,
                    ..options
                };
                let chain = MergeOptions {
                    strategy: MergeStrategy::Chain,
                    ..options
                };
                let cpu = merge_images(inputs, &kway).unwrap();
                assert!(
                    cpu == merge_images(inputs, &chain).unwrap(),
                    "cpu: {} inputs {:?} tidy {}: k-way differs from the chain",
                    inputs.len(),
                    options.output,
                    options.tidy
                );
                let reference = Reference::new(inputs, &kway);
                for layout in Layout::ALL {
                    for stages in Stages::BOTH {
                        let gl = stages.cell(layout, MergeMethod::Stepwise, 4, PixelOrder::Tiled);
                        let what = format!(
                            "{} inputs {} {:?} tidy {} {stages:?} stages",
                            inputs.len(),
                            layout.name(),
                            options.output,
                            options.tidy
                        );
                        let (by_kway, _) = merge_images_gl(ctx, inputs, &kway, &gl).unwrap();
                        let (by_chain, _) = merge_images_gl(ctx, inputs, &chain, &gl).unwrap();
                        assert!(by_kway == by_chain, "{what}: k-way differs from the chain");
                        assert_gl_matches(ctx, inputs, &kway, &gl, &reference, &what);
                    }
                }
            }
        }
    });
}

/// Puts the context's storage-block limit back however the test ends (the context is shared
/// by every test of this binary).
struct StorageLimit<'a>(&'a GlContext);

impl<'a> StorageLimit<'a> {
    fn set(ctx: &'a GlContext, bytes: u64) -> Self {
        ctx.limit_storage_block(Some(bytes));
        StorageLimit(ctx)
    }
}

impl Drop for StorageLimit<'_> {
    fn drop(&mut self) {
        self.0.limit_storage_block(None);
    }
}

/// A driver that binds less than it claims (as a GL_OUT_OF_MEMORY would): the band planner
/// believes GL_MAX_SHADER_STORAGE_BLOCK_SIZE, the first band does not fit, and the merge cuts
/// the rest of the window into bands of half the budget until they do, with the reference's
/// result; when not even one row fits, it gives up with one line.
#[test]
fn bands_that_do_not_fit_are_retried_smaller() {
    with_gl(|ctx| {
        let a = Synth::new(Bounds::from_origin_size(0, 0, 70, 40), 12, 8).build();
        let b = Synth::new(Bounds::from_origin_size(5, 3, 64, 40), 12, 9)
            .with_volumes()
            .build();
        let inputs: [&DeepImage; 3] = [&a, &b, &a];
        for strategy in MergeStrategy::ALL {
            for options in outputs() {
                let options = MergeOptions {
                    strategy,
                    ..options
                };
                let reference = Reference::new(&inputs, &options);
                for stages in Stages::BOTH {
                    let gl = stages.on(GlOptions::default());
                    let what = format!(
                        "{} {:?} tidy {} {stages:?} stages",
                        strategy.name(),
                        options.output,
                        options.tidy
                    );
                    let stats = {
                        let _limit = StorageLimit::set(ctx, 48 << 10);
                        assert_gl_matches(ctx, &inputs, &options, &gl, &reference, &what)
                    };
                    assert!(
                        stats.band_retries >= 1 && stats.bands >= 4,
                        "{what}: {} bands after {} retries",
                        stats.bands,
                        stats.band_retries
                    );
                }
            }
        }
        let err = {
            let _limit = StorageLimit::set(ctx, 256);
            merge_images_gl(ctx, &inputs, &outputs()[0], &GlOptions::default()).unwrap_err()
        };
        let text = err.to_string();
        assert!(
            text.contains("smaller bands do not help") && text.lines().count() == 1,
            "{text}"
        );
    });
}

/// Pixels long enough for llvmpipe's cap on an invocation's loops (65535 iterations), flat and
/// deep, against the reference, in three merges: k-way with pixels of up to 150,000 samples and
/// the pairwise chain with shifted register blocks of 32 (about 33 iterations a sample) with
/// pixels of up to 2,000, which llvmpipe would merge short (`gpu::loop_cap`: they go to the CPU
/// engine there, and the statistics say so), and k-way of three inputs up to 7,800 and the
/// stepwise chain up to 1,400, which it merges right itself (no host band). On a GPU the kernels merge all of them.
/// Before the guard the first came out wrong on llvmpipe (the second's pixels are just short of
/// where the CLI measured that kernel failing, two inputs of 1,000 samples).
#[test]
fn pixels_longer_than_llvmpipes_loops_merge_to_the_reference() {
    with_gl(|ctx| {
        let capped = ctx.info().loops_capped;
        let pair = |max_a: u32, max_b: u32, seed: u64| {
            (
                Synth::new(Bounds::from_origin_size(0, 0, 3, 1), max_a, seed).build(),
                Synth::new(Bounds::from_origin_size(1, 0, 3, 1), max_b, seed + 1).build(),
            )
        };
        let (long_a, long_b) = pair(90_000, 60_000, 8);
        let (mid_a, mid_b) = pair(1_000, 1_000, 10);
        // Three inputs: two with long lists may take the pairwise merge under a GPU's defaults
        // (`GlOptions::pairs_long_lists_pairwise`), which costs ten iterations a sample.
        let (kway_a, kway_b) = pair(2_600, 2_600, 12);
        let kway_c = Synth::new(Bounds::from_origin_size(0, 0, 2, 1), 2_600, 16).build();
        let (chain_a, chain_b) = pair(700, 700, 14);
        let chain = MergeStrategy::Chain;
        let kway = MergeStrategy::KWay;
        let rbm32 = (MergeMethod::RegisterBlock, 32);
        let stepwise = (MergeMethod::Stepwise, 8);
        let cases: [(&str, Vec<&DeepImage>, _, _, bool); 4] = [
            (
                "k-way, 150,000",
                vec![&long_a, &long_b],
                kway,
                stepwise,
                capped,
            ),
            (
                "chain RBM 32, 2,000",
                vec![&mid_a, &mid_b],
                chain,
                rbm32,
                capped,
            ),
            (
                "k-way, 7,800",
                vec![&kway_a, &kway_b, &kway_c],
                kway,
                stepwise,
                false,
            ),
            (
                "chain, 1,400",
                vec![&chain_a, &chain_b],
                chain,
                stepwise,
                false,
            ),
        ];
        for (name, inputs, strategy, (method, block), on_host) in cases {
            for options in outputs() {
                let options = MergeOptions {
                    strategy,
                    ..options
                };
                let reference = Reference::new(&inputs, &options);
                for layout in Layout::ALL {
                    let gl = Stages::Host.cell(layout, method, block, PixelOrder::RowMajor);
                    let what = format!("{name}, {layout:?}, {:?}", options.output);
                    let (output, stats) = merge_images_gl(ctx, &inputs, &options, &gl)
                        .unwrap_or_else(|e| panic!("{what}: GL merge failed: {e}"));
                    // Host stages: bit for bit, tidied pixels too.
                    assert_merge_matches(&output, &reference, Stages::Host, &what);
                    assert_eq!(stats.host_bands, usize::from(on_host), "{what}: {stats:?}");
                }
            }
        }
    });
}
