//! The CPU twins on their own: every array layout is a bijection of (pixel, sample) onto the
//! slots (so the GPU scatter can neither collide nor leave holes), RBM merges exactly as
//! stepwise for every block size, the k-way merge exactly as the chain of stepwise merges, and
//! the scan is the prefix sum.

use deepmerge::cpu::merge::{merge_kway, merge_rbm, merge_stepwise, Pick};
use deepmerge::cpu::scan::exclusive_scan;
use deepmerge::scene::SceneRng;
use deepmerge::vocab::layout::{address, group_min_counts};
use deepmerge::vocab::{Fragment, Layout, GROUP_SIZE};

#[test]
fn scan_is_the_prefix_sum_with_total() {
    assert_eq!(exclusive_scan(&[]), vec![0]);
    assert_eq!(exclusive_scan(&[3, 0, 2]), vec![0, 3, 3, 5]);
}

#[test]
fn array_layouts_are_bijections_onto_the_slots() {
    // The scene generator's random numbers: one generator for the whole crate and its tests.
    let mut rng = SceneRng::new(5, "tests");
    for pixels in [0usize, 1, 31, 32, 33, 64, 100, 32 * 7 + 13] {
        let counts: Vec<u32> = (0..pixels)
            .map(|_| {
                if rng.below(4) == 0 {
                    0
                } else {
                    rng.below(45) as u32
                }
            })
            .collect();
        let offsets = exclusive_scan(&counts);
        let total = offsets[pixels] as usize;
        for layout in [
            Layout::Linearised,
            Layout::Interleaved,
            Layout::BlockedInterleaved,
        ] {
            for block in [1, 2, 4, 8, 16, 32] {
                let mins = group_min_counts(layout, block, &counts);
                if layout == Layout::BlockedInterleaved {
                    assert!(mins.iter().all(|m| m % block == 0));
                }
                let mut seen = vec![false; total];
                for (p, &n) in counts.iter().enumerate() {
                    for i in 0..n {
                        let a = address(layout, block, &offsets, &mins, p, i).unwrap() as usize;
                        assert!(
                            a < total,
                            "{layout:?} block {block} pixels {pixels}: p {p} i {i} -> {a}"
                        );
                        assert!(!seen[a], "{layout:?} block {block}: slot {a} used twice");
                        seen[a] = true;
                    }
                }
                assert!(seen.iter().all(|&s| s));
            }
        }
    }
}

#[test]
fn interleaved_addresses_follow_the_paper() {
    // Two full groups' worth of pixels with 3 samples each: IA interleaves sample by sample.
    let counts = vec![3u32; GROUP_SIZE as usize];
    let offsets = exclusive_scan(&counts);
    let mins = group_min_counts(Layout::Interleaved, 1, &counts);
    assert_eq!(
        address(Layout::Interleaved, 1, &offsets, &mins, 5, 2),
        Some(5 + 32 * 2)
    );
    let mins = group_min_counts(Layout::BlockedInterleaved, 2, &counts);
    assert_eq!(mins, vec![2]);
    // Blocks of 2: pixel 5's samples 0 and 1 sit together at 5 * 2; sample 2 is past the blocks.
    assert_eq!(
        address(Layout::BlockedInterleaved, 2, &offsets, &mins, 5, 1),
        Some(11)
    );
    assert_eq!(
        address(Layout::BlockedInterleaved, 2, &offsets, &mins, 5, 2),
        Some(64 + 15 - 10)
    );
}

fn list(rng: &mut SceneRng, n: usize, input: u32) -> Vec<Fragment> {
    let mut zs: Vec<f32> = (0..n).map(|_| rng.below(8) as f32).collect();
    zs.sort_by(f32::total_cmp);
    zs.into_iter()
        .enumerate()
        .map(|(i, z)| Fragment {
            z,
            zback: z + rng.below(2) as f32,
            input,
            index: i as u32,
        })
        .collect::<Vec<_>>()
        .into_iter()
        .fold(Vec::new(), |mut v: Vec<Fragment>, f| {
            // Keep (Z, ZBack) sorted after the random ZBack.
            let at = v.partition_point(|g| !f.depth_less(g));
            v.insert(at, f);
            v
        })
}

#[test]
fn rbm_equals_stepwise_and_keeps_the_tie_rule() {
    let mut rng = SceneRng::new(9, "tests");
    for _ in 0..300 {
        let na = rng.below(50);
        let nb = rng.below(50);
        let a = list(&mut rng, na, 0);
        let b = list(&mut rng, nb, 1);
        let stepwise = merge_stepwise(&a, &b);
        // Ties: a before b, and each list in its own order.
        let merged: Vec<Fragment> = stepwise
            .iter()
            .map(|p| match *p {
                Pick::A(i) => a[i],
                Pick::B(j) => b[j],
            })
            .collect();
        for w in merged.windows(2) {
            assert!(!w[1].depth_less(&w[0]));
            if !w[0].depth_less(&w[1]) && w[0].input == w[1].input {
                assert!(w[0].index < w[1].index);
            }
            if !w[0].depth_less(&w[1]) {
                assert!(w[0].input <= w[1].input);
            }
        }
        for block in 1..=32 {
            assert_eq!(merge_rbm(&a, &b, block), stepwise, "block {block}");
        }
    }
}

/// The twin of `merge_kway.comp` gives the chain's order: 1 to 9 lists (some empty), ties
/// across and within lists.
#[test]
fn kway_equals_the_chain_of_stepwise_merges() {
    let mut rng = SceneRng::new(10, "tests");
    for round in 0..400 {
        let n = 1 + round % 9;
        let lists: Vec<Vec<Fragment>> = (0..n)
            .map(|k| {
                let len = if rng.below(4) == 0 { 0 } else { rng.below(30) };
                list(&mut rng, len, k as u32)
            })
            .collect();
        // The chain: merge list k into the merged lists before it, stepwise.
        let mut chain: Vec<Fragment> = Vec::new();
        for l in &lists {
            chain = merge_stepwise(&chain, l)
                .into_iter()
                .map(|p| match p {
                    Pick::A(i) => chain[i],
                    Pick::B(j) => l[j],
                })
                .collect();
        }
        let refs: Vec<&[Fragment]> = lists.iter().map(Vec::as_slice).collect();
        let kway: Vec<Fragment> = merge_kway(&refs)
            .into_iter()
            .map(|(k, i)| lists[k][i])
            .collect();
        assert_eq!(kway, chain, "round {round}, {n} lists");
    }
}
