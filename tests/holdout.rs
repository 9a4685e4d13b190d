//! Holdout (issue 9, item 3) built from the tidy's primitives: infinitely deep volumes (ZBack =
//! +inf, Z = −inf) held out and holding out, through the library and the CLI, with answers worked
//! out by hand; a brute-force check that holding out gives IN's share of the merge, on random
//! pixels with infinite and coincident depths; and `--deep --tidy` merges of infinitely deep
//! volumes on the CPU and GL backends. (The corpus references for holdout and cull are checked
//! in `tests/volumetric.rs`.)

mod common;

use std::path::Path;

use common::{image, pixel_image, point, read, run, volume, S, SAMPLE_CHANNELS};
use deepmerge::composite::tidy::{piece_fraction, split_alpha};
use deepmerge::composite::{
    holdout, merge_images, HoldoutMode, MergeOptions, MergeOutput, OutputKind,
};
use deepmerge::deep::{DeepImage, DeepState, FlatImage};
use deepmerge::exr::{write_deep, Codec};

const INF: f32 = f32::INFINITY;

// ---------------------------------------------------------------------------------------------
// Building images by hand

fn plane(image: &DeepImage, name: &str) -> Vec<f32> {
    let c = image.channel_index(name).unwrap();
    (0..image.sample_count())
        .map(|i| image.planes[c].get_f32(i))
        .collect()
}

fn flat(inputs: &[&DeepImage]) -> FlatImage {
    match merge_images(inputs, &MergeOptions::default()).unwrap() {
        MergeOutput::Flat(f) => f,
        MergeOutput::Deep(_) => unreachable!(),
    }
}

fn value(image: &FlatImage, name: &str, p: usize) -> f32 {
    image.channel(name).unwrap()[p]
}

fn deep_tidy(inputs: &[&DeepImage]) -> DeepImage {
    let options = MergeOptions {
        output: OutputKind::Deep,
        tidy: true,
        ..MergeOptions::default()
    };
    match merge_images(inputs, &options).unwrap() {
        MergeOutput::Deep(d) => d,
        MergeOutput::Flat(_) => unreachable!(),
    }
}

fn assert_close(got: f32, want: f64, what: &str) {
    assert!(
        (got as f64 - want).abs() < 1e-6,
        "{what}: got {got}, want {want}"
    );
}

/// No NaN in any channel, and no infinity outside the depth channels.
fn assert_numbers(image: &DeepImage, what: &str) {
    for (c, channel) in image.channels.iter().enumerate() {
        let depth = channel.name == "Z" || channel.name == "ZBack";
        for i in 0..image.sample_count() {
            let v = image.planes[c].get_f32(i);
            assert!(
                !v.is_nan() && (depth || v.is_finite()),
                "{what}: {} sample {i} is {v}",
                channel.name
            );
        }
    }
}

/// Write `image` to `dir/name` (uncompressed) and return its path as a string.
fn write(dir: &Path, name: &str, image: &DeepImage) -> String {
    let path = dir.join(name);
    write_deep(&path, image, Codec::None).unwrap();
    path.to_str().unwrap().to_string()
}

// ---------------------------------------------------------------------------------------------
// The issue's case and its kin, by hand

/// IN: volume [1, +inf) alpha .5, colour (.4, .2, .1). HOLDOUT: point at 2, alpha .5.
fn issue_case() -> (DeepImage, DeepImage) {
    (
        pixel_image(&[volume(1.0, INF, 0.5, [0.4, 0.2, 0.1])]),
        pixel_image(&[point(2.0, 0.5, [0.0; 3])]),
    )
}

/// The expected answer for [`issue_case`]. The tidy's rule for an infinitely deep volume gives
/// its finite piece [1, 2) fraction 0 (alpha 0, colour 0) and its tail [2, inf) fraction 1
/// (alpha .5, colour unchanged). The point (2, 2) sorts before the tail (2, inf) in merge order,
/// so the tail is held out by 1 − .5: A .25, colour (.2, .1, .05).
fn assert_issue_answer(out: &DeepImage, what: &str) {
    assert_numbers(out, what);
    assert_eq!(plane(out, "Z"), vec![1.0, 2.0], "{what}");
    assert_eq!(plane(out, "ZBack"), vec![2.0, INF], "{what}");
    assert_eq!(plane(out, "A"), vec![0.0, 0.25], "{what}");
    assert_eq!(plane(out, "R"), vec![0.0, 0.2], "{what}");
    assert_eq!(plane(out, "G"), vec![0.0, 0.1], "{what}");
    assert_eq!(plane(out, "B"), vec![0.0, 0.05], "{what}");
}

#[test]
fn infinite_volume_held_out_by_a_point_in_front_of_its_far_end() {
    let (input, hold) = issue_case();
    let out = holdout(&input, &hold, HoldoutMode::Attenuate).unwrap();
    assert_issue_answer(&out, "library");
    let f = flat(&[&out]);
    assert_close(value(&f, "A", 0), 0.25, "flat A");
    assert_close(value(&f, "R", 0), 0.2, "flat R");
}

#[test]
fn infinite_volume_held_out_through_the_cli() {
    let (input, hold) = issue_case();
    let dir = tempfile::tempdir().unwrap();
    let (a, h) = (
        write(dir.path(), "in.exr", &input),
        write(dir.path(), "hold.exr", &hold),
    );
    let out = dir.path().join("out.exr");
    let (ok, _, err) = run(&["holdout", &a, &h, "-o", out.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert_issue_answer(&read(&out, 0), "CLI");
}

#[test]
fn point_at_the_front_of_a_volume_holds_it_out() {
    // Merge order puts the point (2, 2) before the volume (2, 4), finite or not, so the point
    // holds the whole volume out; a point at 2 in IN ties with it and is not held out.
    for zback in [4.0, INF] {
        let input = pixel_image(&[
            point(2.0, 0.5, [0.5, 0.0, 0.0]),
            volume(2.0, zback, 0.5, [0.5, 0.0, 0.0]),
        ]);
        let hold = pixel_image(&[point(2.0, 0.5, [0.0; 3])]);
        let out = holdout(&input, &hold, HoldoutMode::Attenuate).unwrap();
        assert_numbers(&out, "front");
        assert_eq!(plane(&out, "A"), vec![0.5, 0.25], "zback {zback}");
        assert_eq!(plane(&out, "R"), vec![0.5, 0.25], "zback {zback}");
    }
    // A point strictly inside a finite volume: the part behind it is held out.
    // [0, 2) alpha .75 cut at 1: two halves of alpha .5; the back one times .5.
    let input = pixel_image(&[volume(0.0, 2.0, 0.75, [0.75, 0.0, 0.0])]);
    let hold = pixel_image(&[point(1.0, 0.5, [0.0; 3])]);
    let out = holdout(&input, &hold, HoldoutMode::Attenuate).unwrap();
    let (alpha, red) = (plane(&out, "A"), plane(&out, "R"));
    assert_close(alpha[0], 0.5, "front A");
    assert_close(alpha[1], 0.25, "back A");
    assert_close(red[1], 0.25, "back R");
}

#[test]
fn infinite_holdout_volumes() {
    let red = [0.4, 0.0, 0.0];
    // A holdout volume [1, inf) of alpha .5 gives its finite front [1, 3) nothing: a point at 3
    // is not held out. Opaque, every piece of it is opaque: the point goes.
    let input = pixel_image(&[point(3.0, 0.5, red)]);
    let clear = pixel_image(&[volume(1.0, INF, 0.5, [0.0; 3])]);
    let out = holdout(&input, &clear, HoldoutMode::Attenuate).unwrap();
    assert_eq!(plane(&out, "A"), vec![0.5]);
    let opaque = pixel_image(&[volume(1.0, INF, 1.0, [0.0; 3])]);
    let out = holdout(&input, &opaque, HoldoutMode::Attenuate).unwrap();
    assert_eq!(out.sample_count(), 0);
    // An IN volume [2, inf) sharing the holdout's tail [2, inf) (fraction 1 of each): equal media
    // of alpha .5 mix to alpha .75, and IN keeps half of it, .375, colour .3 (= .4 · .375 / .5).
    // Its finite front [1, 2) keeps alpha 0.
    let input = pixel_image(&[volume(1.0, INF, 0.5, red)]);
    let hold = pixel_image(&[volume(2.0, INF, 0.5, [0.0; 3])]);
    let out = holdout(&input, &hold, HoldoutMode::Attenuate).unwrap();
    assert_numbers(&out, "shared tail");
    assert_eq!(plane(&out, "ZBack"), vec![2.0, INF]);
    let (alpha, r) = (plane(&out, "A"), plane(&out, "R"));
    assert_eq!(alpha[0], 0.0);
    assert_close(alpha[1], 0.375, "shared A");
    assert_close(r[1], 0.3, "shared R");
}

#[test]
fn minus_infinity_in_holdout() {
    let red = [0.4, 0.0, 0.0];
    // IN [-inf, 2) alpha .5 cut at a holdout point at 1: [-inf, 1) is all of it (fraction 1,
    // nothing in front), [1, 2) has fraction 0 (alpha 0).
    let input = pixel_image(&[volume(-INF, 2.0, 0.5, red)]);
    let out = holdout(
        &input,
        &pixel_image(&[point(1.0, 0.5, [0.0; 3])]),
        HoldoutMode::Attenuate,
    )
    .unwrap();
    assert_numbers(&out, "cut at 1");
    assert_eq!(plane(&out, "Z"), vec![-INF, 1.0]);
    assert_eq!(plane(&out, "A"), vec![0.5, 0.0]);
    assert_eq!(plane(&out, "R"), vec![0.4, 0.0]);
    // A holdout point at -inf sorts before the volume (-inf, 2): held out by .5. An IN point at
    // -inf ties with it and is not.
    let both = pixel_image(&[point(-INF, 0.5, red), volume(-INF, 2.0, 0.5, red)]);
    let out = holdout(
        &both,
        &pixel_image(&[point(-INF, 0.5, [0.0; 3])]),
        HoldoutMode::Attenuate,
    )
    .unwrap();
    assert_eq!(plane(&out, "A"), vec![0.5, 0.25]);
    assert_eq!(plane(&out, "R"), vec![0.4, 0.2]);
    // A holdout volume [-inf, 3) of alpha .5 in front of an IN point at 1: its part [-inf, 1) is
    // all of it, so the point is held out by .5.
    let p = pixel_image(&[point(1.0, 0.5, red)]);
    let hold = pixel_image(&[volume(-INF, 3.0, 0.5, [0.0; 3])]);
    let out = holdout(&p, &hold, HoldoutMode::Attenuate).unwrap();
    assert_eq!(plane(&out, "A"), vec![0.25]);
    assert_eq!(plane(&out, "R"), vec![0.2]);
    // Coincident [-inf, 2) media of alpha .5: IN keeps half of .75.
    let out = holdout(
        &input,
        &pixel_image(&[volume(-INF, 2.0, 0.5, [0.0; 3])]),
        HoldoutMode::Attenuate,
    )
    .unwrap();
    assert_numbers(&out, "coincident");
    assert_close(plane(&out, "A")[0], 0.375, "coincident A");
    assert_close(plane(&out, "R")[0], 0.3, "coincident R");
}

#[test]
fn cull_with_infinite_volumes_through_the_cli() {
    let c = [0.1, 0.2, 0.3];
    let input = image(
        2,
        &[
            vec![
                point(0.5, 0.5, c),
                volume(1.0, INF, 0.5, c),
                point(2.0, 0.5, c),
                volume(3.0, INF, 0.5, c),
            ],
            vec![
                volume(-INF, 1.0, 0.5, c),
                volume(1.0, INF, 0.5, c),
                point(2.0, 0.5, c),
                volume(3.0, INF, 0.5, c),
            ],
        ],
        DeepState::Sorted,
    );
    let hold = image(
        2,
        &[
            // Opaque from 1: IN samples starting behind 1 go; the volume starting at 1 stays.
            vec![point(0.25, 0.5, [0.0; 3]), volume(1.0, INF, 1.0, [0.0; 3])],
            // An infinitely deep holdout volume that never gets opaque, then a point that is:
            // samples starting behind 2 go.
            vec![volume(-INF, INF, 0.5, [0.0; 3]), point(2.0, 1.0, [0.0; 3])],
        ],
        DeepState::Sorted,
    );
    let dir = tempfile::tempdir().unwrap();
    let (a, h) = (
        write(dir.path(), "in.exr", &input),
        write(dir.path(), "hold.exr", &hold),
    );
    let out = dir.path().join("culled.exr");
    let (ok, _, err) = run(&["holdout", &a, &h, "--cull", "-o", out.to_str().unwrap()]);
    assert!(ok, "{err}");
    let culled = read(&out, 0);
    assert_numbers(&culled, "cull");
    assert_eq!(culled.counts(), vec![2, 3]);
    assert_eq!(plane(&culled, "Z"), vec![0.5, 1.0, -INF, 1.0, 2.0]);
    assert_eq!(plane(&culled, "ZBack"), vec![0.5, INF, 1.0, INF, 2.0]);
    // Kept samples are IN's, untouched.
    assert!(plane(&culled, "A").iter().all(|&a| a == 0.5));
    assert!(plane(&culled, "B").iter().all(|&b| b == 0.3));
    // The same inputs held out: numbers everywhere, alpha in [0, 1].
    let out = dir.path().join("held.exr");
    let (ok, _, err) = run(&["holdout", &a, &h, "-o", out.to_str().unwrap()]);
    assert!(ok, "{err}");
    let held = read(&out, 0);
    assert_numbers(&held, "attenuate");
    assert!(plane(&held, "A").iter().all(|a| (0.0..=1.0).contains(a)));
}

// ---------------------------------------------------------------------------------------------
// Holding out gives IN's share of the merge: brute force on random pixels

/// A small xorshift generator, so the cases are the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// A sample on a coarse grid of depths with both infinities, so that samples coincide, start
    /// at each other's ends and reach infinitely far; alphas include 0 and 1.
    fn sample(&mut self) -> S {
        const DEPTHS: [f32; 6] = [-INF, 0.0, 1.0, 2.0, 3.0, INF];
        let z = DEPTHS[self.below(DEPTHS.len())];
        let zback = DEPTHS[self.below(DEPTHS.len())].max(z);
        let a = match self.below(4) {
            0 => 0.0,
            1 => 1.0,
            _ => self.unit(),
        };
        let (g, b) = (a * self.unit(), a * self.unit());
        // Red = alpha: IN's alpha share shows in red.
        S {
            z,
            zback,
            a,
            rgb: [a, g, b],
        }
    }
}

/// Sort a pixel's samples into merge order (stable by (Z, ZBack)), as [`image`] says they are.
fn in_merge_order(samples: &mut [S]) {
    samples.sort_by(|a, b| (a.z, a.zback).partial_cmp(&(b.z, b.zback)).unwrap());
}

/// The transmittance of sample `s`'s own pieces in front of depth `front`, cutting `s` where
/// the merge's tidy cuts it: at every holdout Z and ZBack strictly inside it.
fn own_transmittance(s: &S, hold: &[S], front: f32) -> f64 {
    if s.zback <= s.z {
        return 1.0;
    }
    let mut cuts: Vec<f32> = hold
        .iter()
        .flat_map(|h| [h.z, h.zback])
        .filter(|&d| d > s.z && d < s.zback)
        .collect();
    cuts.sort_by(f32::total_cmp);
    cuts.dedup();
    cuts.push(s.zback);
    let length = s.zback as f64 - s.z as f64;
    let mut t = 1.0;
    let mut z = s.z;
    for back in cuts {
        if back > front {
            break;
        }
        let f = piece_fraction(z as f64, back as f64, length);
        t *= 1.0 - split_alpha(s.a as f64, f).0;
        z = back;
    }
    t
}

#[test]
fn holding_out_gives_ins_share_of_the_merge() {
    // For one IN sample s, IN's share of the merge of s with a black HOLDOUT is the flattened
    // colour of merge(s, HOLDOUT). Holding out scales each piece of s by the holdout's part in
    // it, so the held-out pieces, each seen through s's own pieces in front of it, add up to the
    // same colour. (Flattening the held-out pieces alone would see them through the
    // held-out alphas, which are smaller: a deep holdout cannot store that.) Red is s's alpha,
    // so alpha is checked too.
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut held_out = 0;
    for case in 0..3000 {
        let s = rng.sample();
        let mut hold: Vec<S> = (0..rng.below(5))
            .map(|_| S {
                rgb: [0.0; 3],
                ..rng.sample()
            })
            .collect();
        in_merge_order(&mut hold);
        if s.z == INF && hold.iter().any(|h| h.z == -INF && h.zback == INF) {
            // The tidy's rule is not additive for a volume infinite at both ends: each of its
            // infinite pieces gets all of it, so the merge's alpha in front of a point at +inf
            // grows with every cut the merge makes in it (at other holdout samples, and in a
            // full merge at IN's other samples too). Holding out one IN sample cannot follow
            // that; it takes the whole volume once, as a merge that does not cut it.
            continue;
        }
        let (is, ih) = (pixel_image(&[s]), pixel_image(&hold));
        let merged = flat(&[&is, &ih]);
        let out = holdout(&is, &ih, HoldoutMode::Attenuate).unwrap();
        assert_numbers(&out, "held");
        let z = plane(&out, "Z");
        for (k, name) in ["R", "G", "B"].iter().enumerate() {
            let values = plane(&out, name);
            let ours: f64 = values
                .iter()
                .zip(&z)
                .map(|(&v, &front)| v as f64 * own_transmittance(&s, &hold, front))
                .sum();
            let want = value(&merged, name, 0) as f64;
            assert!(
                (ours - want).abs() <= 1e-6,
                "case {case} {name}: held {ours} vs merged {want}\n  IN {s:?}\n  HOLDOUT {hold:?}"
            );
            if k == 0 && ours < s.a as f64 - 1e-3 {
                held_out += 1;
            }
        }
    }
    // The cases do exercise the holdout.
    assert!(held_out > 1000, "{held_out}");
}

#[test]
fn random_pixels_with_infinite_depths_stay_numbers() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for _ in 0..500 {
        let pixel = |rng: &mut Rng| {
            let mut samples: Vec<S> = (0..rng.below(5)).map(|_| rng.sample()).collect();
            in_merge_order(&mut samples);
            samples
        };
        let pixels: Vec<Vec<S>> = (0..2).map(|_| pixel(&mut rng)).collect();
        let hold: Vec<Vec<S>> = (0..2).map(|_| pixel(&mut rng)).collect();
        let (ia, ih) = (
            image(2, &pixels, DeepState::Sorted),
            image(2, &hold, DeepState::Sorted),
        );
        for mode in [HoldoutMode::Attenuate, HoldoutMode::Cull] {
            let out = holdout(&ia, &ih, mode).unwrap();
            assert_numbers(&out, "random");
            for a in plane(&out, "A") {
                assert!((0.0..=1.0 + 1e-6).contains(&a), "{mode:?}: alpha {a}");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Tidy deep merges of infinitely deep volumes, CPU and GL

/// Two inputs, one pixel per configuration: volumes reaching ZBack = +inf or starting at
/// Z = −inf, cut by points and by each other, coincident infinite volumes, an opaque infinite
/// volume, and a volume infinite at both ends.
fn infinite_inputs() -> (DeepImage, DeepImage) {
    let (r, g) = ([0.3, 0.1, 0.0], [0.0, 0.2, 0.1]);
    let a = vec![
        vec![volume(1.0, INF, 0.5, r)],
        vec![volume(-INF, 3.0, 0.5, r)],
        vec![volume(1.0, INF, 0.5, r)],
        vec![volume(-INF, INF, 0.5, r)],
        vec![volume(-INF, 2.0, 0.75, r)],
        vec![point(-INF, 0.5, r)],
        vec![volume(0.0, INF, 1.0, r)],
        vec![point(1.0, 0.5, r), volume(2.0, INF, 0.3, r)],
    ];
    let b = vec![
        vec![point(2.0, 0.5, g)],
        vec![point(1.0, 0.5, g)],
        vec![volume(2.0, INF, 0.5, g)],
        vec![point(0.0, 0.5, g), volume(1.0, 2.0, 0.25, g)],
        vec![volume(-INF, 2.0, 0.5, g)],
        vec![volume(-INF, 0.0, 0.5, g)],
        vec![point(5.0, 0.5, g)],
        vec![volume(1.5, INF, 0.6, g), point(3.0, 0.2, g)],
    ];
    (
        image(4, &a, DeepState::Sorted),
        image(4, &b, DeepState::Sorted),
    )
}

#[test]
fn tidy_deep_merge_of_infinite_volumes_on_every_backend() {
    let (a, b) = infinite_inputs();
    let reference = deep_tidy(&[&a, &b]);
    assert_numbers(&reference, "reference");
    let dir = tempfile::tempdir().unwrap();
    let (pa, pb) = (
        write(dir.path(), "a.exr", &a),
        write(dir.path(), "b.exr", &b),
    );
    for (label, extra) in [
        ("cpu", &["--backend", "cpu"][..]),
        (
            "gl, stages on the GPU",
            &["--backend", "gl", "--gpu-stages", "gpu"][..],
        ),
        (
            "gl, stages on the host",
            &["--backend", "gl", "--gpu-stages", "host"][..],
        ),
    ] {
        let out = dir.path().join("merged.exr");
        let mut args = vec![pa.as_str(), pb.as_str(), "--deep", "--tidy"];
        args.extend_from_slice(extra);
        args.extend(["-o", out.to_str().unwrap()]);
        let (ok, _, err) = run(&args);
        assert!(ok, "{label}: {err}");
        let ours = read(&out, 0);
        assert_numbers(&ours, label);
        assert_eq!(ours.counts(), reference.counts(), "{label}: counts");
        for name in SAMPLE_CHANNELS {
            let (x, y) = (plane(&ours, name), plane(&reference, name));
            for (i, (u, v)) in x.iter().zip(&y).enumerate() {
                let same = u == v || (u - v).abs() <= 1e-5 * v.abs().max(1.0);
                assert!(same, "{label}: {name} sample {i}: {u} vs {v}");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The merge's options on `deepmerge holdout` (issue 20, item 8)

/// The corpus's volumetric pair: IN and the holdout, per-channel alphas, up to 25 samples.
fn corpus_pair() -> (std::path::PathBuf, std::path::PathBuf) {
    (
        common::data("oiio/input-crop.deep.exr"),
        common::data("oiio/holdout-crop.deep.exr"),
    )
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Run `deepmerge holdout IN HOLD ARGS... -o OUT`; panics with stderr on failure.
fn run_holdout(input: &Path, hold: &Path, args: &[&str], out: &Path) {
    let mut all = vec!["holdout", s(input), s(hold)];
    all.extend_from_slice(args);
    all.extend(["-o", s(out)]);
    let (ok, _, err) = run(&all);
    assert!(ok, "holdout {args:?}: {err}");
}

/// The holdout of the whole images, written at once with the CLI's default output options but
/// no carried metadata: what a streamed `--metadata none` run must equal byte for byte.
fn whole_image_holdout(mode: HoldoutMode) -> DeepImage {
    let (a, h) = corpus_pair();
    holdout(&read(&a, 0), &read(&h, 0), mode).unwrap()
}

#[test]
fn streamed_holdout_has_the_bytes_of_the_whole_image_holdout() {
    use deepmerge::exr::{write_deep_with, OutputOptions};
    let (a, h) = corpus_pair();
    let dir = tempfile::tempdir().unwrap();
    for (mode, flag) in [
        (HoldoutMode::Attenuate, None),
        (HoldoutMode::Cull, Some("--cull")),
    ] {
        let want = dir.path().join("whole.exr");
        let deep = OutputOptions::default().deep(true).unwrap();
        write_deep_with(&want, &whole_image_holdout(mode), &deep).unwrap();
        // One row per band, three rows per band, and the budget's own bands.
        for rows in ["1", "3", "0"] {
            let out = dir.path().join(format!("band{rows}.exr"));
            let mut args = vec!["--metadata", "none"];
            if rows != "0" {
                args.extend(["--band-rows", rows]);
            }
            args.extend(flag);
            run_holdout(&a, &h, &args, &out);
            assert_eq!(
                std::fs::read(&out).unwrap(),
                std::fs::read(&want).unwrap(),
                "{mode:?}, band rows {rows}"
            );
        }
    }
}

#[test]
fn flat_holdout_is_the_flat_composite_of_the_held_out_image() {
    use deepmerge::exr::{write_flat_with, FlatType, OutputOptions};
    let (a, h) = corpus_pair();
    let dir = tempfile::tempdir().unwrap();
    let held = whole_image_holdout(HoldoutMode::Attenuate);
    for (args, z, flat_type) in [
        (vec![], false, FlatType::Half),
        (
            vec!["--flat-z", "--flat-type", "float"],
            true,
            FlatType::Float,
        ),
    ] {
        let options = MergeOptions {
            output: OutputKind::Flat { z },
            ..MergeOptions::default()
        };
        let MergeOutput::Flat(composite) = merge_images(&[&held], &options).unwrap() else {
            unreachable!()
        };
        let want = dir.path().join("want.exr");
        write_flat_with(&want, &composite, &OutputOptions::default().flat(flat_type)).unwrap();
        let out = dir.path().join("flat.exr");
        let mut all = vec!["--flat", "--metadata", "none", "--band-rows", "5"];
        all.extend(&args);
        run_holdout(&a, &h, &all, &out);
        assert_eq!(
            std::fs::read(&out).unwrap(),
            std::fs::read(&want).unwrap(),
            "--flat {args:?}"
        );
    }
    // `*.png` is a flat preview without --flat.
    let png = dir.path().join("preview.png");
    run_holdout(&a, &h, &[], &png);
    assert_eq!(&std::fs::read(&png).unwrap()[..8], b"\x89PNG\r\n\x1a\n");
}

#[test]
fn holdout_output_options_reach_the_file() {
    let (a, h) = corpus_pair();
    let dir = tempfile::tempdir().unwrap();
    let default = dir.path().join("default.exr");
    run_holdout(&a, &h, &[], &default);
    let samples = read(&default, 0);
    let info = |p: &Path| deepmerge::exr::read_parts_info(p).unwrap().remove(0);
    let has = |p: &Path, name: &str| info(p).attributes.iter().any(|x| x.name == name);
    assert!(has(&default, "deepImageState"));
    // IN's own attributes are carried by default (metadata first), and not with none.
    // (Less the three every header has, which the writer states when nothing is carried.)
    let own: Vec<String> = deepmerge::exr::carried_attributes(&info(&a).attributes)
        .into_iter()
        .map(|x| x.name)
        .filter(|n| !deepmerge::exr::REQUIRED_CARRIED.iter().any(|r| r.0 == n))
        .collect();
    assert!(
        !own.is_empty(),
        "the corpus file carries attributes of its own"
    );
    for (args, check) in [
        (vec!["--no-deep-state"], "no state"),
        (vec!["--compression", "zstd", "--zstd-level", "3"], "zstd"),
        (vec!["--compression", "rle"], "rle"),
        (vec!["--metadata", "none"], "no metadata"),
        (vec!["--max-memory", "0.5"], "the old budget name"),
    ] {
        let out = dir.path().join("out.exr");
        run_holdout(&a, &h, &args, &out);
        let got = read(&out, 0);
        assert_eq!(got.offsets, samples.offsets, "{check}");
        assert_eq!(got.planes, samples.planes, "{check}");
        let part = info(&out);
        match check {
            "no state" => assert!(!has(&out, "deepImageState")),
            "zstd" => assert!(part.compression.contains("zstd"), "{}", part.compression),
            "rle" => assert!(part.compression.contains("rle"), "{}", part.compression),
            "no metadata" => {
                for name in &own {
                    assert!(!has(&out, name), "{name} carried with --metadata none");
                }
            }
            _ => assert_eq!(
                std::fs::read(&out).unwrap(),
                std::fs::read(&default).unwrap()
            ),
        }
        if check != "no metadata" {
            for name in &own {
                assert!(has(&out, name), "{check}: {name} not carried");
            }
        }
    }
}

#[test]
fn holdout_tidy_output_is_tidy_and_composites_the_same() {
    let (a, h) = corpus_pair();
    let dir = tempfile::tempdir().unwrap();
    let (plain, tidy) = (dir.path().join("plain.exr"), dir.path().join("tidy.exr"));
    run_holdout(&a, &h, &[], &plain);
    run_holdout(&a, &h, &["--tidy"], &tidy);
    let (plain, tidy) = (read(&plain, 0), read(&tidy, 0));
    assert_eq!(tidy.state, DeepState::Tidy);
    let (p, t) = (flat(&[&plain]), flat(&[&tidy]));
    for name in ["R", "A", "RA"] {
        for (i, (x, y)) in p
            .channel(name)
            .unwrap()
            .iter()
            .zip(t.channel(name).unwrap())
            .enumerate()
        {
            assert!((x - y).abs() < 1e-3, "{name} pixel {i}: {x} vs {y}");
        }
    }
}

#[test]
fn holdout_reads_the_part_asked_for_in_both_files() {
    let stereo = common::data("openexr-images/Stereo-Trunks-multipart.exr");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("right.exr");
    run_holdout(
        &stereo,
        &stereo,
        &["--part", "rgba.right", "--metadata", "none"],
        &out,
    );
    let right = read(&stereo, 1);
    let want = holdout(&right, &right, HoldoutMode::Attenuate).unwrap();
    let got = read(&out, 0);
    assert_eq!(got.data_window, right.data_window);
    assert_eq!(got.offsets, want.offsets);
    assert_eq!(got.planes, want.planes);
    // A part the files lack is one line naming the file.
    let (ok, _, err) = run(&[
        "holdout",
        s(&stereo),
        s(&stereo),
        "--part",
        "7",
        "-o",
        s(&out),
    ]);
    assert!(
        !ok && err.lines().count() == 1 && err.contains("has no part 7"),
        "{err}"
    );
}

#[test]
fn holdout_refusals_are_one_line_and_write_nothing() {
    let (a, h) = corpus_pair();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.exr");
    for (args, message) in [
        (vec!["--backend", "gl"], "holdout has no OpenGL path"),
        (vec!["--flat", "--tidy"], "--tidy applies to deep output"),
        (
            vec!["--flat", "--no-deep-state"],
            "--no-deep-state applies to deep output",
        ),
        (vec!["--flat-z"], "--flat"),
        (vec!["--compression", "zip"], "zip"),
    ] {
        let mut all = vec!["holdout", s(&a), s(&h)];
        all.extend(&args);
        all.extend(["-o", s(&out)]);
        let output = common::deepmerge().args(&all).output().unwrap();
        let err = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(message), "{args:?}: {err}");
        assert!(!out.exists(), "{args:?} wrote {}", out.display());
    }
    // An output name that says neither EXR nor PNG.
    let bad = dir.path().join("out.tif");
    let (ok, _, err) = run(&["holdout", s(&a), s(&h), "-o", s(&bad)]);
    assert!(
        !ok && err.contains("the output format comes from the extension"),
        "{err}"
    );
    assert!(!bad.exists());
}
