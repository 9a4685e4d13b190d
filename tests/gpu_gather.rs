//! The GPU gather (`gather_count.comp`, `gather.comp`) against its CPU twin (`cpu::gather`), and
//! the twin against the reference's own reading of samples (`composite::read_sample`,
//! `Plane::get_f32`): counts, keys and values element by element, for half, float and uint
//! planes, absent channels, both pixel orders, bands that cut an input's rows, inputs offset
//! from, wider than, or disjoint from the band, empty inputs, and inputs stacked into slices
//! as a k-way merge stacks them; with the planes copied to the GPU and, on a software
//! rasteriser, read in place (`GL_AMD_pinned_memory`: runs of halves that start in a word's
//! high half among them).
//! Runs on whatever GL the machine has (Mesa llvmpipe in CI), in strict mode; no GL is a
//! failure, not a skip.

mod gpu_common;

use deepmerge::composite::read_sample;
use deepmerge::cpu::gather::{gather as cpu_gather, gather_counts as cpu_gather_counts};
use deepmerge::deep::{Bounds, DeepImage};
use deepmerge::gpu::gather::{gather, gather_counts, stage, GatherBand};
use deepmerge::gpu::scan::exclusive_scan_buffer;
use deepmerge::gpu::GlContext;
use deepmerge::vocab::{kway_stride, Fragment, PixelOrder, StagedInput};
use gpu_common::{real, with_gl, Synth};

/// One input of a case: the image and which of its channels each column reads.
struct Input {
    image: DeepImage,
    /// Column sources by channel name (`None`: a column the input lacks).
    columns: Vec<Option<&'static str>>,
}

impl Input {
    fn depth(&self) -> (Option<usize>, Option<usize>) {
        (
            self.image.channel_index("Z"),
            self.image.channel_index("ZBack"),
        )
    }

    fn sources(&self) -> Vec<Option<usize>> {
        self.columns
            .iter()
            .map(|c| c.and_then(|name| self.image.channel_index(name)))
            .collect()
    }
}

/// The GPU's counts, keys and values for the `staged` inputs over a band `width` wide of
/// `band_pixels` pixels in `order` (`None`: row-major), each input in a slice of `slice` pixels.
#[allow(clippy::too_many_arguments)]
fn gpu_stream(
    ctx: &GlContext,
    staged: &[StagedInput],
    band_pixels: usize,
    width: usize,
    order: Option<&[u32]>,
    slice: usize,
    columns: usize,
    with_values: bool,
) -> (Vec<u32>, Vec<Fragment>, Vec<f32>) {
    let order_buffer = order.map(|order| ctx.upload(order).unwrap());
    let band = GatherBand {
        pixels: band_pixels,
        width,
        order: order_buffer.as_ref(),
    };
    let buffers: Vec<_> = staged
        .iter()
        .map(|s| stage(ctx, s, width).unwrap())
        .collect();
    let total = slice * staged.len();
    let counts = ctx.zeroed((total * 4).max(16)).unwrap();
    for (j, b) in buffers.iter().enumerate() {
        gather_counts(ctx, b, &band, &counts, j * slice).unwrap();
    }
    let offsets = exclusive_scan_buffer(ctx, &counts, total).unwrap();
    let samples: usize = staged.iter().map(|s| s.gathered_samples(width)).sum();
    let keys = ctx.scratch((samples * 16).max(16)).unwrap();
    let values = ctx.scratch((samples * columns * 4).max(16)).unwrap();
    for (j, b) in buffers.iter().enumerate() {
        gather(
            ctx,
            b,
            &band,
            &offsets,
            j * slice,
            &keys,
            &values,
            columns,
            with_values,
        )
        .unwrap();
    }
    (
        counts.read(total),
        keys.read(samples),
        if with_values {
            values.read(samples * columns)
        } else {
            Vec::new()
        },
    )
}

/// Check the GPU against the twin, and the twin against the reference's reading, for `inputs`
/// over band rows `row0 .. row0 + rows` of `window`.
fn check(ctx: &GlContext, inputs: &[Input], window: Bounds, row0: usize, rows: usize, what: &str) {
    let columns = inputs[0].columns.len();
    let width = window.width();
    let band_pixels = width * rows;
    let sources: Vec<Vec<Option<usize>>> = inputs.iter().map(Input::sources).collect();
    // Every input staged with its columns, or (`with_values` false) its depth planes alone.
    let stage_all = |with_values: bool| -> Vec<StagedInput> {
        inputs
            .iter()
            .zip(&sources)
            .enumerate()
            .map(|(k, (input, sources))| {
                let sources: &[Option<usize>] = if with_values { sources } else { &[] };
                StagedInput::new(
                    &input.image,
                    k as u32,
                    input.depth(),
                    sources,
                    window,
                    row0,
                    rows,
                )
            })
            .collect()
    };
    for order_kind in [PixelOrder::RowMajor, PixelOrder::Tiled] {
        let order = order_kind.permutation(width, rows);
        let staged = stage_all(true);
        let stacked = inputs.len() > 1;
        let slice = if stacked {
            kway_stride(band_pixels)
        } else {
            band_pixels
        };
        // The twin, input after input, each padded to its slice.
        let (mut counts, mut keys, mut values) = (Vec::new(), Vec::new(), Vec::new());
        for s in &staged {
            counts.extend(cpu_gather_counts(s, &order, width));
            counts.resize(counts.len() + slice - band_pixels, 0);
            let (k, v) = cpu_gather(s, &order, width, columns);
            keys.extend(k);
            values.extend(v);
        }
        let what = format!("{what}, {order_kind:?} order");
        // The twin reads samples as the reference does.
        for (i, key) in keys.iter().enumerate() {
            let input = &inputs[key.input as usize];
            let index = key.index as usize;
            let want =
                Fragment::try_from(read_sample(&input.image, input.depth(), key.input, index))
                    .unwrap();
            assert_eq!(*key, want, "{what}: key {i}");
            for (c, source) in sources[key.input as usize].iter().enumerate() {
                let want = source.map_or(0.0, |ch| input.image.planes[ch].get_f32(index));
                assert_eq!(
                    values[i * columns + c].to_bits(),
                    want.to_bits(),
                    "{what}: sample {i} column {c}"
                );
            }
        }
        let gathered: usize = staged.iter().map(|s| s.gathered_samples(width)).sum();
        assert_eq!(
            keys.len(),
            gathered,
            "{what}: every sample in the band once"
        );
        let (gpu_counts, gpu_keys, gpu_values) = gpu_stream(
            ctx,
            &staged,
            band_pixels,
            width,
            (order_kind != PixelOrder::RowMajor).then_some(&order[..]),
            slice,
            columns,
            true,
        );
        assert_eq!(gpu_counts, counts, "{what}: counts");
        assert_eq!(gpu_keys, keys, "{what}: keys");
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&gpu_values), bits(&values), "{what}: values");
        // The keys alone (a deep output's merge): the depth planes staged, the same keys.
        let depth_only = stage_all(false);
        let (key_counts, key_keys, _) = gpu_stream(
            ctx,
            &depth_only,
            band_pixels,
            width,
            (order_kind != PixelOrder::RowMajor).then_some(&order[..]),
            slice,
            columns,
            false,
        );
        assert_eq!(key_counts, counts, "{what}: counts, keys alone");
        assert_eq!(key_keys, keys, "{what}: keys alone");
    }
}

/// Columns over the synthetic images' channels: halves (A, B, R), a float (G), a uint (id)
/// and one no input has.
const SYNTH_COLUMNS: [Option<&str>; 6] =
    [Some("A"), Some("B"), Some("G"), Some("R"), Some("id"), None];

fn synth(window: Bounds, max_count: u32, seed: u64, volumes: bool) -> Input {
    let mut synth = Synth::new(window, max_count, seed);
    synth.volumes = volumes;
    synth.messy = seed.is_multiple_of(2);
    Input {
        image: synth.build(),
        columns: SYNTH_COLUMNS.to_vec(),
    }
}

/// `job` with the planes read in place (where the context can) and copied, then the context's
/// own choice put back.
fn both_ways(ctx: &GlContext, job: impl Fn(&str)) {
    let default = ctx.pinned_planes();
    for in_place in [true, false] {
        ctx.set_pinned_planes(in_place);
        job(if ctx.pinned_planes() {
            "planes read in place"
        } else {
            "planes copied"
        });
    }
    ctx.set_pinned_planes(default);
}

#[test]
fn gpu_gather_matches_its_twin_on_synthetic_inputs() {
    with_gl(|ctx| {
        both_ways(ctx, |how| {
            let check = |ctx: &GlContext, inputs: &[Input], window, row0, rows, what: &str| {
                check(ctx, inputs, window, row0, rows, &format!("{what}, {how}"))
            };
            let window = Bounds::from_origin_size(-3, 5, 37, 19);
            // One input inside the window, offset; its band cut mid-image.
            let a = synth(Bounds::from_origin_size(2, 7, 29, 13), 9, 11, true);
            check(
                ctx,
                std::slice::from_ref(&a),
                window,
                0,
                19,
                "one input, whole window",
            );
            check(
                ctx,
                std::slice::from_ref(&a),
                window,
                4,
                7,
                "one input, a band cutting it",
            );
            check(
                ctx,
                std::slice::from_ref(&a),
                window,
                18,
                1,
                "one input, a band below it",
            );
            // Wider than the window (a --bbox smaller than the input), no ZBack, long lists.
            let b = synth(Bounds::from_origin_size(-9, 3, 60, 30), 40, 12, false);
            check(
                ctx,
                std::slice::from_ref(&b),
                window,
                3,
                9,
                "an input wider than the window",
            );
            // An input the band does not reach, and an empty one.
            let c = synth(Bounds::from_origin_size(100, 100, 5, 5), 4, 13, true);
            let mut empty = Synth::new(Bounds::from_origin_size(0, 6, 7, 3), 0, 14);
            empty.empty_percent = 100;
            let empty = Input {
                image: empty.build(),
                columns: SYNTH_COLUMNS.to_vec(),
            };
            check(ctx, &[a, b, c, empty], window, 2, 15, "four inputs stacked");
        })
    });
}

#[test]
fn gpu_gather_matches_its_twin_on_real_files() {
    with_gl(|ctx| {
        both_ways(ctx, |how| {
            let columns = vec![Some("A"), Some("B"), Some("G"), Some("R")];
            let balls = Input {
                image: real("Balls.exr"),
                columns: columns.clone(),
            };
            let leaves = Input {
                image: real("Leaves.exr"),
                columns,
            };
            let window = balls.image.data_window.union(&leaves.image.data_window);
            let rows = window.height();
            check(
                ctx,
                &[balls, leaves],
                window,
                rows / 3,
                rows / 3 + 5,
                &format!("Balls + Leaves, {how}"),
            );
        })
    });
}
