//! `deepmerge comp` (issue 27): a graph in one streamed pass writes, byte for byte, what the
//! same steps write through intermediate files with the CLI, on the corpus and on the 1080p
//! scenes, on both engines (GL in strict mode, `common::deepmerge`); row-moving transforms;
//! sequences; and the script's refusals, each naming its line before any file is read.

mod common;
mod timeline_spans;

use std::path::{Path, PathBuf};

use timeline_spans::Span;

use common::{data, run};

/// Run the CLI; panic with its stderr unless it succeeds.
fn ok(args: &[&str]) -> String {
    let (ok, out, err) = run(args);
    assert!(ok, "deepmerge {}: {err}", args.join(" "));
    out
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Whether two files hold the same bytes (reported without them).
fn same(a: &Path, b: &Path) -> bool {
    std::fs::read(a).unwrap() == std::fs::read(b).unwrap()
}

/// The inputs of the six-node graph: two character layers, a set, a flat grade, volumes.
struct Six {
    chars_a: PathBuf,
    chars_b: PathBuf,
    set: PathBuf,
    grade: PathBuf,
    volumes: PathBuf,
    far: f32,
}

/// The six-node graph of issue 27: merge the characters, hold them out by the set, grade
/// (recolor by a flat image), slice off the far background, merge the volumes, flatten. Every
/// node is an output too, so each step's bytes are compared; the flat composite comes first.
fn six_node_script(six: &Six, backend: &str, out: &Path) -> String {
    let p = |name: &str| out.join(name).display().to_string();
    format!(
        r#"
[input.chars_a]
path = "{}"
[input.chars_b]
path = "{}"
[input.set]
path = "{}"
[input.grade]
path = "{}"
[input.volumes]
path = "{}"

[node.chars]
op = "merge"
inputs = ["chars_a", "chars_b"]
deep = true
backend = "{backend}"

[node.held]
op = "holdout"
input = "chars"
holdout = "set"

[node.graded]
op = "recolor"
input = "held"
flat = "grade"

[node.near]
op = "slice"
input = "graded"
far = {}

[node.all]
op = "merge"
inputs = ["near", "volumes"]
deep = true
backend = "{backend}"

[node.comp]
op = "flatten"
input = "all"

[[output]]
node = "comp"
path = "{}"
[[output]]
node = "chars"
path = "{}"
[[output]]
node = "held"
path = "{}"
compression = "rle"
[[output]]
node = "graded"
path = "{}"
[[output]]
node = "near"
path = "{}"
[[output]]
node = "all"
path = "{}"
"#,
        six.chars_a.display(),
        six.chars_b.display(),
        six.set.display(),
        six.grade.display(),
        six.volumes.display(),
        six.far,
        p("comp.exr"),
        p("chars.exr"),
        p("held.exr"),
        p("graded.exr"),
        p("near.exr"),
        p("all.exr"),
    )
}

/// The same six steps through files, one command each, into `dir`.
fn six_steps(six: &Six, backend: &str, dir: &Path) {
    let f = |name: &str| dir.join(name);
    ok(&[
        s(&six.chars_a),
        s(&six.chars_b),
        "--deep",
        "--backend",
        backend,
        "-o",
        s(&f("chars.exr")),
    ]);
    ok(&[
        "holdout",
        s(&f("chars.exr")),
        s(&six.set),
        "--compression",
        "rle",
        "-o",
        s(&f("held.exr")),
    ]);
    ok(&[
        "recolor",
        s(&f("held.exr")),
        s(&six.grade),
        "-o",
        s(&f("graded.exr")),
    ]);
    let far = six.far.to_string();
    ok(&[
        "slice",
        s(&f("graded.exr")),
        "--far",
        &far,
        "-o",
        s(&f("near.exr")),
    ]);
    ok(&[
        s(&f("near.exr")),
        s(&six.volumes),
        "--deep",
        "--backend",
        backend,
        "-o",
        s(&f("all.exr")),
    ]);
    ok(&["flatten", s(&f("all.exr")), "-o", s(&f("comp.exr"))]);
}

/// Run the six-node graph as a script and as steps, with `extra` comp arguments, and compare
/// every output.
fn six_equal_the_steps(six: &Six, backend: &str, extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let (graph_dir, steps_dir) = (dir.path().join("graph"), dir.path().join("steps"));
    std::fs::create_dir_all(&graph_dir).unwrap();
    std::fs::create_dir_all(&steps_dir).unwrap();
    let script = dir.path().join("six.toml");
    std::fs::write(&script, six_node_script(six, backend, &graph_dir)).unwrap();
    ok(&[&["comp", s(&script)][..], extra].concat());
    six_steps(six, backend, &steps_dir);
    for name in [
        "comp.exr",
        "chars.exr",
        "held.exr",
        "graded.exr",
        "near.exr",
        "all.exr",
    ] {
        assert!(
            same(&graph_dir.join(name), &steps_dir.join(name)),
            "{backend} {extra:?}: {name} differs from the steps' file"
        );
    }
    // The steps did something at each node: no two consecutive files are alike.
    assert!(!same(
        &steps_dir.join("held.exr"),
        &steps_dir.join("graded.exr")
    ));
    assert!(!same(
        &steps_dir.join("graded.exr"),
        &steps_dir.join("near.exr")
    ));
}

/// The corpus' six-node inputs: Balls and Leaves as the characters, Trunks as the set, the
/// flattened Leaves as the grade, multivariate.deep.exr's volumes.
fn corpus(dir: &Path) -> Six {
    let grade = dir.join("grade.exr");
    ok(&[
        "flatten",
        s(&data("openexr-images/Leaves.exr")),
        "-o",
        s(&grade),
    ]);
    Six {
        chars_a: data("openexr-images/Balls.exr"),
        chars_b: data("openexr-images/Leaves.exr"),
        set: data("openexr-images/Trunks.exr"),
        grade,
        volumes: data("openexr/multivariate.deep.exr"),
        far: 300.0,
    }
}

#[test]
fn the_six_node_graph_writes_the_steps_bytes_on_the_corpus() {
    let dir = tempfile::tempdir().unwrap();
    let six = corpus(dir.path());
    six_equal_the_steps(&six, "cpu", &[]);
    // Thin bands: every node's rows come in many pieces.
    six_equal_the_steps(&six, "cpu", &["--band-rows", "7"]);
}

#[test]
fn the_six_node_graph_writes_the_steps_bytes_with_gl_merges() {
    let dir = tempfile::tempdir().unwrap();
    let six = corpus(dir.path());
    six_equal_the_steps(&six, "gl", &["--band-rows", "64"]);
}

#[test]
fn the_six_node_graph_writes_the_steps_bytes_on_the_1080p_scenes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (scene, far) in [("powerplant", 30.0), ("atrium", 20.0)] {
        let prefix = d.join(scene);
        ok(&[
            "scene",
            scene,
            "--size",
            "1920x1080",
            "--inputs",
            "4",
            "-o",
            s(&prefix),
        ]);
        let input = |k: usize| PathBuf::from(format!("{}_{k}.exr", prefix.display()));
        let grade = d.join(format!("{scene}-grade.exr"));
        ok(&["flatten", s(&input(3)), "-o", s(&grade)]);
        let six = Six {
            chars_a: input(0),
            chars_b: input(2),
            set: input(1),
            grade,
            volumes: input(3),
            far,
        };
        six_equal_the_steps(&six, "cpu", &[]);
    }
}

#[test]
fn transforms_read_the_rows_they_need_across_bands() {
    // One input read at two shifts (moved, and as it is) and a crop after the move: the rows a
    // band needs come from bands above and below it.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let balls = data("openexr-images/Balls.exr");
    let leaves = data("openexr-images/Leaves.exr");
    let script = d.join("moved.toml");
    std::fs::write(
        &script,
        format!(
            r#"
[input.balls]
path = "{}"
[input.leaves]
path = "{}"
[node.down]
op = "transform"
input = "balls"
translate = [7, 45]
z_offset = 1.5
[node.up]
op = "transform"
input = "leaves"
translate = "-3,-30"
[node.boxed]
op = "crop"
input = "up"
box = [100, 50, 700, 400]
[node.both]
op = "merge"
inputs = ["down", "balls", "boxed"]
[[output]]
node = "both"
path = "{}"
[[output]]
node = "down"
path = "{}"
[[output]]
node = "balls"
path = "{}"
"#,
            balls.display(),
            leaves.display(),
            d.join("graph.exr").display(),
            d.join("graph-down.exr").display(),
            d.join("graph-balls.exr").display()
        ),
    )
    .unwrap();
    for rows in ["5", "64"] {
        ok(&["comp", s(&script), "--band-rows", rows]);
        ok(&[
            "transform",
            s(&balls),
            "--translate",
            "7,45",
            "--z-offset",
            "1.5",
            "-o",
            s(&d.join("down.exr")),
        ]);
        ok(&[
            "transform",
            s(&leaves),
            "--translate=-3,-30",
            "-o",
            s(&d.join("up.exr")),
        ]);
        ok(&[
            "crop",
            s(&d.join("up.exr")),
            "--box",
            "100,50,700,400",
            "-o",
            s(&d.join("boxed.exr")),
        ]);
        ok(&[
            s(&d.join("down.exr")),
            s(&balls),
            s(&d.join("boxed.exr")),
            "-o",
            s(&d.join("steps.exr")),
        ]);
        assert!(
            same(&d.join("graph.exr"), &d.join("steps.exr")),
            "rows {rows}"
        );
        assert!(
            same(&d.join("graph-down.exr"), &d.join("down.exr")),
            "rows {rows}"
        );
        // An input written as it is: the bytes of a crop to its own data window.
        ok(&[
            "crop",
            s(&balls),
            "--box",
            "131,170,894,575",
            "-o",
            s(&d.join("balls.exr")),
        ]);
        assert!(
            same(&d.join("graph-balls.exr"), &d.join("balls.exr")),
            "rows {rows}"
        );
    }
}

/// Frames 1-3 of two inputs in `d` (`a.####.exr`, `b.####.exr`: the corpus's Balls, Leaves
/// and Trunks in turn) and `seq.toml`, which merges them (on `backend`, or the default) into
/// `out.####.exr` (relative paths are the script's folder's); returns the script's path.
fn sequence_in(d: &Path, backend: Option<&str>) -> PathBuf {
    let backend = backend.map_or(String::new(), |b| format!("backend = \"{b}\""));
    let files = [
        data("openexr-images/Balls.exr"),
        data("openexr-images/Leaves.exr"),
        data("openexr-images/Trunks.exr"),
    ];
    for f in 1..=3 {
        std::fs::copy(&files[f - 1], d.join(format!("a.{f:04}.exr"))).unwrap();
        std::fs::copy(&files[f % 3], d.join(format!("b.{f:04}.exr"))).unwrap();
    }
    let script = d.join("seq.toml");
    std::fs::write(
        &script,
        format!(
            r#"
[input.a]
path = "a.####.exr"
[input.b]
path = "b.####.exr"
[node.m]
op = "merge"
inputs = ["a", "b"]
{backend}
[[output]]
node = "m"
path = "out.####.exr"
"#
        ),
    )
    .unwrap();
    script
}

/// Each of `frames` of [`sequence_in`]'s output holds the bytes the merge command (with
/// `extra` options) writes from that frame's two inputs; `what` ends a failure's message.
fn frames_equal_single_merges(
    d: &Path,
    frames: std::ops::RangeInclusive<usize>,
    extra: &[&str],
    what: &str,
) {
    for f in frames {
        let single = d.join(format!("single.{f}.exr"));
        let a = d.join(format!("a.{f:04}.exr"));
        let b = d.join(format!("b.{f:04}.exr"));
        let mut args = vec![s(&a), s(&b)];
        args.extend(extra);
        args.extend(["-o", s(&single)]);
        ok(&args);
        assert!(
            same(&d.join(format!("out.{f:04}.exr")), &single),
            "frame {f}{what}"
        );
    }
}

#[test]
fn frames_run_the_graph_per_frame_with_farm_progress() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let script = sequence_in(d, None);
    let out = ok(&[
        "comp",
        s(&script),
        "--frames",
        "1-3",
        "--progress",
        "openjd",
    ]);
    assert!(out.contains("openjd_progress: 100"), "{out}");
    frames_equal_single_merges(d, 1..=3, &[], "");
    // A token without --frames, and --frames without a token, are usage errors.
    let out = common::deepmerge()
        .args(["comp", s(&script)])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--frames"));
}

/// The rows `a..=b` a span names after `prefix` ("decode rows 0..=63", "work rows 0..=63",
/// "encode rows 0..=63 of output 0"), as `(a, b)`.
fn rows_of(span: &Span, prefix: &str) -> Option<(i64, i64)> {
    let rest = span.what.strip_prefix(prefix)?;
    let range = rest.split_whitespace().next()?;
    let (a, b) = range.split_once("..=")?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// The bands of a comp run's timeline, in order, each with its spans' (start, end) in ms:
/// (decode, work, encode).
type BandTimes = Vec<((f64, f64), (f64, f64), (f64, f64))>;

fn band_times(spans: &[Span]) -> BandTimes {
    let find = |prefix: &str, thread: &str, rows: (i64, i64)| {
        let found: Vec<&Span> = spans
            .iter()
            .filter(|s| s.thread == thread && rows_of(s, prefix) == Some(rows))
            .collect();
        assert_eq!(found.len(), 1, "one span '{prefix}{rows:?}' on {thread}");
        (found[0].start, found[0].start + found[0].took)
    };
    spans
        .iter()
        .filter(|s| s.thread == "main")
        .filter_map(|s| rows_of(s, "work rows "))
        .map(|rows| {
            (
                find("decode rows ", "reader", rows),
                find("work rows ", "main", rows),
                find("encode rows ", "writer", rows),
            )
        })
        .collect()
}

/// A GL graph run over frames makes one context for them all, started on a helper while the
/// first frame's inputs are opened; the reader decodes the bands ahead while it is made, never
/// more than the three the plan counts (`DEEPMERGE_READ_AHEAD=0`: one, handed over as before);
/// every frame has the CPU merge's bytes.
#[test]
fn gl_frames_share_one_context_and_the_reader_decodes_ahead_while_it_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let script = sequence_in(d, Some("gl"));
    for read_ahead in ["1", "0"] {
        let out = common::deepmerge()
            .args(["comp", s(&script), "--frames", "1-2", "--band-rows", "64"])
            .env("DEEPMERGE_TIMELINE", "1")
            .env("DEEPMERGE_READ_AHEAD", read_ahead)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        let spans = timeline_spans::spans(&err);
        let count = |what: &str| spans.iter().filter(|s| s.what == what).count();
        assert_eq!(count("GL context"), 1, "one context made: {err}");
        assert_eq!(count("make the GL context current"), 1, "{err}");
        assert_eq!(count("GL context dropped"), 1, "{err}");
        assert_eq!(count("finish the output files"), 2, "two frames: {err}");
        // The first frame's bands.
        let first_frame_end = spans
            .iter()
            .position(|s| s.what == "finish the output files")
            .expect("a finished frame");
        let bands = band_times(&spans[..first_frame_end]);
        assert!(bands.len() >= 6, "several bands: {err}");
        // Rounding to 0.1 ms in the timeline.
        let after = |a: f64, b: f64| a + 0.2 >= b;
        for k in 0..bands.len() {
            if read_ahead == "1" && k >= 3 {
                // A band is decoded only once a band three before it is written.
                assert!(after(bands[k].0 .0, bands[k - 3].2 .1), "band {k}: {err}");
            }
            if read_ahead == "0" && k >= 2 {
                // Handed over: decoded only once the band before the one before is worked.
                assert!(after(bands[k].0 .0, bands[k - 2].1 .1), "band {k}: {err}");
            }
        }
        if read_ahead == "1" {
            // While the first band waits for the context (tens of ms on llvmpipe), the
            // reader decodes the next two (about a millisecond each).
            assert!(
                bands[2].0 .1 < bands[0].1 .1,
                "the third band decoded before the first is worked: {err}"
            );
        }
        let what = format!(", DEEPMERGE_READ_AHEAD={read_ahead}");
        frames_equal_single_merges(d, 1..=2, &["--backend", "cpu"], &what);
    }
}

/// The refusal of `script`, which must exit 2 with one line.
fn refusal(script: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, script).unwrap();
    let out = common::deepmerge()
        .args(["comp", s(&path)])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let prefix = format!("deepmerge: error: {}:", path.display());
    assert!(err.starts_with(&prefix), "{err}");
    err[prefix.len()..].trim_end().to_string()
}

#[test]
fn script_errors_name_their_line_before_any_file_is_read() {
    // The input files do not exist: every refusal below comes before any is opened.
    let head = "[input.a]\npath = \"missing-a.exr\"\n[input.b]\npath = \"missing-b.exr\"\n";
    let out = "[[output]]\nnode = \"m\"\npath = \"out.exr\"\n";
    // A cycle.
    let e = refusal(&format!(
        "{head}[node.m]\nop = \"merge\"\ninputs = [\"a\", \"n\"]\ndeep = true\n[node.n]\nop = \"slice\"\ninput = \"m\"\nfar = 3\n{out}"
    ));
    assert!(e.contains("cycle: "), "{e}");
    assert!(e.starts_with("5: ") || e.starts_with("9: "), "{e}");
    // An unknown node.
    let e = refusal(&format!(
        "{head}[node.m]\nop = \"merge\"\ninputs = [\"a\", \"nobody\"]\n{out}"
    ));
    assert!(
        e.starts_with("7: ") && e.contains("no input or node is named nobody"),
        "{e}"
    );
    // An unknown op.
    let e = refusal(&format!(
        "{head}[node.m]\nop = \"blur\"\ninput = \"a\"\n{out}"
    ));
    assert!(
        e.starts_with("5: ") && e.contains("unknown op \"blur\""),
        "{e}"
    );
    // A missing input option.
    let e = refusal(&format!("{head}[node.m]\nop = \"slice\"\nfar = 2\n{out}"));
    assert!(
        e.starts_with("5: ") && e.contains("input is missing"),
        "{e}"
    );
    // A wrong option, and a wrong value.
    let e = refusal(&format!(
        "{head}[node.m]\nop = \"slice\"\ninput = \"a\"\nfar = 2\nfarr = 3\n{out}"
    ));
    assert!(
        e.starts_with("9: ") && e.contains("unknown option farr"),
        "{e}"
    );
    let e = refusal(&format!(
        "{head}[node.m]\nop = \"slice\"\ninput = \"a\"\nfar = \"x\"\n{out}"
    ));
    assert!(
        e.starts_with("8: ") && e.contains("far takes a number"),
        "{e}"
    );
    // Options that do not fit together, worded as the script spells them.
    let e = refusal(&format!(
        "{head}[node.m]\nop = \"merge\"\ninputs = [\"a\", \"b\"]\ntidy = true\n{out}"
    ));
    assert!(
        e.contains("tidy applies to deep output; add deep = true"),
        "{e}"
    );
    // A deep node read where flat samples are needed, a flat one where deep ones are.
    let e = refusal(&format!(
        "{head}[node.m]\nop = \"merge\"\ninputs = [\"a\", \"b\"]\n[node.s]\nop = \"slice\"\ninput = \"m\"\nfar = 1\n{out}"
    ));
    assert!(
        e.contains("m is a flat composite; slice reads deep samples"),
        "{e}"
    );
    // An output refused: options a PNG does not take.
    let e = refusal(&format!(
        "{head}[node.m]\nop = \"merge\"\ninputs = [\"a\", \"b\"]\n[[output]]\nnode = \"m\"\npath = \"x.png\"\ncompression = \"rle\"\n"
    ));
    assert!(
        e.starts_with("8: ") && e.contains("compression applies to EXR output"),
        "{e}"
    );
    // TOML itself.
    let e = refusal("[input.a]\npath = \n");
    assert!(e.starts_with("2: "), "{e}");
}

/// A copy of the repository's `examples/comp` in a temporary folder, with `tests/data` linked
/// beside it, so the scripts' relative paths resolve as in a fresh clone and their outputs land
/// in the copy.
fn examples_copy(root: &Path) -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let examples = root.join("examples/comp");
    std::fs::create_dir_all(&examples).unwrap();
    std::fs::create_dir_all(root.join("tests")).unwrap();
    std::os::unix::fs::symlink(repo.join("tests/data"), root.join("tests/data")).unwrap();
    for entry in std::fs::read_dir(repo.join("examples/comp")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            std::fs::copy(&path, examples.join(path.file_name().unwrap())).unwrap();
        }
    }
    examples
}

#[test]
fn the_examples_run_from_a_clone_and_write_the_steps_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let examples = examples_copy(dir.path());
    // Run from another folder: paths are the script's.
    ok(&["comp", s(&examples.join("two-input-merge.toml"))]);
    let merged = dir.path().join("merged.exr");
    ok(&[
        s(&data("openexr-images/Balls.exr")),
        s(&data("openexr-images/Leaves.exr")),
        "-o",
        s(&merged),
    ]);
    assert!(same(&examples.join("two-input-merge.exr"), &merged));

    ok(&["comp", s(&examples.join("six-node.toml"))]);
    let steps = dir.path().join("steps");
    std::fs::create_dir_all(&steps).unwrap();
    let six = Six {
        chars_a: data("openexr-images/Balls.exr"),
        chars_b: data("openexr-images/Leaves.exr"),
        set: data("openexr-images/Trunks.exr"),
        grade: data("openexr-images/composited.exr"),
        volumes: data("openexr/multivariate.deep.exr"),
        far: 300.0,
    };
    six_steps(&six, "cpu", &steps);
    assert!(same(
        &examples.join("six-node-comp.exr"),
        &steps.join("comp.exr")
    ));
    // The example's second output is deep, ZIPS (the steps' held.exr is RLE).
    let (ok_, _, err) = run(&[
        "holdout",
        s(&steps.join("chars.exr")),
        s(&six.set),
        "-o",
        s(&steps.join("held-zips.exr")),
    ]);
    assert!(ok_, "{err}");
    assert!(same(
        &examples.join("six-node-held.exr"),
        &steps.join("held-zips.exr")
    ));
}

/// A `grade` node (added with issue 26) writes what `deepmerge grade` writes, with a depth
/// mask, per-channel values and an id condition by number.
#[test]
fn a_grade_node_writes_the_grade_commands_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let input = data("oiio/input-crop.deep.exr");
    let by_command = dir.path().join("command.exr");
    ok(&[
        "grade",
        s(&input),
        "-o",
        s(&by_command),
        "--gain",
        "1.5,1,0.5",
        "--saturation",
        "0.3",
        "--near",
        "2",
        "--far",
        "40",
        "--ramp",
        "1",
    ]);
    let by_graph = dir.path().join("graph.exr");
    let script = dir.path().join("grade.toml");
    std::fs::write(
        &script,
        format!(
            r#"
[input.in]
path = "{}"

[node.graded]
op = "grade"
input = "in"
gain = "1.5,1,0.5"
saturation = 0.3
near = 2
far = 40
ramp = 1

[[output]]
node = "graded"
path = "{}"
"#,
            s(&input),
            s(&by_graph)
        ),
    )
    .unwrap();
    ok(&["comp", s(&script)]);
    assert!(same(&by_command, &by_graph), "the graph's grade differs");
    // A bad value is refused naming the script's line.
    std::fs::write(
        &script,
        "[input.in]\npath = \"x.exr\"\n[node.g]\nop = \"grade\"\ninput = \"in\"\ngamma = -1\n[[output]]\nnode = \"g\"\npath = \"y.exr\"\n",
    )
    .unwrap();
    let (good, _, err) = run(&["comp", s(&script)]);
    assert!(!good);
    assert!(
        err.contains("grade.toml:") && err.contains("gamma"),
        "{err}"
    );
}

#[test]
fn reformat_nodes_read_the_rows_their_footprints_cover_across_bands() {
    // A reformat moves rows by a scale: its band's output rows need input rows of other
    // bands, some of them twice. Down and up, box and nearest, under a translation, read twice
    // (reformatted and as it is) and merged with an input of another size; in bands of 1, 5
    // and 64 rows. The bytes are the steps'.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let balls = data("openexr-images/Balls.exr");
    let leaves = data("openexr-images/Leaves.exr");
    for (scale, filter) in [("0.5", "box"), ("2", "nearest"), ("0.37", "box")] {
        let script = d.join("reformat.toml");
        std::fs::write(
            &script,
            format!(
                r#"
[input.balls]
path = "{balls}"
[input.leaves]
path = "{leaves}"
[node.moved]
op = "transform"
input = "balls"
translate = [5, 17]
[node.scaled]
op = "reformat"
input = "moved"
scale = {scale}
filter = "{filter}"
[node.both]
op = "merge"
inputs = ["scaled", "leaves", "balls"]
deep = true
[[output]]
node = "both"
path = "{both}"
[[output]]
node = "scaled"
path = "{scaled}"
"#,
                balls = balls.display(),
                leaves = leaves.display(),
                both = d.join("graph.exr").display(),
                scaled = d.join("graph-scaled.exr").display(),
            ),
        )
        .unwrap();
        ok(&[
            "transform",
            s(&balls),
            "--translate",
            "5,17",
            "-o",
            s(&d.join("moved.exr")),
        ]);
        ok(&[
            "reformat",
            s(&d.join("moved.exr")),
            "--scale",
            scale,
            "--filter",
            filter,
            "-o",
            s(&d.join("scaled.exr")),
        ]);
        ok(&[
            s(&d.join("scaled.exr")),
            s(&leaves),
            s(&balls),
            "--deep",
            "-o",
            s(&d.join("steps.exr")),
        ]);
        for rows in ["1", "5", "64"] {
            ok(&["comp", s(&script), "--band-rows", rows]);
            let what = format!("scale {scale} {filter} rows {rows}");
            assert!(
                same(&d.join("graph-scaled.exr"), &d.join("scaled.exr")),
                "{what}: the reformat node"
            );
            assert!(
                same(&d.join("graph.exr"), &d.join("steps.exr")),
                "{what}: the merge after it"
            );
        }
    }
}

#[test]
fn a_crop_node_that_leaves_nothing_writes_the_commands_empty_image() {
    // As the command: the box with no samples, and a merge over it sees nothing there.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let balls = data("openexr-images/Balls.exr");
    let script = d.join("empty.toml");
    std::fs::write(
        &script,
        format!(
            r#"
[input.balls]
path = "{balls}"
[node.outside]
op = "crop"
input = "balls"
box = [5000, 5000, 5009, 5004]
[node.both]
op = "merge"
inputs = ["outside", "balls"]
[[output]]
node = "outside"
path = "{outside}"
[[output]]
node = "both"
path = "{both}"
"#,
            balls = balls.display(),
            outside = d.join("graph-outside.exr").display(),
            both = d.join("graph-both.exr").display(),
        ),
    )
    .unwrap();
    ok(&["comp", s(&script), "-q"]);
    ok(&[
        "crop",
        s(&balls),
        "--box",
        "5000,5000,5009,5004",
        "-q",
        "-o",
        s(&d.join("outside.exr")),
    ]);
    ok(&[
        s(&d.join("outside.exr")),
        s(&balls),
        "-o",
        s(&d.join("both.exr")),
    ]);
    assert!(same(&d.join("graph-outside.exr"), &d.join("outside.exr")));
    assert!(same(&d.join("graph-both.exr"), &d.join("both.exr")));
}
