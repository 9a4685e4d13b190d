//! The GPU per-pixel sort (`glsl/sort.comp`) against its CPU twin and against the definition, a
//! stable `sort_by` on depth: list lengths around every boundary of its three paths (registers up
//! to REG_SORT_SIZE, one shared-memory work group up to LOCAL_SORT_SIZE, chunks plus global merge
//! passes beyond, odd and even pass counts), lists longer than one llvmpipe invocation could
//! loop over, ties, signed zeros, infinities, lists in order except across a chunk boundary,
//! value buffers of 1 to 9 columns, and pixel counts that need more than one row of work groups.
//! Fragments are compared bit for bit and every fragment carries a unique `index`, so any
//! reordering of equal keys (an unstable sort) fails.

mod gpu_common;

use deepmerge::cpu::sort::{merge_passes, sort_pixels as cpu_sort, sort_pixels_with_values};
use deepmerge::gpu::sort::{
    sort_pixels_host, sort_pixels_host_with_values, SortShape, SERIAL_SORT_SIZE,
};

/// Both shapes of the GPU sort: work groups (hardware) and serial (software rasterisers).
const SHAPES: [SortShape; 2] = [SortShape::Groups, SortShape::Serial];
use deepmerge::vocab::{Fragment, GROUP_SIZE, LOCAL_SORT_SIZE, REG_SORT_SIZE};
use gpu_common::{test_rng, with_gl};

fn bits(fragments: &[Fragment]) -> Vec<[u32; 4]> {
    fragments.iter().map(|f| bytemuck::cast(*f)).collect()
}

/// The definition of merge order inside one input: a stable sort by (Z, ZBack).
fn reference(offsets: &[u32], fragments: &[Fragment]) -> Vec<Fragment> {
    let mut out = fragments.to_vec();
    for p in 0..offsets.len().saturating_sub(1) {
        out[offsets[p] as usize..offsets[p + 1] as usize].sort_by(Fragment::depth_cmp);
    }
    out
}

/// CSR offsets and fragments from per-pixel depth lists; `index` numbers every fragment and
/// `input` is arbitrary (stability must not lean on it).
fn from_lists(lists: &[Vec<(f32, f32)>]) -> (Vec<u32>, Vec<Fragment>) {
    let mut offsets = vec![0u32];
    let mut fragments = Vec::new();
    for list in lists {
        for &(z, zback) in list {
            let index = fragments.len() as u32;
            fragments.push(Fragment {
                z,
                zback,
                input: index.wrapping_mul(2654435761) % 3,
                index,
            });
        }
        offsets.push(fragments.len() as u32);
    }
    (offsets, fragments)
}

/// Random depth lists of the given lengths; depths come from `levels` values, so small `levels`
/// means many equal keys.
fn random_lists(lengths: &[usize], levels: u32, seed: u64) -> Vec<Vec<(f32, f32)>> {
    let mut rng = test_rng(seed);
    lengths
        .iter()
        .map(|&n| {
            (0..n)
                .map(|_| {
                    let z = rng.below(levels as usize) as f32 * 0.25 - 1.0;
                    (z, z + rng.below(3) as f32 * 0.5)
                })
                .collect()
        })
        .collect()
}

/// GPU == CPU twin == reference, fragments and (with values) the values that ride along.
fn check(offsets: Vec<u32>, fragments: Vec<Fragment>, what: &str) {
    check_columns(offsets, fragments, 2, what);
}

/// The values of a fragment: column c encodes its `index` and c, so a value that moves without
/// its fragment, or lands in another column, is seen.
fn value_of(f: &Fragment, c: usize) -> f32 {
    (f.index as f32) * 16.0 + c as f32
}

/// [`check`] with `columns` floats per slot.
fn check_columns(offsets: Vec<u32>, fragments: Vec<Fragment>, columns: usize, what: &str) {
    let expected = reference(&offsets, &fragments);
    let values: Vec<f32> = fragments
        .iter()
        .flat_map(|f| (0..columns).map(move |c| value_of(f, c)))
        .collect();
    let mut cpu = fragments.clone();
    cpu_sort(&offsets, &mut cpu);
    assert!(
        bits(&cpu) == bits(&expected),
        "{what}: CPU twin differs from the reference"
    );
    let mut cpu_with_values = fragments.clone();
    let mut cpu_values = values.clone();
    sort_pixels_with_values(&offsets, &mut cpu_with_values, &mut cpu_values, columns);
    assert!(
        bits(&cpu_with_values) == bits(&expected),
        "{what}: CPU twin with values differs from the reference"
    );
    for shape in SHAPES {
        check_shape(
            &offsets, &fragments, &values, columns, &expected, shape, what,
        );
    }
    for (slot, f) in expected.iter().enumerate() {
        let want: Vec<f32> = (0..columns).map(|c| value_of(f, c)).collect();
        assert_eq!(
            cpu_values[slot * columns..(slot + 1) * columns],
            want[..],
            "{what}: CPU twin values of slot {slot} did not follow their fragment"
        );
    }
}

/// The GPU sort in `shape` against the reference, fragments and values.
fn check_shape(
    offsets: &[u32],
    fragments: &[Fragment],
    values: &[f32],
    columns: usize,
    expected: &[Fragment],
    shape: SortShape,
    what: &str,
) {
    let what = format!("{what} ({shape:?})");
    let (offsets, fragments, values) = (offsets.to_vec(), fragments.to_vec(), values.to_vec());
    let (gpu, gpu_values, gpu_plain) = with_gl(move |ctx| {
        let (gpu, gpu_values) =
            sort_pixels_host_with_values(ctx, &offsets, &fragments, &values, columns, shape)
                .expect("GPU sort with values");
        let plain = sort_pixels_host(ctx, &offsets, &fragments, shape).expect("GPU sort");
        (gpu, gpu_values, plain)
    });
    for (name, got) in [("GPU", &gpu_plain), ("GPU with values", &gpu)] {
        if bits(got) != bits(expected) {
            let i = bits(got)
                .iter()
                .zip(bits(expected))
                .position(|(a, b)| *a != b)
                .unwrap();
            panic!(
                "{what}: {name} differs first at slot {i}: {:?} vs {:?}",
                got[i], expected[i]
            );
        }
    }
    for (slot, f) in expected.iter().enumerate() {
        let want: Vec<f32> = (0..columns).map(|c| value_of(f, c)).collect();
        assert_eq!(
            gpu_values[slot * columns..(slot + 1) * columns],
            want[..],
            "{what}: GPU values of slot {slot} did not follow their fragment"
        );
    }
}

/// The lengths around every boundary of the sort's paths.
fn boundary_lengths() -> Vec<usize> {
    let (r, l) = (REG_SORT_SIZE, LOCAL_SORT_SIZE);
    vec![
        0,
        1,
        2,
        3,
        r - 1,
        r,
        r + 1,
        2 * r - 1,
        2 * r,
        2 * r + 1,
        3 * r + 5,
        SERIAL_SORT_SIZE - 1,
        SERIAL_SORT_SIZE,
        SERIAL_SORT_SIZE + 1,
        500,
        l - 1,
        l,
        l + 1,
        2 * l,
        2 * l + 1,
        3 * l + 5,
        4 * l + 1,
        0,
        1,
    ]
}

#[test]
fn sorts_every_list_length_like_a_stable_sort() {
    let lengths = boundary_lengths();
    // Every path is taken, merge pass counts 0 to 3 included (odd counts start in the scratch).
    let passes: Vec<u32> = lengths.iter().map(|&n| merge_passes(n)).collect();
    assert!((0..=3).all(|k| passes.contains(&k)), "{passes:?}");
    for (levels, seed) in [(3, 1), (40, 2), (100_000, 3)] {
        let (offsets, fragments) = from_lists(&random_lists(&lengths, levels, seed));
        check(
            offsets,
            fragments,
            &format!("random lists, {levels} depth levels"),
        );
    }
}

#[test]
fn permutes_one_to_nine_value_columns() {
    // 9 columns take three gather rounds of 4, the last partial; 1 column one partial round.
    let lengths = boundary_lengths();
    for (columns, seed) in [(1, 4), (4, 5), (5, 6), (9, 7)] {
        let (offsets, fragments) = from_lists(&random_lists(&lengths, 50, seed));
        check_columns(offsets, fragments, columns, &format!("{columns} columns"));
    }
}

#[test]
fn keeps_ties_signed_zeros_and_infinities_in_order() {
    let inf = f32::INFINITY;
    let (r, l) = (REG_SORT_SIZE, LOCAL_SORT_SIZE);
    let lists: Vec<Vec<(f32, f32)>> = vec![
        // -0.0 and 0.0 are equal keys: they keep their order.
        vec![
            (0.0, 0.0),
            (-0.0, -0.0),
            (1.0, 1.0),
            (0.0, 0.0),
            (-0.0, 0.0),
            (-1.0, -1.0),
        ],
        vec![
            (inf, inf),
            (-inf, -inf),
            (inf, inf),
            (0.0, inf),
            (-inf, -inf),
            (0.0, 0.0),
        ],
        // All equal, short and long: nothing may move.
        vec![(2.0, 2.0); r + 3],
        vec![(2.0, 3.0); 700],
        // Equal Z, ZBack decides.
        (0..3 * r).map(|i| (1.0, (i % 5) as f32)).collect(),
        // Already sorted and reversed, short and long.
        (0..r).map(|i| (i as f32, i as f32)).collect(),
        (0..r).rev().map(|i| (i as f32, i as f32)).collect(),
        (0..1000).map(|i| (i as f32, i as f32)).collect(),
        (0..1000)
            .rev()
            .map(|i| ((i / 3) as f32, (i / 3) as f32))
            .collect(),
        // The same past one chunk: all equal, sorted, reversed with ties.
        vec![(2.0, 2.0); l + 1],
        vec![(-1.0, 5.0); 3 * l + 5],
        (0..3 * l + 5).map(|i| (i as f32, i as f32)).collect(),
        (0..3 * l + 5)
            .rev()
            .map(|i| ((i / 7) as f32, (i % 2) as f32))
            .collect(),
        // Each chunk sorted and every pair inside a chunk in order: only the pair across the
        // chunk boundary is not, which the parallel check must still see.
        (0..2 * l)
            .map(|i| {
                let z = if i < l {
                    (i + l) as f32
                } else {
                    (i - l) as f32
                };
                (z, z)
            })
            .collect(),
        // In order except the very last pair of a long list.
        (0..2 * l + 3)
            .map(|i| {
                let z = if i == 2 * l + 2 { 0.5 } else { i as f32 };
                (z, z)
            })
            .collect(),
    ];
    let (offsets, fragments) = from_lists(&lists);
    // The ties do discriminate: breaking them the other way gives a different answer.
    let expected = reference(&offsets, &fragments);
    let mut ties_reversed = fragments.clone();
    for p in 0..lists.len() {
        ties_reversed[offsets[p] as usize..offsets[p + 1] as usize]
            .sort_by(|a, b| a.depth_cmp(b).then(b.index.cmp(&a.index)));
    }
    assert!(
        bits(&ties_reversed) != bits(&expected),
        "the ties are not visible"
    );
    check(offsets, fragments, "edge values");
}

#[test]
fn handles_pixel_counts_around_the_group_size() {
    for pixels in [0usize, 1, 31, 33, GROUP_SIZE as usize * 3 + 1] {
        let mut rng = test_rng(pixels as u64 + 11);
        // Mostly short lists, every 13th past one local sort, so chunk groups interleave
        // with pixels that have none.
        let lengths: Vec<usize> = (0..pixels)
            .map(|p| {
                if p % 13 == 5 {
                    LOCAL_SORT_SIZE + rng.below(LOCAL_SORT_SIZE)
                } else {
                    rng.below(2 * REG_SORT_SIZE + 3)
                }
            })
            .collect();
        let (offsets, fragments) = from_lists(&random_lists(&lengths, 6, pixels as u64));
        check(offsets, fragments, &format!("{pixels} pixels"));
    }
}

#[test]
fn sorts_lists_longer_than_one_invocation_could_loop_over() {
    // llvmpipe silently ends an invocation's loops after 65535 iterations in all: a list this
    // long is only sorted right if the work really is spread over groups and dispatches
    // (8 merge passes).
    let n = 70_000;
    assert_eq!(merge_passes(n), 8);
    let lists = random_lists(&[n, 5, 3 * LOCAL_SORT_SIZE], 500, 8);
    let (offsets, fragments) = from_lists(&lists);
    check(offsets, fragments, "a list of 70000");
}

#[test]
fn sorts_a_mixed_image_like_the_twin_and_reports_times() {
    // 40000 pixels of 0-40 samples and one in 200 of 1000-5000: every path at once. The times
    // (printed with --nocapture) include upload and read-back; on llvmpipe they say nothing
    // about a real GPU.
    let mut rng = test_rng(21);
    let lengths: Vec<usize> = (0..40_000)
        .map(|p| {
            if p % 200 == 7 {
                1000 + rng.below(4001)
            } else {
                rng.below(41)
            }
        })
        .collect();
    let (offsets, fragments) = from_lists(&random_lists(&lengths, 1000, 22));
    let columns = 4;
    let values: Vec<f32> = fragments
        .iter()
        .flat_map(|f| (0..columns).map(move |c| value_of(f, c)))
        .collect();
    let expected = reference(&offsets, &fragments);
    let started = std::time::Instant::now();
    let mut cpu = fragments.clone();
    let mut cpu_values = values.clone();
    sort_pixels_with_values(&offsets, &mut cpu, &mut cpu_values, columns);
    let cpu_time = started.elapsed();
    assert!(bits(&cpu) == bits(&expected), "CPU twin");
    let samples = fragments.len();
    for shape in SHAPES {
        let (offsets, fragments, values) = (offsets.clone(), fragments.clone(), values.clone());
        let (gpu, gpu_values, gpu_time) = with_gl(move |ctx| {
            // Compile the stages first so the time is the sort's.
            sort_pixels_host_with_values(ctx, &offsets, &fragments, &values, columns, shape)
                .unwrap();
            let started = std::time::Instant::now();
            let (gpu, gpu_values) =
                sort_pixels_host_with_values(ctx, &offsets, &fragments, &values, columns, shape)
                    .unwrap();
            (gpu, gpu_values, started.elapsed())
        });
        assert!(bits(&gpu) == bits(&expected), "GPU ({shape:?})");
        assert!(
            gpu_values == cpu_values,
            "GPU values ({shape:?}) differ from the twin's"
        );
        println!(
            "sort of {samples} samples, 4 columns: GPU ({shape:?}) {:.3} s, CPU twin {:.3} s, ratio {:.2}",
            gpu_time.as_secs_f64(),
            cpu_time.as_secs_f64(),
            gpu_time.as_secs_f64() / cpu_time.as_secs_f64()
        );
    }
}

#[test]
fn sorts_more_pixels_than_one_row_of_work_groups() {
    // More than 65535 groups of 32: the dispatch needs a second row.
    let pixels = 65535 * GROUP_SIZE as usize + 777;
    let mut rng = test_rng(5);
    let lengths: Vec<usize> = (0..pixels).map(|_| rng.below(4)).collect();
    let (offsets, fragments) = from_lists(&random_lists(&lengths, 4, 9));
    let expected = reference(&offsets, &fragments);
    // The pixels in the second row of groups really have work to do.
    let tail = offsets[65535 * GROUP_SIZE as usize] as usize..expected.len();
    assert!(bits(&fragments[tail.clone()]) != bits(&expected[tail]));
    let mut cpu = fragments.clone();
    let mut values: Vec<f32> = fragments.iter().map(|f| f.index as f32).collect();
    sort_pixels_with_values(&offsets, &mut cpu, &mut values, 1);
    assert!(bits(&cpu) == bits(&expected), "CPU twin");
    assert!(
        cpu.iter().zip(&values).all(|(f, &v)| v == f.index as f32),
        "CPU twin values"
    );
    for shape in SHAPES {
        let (offsets, fragments) = (offsets.clone(), fragments.clone());
        let gpu = with_gl(move |ctx| {
            sort_pixels_host(ctx, &offsets, &fragments, shape).expect("GPU sort")
        });
        assert_eq!(gpu.len(), expected.len());
        let first_difference = bits(&gpu)
            .iter()
            .zip(bits(&expected))
            .position(|(a, b)| *a != b);
        assert_eq!(
            first_difference, None,
            "GPU ({shape:?}) differs from the reference"
        );
    }
}

#[test]
fn rejects_offsets_that_do_not_span_the_fragments() {
    let fragments = vec![Fragment::default(); 3];
    with_gl(move |ctx| {
        // Bad offsets are the caller's bug, reported as an internal error (not as a GL failure).
        for offsets in [&[0, 2][..], &[0, 2, 1, 3]] {
            let err = sort_pixels_host(ctx, offsets, &fragments, SortShape::Groups).unwrap_err();
            assert!(
                matches!(err, deepmerge::error::Error::Internal(_)),
                "{offsets:?}: {err}"
            );
        }
        assert_eq!(
            sort_pixels_host(ctx, &[0], &[], SortShape::Serial).unwrap(),
            Vec::new()
        );
    });
}
