//! The GPU exclusive scan against its CPU twin at the sizes where work-group scans go wrong, and
//! the stream compaction built on it (`compact.comp`) against its twin.
//! Runs on whatever GL the machine has (Mesa llvmpipe in CI); no GL is a failure, not a skip.

use deepmerge::cpu::scan::exclusive_scan as cpu_scan;
use deepmerge::gpu::scan::{exclusive_scan as gpu_scan, SCAN_GROUP};
use deepmerge::gpu::GlContext;
use deepmerge::scene::SceneRng;

/// `n` random counts below 300 (the scene generator's random numbers, the crate's one generator).
fn counts(n: usize, seed: u64) -> Vec<u32> {
    let mut rng = SceneRng::new(seed, "tests");
    (0..n).map(|_| rng.below(300) as u32).collect()
}

#[test]
fn gpu_scan_matches_cpu_scan_at_edge_sizes() {
    let ctx =
        GlContext::new_with(true).expect("a GL 4.3 context (install libegl1 libgl1-mesa-dri)");
    let g = SCAN_GROUP;
    for n in [
        0,
        1,
        31,
        32,
        33,
        g - 1,
        g,
        g + 1,
        g * g - 1,
        g * g,
        g * g + 1,
        3 * g * g + 7,
    ] {
        let input = counts(n, n as u64);
        assert_eq!(gpu_scan(&ctx, &input).unwrap(), cpu_scan(&input), "n = {n}");
    }
}

#[test]
fn gpu_scan_matches_cpu_scan_at_ten_million() {
    let ctx =
        GlContext::new_with(true).expect("a GL 4.3 context (install libegl1 libgl1-mesa-dri)");
    let input = counts(10_000_000, 7);
    let gpu = gpu_scan(&ctx, &input).unwrap();
    let cpu = cpu_scan(&input);
    assert_eq!(gpu.len(), cpu.len());
    assert!(
        gpu == cpu,
        "first difference at {:?}",
        gpu.iter().zip(&cpu).position(|(a, b)| a != b)
    );
}

#[test]
fn gl_info_reports_renderer_and_limits() {
    let ctx = GlContext::new_with(true).expect("a GL 4.3 context");
    let info = ctx.info();
    assert!(!info.renderer.is_empty());
    assert!(info.max_ssbo_bytes >= 1 << 24, "{info}");
    assert!(info.max_compute_ssbo_bindings >= 12, "{info}");
    let text = info.to_string();
    assert!(
        text.contains(&info.renderer) && text.contains("shader storage"),
        "{text}"
    );
}

#[test]
fn gpu_compaction_matches_its_twin() {
    use deepmerge::cpu::compact::compact_flagged as cpu_compact;
    use deepmerge::gpu::compact::compact_flagged as gpu_compact;
    use deepmerge::gpu::GpuBuffer;
    use deepmerge::vocab::FlagField;
    let ctx =
        GlContext::new_with(true).expect("a GL 4.3 context (install libegl1 libgl1-mesa-dri)");
    let g = SCAN_GROUP;
    for n in [0, 1, 31, 33, g - 1, g + 1, 3 * g + 7, g * g + 5] {
        for (field, stride) in [(FlagField::WORD, 1), (FlagField::NEEDS_TIDY_IN_FRONT, 4)] {
            for density in [0u32, 1, 50, 100] {
                // Plain words: any value marks. Front words: other bits set too, only bit 2 marks.
                let flags: Vec<u32> = counts(n * stride, n as u64 + u64::from(density))
                    .iter()
                    .map(|&c| {
                        let on = c % 100 < density;
                        match (stride, on) {
                            (1, true) => c | 1,
                            (1, false) => 0,
                            (_, true) => c | 2,
                            (_, false) => c & !2,
                        }
                    })
                    .collect();
                let want = cpu_compact(&flags, n, field);
                let buffer = GpuBuffer::from_slice(&ctx, &flags).unwrap();
                let got = gpu_compact(&ctx, &buffer, n, field).unwrap();
                let what = format!("n {n} stride {stride} density {density}");
                assert_eq!(got.count, want.list.len(), "{what}");
                assert_eq!(got.marks.read::<u32>(n), want.marks, "{what}");
                assert_eq!(got.rank.read::<u32>(n + 1), want.rank, "{what}");
                assert_eq!(got.list.read::<u32>(got.count), want.list, "{what}");
            }
        }
    }
}

#[test]
fn gpu_zero_fill_clears_every_word_and_zeroed_buffers_start_at_zero() {
    use deepmerge::gpu::GpuBuffer;
    let ctx =
        GlContext::new_with(true).expect("a GL 4.3 context (install libegl1 libgl1-mesa-dri)");
    // Sizes around the work group (64 words) and the host-upload threshold (64 KiB).
    for words in [1usize, 63, 64, 65, 4095, 4096, 4097, 100_003] {
        let dirty = GpuBuffer::from_slice(&ctx, &vec![0xdead_beefu32; words * 4]).unwrap();
        ctx.fill_zero(&dirty).unwrap();
        let back: Vec<u32> = dirty.read(words * 4);
        assert!(back.iter().all(|&w| w == 0), "{words} words not cleared");
    }
    for bytes in [4, 16, 65_535, 65_536, 65_540, 1 << 20] {
        let zeroed = ctx.zeroed(bytes).unwrap();
        assert!(zeroed.bytes >= bytes);
        let back: Vec<u8> = zeroed.read(bytes);
        assert!(back.iter().all(|&b| b == 0), "zeroed({bytes})");
    }
}
