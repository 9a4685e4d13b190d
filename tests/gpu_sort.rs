//! The GPU per-pixel sort (`glsl/sort.comp`) against its CPU twin and against the definition, a
//! stable `sort_by` on depth: lengths around the register block size, long lists, ties, signed
//! zeros, infinities, and pixel counts that need more than one row of work groups.
//! Fragments are compared bit for bit and every fragment carries a unique `index`, so any
//! reordering of equal keys (an unstable sort) fails.

mod gpu_common;

use deepmerge::cpu::sort::{sort_pixels as cpu_sort, sort_pixels_with_values, REG_SORT_SIZE};
use deepmerge::cpu::{Fragment, GROUP_SIZE};
use deepmerge::gpu::sort::{sort_pixels_host, sort_pixels_host_with_values};
use gpu_common::{with_gl, Lcg};

fn bits(fragments: &[Fragment]) -> Vec<[u32; 4]> {
    fragments.iter().map(|f| bytemuck::cast(*f)).collect()
}

/// The definition of merge order inside one input: a stable sort by (Z, ZBack).
fn reference(offsets: &[u32], fragments: &[Fragment]) -> Vec<Fragment> {
    let mut out = fragments.to_vec();
    for p in 0..offsets.len().saturating_sub(1) {
        out[offsets[p] as usize..offsets[p + 1] as usize].sort_by(depth_cmp);
    }
    out
}

fn depth_cmp(a: &Fragment, b: &Fragment) -> std::cmp::Ordering {
    if a.depth_less(b) {
        std::cmp::Ordering::Less
    } else if b.depth_less(a) {
        std::cmp::Ordering::Greater
    } else {
        std::cmp::Ordering::Equal
    }
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
    let mut rng = Lcg(seed);
    lengths
        .iter()
        .map(|&n| {
            (0..n)
                .map(|_| {
                    let z = rng.below(levels) as f32 * 0.25 - 1.0;
                    (z, z + rng.below(3) as f32 * 0.5)
                })
                .collect()
        })
        .collect()
}

/// GPU == CPU twin == reference, fragments and (with values) the values that ride along.
fn check(offsets: Vec<u32>, fragments: Vec<Fragment>, what: &str) {
    let expected = reference(&offsets, &fragments);
    let mut cpu = fragments.clone();
    cpu_sort(&offsets, &mut cpu);
    assert!(
        bits(&cpu) == bits(&expected),
        "{what}: CPU twin differs from the reference"
    );
    let columns = 2;
    let values: Vec<f32> = fragments
        .iter()
        .flat_map(|f| [f.index as f32, -(f.index as f32) - 0.5])
        .collect();
    let (gpu, gpu_values, gpu_plain) = with_gl(move |ctx| {
        let (gpu, gpu_values) =
            sort_pixels_host_with_values(ctx, &offsets, &fragments, &values, columns)
                .expect("GPU sort with values");
        let plain = sort_pixels_host(ctx, &offsets, &fragments).expect("GPU sort");
        (gpu, gpu_values, plain)
    });
    for (name, got) in [("GPU", &gpu_plain), ("GPU with values", &gpu)] {
        if bits(got) != bits(&expected) {
            let i = bits(got)
                .iter()
                .zip(bits(&expected))
                .position(|(a, b)| *a != b)
                .unwrap();
            panic!(
                "{what}: {name} differs first at slot {i}: {:?} vs {:?}",
                got[i], expected[i]
            );
        }
    }
    for (slot, f) in gpu.iter().enumerate() {
        assert_eq!(
            [gpu_values[2 * slot], gpu_values[2 * slot + 1]],
            [f.index as f32, -(f.index as f32) - 0.5],
            "{what}: values of slot {slot} did not follow their fragment"
        );
    }
}

#[test]
fn sorts_every_list_length_like_a_stable_sort() {
    let r = REG_SORT_SIZE;
    let lengths = [
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
        500,
        2000,
        0,
        1,
    ];
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
fn keeps_ties_signed_zeros_and_infinities_in_order() {
    let inf = f32::INFINITY;
    let r = REG_SORT_SIZE;
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
    ];
    let (offsets, fragments) = from_lists(&lists);
    // The ties do discriminate: breaking them the other way gives a different answer.
    let expected = reference(&offsets, &fragments);
    let mut ties_reversed = fragments.clone();
    for p in 0..lists.len() {
        ties_reversed[offsets[p] as usize..offsets[p + 1] as usize]
            .sort_by(|a, b| depth_cmp(a, b).then(b.index.cmp(&a.index)));
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
        let mut rng = Lcg(pixels as u64 + 11);
        let lengths: Vec<usize> = (0..pixels)
            .map(|_| rng.below(2 * REG_SORT_SIZE as u32 + 3) as usize)
            .collect();
        let (offsets, fragments) = from_lists(&random_lists(&lengths, 6, pixels as u64));
        check(offsets, fragments, &format!("{pixels} pixels"));
    }
}

#[test]
fn sorts_more_pixels_than_one_row_of_work_groups() {
    // More than 65535 groups of 32: the dispatch needs a second row.
    let pixels = 65535 * GROUP_SIZE as usize + 777;
    let mut rng = Lcg(5);
    let lengths: Vec<usize> = (0..pixels).map(|_| rng.below(4) as usize).collect();
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
    let gpu = with_gl(move |ctx| sort_pixels_host(ctx, &offsets, &fragments).expect("GPU sort"));
    assert_eq!(gpu.len(), expected.len());
    let first_difference = bits(&gpu)
        .iter()
        .zip(bits(&expected))
        .position(|(a, b)| *a != b);
    assert_eq!(first_difference, None, "GPU differs from the reference");
}

#[test]
fn rejects_offsets_that_do_not_span_the_fragments() {
    let fragments = vec![Fragment::default(); 3];
    with_gl(move |ctx| {
        assert!(sort_pixels_host(ctx, &[0, 2], &fragments).is_err());
        assert!(sort_pixels_host(ctx, &[0, 2, 1, 3], &fragments).is_err());
        assert_eq!(sort_pixels_host(ctx, &[0], &[]).unwrap(), Vec::new());
    });
}
