//! Volumetric merging (issue 4): tidy (split and merge of overlapping volumes), per-channel
//! alpha, ids, sort policy, tidy deep output, holdout and cull, checked on hand-built pixels with
//! answers worked out by hand, on the volumetric corpus (`tests/data/oiio/`), against oiiotool
//! and the 2017 reference outputs, and with property tests on random pixels.

mod common;

use std::path::PathBuf;

use common::{
    image, interleaving_shift, oiiotool, pixel_image, point, shifted, shifted_points, volume, S,
};
use deepmerge::composite::{
    holdout, is_split, is_tidy, merge_images, needs_tidy, tidy_deep_pixel, tidy_pixel,
    CompositeChannels, CompositeKind, HoldoutMode, MergeOptions, MergeOutput, MergePlan,
    OutputKind, PixelSamples, SortPolicy,
};
use deepmerge::deep::{Bounds, Channel, DeepImage, DeepState, FlatImage, Plane, SampleType};
use deepmerge::exr::{read_deep, ReadOptions};
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------------
// Building images by hand

/// `options` with the sort policy `sort`.
fn with_sort(sort: SortPolicy, options: MergeOptions) -> MergeOptions {
    MergeOptions { sort, ..options }
}
fn one_pixel() -> Bounds {
    Bounds::from_origin_size(0, 0, 1, 1)
}

fn flat(inputs: &[&DeepImage]) -> FlatImage {
    match merge_images(inputs, &MergeOptions::default()).unwrap() {
        MergeOutput::Flat(f) => f,
        MergeOutput::Deep(_) => unreachable!(),
    }
}

fn deep(inputs: &[&DeepImage], tidy: bool) -> DeepImage {
    let options = MergeOptions {
        output: OutputKind::Deep,
        tidy,
        ..MergeOptions::default()
    };
    match merge_images(inputs, &options).unwrap() {
        MergeOutput::Deep(d) => d,
        MergeOutput::Flat(_) => unreachable!(),
    }
}

fn value(image: &FlatImage, name: &str) -> f32 {
    image.channel(name).unwrap()[0]
}

fn plane(image: &DeepImage, name: &str) -> Vec<f32> {
    let c = image.channel_index(name).unwrap();
    (0..image.sample_count())
        .map(|i| image.planes[c].get_f32(i))
        .collect()
}

fn assert_close(got: f32, want: f64, what: &str) {
    assert!(
        (got as f64 - want).abs() < 1e-6,
        "{what}: got {got}, want {want}"
    );
}

// ---------------------------------------------------------------------------------------------
// Hand-built pixels. Every expected number below is worked out by hand in the comment above it.

#[test]
fn two_overlapping_volumes() {
    // A = [0,2) alpha 0.75 red 0.75; B = [1,3) alpha 0.75 green 0.75. Half of a 0.75 volume has
    // alpha 1 - 0.25^0.5 = 0.5 and colour 0.5. [1,2) holds halves of both: alpha 1 - 0.5·0.5 =
    // 0.75, u = ln 2 each, v = 2 ln 2, w = 0.75 / (2 ln 2), so R = G = 0.375.
    // Over: [0,1) R .5 A .5; [1,2) R += .5·.375, G = .5·.375, A = .875; [2,3) G += .125·.5.
    let a = pixel_image(&[volume(0.0, 2.0, 0.75, [0.75, 0.0, 0.0])]);
    let b = pixel_image(&[volume(1.0, 3.0, 0.75, [0.0, 0.75, 0.0])]);
    let f = flat(&[&a, &b]);
    assert_close(value(&f, "R"), 0.6875, "R");
    assert_close(value(&f, "G"), 0.25, "G");
    assert_close(value(&f, "A"), 0.9375, "A");
    // Without tidying, list order would give R .75, G .1875: the test can tell the difference.
    let d = deep(&[&a, &b], true);
    assert_eq!(plane(&d, "Z"), vec![0.0, 1.0, 2.0]);
    assert_eq!(plane(&d, "ZBack"), vec![1.0, 2.0, 3.0]);
    assert_close(plane(&d, "A")[1], 0.75, "merged A");
    assert_close(plane(&d, "R")[1], 0.375, "merged R");
    assert_close(plane(&d, "G")[1], 0.375, "merged G");
}

#[test]
fn volume_containing_a_point() {
    // V = [0,4) alpha 15/16 red 15/16: halves have alpha 1 - (1/16)^0.5 = 0.75, red 0.75.
    // Point at 2: alpha .5, green .5. Over: R .75 A .75; G += .25·.5 = .125, A .875;
    // R += .125·.75 = .84375, A = .875 + .125·.75 = .96875.
    let v = pixel_image(&[volume(0.0, 4.0, 0.9375, [0.9375, 0.0, 0.0])]);
    let p = pixel_image(&[point(2.0, 0.5, [0.0, 0.5, 0.0])]);
    let f = flat(&[&v, &p]);
    assert_close(value(&f, "R"), 0.84375, "R");
    assert_close(value(&f, "G"), 0.125, "G");
    assert_close(value(&f, "A"), 0.96875, "A");
    let d = deep(&[&v, &p], true);
    assert_eq!(plane(&d, "Z"), vec![0.0, 2.0, 2.0]);
    assert_eq!(plane(&d, "ZBack"), vec![2.0, 2.0, 4.0]);
}

#[test]
fn identical_intervals_merge_into_one_sample() {
    // [1,2) alpha .5 red .5 and [1,2) alpha .75 green .3: u1 = ln 2, u2 = 2 ln 2, alpha =
    // 1 - .5·.25 = .875, w = .875 / (3 ln 2); R = w·.5·(ln 2/.5) = .875/3,
    // G = w·.3·(2 ln 2/.75) = .875·.6/(3·.75).
    let a = pixel_image(&[volume(1.0, 2.0, 0.5, [0.5, 0.0, 0.0])]);
    let b = pixel_image(&[volume(1.0, 2.0, 0.75, [0.0, 0.3, 0.0])]);
    let d = deep(&[&a, &b], true);
    assert_eq!(d.sample_count(), 1);
    assert_close(plane(&d, "A")[0], 0.875, "A");
    assert_close(plane(&d, "R")[0], 0.875 / 3.0, "R");
    assert_close(plane(&d, "G")[0], 0.875 * 0.6 / 2.25, "G");
    // The merge is symmetric: swapping the inputs gives the same sample.
    let swapped = deep(&[&b, &a], true);
    for n in ["A", "R", "G"] {
        assert_close(plane(&swapped, n)[0], plane(&d, n)[0] as f64, n);
    }
}

#[test]
fn coincident_points_composite_in_order_flat_and_merge_in_a_tidy_deep_output() {
    // Two points at 1. The flat merge composites them in input order: R .5, then G behind .5
    // at .5 coverage. A plain deep merge keeps both.
    let a = pixel_image(&[point(1.0, 0.5, [0.5, 0.0, 0.0])]);
    let b = pixel_image(&[point(1.0, 0.5, [0.0, 0.5, 0.0])]);
    let f = flat(&[&a, &b]);
    assert_close(value(&f, "R"), 0.5, "R");
    assert_close(value(&f, "G"), 0.25, "G");
    assert_eq!(deep(&[&a, &b], false).sample_count(), 2);
    // A tidy deep output merges them ("Interpreting OpenEXR Deep Pixels"): alpha
    // 1 - .5 · .5 = .75; equal optical depths u = ln 2, so w = .75 / (2 ln 2), v = 2 ln 2 and
    // each colour is .75 · c / (2 · .5): R = G = .375, whichever input comes first.
    let d = deep(&[&a, &b], true);
    assert_eq!(d.sample_count(), 1);
    assert_eq!(d.state, DeepState::Tidy);
    assert_close(plane(&d, "A")[0], 0.75, "A");
    assert_close(plane(&d, "R")[0], 0.375, "R");
    assert_close(plane(&d, "G")[0], 0.375, "G");
    let swapped = deep(&[&b, &a], true);
    for n in ["A", "R", "G"] {
        assert_close(plane(&swapped, n)[0], plane(&d, n)[0] as f64, n);
    }
    // So its flattening differs from the flat merge exactly there (R .375 against .5).
    let flat_of_tidy = flat(&[&d]);
    assert_close(value(&flat_of_tidy, "R"), 0.375, "R");
    assert_close(value(&flat_of_tidy, "G"), 0.375, "G");
    assert_close(value(&flat_of_tidy, "A"), 0.75, "A");
}

#[test]
fn alpha_zero_volume_with_colour_spreads_its_emission() {
    // [0,2) alpha 0 red 1 (pure emission) cut by a point at 1 (alpha .5 green .5): halves carry
    // red .5 each; the back half shows through the point at .5. R = .5 + .5·.5, G = .5, A = .5.
    let v = pixel_image(&[volume(0.0, 2.0, 0.0, [1.0, 0.0, 0.0])]);
    let p = pixel_image(&[point(1.0, 0.5, [0.0, 0.5, 0.0])]);
    let f = flat(&[&v, &p]);
    assert_close(value(&f, "R"), 0.75, "R");
    assert_close(value(&f, "G"), 0.5, "G");
    assert_close(value(&f, "A"), 0.5, "A");
    // Two emitters sharing an interval add.
    let e = pixel_image(&[volume(0.0, 2.0, 0.0, [0.0, 0.25, 0.0])]);
    let d = deep(&[&v, &e], true);
    assert_eq!(d.sample_count(), 1);
    assert_eq!(
        (plane(&d, "A")[0], plane(&d, "R")[0], plane(&d, "G")[0]),
        (0.0, 1.0, 0.25)
    );
}

#[test]
fn opaque_volume_wins_outright() {
    // [0,2) alpha 1 red 1 over [1,3) alpha .75 green .75: every piece of an opaque medium is
    // opaque, so the first piece already hides everything: R 1, G 0, A 1. In the shared [1,2)
    // the opaque piece wins: alpha 1, red 1, green 0.
    let a = pixel_image(&[volume(0.0, 2.0, 1.0, [1.0, 0.0, 0.0])]);
    let b = pixel_image(&[volume(1.0, 3.0, 0.75, [0.0, 0.75, 0.0])]);
    let f = flat(&[&b, &a]);
    assert_eq!(
        (value(&f, "R"), value(&f, "G"), value(&f, "A")),
        (1.0, 0.0, 1.0)
    );
    let d = deep(&[&a, &b], true);
    assert_eq!(plane(&d, "Z"), vec![0.0, 1.0, 2.0]);
    assert_eq!(
        (plane(&d, "A")[1], plane(&d, "R")[1], plane(&d, "G")[1]),
        (1.0, 1.0, 0.0)
    );
    // Both opaque: colours average.
    let c = pixel_image(&[volume(0.0, 2.0, 1.0, [0.0, 0.5, 0.0])]);
    let d = deep(&[&a, &c], true);
    assert_eq!(d.sample_count(), 1);
    assert_eq!((plane(&d, "R")[0], plane(&d, "G")[0]), (0.5, 0.25));
}

/// A sample with per-channel alpha: Z, ZBack, colour, (RA, GA, BA), A.
type PerChannelSample = (f32, f32, [f32; 3], [f32; 3], f32);

/// A one-pixel image with per-channel alpha: channels A,B,BA,G,GA,R,RA,Z,ZBack.
fn rgba_alpha_pixel(samples: &[PerChannelSample]) -> DeepImage {
    let names = ["A", "B", "BA", "G", "GA", "R", "RA", "Z", "ZBack"];
    let channels: Vec<Channel> = names
        .iter()
        .map(|n| Channel::new(*n, SampleType::F32))
        .collect();
    let planes = names
        .iter()
        .map(|n| {
            Plane::F32(
                samples
                    .iter()
                    .map(|&(z, zback, rgb, rgb_alpha, a)| match *n {
                        "A" => a,
                        "R" => rgb[0],
                        "G" => rgb[1],
                        "B" => rgb[2],
                        "RA" => rgb_alpha[0],
                        "GA" => rgb_alpha[1],
                        "BA" => rgb_alpha[2],
                        "Z" => z,
                        _ => zback,
                    })
                    .collect(),
            )
        })
        .collect();
    DeepImage::from_counts(
        one_pixel(),
        one_pixel(),
        channels,
        &[samples.len() as u32],
        planes,
        DeepState::Sorted,
    )
    .unwrap()
}

#[test]
fn per_channel_alpha_splits_and_flattens_per_channel() {
    // Volume [0,2): RA .75 (R .75), GA 0 (G .4, emission), BA 1 (B 1), A .75. Cut at 1 by a
    // point with every alpha .5 and colour .5. Halves: RA .5 R .5; GA 0 G .2; BA 1 B 1; A .5.
    // R: .5, + .5·.5 = .75, + .25·.5 = .875 (RA .875).
    // G: .2, + 1·.5 = .7, + .5·.2 = .8 (GA .5).
    // B: 1 (BA 1: the point and back half are hidden in blue only).
    // A: .5, .75, .875.
    let v = rgba_alpha_pixel(&[(0.0, 2.0, [0.75, 0.4, 1.0], [0.75, 0.0, 1.0], 0.75)]);
    let p = rgba_alpha_pixel(&[(1.0, 1.0, [0.5; 3], [0.5; 3], 0.5)]);
    let f = flat(&[&v, &p]);
    for (name, want) in [
        ("R", 0.875),
        ("G", 0.8),
        ("B", 1.0),
        ("A", 0.875),
        ("RA", 0.875),
        ("GA", 0.5),
        ("BA", 1.0),
    ] {
        assert_close(value(&f, name), want, name);
    }
}

#[test]
fn per_channel_alpha_without_volumes_flattens_per_channel() {
    // Two points: front RA 1 GA 0 BA .5 with colour (.2, .3, .4); back all alphas .5, colour .5.
    // R = .2 (hidden behind RA 1), G = .3 + .5 = .8, B = .4 + .5·.5 = .65.
    let a = rgba_alpha_pixel(&[(1.0, 1.0, [0.2, 0.3, 0.4], [1.0, 0.0, 0.5], 0.5)]);
    let b = rgba_alpha_pixel(&[(2.0, 2.0, [0.5; 3], [0.5; 3], 0.5)]);
    let f = flat(&[&b, &a]);
    assert_close(value(&f, "R"), 0.2, "R");
    assert_close(value(&f, "G"), 0.8, "G");
    assert_close(value(&f, "B"), 0.65, "B");
}

/// One pixel with channels A, R, Z, ZBack (f32) and `id` (uint).
fn with_ids(samples: &[(f32, f32, f32, u32)]) -> DeepImage {
    let channels = vec![
        Channel::new("A", SampleType::F32),
        Channel::new("R", SampleType::F32),
        Channel::new("Z", SampleType::F32),
        Channel::new("ZBack", SampleType::F32),
        Channel::new("id", SampleType::U32),
    ];
    let planes = vec![
        Plane::F32(samples.iter().map(|s| s.2).collect()),
        Plane::F32(samples.iter().map(|s| s.2).collect()),
        Plane::F32(samples.iter().map(|s| s.0).collect()),
        Plane::F32(samples.iter().map(|s| s.1).collect()),
        Plane::U32(samples.iter().map(|s| s.3).collect()),
    ];
    DeepImage::from_counts(
        one_pixel(),
        one_pixel(),
        channels,
        &[samples.len() as u32],
        planes,
        DeepState::Sorted,
    )
    .unwrap()
}

fn ids(image: &DeepImage) -> Vec<u32> {
    match &image.planes[image.channel_index("id").unwrap()] {
        Plane::U32(v) => v.clone(),
        _ => panic!("id is not uint"),
    }
}

#[test]
fn ids_pass_through_and_follow_their_samples() {
    // Input 0: an alpha-0 point at .5 (id 9, contributes nothing) and a point at 2 (id 7).
    // Input 1: a point at 1 (id 5). Flat: ids of the front-most sample with alpha > 0 = 5.
    let a = with_ids(&[(0.5, 0.5, 0.0, 9), (2.0, 2.0, 0.5, 7)]);
    let b = with_ids(&[(1.0, 1.0, 0.3, 5)]);
    let f = flat(&[&a, &b]);
    let flat_ids = f.channels.iter().find(|c| c.name == "id").unwrap();
    assert_eq!(
        flat_ids.values,
        deepmerge::deep::FlatValues::U32(vec![5]),
        "flat id"
    );
    // Deep: untouched, in merge order.
    assert_eq!(ids(&deep(&[&a, &b], false)), vec![9, 5, 7]);
    // Tidy: a volume cut by the point keeps its id on both pieces.
    let v = with_ids(&[(0.0, 4.0, 0.5, 3)]);
    let d = deep(&[&v, &b], true);
    assert_eq!(plane(&d, "Z"), vec![0.0, 1.0, 1.0]);
    assert_eq!(ids(&d), vec![3, 5, 3]);
}

// ---------------------------------------------------------------------------------------------
// Sort policy

/// Deterministic shuffle (xorshift) of each pixel's samples.
fn shuffled(pixels: &[Vec<S>], seed: u64) -> Vec<Vec<S>> {
    let mut state = seed | 1;
    pixels
        .iter()
        .map(|p| {
            let mut p = p.clone();
            for i in (1..p.len()).rev() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                p.swap(i, (state % (i as u64 + 1)) as usize);
            }
            p
        })
        .collect()
}

fn sorted_pixels() -> Vec<Vec<S>> {
    // Distinct depths (ties would keep file order, which a shuffle changes by design).
    (0..12)
        .map(|p| {
            (0..(p % 5 + 2))
                .map(|i| {
                    let z = i as f32 + 0.1 * p as f32;
                    let a = 0.1 + 0.15 * ((i + p) % 6) as f32;
                    if i % 3 == 1 {
                        volume(z, z + 1.5, a, [a * 0.5, a * 0.2, a * 0.9])
                    } else {
                        point(z, a, [a * 0.3, a * 0.7, a * 0.1])
                    }
                })
                .collect()
        })
        .collect()
}

#[test]
fn shuffled_input_merges_like_sorted_input() {
    let sorted_pixels = sorted_pixels();
    let sorted = image(4, &sorted_pixels, DeepState::Sorted);
    let other = image(4, &shuffled(&sorted_pixels, 99), DeepState::Messy);
    let messy = image(4, &shuffled(&sorted_pixels, 7), DeepState::Messy);
    assert_ne!(
        messy,
        image(4, &sorted_pixels, DeepState::Messy),
        "shuffle did something"
    );
    for tidy in [false, true] {
        let options = MergeOptions {
            output: OutputKind::Deep,
            tidy,
            ..MergeOptions::default()
        };
        let want = merge_images(&[&sorted, &other], &with_sort(SortPolicy::Auto, options)).unwrap();
        for policy in [SortPolicy::Auto, SortPolicy::Always] {
            let got = merge_images(&[&messy, &other], &with_sort(policy, options)).unwrap();
            assert_eq!(got, want, "{policy:?}, tidy {tidy}");
        }
    }
    let want = flat(&[&sorted, &other]);
    let got = merge_images(
        &[&messy, &other],
        &with_sort(SortPolicy::Always, MergeOptions::default()),
    )
    .unwrap();
    assert_eq!(got, MergeOutput::Flat(want));
}

#[test]
fn header_claims_decide_auto_and_always_overrides_them() {
    // A shuffled image whose header lies ("sorted"): Auto and AssumeSorted trust it and give a
    // different (wrong) composite; Always sorts and gives the right one.
    let sorted_pixels = sorted_pixels();
    let sorted = image(4, &sorted_pixels, DeepState::Sorted);
    let liar = image(4, &shuffled(&sorted_pixels, 7), DeepState::Sorted);
    let right = merge_images(
        &[&sorted],
        &with_sort(SortPolicy::Auto, MergeOptions::default()),
    );
    let always = merge_images(
        &[&liar],
        &with_sort(SortPolicy::Always, MergeOptions::default()),
    );
    let auto = merge_images(
        &[&liar],
        &with_sort(SortPolicy::Auto, MergeOptions::default()),
    );
    let assume = merge_images(
        &[&liar],
        &with_sort(SortPolicy::AssumeSorted, MergeOptions::default()),
    );
    assert_eq!(always.unwrap(), *right.as_ref().unwrap());
    assert_ne!(auto.unwrap(), *right.as_ref().unwrap());
    assert_ne!(assume.unwrap(), *right.as_ref().unwrap());
    // On honest sorted inputs every policy agrees.
    let other = image(4, &shuffled(&sorted_pixels, 3), DeepState::Messy);
    let other = deep(&[&other], false); // sorted now, state Sorted
    let options = MergeOptions {
        output: OutputKind::Deep,
        tidy: true,
        ..MergeOptions::default()
    };
    let results: Vec<MergeOutput> = [
        SortPolicy::Auto,
        SortPolicy::Always,
        SortPolicy::AssumeSorted,
    ]
    .iter()
    .map(|&p| merge_images(&[&sorted, &other], &with_sort(p, options)).unwrap())
    .collect();
    assert_eq!(results[0], results[1]);
    assert_eq!(results[0], results[2]);
}

// ---------------------------------------------------------------------------------------------
// Tidy deep output

/// True when every pixel of `image` is tidy (sorted, no overlaps).
fn every_pixel_tidy(image: &DeepImage) -> bool {
    let mut plan = MergePlan::new(&[image]).unwrap();
    plan.sort = SortPolicy::AssumeSorted;
    let mut samples = Vec::new();
    (0..image.pixel_count()).all(|p| {
        let (x, y) = image.data_window.coords_of(p);
        plan.ordered_samples(x, y, &mut samples);
        is_tidy(&samples)
    })
}

#[test]
fn tidy_deep_output_is_tidy_and_merges_coincident_volumes() {
    let sorted_pixels = sorted_pixels();
    let a = image(4, &sorted_pixels, DeepState::Sorted);
    let b = image(4, &shuffled(&sorted_pixels, 5), DeepState::Messy);
    let untidy = deep(&[&a, &b], false);
    assert_eq!(untidy.state, DeepState::Sorted);
    assert!(!every_pixel_tidy(&untidy), "the inputs overlap");
    let tidy = deep(&[&a, &b], true);
    assert_eq!(tidy.state, DeepState::Tidy);
    assert!(every_pixel_tidy(&tidy));
    // Both inputs hold the same volumes, so every volume piece in the output is a merge of two
    // coincident pieces: no two output volumes share an interval.
    let z = plane(&tidy, "Z");
    let zb = plane(&tidy, "ZBack");
    for p in 0..tidy.pixel_count() {
        let r = tidy.range(p);
        let vols: Vec<(f32, f32)> = r
            .clone()
            .filter(|&i| zb[i] > z[i])
            .map(|i| (z[i], zb[i]))
            .collect();
        let mut dedup = vols.clone();
        dedup.dedup();
        assert_eq!(vols, dedup, "pixel {p}");
    }
    // Tidying changes nothing visible: the flat composite of the tidy deep output equals the
    // flat merge.
    let flat_of_tidy = flat(&[&tidy]);
    let flat_merge = flat(&[&a, &b]);
    for name in ["R", "G", "B", "A"] {
        let (x, y) = (
            flat_of_tidy.channel(name).unwrap(),
            flat_merge.channel(name).unwrap(),
        );
        for (p, (u, v)) in x.iter().zip(y).enumerate() {
            assert!((u - v).abs() < 1e-5, "{name} pixel {p}: {u} vs {v}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The volumetric corpus

fn corpus(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/oiio")
        .join(name)
}

fn read(name: &str) -> DeepImage {
    read_deep(&corpus(name), &ReadOptions::default()).unwrap()
}

/// Every pixel's samples (in merge order) with their composited values, for one image.
fn pixels_of(image: &DeepImage) -> (CompositeChannels, Vec<PixelSamples>) {
    let plan = MergePlan::new(&[image]).unwrap();
    let mut samples = Vec::new();
    let pixels = (0..image.pixel_count())
        .map(|p| {
            let (x, y) = image.data_window.coords_of(p);
            plan.ordered_samples(x, y, &mut samples);
            let mut px = PixelSamples::new(plan.composite.len());
            px.gather(&samples, &plan.inputs, &plan.sources);
            px
        })
        .collect();
    (plan.composite.clone(), pixels)
}

#[test]
fn corpus_merge_is_sane_and_tidy() {
    let input = read("input-crop.deep.exr");
    let hold = read("holdout-crop.deep.exr");
    let moved = shifted(&input, interleaving_shift(&input));
    let points = shifted_points(&input, interleaving_shift(&input));
    for (label, a, b) in [
        ("input+holdout", &input, &hold),
        ("input+input", &input, &input),
        ("input+shifted input", &input, &moved),
        ("input+shifted points", &input, &points),
    ] {
        let f = flat(&[a, b]);
        for name in ["R", "G", "B", "A", "RA", "GA", "BA"] {
            let v = f.channel(name).unwrap();
            assert!(v.iter().all(|x| x.is_finite()), "{label} {name}");
            if name.ends_with('A') {
                assert!(
                    v.iter().all(|&a| (0.0..=1.0 + 1e-6).contains(&a)),
                    "{label}: {name} alpha out of [0, 1]"
                );
            }
        }
        let tidy = deep(&[a, b], true);
        assert_eq!(tidy.state, DeepState::Tidy);
        assert!(every_pixel_tidy(&tidy), "{label}");
        let (_, pixels) = pixels_of(&tidy);
        for (p, px) in pixels.iter().enumerate() {
            for (k, v) in px.values.iter().enumerate() {
                assert!(v.is_finite(), "{label}: pixel {p} value {k}");
            }
        }
        let merged = deep(&[a, b], false);
        let (_, merged_pixels) = pixels_of(&merged);
        let overlapping = merged_pixels
            .iter()
            .filter(|px| needs_tidy(&px.samples))
            .count();
        println!("{label}: {overlapping} of 1024 pixels need tidying");
        // The crop's volumes are thin and never overlap the holdout's samples; merged with a
        // copy of itself (as is, or shifted by half a volume) they do.
        assert_eq!(overlapping > 0, label != "input+holdout", "{label}");
    }
}

/// Flat float channels of an EXR file written by another tool, by name.
fn read_flat_file(path: &std::path::Path) -> Vec<(String, Vec<f32>)> {
    use ::exr::prelude::*;
    let image = read()
        .no_deep_data()
        .largest_resolution_level()
        .all_channels()
        .first_valid_layer()
        .all_attributes()
        .from_file(path)
        .unwrap();
    image
        .layer_data
        .channel_data
        .list
        .iter()
        .map(|c| {
            (
                c.name.to_string(),
                c.sample_data.values_as_f32().collect::<Vec<f32>>(),
            )
        })
        .collect()
}

/// The flat composite of one pixel computed independently of tidy: every volume is cut into
/// `slices` thin slices at a fine common grid and the slices of coincident media alternate,
/// which converges to the mixed medium as the slices get thinner.
fn brute_force_flatten(px: &PixelSamples, channels: &CompositeChannels, slices: usize) -> Vec<f64> {
    let mut bounds: Vec<f32> = px.samples.iter().flat_map(|s| [s.z, s.zback]).collect();
    bounds.sort_by(f32::total_cmp);
    bounds.dedup();
    let mut out = vec![0.0f64; channels.len()];
    let over = |out: &mut Vec<f64>, row: &[f64]| {
        let before = out.clone();
        for (k, kind) in channels.kinds.iter().enumerate() {
            let alpha = match kind {
                CompositeKind::Alpha => k,
                CompositeKind::Colour { alpha } => *alpha,
            };
            out[k] += (1.0 - before[alpha]) * row[k];
        }
    };
    let slice_of = |row: &[f32], fraction: f64| -> Vec<f64> {
        channels
            .kinds
            .iter()
            .enumerate()
            .map(|(k, kind)| {
                let alpha = match kind {
                    CompositeKind::Alpha => k,
                    CompositeKind::Colour { alpha } => *alpha,
                };
                let a = row[alpha] as f64;
                // Naive formula on purpose (independent of tidy's expm1/log1p path).
                let piece = if a >= 1.0 {
                    1.0
                } else {
                    1.0 - (1.0 - a).powf(fraction)
                };
                let scale = if a >= 1.0 {
                    1.0
                } else if a == 0.0 {
                    fraction
                } else {
                    piece / a
                };
                if k == alpha {
                    piece
                } else {
                    row[k] as f64 * scale
                }
            })
            .collect()
    };
    for (i, &d) in bounds.iter().enumerate() {
        // Points at this depth, in merge order.
        for s in 0..px.len() {
            if !px.samples[s].is_volume() && px.samples[s].z == d {
                let row: Vec<f64> = px.row(s).iter().map(|&v| v as f64).collect();
                over(&mut out, &row);
            }
        }
        let Some(&next) = bounds.get(i + 1) else {
            break;
        };
        let media: Vec<(usize, Vec<f64>)> = (0..px.len())
            .filter(|&s| {
                let t = px.samples[s];
                t.is_volume() && t.z <= d && next <= t.zback
            })
            .map(|s| {
                let t = px.samples[s];
                let fraction = (next as f64 - d as f64) / (t.zback as f64 - t.z as f64);
                (s, slice_of(px.row(s), fraction / slices as f64))
            })
            .collect();
        for _ in 0..slices {
            for (_, slice) in &media {
                over(&mut out, slice);
            }
        }
    }
    out
}

/// Flatten `a` over `b` with oiiotool (`--deepmerge --flatten`); fails the test when oiiotool is
/// missing or fails.
fn oiiotool_flat(a: &DeepImage, b: &DeepImage) -> Vec<(String, Vec<f32>)> {
    let dir = tempfile::tempdir().unwrap();
    let (pa, pb, out) = (
        dir.path().join("a.exr"),
        dir.path().join("b.exr"),
        dir.path().join("flat.exr"),
    );
    deepmerge::exr::write_deep(&pa, a, deepmerge::exr::Codec::Zips).unwrap();
    deepmerge::exr::write_deep(&pb, b, deepmerge::exr::Codec::Zips).unwrap();
    let run = oiiotool()
        .arg(&pa)
        .arg(&pb)
        .args(["--deepmerge", "--flatten", "-d", "float", "-o"])
        .arg(&out)
        .output()
        .expect("oiiotool runs");
    assert!(
        run.status.success(),
        "oiiotool --deepmerge --flatten failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    read_flat_file(&out)
}

/// Largest |ours − theirs| over the composited channels, split by whether the pixel needed
/// tidying; with the number of such pixels.
fn compare_with_oiiotool(a: &DeepImage, b: &DeepImage) -> (f32, f32, usize) {
    let theirs = oiiotool_flat(a, b);
    let ours = flat(&[a, b]);
    let merged = deep(&[a, b], false);
    let (_, pixels) = pixels_of(&merged);
    let interleaved: Vec<bool> = pixels.iter().map(|px| needs_tidy(&px.samples)).collect();
    let (mut agree_max, mut disagree_max) = (0.0f32, 0.0f32);
    for name in ["R", "G", "B", "A", "RA", "GA", "BA"] {
        let t = &theirs.iter().find(|(n, _)| n == name).unwrap().1;
        let o = ours.channel(name).unwrap();
        for p in 0..o.len() {
            let d = (o[p] - t[p]).abs();
            if interleaved[p] {
                disagree_max = disagree_max.max(d);
            } else {
                agree_max = agree_max.max(d);
            }
        }
    }
    (
        agree_max,
        disagree_max,
        interleaved.iter().filter(|&&i| i).count(),
    )
}

#[test]
fn corpus_flatten_checked_by_brute_force_where_volumes_interleave() {
    // An independent check of our answer where volumes overlap volumes or contain points: thin
    // alternating slices (no split/merge formulas involved) against the tidy flatten. The
    // slices converge as 1/N; 400 of them leave a few 1e-4.
    let input = read("input-crop.deep.exr");
    let shift = interleaving_shift(&input);
    for (label, other) in [
        ("shifted input", shifted(&input, shift)),
        ("shifted points", shifted_points(&input, shift)),
    ] {
        let merged = deep(&[&input, &other], false);
        let (channels, pixels) = pixels_of(&merged);
        let ours = flat(&[&input, &other]);
        let mut worst = 0.0f64;
        for (p, px) in pixels.iter().enumerate() {
            if !needs_tidy(&px.samples) {
                continue;
            }
            let brute = brute_force_flatten(px, &channels, 400);
            for (k, name) in channels.names.iter().enumerate() {
                let diff = (ours.channel(name).unwrap()[p] as f64 - brute[k]).abs();
                worst = worst.max(diff);
            }
        }
        println!("tidy flatten vs 400-slice brute force, input + {label}: max |diff| {worst:.2e}");
        assert!(worst < 2e-3, "{label}: {worst}");
    }
}

#[test]
fn corpus_flatten_against_oiiotool() {
    let input = read("input-crop.deep.exr");
    let hold = read("holdout-crop.deep.exr");
    let shift = interleaving_shift(&input);

    // input + holdout: no volume overlaps anything; both tools composite the same sorted list
    // with "over": agreement to float rounding (half inputs, up to ~45 samples a pixel).
    let (agree, _, n) = compare_with_oiiotool(&input, &hold);
    println!("oiiotool, input+holdout: {n} overlapping pixels, the others agree to {agree:.2e}");
    assert_eq!(n, 0);
    assert!(agree < 1e-5, "{agree}");

    // input + input: identical volumes coincide. We merge them (alpha 1 − (1 − a)², colour
    // c(2 − a)); oiiotool merges them too, storing the merged piece in half, so they agree to a
    // few half ulps. Every point also coincides with its copy: we composite the two in order,
    // oiiotool blends samples that share a Z into one (we do not: docs/architecture.md, "Tidy");
    // for identical samples that is the same value up to half rounding, hence the same small bound
    // in pixels with only points.
    let (agree, disagree, n) = compare_with_oiiotool(&input, &input);
    println!("oiiotool, input+input: {n} pixels with coincident volumes differ by {disagree:.2e}, points-only pixels by {agree:.2e}");
    assert!(agree < 5e-4 && disagree < 5e-4, "{agree} {disagree}");

    // input + a copy shifted by half a volume (red and blue swapped): volumes overlap volumes.
    // oiiotool 2.4.7 also splits volumes at other volumes' bounds and merges the pieces, so it
    // agrees, up to its pieces being stored in the inputs' half type (we keep pieces in f32
    // until output): a few half ulps.
    let (agree, disagree, n) = compare_with_oiiotool(&input, &shifted(&input, shift));
    println!("oiiotool, input+shifted input: {n} overlapping pixels differ by up to {disagree:.2e}, others {agree:.2e}");
    assert!(
        n > 0 && agree < 1e-5 && disagree < 5e-4,
        "{n} {agree} {disagree}"
    );

    // input + the shifted copy as points: points inside volumes. oiiotool 2.4.7 does not split a
    // volume at a point inside it: it composites the whole volume in front of the point. The
    // brute-force test above confirms our answer; oiiotool's is off by this much.
    let (agree, disagree, n) = compare_with_oiiotool(&input, &shifted_points(&input, shift));
    println!("oiiotool, input+shifted points: {n} pixels with points inside volumes differ by up to {disagree:.3}, others {agree:.2e}");
    assert!(
        n > 0 && agree < 1e-5 && disagree > 1e-2,
        "{n} {agree} {disagree}"
    );
}

#[test]
fn oiiotool_splits_at_volume_bounds_but_not_at_points() {
    // Hand-built pixels through oiiotool 2.4.7. Where volumes overlap volumes it gives our
    // hand-worked answers; where a point lies inside a volume it gives the answer of
    // compositing the whole volume before the point, worked out by hand here.
    let agree: Vec<(Vec<S>, Vec<S>)> = vec![
        (
            vec![volume(0.0, 2.0, 0.75, [0.75, 0.0, 0.0])],
            vec![volume(1.0, 3.0, 0.75, [0.0, 0.75, 0.0])],
        ),
        (
            vec![volume(1.0, 2.0, 0.5, [0.5, 0.0, 0.0])],
            vec![volume(1.0, 2.0, 0.75, [0.0, 0.3, 0.0])],
        ),
        (
            vec![volume(0.0, 2.0, 1.0, [1.0, 0.0, 0.0])],
            vec![volume(1.0, 3.0, 0.75, [0.0, 0.75, 0.0])],
        ),
    ];
    for (a, b) in &agree {
        let (ia, ib) = (pixel_image(a), pixel_image(b));
        let theirs = oiiotool_flat(&ia, &ib);
        let ours = flat(&[&ia, &ib]);
        for (name, v) in theirs
            .iter()
            .filter(|(n, _)| ["R", "G", "A"].contains(&n.as_str()))
        {
            assert!(
                (value(&ours, name) - v[0]).abs() < 1e-6,
                "{a:?} {b:?} {name}"
            );
        }
    }
    // Point (alpha .5, green .5) at 2 inside [0,4) alpha 15/16 red 15/16. Whole volume first:
    // R 15/16, G = (1/16)·.5 = 1/32, A = 1 − (1/16)·.5. Ours (tidy): R .84375, G .125.
    let v = pixel_image(&[volume(0.0, 4.0, 0.9375, [0.9375, 0.0, 0.0])]);
    let p = pixel_image(&[point(2.0, 0.5, [0.0, 0.5, 0.0])]);
    let theirs = oiiotool_flat(&v, &p);
    let get = |n: &str| theirs.iter().find(|(x, _)| x == n).unwrap().1[0];
    assert!((get("R") - 0.9375).abs() < 1e-6 && (get("G") - 0.03125).abs() < 1e-6);
    assert!(
        (get("A") - 0.96875).abs() < 1e-6,
        "alpha agrees: it does not depend on order"
    );
    // The worst case: a dense volume with a bright opaque point just inside its front. oiiotool
    // shows the volume (R 0.99); the point hides all but the first 1% of it (G ≈ 0.96).
    let v = pixel_image(&[volume(0.0, 100.0, 0.99, [0.99, 0.0, 0.0])]);
    let p = pixel_image(&[point(1.0, 1.0, [0.0, 1.0, 0.0])]);
    let theirs = oiiotool_flat(&v, &p);
    let get = |n: &str| theirs.iter().find(|(x, _)| x == n).unwrap().1[0];
    let ours = flat(&[&v, &p]);
    // Front 1% of the volume: alpha 1 − 0.01^0.01 ≈ 0.0450, red the same; then the point.
    let front = 1.0 - 0.01f64.powf(0.01);
    assert_close(value(&ours, "R"), front, "R");
    assert_close(value(&ours, "G"), 1.0 - front, "G");
    assert!((get("R") - 0.99).abs() < 1e-6 && (get("G") - 0.01).abs() < 1e-6);
    println!(
        "dense volume with a point inside: oiiotool G {:.3}, ours {:.3}",
        get("G"),
        value(&ours, "G")
    );
}

// ---------------------------------------------------------------------------------------------
// Holdout and cull against the 2017 reference outputs

fn samples_of(image: &DeepImage, p: usize) -> Vec<Vec<f32>> {
    image
        .range(p)
        .map(|i| image.planes.iter().map(|pl| pl.get_f32(i)).collect())
        .collect()
}

#[test]
fn cull_matches_the_reference_exactly() {
    let input = read("input-crop.deep.exr");
    let hold = read("holdout-crop.deep.exr");
    let reference = read("ref-cull-crop.deep.exr");
    let ours = holdout(&input, &hold, HoldoutMode::Cull).unwrap();
    assert_eq!(ours.channels, reference.channels);
    let culled = input.sample_count() - ours.sample_count();
    println!("cull: dropped {culled} of {} samples", input.sample_count());
    assert!(culled > 0);
    // Same samples kept in every pixel, values bit-exact (both keep IN's samples untouched).
    assert_eq!(ours.counts(), reference.counts());
    assert_eq!(ours.planes, reference.planes);

    // Where the two rules differ, and why they agree here. The reference (OpenImageIO's
    // DeepData::opaque_z) takes the first holdout sample whose own alpha is >= 1 and culls
    // behind its ZBack; we accumulate alpha and cull behind the Z of the sample that makes the
    // holdout opaque (every piece of an opaque medium is opaque, so an opaque volume hides what
    // starts inside it). They differ only (a) where accumulated alpha reaches 1 before any
    // single sample does, and (b) where the opaque sample is a volume with IN samples starting
    // inside it. Count both: neither occurs in this corpus.
    let (_, in_pixels) = pixels_of(&input);
    let (channels, ho_pixels) = pixels_of(&hold);
    let a = channels.names.iter().position(|n| n == "A").unwrap();
    let (mut accumulated_first, mut inside_opaque_volume) = (0, 0);
    for (i, h) in in_pixels.iter().zip(&ho_pixels) {
        let single = (0..h.len()).find(|&s| h.row(s)[a] >= 1.0);
        let mut acc = 0.0f32;
        let accumulated = (0..h.len()).find(|&s| {
            acc += (1.0 - acc) * h.row(s)[a];
            acc >= 1.0
        });
        if accumulated != single {
            accumulated_first += 1;
        }
        if let Some(s) = single {
            let o = h.samples[s];
            inside_opaque_volume += i
                .samples
                .iter()
                .filter(|t| t.z > o.z && t.z <= o.zback)
                .count();
        }
    }
    assert_eq!((accumulated_first, inside_opaque_volume), (0, 0));
}

#[test]
fn attenuate_matches_the_reference_within_half_rounding() {
    let input = read("input-crop.deep.exr");
    let hold = read("holdout-crop.deep.exr");
    let reference = read("ref-holdout-crop.deep.exr");
    let ours = holdout(&input, &hold, HoldoutMode::Attenuate).unwrap();
    assert_eq!(ours.channels, reference.channels);
    // The reference drops samples behind an opaque holdout sample, as we drop samples whose
    // every factor is 0: same samples in every pixel.
    assert_eq!(ours.counts(), reference.counts());
    let z = input.channel_index("Z").unwrap();
    let zback = input.channel_index("ZBack").unwrap();
    let mut worst = 0.0f32;
    let mut worst_relative = 0.0f32;
    for p in 0..ours.pixel_count() {
        let (o, r) = (samples_of(&ours, p), samples_of(&reference, p));
        for (os, rs) in o.iter().zip(&r) {
            // Depths untouched: no IN volume in this corpus straddles a holdout boundary, so
            // nothing is cut (see the overlap count below).
            assert_eq!((os[z], os[zback]), (rs[z], rs[zback]), "pixel {p}");
            for (c, (a, b)) in os.iter().zip(rs).enumerate() {
                if c == z || c == zback {
                    continue;
                }
                let d = (a - b).abs();
                worst = worst.max(d);
                if b.abs() > 1e-3 {
                    worst_relative = worst_relative.max(d / b.abs());
                }
            }
        }
    }
    // Both are IN × T(z) rounded to half (2^-11 relative); the reference multiplied in a
    // different order (and perhaps in half), so up to two roundings apart.
    println!("holdout vs reference: max |diff| {worst:.2e}, max relative {worst_relative:.2e}");
    assert!(worst_relative < 2.0 * 2f32.powi(-10), "{worst_relative}");

    // Where the two models could differ at all: IN volumes that share depth with a holdout
    // volume (we mix the media, a per-sample transmittance does not). Count them.
    let (_, in_pixels) = pixels_of(&input);
    let (_, ho_pixels) = pixels_of(&hold);
    let shared = in_pixels
        .iter()
        .zip(&ho_pixels)
        .map(|(i, h)| {
            i.samples
                .iter()
                .filter(|s| {
                    s.is_volume()
                        && h.samples.iter().any(|t| {
                            (t.is_volume() && t.z < s.zback && s.z < t.zback)
                                || (!t.is_volume() && t.z > s.z && t.z < s.zback)
                        })
                })
                .count()
        })
        .sum::<usize>();
    println!("IN volumes overlapping holdout samples: {shared}");
    assert_eq!(shared, 0, "the corpus never exercises the mixing path");
}

#[test]
fn attenuate_splits_volumes_and_mixes_shared_media() {
    // IN: volume [0,2) alpha .75 red .75. HOLDOUT: volume [1,3) alpha .75.
    // Cut at 1: [0,1) alpha .5 red .5, nothing in front: unchanged.
    // [1,2): IN .5 shares with holdout half (.5): mix alpha .75, IN's share (u equal) = half:
    // alpha .375, red .375.
    let a = pixel_image(&[volume(0.0, 2.0, 0.75, [0.75, 0.0, 0.0])]);
    let h = pixel_image(&[volume(1.0, 3.0, 0.75, [0.0, 0.0, 0.0])]);
    let out = holdout(&a, &h, HoldoutMode::Attenuate).unwrap();
    assert_eq!(plane(&out, "Z"), vec![0.0, 1.0]);
    assert_eq!(plane(&out, "ZBack"), vec![1.0, 2.0]);
    let (alpha, red) = (plane(&out, "A"), plane(&out, "R"));
    assert_close(alpha[0], 0.5, "front A");
    assert_close(red[0], 0.5, "front R");
    assert_close(alpha[1], 0.375, "shared A");
    assert_close(red[1], 0.375, "shared R");
    // Consistency with merging: here the shared piece is IN's last, so flattening the held-out
    // IN gives the same red as merging IN with the (black) holdout. (In general it does not:
    // scaling a sample's alpha also lets more of IN's own samples behind it through; that is
    // inherent in storing a holdout as deep samples, and the 2017 reference does the same.)
    let merged = flat(&[&a, &h]);
    let held = flat(&[&out]);
    assert_close(
        value(&held, "R"),
        value(&merged, "R") as f64,
        "R through merge",
    );

    // A point IN sample behind a holdout point and half of a holdout volume.
    let p = pixel_image(&[point(2.0, 0.5, [0.5, 0.0, 0.0])]);
    let h = pixel_image(&[point(0.5, 0.5, [0.0; 3]), volume(1.0, 3.0, 0.75, [0.0; 3])]);
    let out = holdout(&p, &h, HoldoutMode::Attenuate).unwrap();
    // T = (1 - .5) · .25^.5 = .25.
    assert_close(plane(&out, "A")[0], 0.125, "A");
    assert_close(plane(&out, "R")[0], 0.125, "R");
}

#[test]
fn cull_uses_accumulated_alpha() {
    // Two holdout points of alpha .5 never reach 1; a third of alpha 1 at 3 does: IN samples
    // starting behind 3 go, the one at 3 (a tie: IN first) and a volume straddling 3 stay.
    let a = pixel_image(&[
        point(1.0, 0.5, [0.1; 3]),
        volume(2.5, 3.5, 0.5, [0.1; 3]),
        point(3.0, 0.5, [0.1; 3]),
        point(4.0, 0.5, [0.1; 3]),
    ]);
    let h = pixel_image(&[
        point(0.5, 0.5, [0.0; 3]),
        point(2.0, 0.5, [0.0; 3]),
        point(3.0, 1.0, [0.0; 3]),
    ]);
    let out = holdout(&a, &h, HoldoutMode::Cull).unwrap();
    assert_eq!(plane(&out, "Z"), vec![1.0, 2.5, 3.0]);
    let none = pixel_image(&[point(0.5, 0.5, [0.0; 3]), point(2.0, 0.5, [0.0; 3])]);
    assert_eq!(
        holdout(&a, &none, HoldoutMode::Cull)
            .unwrap()
            .sample_count(),
        4
    );
    // An opaque holdout volume [2, 5) hides what starts inside it (OpenImageIO culls only
    // behind its ZBack, 5, and would keep all four).
    let opaque_volume = pixel_image(&[volume(2.0, 5.0, 1.0, [0.0; 3])]);
    let out = holdout(&a, &opaque_volume, HoldoutMode::Cull).unwrap();
    assert_eq!(plane(&out, "Z"), vec![1.0]);
}

// ---------------------------------------------------------------------------------------------
// Property tests

fn arb_sample() -> impl Strategy<Value = S> {
    (
        0..8u8,
        prop_oneof![Just(0u8), 1..4u8],
        prop_oneof![Just(0.0f32), Just(1.0f32), 0.0f32..1.0],
        (0.0f32..1.0, 0.0f32..1.0, 0.0f32..1.0),
    )
        .prop_map(|(z, len, a, (r, g, b))| {
            // For points z is only a grid slot: `arb_inputs` makes their depths distinct.
            S {
                z: z as f32,
                zback: z as f32 + len as f32,
                a,
                rgb: [r * a.max(0.05), g * a.max(0.05), b * a.max(0.05)],
            }
        })
}

/// Random pixels for two inputs: volumes on an integer grid (so boundaries coincide often),
/// points at distinct depths (coincident points composite in input order by design, which is
/// the one documented way the result may depend on order).
fn arb_inputs() -> impl Strategy<Value = (Vec<S>, Vec<S>)> {
    (
        prop::collection::vec(arb_sample(), 0..7),
        prop::collection::vec(arb_sample(), 0..7),
    )
        .prop_map(|(mut a, mut b)| {
            let mut slot = 0;
            for s in a.iter_mut().chain(b.iter_mut()) {
                if s.zback == s.z {
                    // Unique, and sometimes on a volume boundary (slot 0 of each unit).
                    s.z += (slot % 4) as f32 * 0.25 + (slot / 4) as f32 * 1e-3;
                    s.zback = s.z;
                    slot += 1;
                }
            }
            a.sort_by(|x, y| (x.z, x.zback).partial_cmp(&(y.z, y.zback)).unwrap());
            b.sort_by(|x, y| (x.z, x.zback).partial_cmp(&(y.z, y.zback)).unwrap());
            (a, b)
        })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn flat_merge_does_not_depend_on_input_order((a, b) in arb_inputs()) {
        let (ia, ib) = (pixel_image(&a), pixel_image(&b));
        let ab = flat(&[&ia, &ib]);
        let ba = flat(&[&ib, &ia]);
        for name in ["R", "G", "B", "A"] {
            let (x, y) = (value(&ab, name), value(&ba, name));
            // f32 rounding of sums taken in a different order.
            prop_assert!((x - y).abs() <= 1e-5, "{}: {} vs {}", name, x, y);
        }
    }

    #[test]
    fn tidy_output_is_tidy_and_alpha_stays_in_range((a, b) in arb_inputs()) {
        let (ia, ib) = (pixel_image(&a), pixel_image(&b));
        let d = deep(&[&ia, &ib], true);
        prop_assert!(every_pixel_tidy(&d));
        // Piece and merged alphas are 1 - Π(1 - a_i)^f_i of alphas in [0, 1]: in [0, 1] up to
        // f32 rounding.
        for v in plane(&d, "A") {
            prop_assert!((-1e-7..=1.0 + 1e-6).contains(&v), "alpha {}", v);
        }
        let f = flat(&[&ia, &ib]);
        let alpha = value(&f, "A");
        prop_assert!((0.0..=1.0 + 1e-6).contains(&alpha), "flat alpha {}", alpha);
        // And tidying keeps the picture: flattening the tidy output equals the flat merge.
        let again = flat(&[&d]);
        for name in ["R", "G", "B", "A"] {
            let (x, y) = (value(&again, name), value(&f, name));
            prop_assert!((x - y).abs() <= 1e-5, "{}: {} vs {}", name, x, y);
        }
    }

    #[test]
    fn tidy_pixel_is_idempotent((a, b) in arb_inputs()) {
        let (ia, ib) = (pixel_image(&a), pixel_image(&b));
        let plan = MergePlan::new(&[&ia, &ib]).unwrap();
        let mut samples = Vec::new();
        plan.ordered_samples(0, 0, &mut samples);
        let mut px = PixelSamples::new(plan.composite.len());
        px.gather(&samples, &plan.inputs, &plan.sources);
        let mut deep_px = px.clone();
        tidy_pixel(&mut px, &plan.composite);
        prop_assert!(is_split(&px.samples));
        let once = px.clone();
        tidy_pixel(&mut px, &plan.composite);
        prop_assert_eq!(&px, &once);
        // The deep output's tidy (coincident points merged too) is tidy and idempotent as well.
        tidy_deep_pixel(&mut deep_px, &plan.composite);
        prop_assert!(is_tidy(&deep_px.samples));
        let once = deep_px.clone();
        tidy_deep_pixel(&mut deep_px, &plan.composite);
        prop_assert_eq!(&deep_px, &once);
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 128,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn holdout_only_removes((a, h) in arb_inputs()) {
        let (ia, ih) = (pixel_image(&a), pixel_image(&h));
        let before = flat(&[&ia]);
        let held = holdout(&ia, &ih, HoldoutMode::Attenuate).unwrap();
        let after = flat(&[&held]);
        // Alpha can only go down, and stays in [0, 1] (f32 rounding allowed).
        let (x, y) = (value(&after, "A"), value(&before, "A"));
        prop_assert!((-1e-7..=y + 1e-6).contains(&x), "A {} > {}", x, y);
        for v in plane(&held, "A") {
            prop_assert!((-1e-7..=1.0 + 1e-6).contains(&v), "sample alpha {}", v);
        }
        let culled = holdout(&ia, &ih, HoldoutMode::Cull).unwrap();
        prop_assert!(culled.sample_count() <= ia.sample_count());
    }

    #[test]
    fn transparent_holdout_changes_nothing_visible((a, h) in arb_inputs()) {
        // A holdout whose alphas are all 0 cuts IN's volumes at its boundaries but leaves the
        // composite as it was.
        let clear: Vec<S> = h.iter().map(|s| S { a: 0.0, ..*s }).collect();
        let (ia, ih) = (pixel_image(&a), pixel_image(&clear));
        let held = holdout(&ia, &ih, HoldoutMode::Attenuate).unwrap();
        prop_assert_eq!(held.sample_count() >= ia.sample_count(), true);
        let (x, y) = (flat(&[&held]), flat(&[&ia]));
        for name in ["R", "G", "B", "A"] {
            prop_assert!((value(&x, name) - value(&y, name)).abs() <= 1e-5, "{}", name);
        }
        prop_assert_eq!(holdout(&ia, &ih, HoldoutMode::Cull).unwrap().planes, ia.planes);
    }
}

#[test]
fn holdout_by_an_empty_image_is_the_identity() {
    let pixels = sorted_pixels();
    let input = image(4, &pixels, DeepState::Sorted);
    let empty = image(4, &vec![Vec::new(); pixels.len()], DeepState::Tidy);
    for mode in [HoldoutMode::Attenuate, HoldoutMode::Cull] {
        let out = holdout(&input, &empty, mode).unwrap();
        assert_eq!(out.planes, input.planes, "{mode:?}");
        assert_eq!(out.counts(), input.counts());
    }
}
