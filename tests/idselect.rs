//! `idselect` (`deepmerge::ops::IdSelect`, the `idselect` command): a selection and its
//! `--invert` merge back to the input and each keeps exactly the samples with its ids, on
//! random images (uint ids and the float-id convention in half) and on the corpus's
//! id-carrying renders; the streamed command against the whole image; `--mask`; refusals.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::{data, read, run};
use deepmerge::composite::{merge_images, MergeOptions, MergeOutput, OutputKind, SortPolicy};
use deepmerge::deep::{Bounds, Channel, DeepImage, DeepState, Plane, SampleType};
use deepmerge::exr::{write_deep, write_deep_with, Codec, OutputOptions};
use deepmerge::ops::idselect::id_at;
use deepmerge::ops::{DeepOp, IdSelect};
use half::f16;
use proptest::prelude::*;

/// The selection applied to the whole image as one band.
fn apply(op: &IdSelect, input: &DeepImage) -> DeepImage {
    let windows = op.windows(input.data_window, input.display_window).unwrap();
    op.apply(input, &windows).unwrap_or_else(|e| panic!("{e}"))
}

fn select(ids: &[&str], invert: bool) -> IdSelect {
    IdSelect::parse(ids, invert).unwrap()
}

/// Sample `i` of `image` as the bits of every channel.
fn sample_bits(image: &DeepImage, i: usize) -> Vec<u32> {
    image
        .planes
        .iter()
        .map(|p| match p {
            Plane::U32(v) => v[i],
            Plane::F16(v) => v[i].to_bits() as u32,
            Plane::F32(v) => v[i].to_bits(),
        })
        .collect()
}

/// Every pixel's samples, as a sorted list of their bits (the pixel's multiset of samples).
fn pixel_multisets(image: &DeepImage) -> Vec<Vec<Vec<u32>>> {
    (0..image.pixel_count())
        .map(|p| {
            let mut samples: Vec<Vec<u32>> =
                image.range(p).map(|i| sample_bits(image, i)).collect();
            samples.sort();
            samples
        })
        .collect()
}

fn deep_merge(inputs: &[&DeepImage]) -> DeepImage {
    let options = MergeOptions {
        output: OutputKind::Deep,
        sort: SortPolicy::Always,
        ..MergeOptions::default()
    };
    match merge_images(inputs, &options).unwrap_or_else(|e| panic!("{e}")) {
        MergeOutput::Deep(d) => d,
        MergeOutput::Flat(_) => unreachable!(),
    }
}

/// Whether sample `i` of `image` meets every `(channel, ids)` condition (the test's own
/// reading of the semantics: uint exactly, floats when whole).
fn meets(image: &DeepImage, i: usize, conditions: &[(&str, &[u32])]) -> bool {
    conditions.iter().all(|(name, ids)| {
        let plane = &image.planes[image.channel_index(name).unwrap()];
        let value = match plane {
            Plane::U32(v) => v[i] as f64,
            other => other.get_f32(i) as f64,
        };
        ids.iter().any(|&n| n as f64 == value)
    })
}

/// The samples of `image` (as bits, per pixel) meeting the conditions, or with `invert` not.
fn expected(image: &DeepImage, conditions: &[(&str, &[u32])], invert: bool) -> Vec<Vec<u32>> {
    (0..image.sample_count())
        .filter(|&i| meets(image, i, conditions) != invert)
        .map(|i| sample_bits(image, i))
        .collect()
}

fn all_samples(image: &DeepImage) -> Vec<Vec<u32>> {
    (0..image.sample_count())
        .map(|i| sample_bits(image, i))
        .collect()
}

/// Check a selection and its inverse against the input: each keeps exactly the samples the
/// conditions say, in order, with the input's windows, and the two merged are the input.
fn check_split(input: &DeepImage, texts: &[&str], conditions: &[(&str, &[u32])]) {
    let kept = apply(&select(texts, false), input);
    let rest = apply(&select(texts, true), input);
    for (out, invert) in [(&kept, false), (&rest, true)] {
        assert_eq!(out.data_window, input.data_window);
        assert_eq!(out.channels, input.channels);
        assert_eq!(out.state, input.state);
        assert_eq!(
            all_samples(out),
            expected(input, conditions, invert),
            "{texts:?} invert {invert}"
        );
    }
    assert_eq!(
        kept.sample_count() + rest.sample_count(),
        input.sample_count()
    );
    let merged = deep_merge(&[&kept, &rest]);
    assert_eq!(pixel_multisets(&merged), pixel_multisets(input));
}

// ---------------------------------------------------------------------------------------------
// Hand-built samples

/// A 2x1 image, channels A, Z (f32), fid (half, float ids), id (uint): pixel 0 holds samples
/// with ids 1, 2, 3 (fid 1.0, 2.5, 3.0), pixel 1 holds id 3236172513 (fid 7.0).
fn ids_image() -> DeepImage {
    let window = Bounds::from_origin_size(0, 0, 2, 1);
    let channels = vec![
        Channel::new("A", SampleType::F32),
        Channel::new("Z", SampleType::F32),
        Channel::new("fid", SampleType::F16),
        Channel::new("id", SampleType::U32),
    ];
    let halves = |v: &[f32]| Plane::F16(v.iter().map(|&x| f16::from_f32(x)).collect());
    let planes = vec![
        Plane::F32(vec![0.5, 0.25, 0.75, 1.0]),
        Plane::F32(vec![1.0, 2.0, 3.0, 4.0]),
        halves(&[1.0, 2.5, 3.0, 7.0]),
        Plane::U32(vec![1, 2, 3, 3236172513]),
    ];
    DeepImage::from_counts(window, window, channels, &[3, 1], planes, DeepState::Sorted).unwrap()
}

#[test]
fn ids_are_ored_within_an_option_and_anded_across_options() {
    let input = ids_image();
    let ids = |out: &DeepImage| -> Vec<Option<u32>> {
        let c = out.channel_index("id").unwrap();
        (0..out.sample_count())
            .map(|i| id_at(&out.planes[c], i))
            .collect()
    };
    assert_eq!(
        ids(&apply(&select(&["id=1,3"], false), &input)),
        [Some(1), Some(3)]
    );
    assert_eq!(
        ids(&apply(&select(&["id=1,3"], true), &input)),
        [Some(2), Some(3236172513)]
    );
    // uint ids beyond a float's precision compare exactly.
    assert_eq!(
        ids(&apply(&select(&["id=3236172513"], false), &input)),
        [Some(3236172513)]
    );
    assert!(apply(&select(&["id=3236172512"], false), &input).sample_count() == 0);
    // Float ids: 2.5 is no id, 3.0 is id 3, 7.0 id 7.
    assert_eq!(
        ids(&apply(&select(&["fid=2,3,7"], false), &input)),
        [Some(3), Some(3236172513)]
    );
    // AND across options: id in {1,2,3} and fid = 3.
    assert_eq!(
        ids(&apply(&select(&["id=1,2,3", "fid=3"], false), &input)),
        [Some(3)]
    );
    // Two options on one channel select what both list.
    assert_eq!(
        ids(&apply(&select(&["id=1,2", "id=2,3"], false), &input)),
        [Some(2)]
    );
    // The per-pixel counts follow the samples kept.
    let kept = apply(&select(&["id=3236172513"], false), &input);
    assert_eq!(kept.counts(), [0, 1]);
}

#[test]
fn a_missing_channel_is_an_error_listing_the_channels() {
    let input = ids_image();
    let op = select(&["object=1"], false);
    let windows = op.windows(input.data_window, input.display_window).unwrap();
    let err = op.apply(&input, &windows).unwrap_err().to_string();
    assert!(
        err.contains("\"object\"") && err.contains("A, Z, fid, id"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------------
// Random images

fn arb_ids_image() -> impl Strategy<Value = DeepImage> {
    let sample = (0u32..20, 0u32..=10, 0u32..5, 0u32..8);
    (1usize..5, 1usize..4).prop_flat_map(move |(w, h)| {
        proptest::collection::vec(proptest::collection::vec(sample.clone(), 0..5), w * h).prop_map(
            move |mut pixels| {
                for p in &mut pixels {
                    p.sort();
                }
                let window = Bounds::from_origin_size(-1, 2, w, h);
                let all: Vec<_> = pixels.iter().flatten().collect();
                let channels = vec![
                    Channel::new("A", SampleType::F32),
                    Channel::new("Z", SampleType::F32),
                    Channel::new("fid", SampleType::F16),
                    Channel::new("id", SampleType::U32),
                ];
                let planes = vec![
                    Plane::F32(all.iter().map(|s| s.1 as f32 / 10.0).collect()),
                    Plane::F32(all.iter().map(|s| s.0 as f32 * 0.5).collect()),
                    // Odd codes are half-way values: no id under the float-id convention.
                    Plane::F16(
                        all.iter()
                            .map(|s| f16::from_f32(s.3 as f32 / 2.0))
                            .collect(),
                    ),
                    Plane::U32(all.iter().map(|s| s.2).collect()),
                ];
                let counts: Vec<u32> = pixels.iter().map(|p| p.len() as u32).collect();
                DeepImage::from_counts(window, window, channels, &counts, planes, DeepState::Sorted)
                    .unwrap()
            },
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn a_selection_and_its_inverse_hold_exactly_their_samples_and_merge_to_the_input(
        input in arb_ids_image(),
        ids in proptest::collection::btree_set(0u32..5, 1..4),
        fids in proptest::collection::btree_set(0u32..4, 1..3),
        both in any::<bool>(),
    ) {
        let ids: Vec<u32> = ids.into_iter().collect();
        let fids: Vec<u32> = fids.into_iter().collect();
        let list = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        let id_text = format!("id={}", list(&ids));
        let fid_text = format!("fid={}", list(&fids));
        if both {
            check_split(&input, &[&id_text, &fid_text], &[("id", &ids), ("fid", &fids)]);
        } else {
            check_split(&input, &[&id_text], &[("id", &ids)]);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The corpus: OpenEXR's id-carrying renders

/// The distinct values of a uint channel.
fn distinct_ids(image: &DeepImage, name: &str) -> Vec<u32> {
    let c = image.channel_index(name).unwrap();
    let set: BTreeSet<u32> = (0..image.sample_count())
        .filter_map(|i| id_at(&image.planes[c], i))
        .collect();
    set.into_iter().collect()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn corpus_selections_and_their_inverses_split_the_samples_exactly() {
    let dir = tempfile::tempdir().unwrap();
    for file in ["openexr/11.deep.exr", "openexr/multivariate.deep.exr"] {
        let path = data(file);
        let input = read(&path, 0);
        let channels: Vec<String> = input
            .channels
            .iter()
            .filter(|c| c.sample_type == SampleType::U32)
            .map(|c| c.name.clone())
            .collect();
        assert!(
            !channels.is_empty(),
            "{file}: the corpus says it has uint ids"
        );
        for name in &channels {
            let all = distinct_ids(&input, name);
            assert!(all.len() >= 2, "{file}: {name} holds several ids");
            // Every other id, so that both sides hold samples when there are two ids or more.
            let chosen: Vec<u32> = all.iter().copied().step_by(2).collect();
            let text = format!(
                "{name}={}",
                chosen
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            );
            check_split(&input, &[&text], &[(name, &chosen)]);

            // The command, streamed in bands, writes the whole image's selection.
            let kept = dir.path().join("kept.exr");
            let (ok, _, err) = run(&[
                "idselect",
                s(&path),
                "--id",
                &text,
                "--band-rows",
                "7",
                // An image in memory has no header to carry: compare without the input's.
                "--metadata",
                "none",
                "-o",
                s(&kept),
            ]);
            assert!(ok, "{file}: {err}");
            let want = apply(&select(&[&text], false), &input);
            let whole = dir.path().join("whole.exr");
            // The CLI's deep output options: its default compression and `software`.
            let options = OutputOptions::default().deep(true).unwrap();
            write_deep_with(&whole, &want, &options).unwrap();
            assert_eq!(
                std::fs::read(&kept).unwrap(),
                std::fs::read(&whole).unwrap(),
                "{file} {name}: streamed output differs from the whole image's"
            );
        }
    }
}

#[test]
fn the_mask_is_the_flat_alpha_of_the_selection() {
    let dir = tempfile::tempdir().unwrap();
    let path = data("openexr/11.deep.exr");
    let input = read(&path, 0);
    let ids = distinct_ids(&input, "id");
    let text = format!("id={}", ids[0]);
    let (out, mask) = (dir.path().join("o.exr"), dir.path().join("m.exr"));
    let (ok, _, err) = run(&[
        "idselect",
        s(&path),
        "--id",
        &text,
        "--mask",
        s(&mask),
        "-o",
        s(&out),
    ]);
    assert!(ok, "{err}");
    // Read with the `exr` crate, independent of our code.
    let flat = exr::prelude::read_all_flat_layers_from_file(&mask).unwrap();
    let layer = &flat.layer_data[0];
    let names: Vec<String> = layer
        .channel_data
        .list
        .iter()
        .map(|c| c.name.to_string())
        .collect();
    assert_eq!(names, ["A"], "the mask holds the alpha only");
    assert_eq!(layer.size.x() * layer.size.y(), input.pixel_count());
    // The flat alpha of the kept samples, composited here with "over" in the samples' order.
    let kept = apply(&select(&[&text], false), &input);
    let a = kept.channel_index("A").unwrap();
    let got: Vec<f32> = layer.channel_data.list[0]
        .sample_data
        .values_as_f32()
        .collect();
    let mut covered = 0;
    assert_eq!(got.len(), kept.pixel_count());
    for (p, mask) in got.iter().enumerate() {
        let alpha = kept
            .range(p)
            .fold(0f32, |acc, i| acc + (1.0 - acc) * kept.planes[a].get_f32(i));
        covered += usize::from(alpha > 0.0);
        assert!(
            (mask - alpha).abs() <= 1e-3,
            "pixel {p}: mask {mask} against {alpha}"
        );
    }
    assert!(covered > 0, "the selection covers some pixels");
}

#[test]
fn bad_selections_are_one_line_errors_that_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = data("openexr/11.deep.exr");
    let out = dir.path().join("o.exr");
    let mask = dir.path().join("m.exr");
    let cases: [(&[&str], &str); 5] = [
        (
            &["--id", "object=1"],
            "its channels: A, B, G, R, Z, id, particleid",
        ),
        (&["--id", "id=-1"], "--id takes CHANNEL=N"),
        (&["--id", "id"], "--id takes CHANNEL=N"),
        (&["--id", "id=1", "--mask", "m.tif"], "extension"),
        (
            &["--id", "id=1", "--mask", s(&out)],
            "the mask is the output itself",
        ),
    ];
    for (args, says) in cases {
        let mut all = vec!["idselect", s(&path), "-o", s(&out)];
        all.extend_from_slice(args);
        let (ok, _, err) = run(&all);
        assert!(!ok, "{args:?}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(!out.exists() && !mask.exists(), "{args:?} wrote a file");
    }
    let (ok, _, err) = run(&["idselect", s(&path), "-o", s(&out)]);
    assert!(!ok && err.contains("--id"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// Ids by name, through the file's id manifest

fn manifest_of(file: &str) -> deepmerge::exr::IdManifest {
    deepmerge::ops::idselect::read_id_manifest(
        &data(file),
        &deepmerge::exr::PartSelector::FirstDeep,
    )
    .unwrap()
    .expect("the corpus file carries an idManifest")
}

#[test]
fn the_corpus_manifests_decode_and_name_the_ids_the_files_hold() {
    for file in ["openexr/11.deep.exr", "openexr/multivariate.deep.exr"] {
        let manifest = manifest_of(file);
        let image = read(&data(file), 0);
        let group = manifest.group_of("id").expect("a group for the id channel");
        assert_eq!(group.components, vec!["model", "material"], "{file}");
        assert_eq!(group.hash_scheme, "MurmurHash3_32", "{file}");
        // Every id the channel holds has its names in the manifest.
        let named: BTreeSet<u64> = group.entries.iter().map(|e| e.0).collect();
        for id in distinct_ids(&image, "id") {
            assert!(named.contains(&(id as u64)), "{file}: id {id} has no name");
        }
        assert!(manifest.group_of("particleid").is_some(), "{file}");
    }
    // Read by hand from the bytes of 11.deep.exr's manifest: 11 ids; the first, 0x1f33626a,
    // has string codes 5 and 3, and the table (prefix-coded) is blob/big, blob/medium,
    // blob/small, blue, circle/big, circle/medium, ...; its mapping is the identity.
    let eleven = manifest_of("openexr/11.deep.exr");
    let group = eleven.group_of("id").unwrap();
    assert_eq!(group.entries.len(), 11);
    assert_eq!(
        group.entries[0],
        (
            0x1f33_626a,
            vec!["circle/medium".to_string(), "blue".to_string()]
        )
    );
}

#[test]
fn names_select_what_their_numbers_select() {
    let dir = tempfile::tempdir().unwrap();
    for file in ["openexr/11.deep.exr", "openexr/multivariate.deep.exr"] {
        let path = data(file);
        let group = manifest_of(file).group_of("id").unwrap().clone();
        for (pattern, invert) in [("blob/*", false), ("circle/*", true), ("green", false)] {
            // The ids a name stands for: those with a name (model or material) matching it.
            let ids: Vec<String> = group
                .entries
                .iter()
                .filter(|(_, names)| names.iter().any(|n| glob_match(pattern, n)))
                .map(|(id, _)| id.to_string())
                .collect();
            assert!(!ids.is_empty(), "{file}: {pattern} names ids");
            let (by_name, by_number) = (dir.path().join("n.exr"), dir.path().join("i.exr"));
            let flag = if invert { "--invert" } else { "--band-rows" };
            let extra = if invert { "--invert" } else { "5" };
            let name_text = format!("id={pattern}");
            let number_text = format!("id={}", ids.join(","));
            for (text, out) in [(&name_text, &by_name), (&number_text, &by_number)] {
                let mut args = vec!["idselect", s(&path), "--id", text, "-o", s(out), flag];
                if !invert {
                    args.push(extra);
                }
                let (ok, _, err) = run(&args);
                assert!(ok, "{file} {text}: {err}");
            }
            assert_eq!(
                std::fs::read(&by_name).unwrap(),
                std::fs::read(&by_number).unwrap(),
                "{file}: {pattern}"
            );
        }
    }
    // Names and numbers mix: a name and the number of one id it does not name.
    let path = data("openexr/11.deep.exr");
    let (ok, _, err) = run(&[
        "idselect",
        s(&path),
        "--id",
        "id=blob/*,523461226",
        "-o",
        s(&dir.path().join("mixed.exr")),
    ]);
    assert!(ok, "{err}");
}

/// A shell pattern's match, written out for the test: `*` any run, `?` one character (the
/// patterns used here have no brackets).
fn glob_match(pattern: &str, text: &str) -> bool {
    fn go(p: &[char], t: &[char]) -> bool {
        match p.split_first() {
            None => t.is_empty(),
            Some(('*', rest)) => (0..=t.len()).any(|k| go(rest, &t[k..])),
            Some(('?', rest)) => !t.is_empty() && go(rest, &t[1..]),
            Some((c, rest)) => t.first() == Some(c) && go(rest, &t[1..]),
        }
    }
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    go(&p, &t)
}

#[test]
fn unknown_names_are_one_line_errors_naming_file_and_name() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.exr");
    let path = data("openexr/11.deep.exr");
    // A file with ids but no manifest.
    let bare = dir.path().join("bare.exr");
    write_deep(&bare, &ids_image(), Codec::None).unwrap();
    let bare_id = ids_image()
        .channels
        .iter()
        .find(|c| c.sample_type == SampleType::U32)
        .unwrap()
        .name
        .clone();
    let bare_text = format!("{bare_id}=chair*");
    for (input, text, says) in [
        (
            &path,
            "id=chair*",
            "no id of channel \"id\" in its idManifest is named \"chair*\"",
        ),
        (
            &path,
            "particleid=blob*",
            "the manifest gives them no names",
        ),
        (&bare, bare_text.as_str(), "has no idManifest attribute"),
    ] {
        let (ok, _, err) = run(&["idselect", s(input), "--id", text, "-o", s(&out)]);
        assert!(!ok, "{text}");
        assert!(
            err.contains(says) && err.contains(s(input)),
            "{text}: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{text}: {err}");
        assert!(!out.exists(), "{text} wrote a file");
    }
}
