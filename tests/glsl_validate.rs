//! Every shader stage in `glsl/`, under every combination of `#define`s the program loader
//! produces, compiled by a GLSL front end that needs no GL context: `glslangValidator` (Debian's
//! `glslang-tools`). A shader error therefore fails `cargo test` on any machine, not only where a
//! GL context exists. The sources are the loader's own ([`resolve`]: includes inlined, the shared
//! vocabulary's defines first), so what is checked is exactly what the driver would be given.
//!
//! The variants are one list, [`stages`]: per stage, the axes of defines its loader sets (in
//! `src/gpu/*.rs` and `src/view/gpu.rs`). Structural axes (layouts, methods, output kinds, modes,
//! input counts) are combined in full; numeric axes (block sizes, column tables) cycle through
//! that product, so every value meets every structural choice without multiplying the count. A
//! new define is one more axis in the list; a define a shader tests in `#if` that no variant
//! sets fails [`conditionals_test_only_defined_macros`], since GLSL silently reads an undefined
//! macro there as 0.
//!
//! Fast: the variants are written to a temporary folder and compiled by one validator process
//! per core, many files each.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use deepmerge::gpu::program::{resolve, Defines};
use deepmerge::gpu::resident::ColumnSpec;
use deepmerge::gpu::scan::SCAN_GROUP;
use deepmerge::gpu::stages::GLSL_FILES;
use deepmerge::gpu::tidy::WORK_BUDGET;
use deepmerge::vocab::{
    FlagField, Layout, GATE_LIMIT, GROUP_SIZE, LOCAL_GROUP_SIZE, LOCAL_SORT_SIZE, MAX_BLOCK_SIZE,
    MAX_KWAY_INPUTS, REG_SORT_SIZE,
};

/// The validator and the Debian package that has it.
const VALIDATOR: &str = "glslangValidator";
const VALIDATOR_PACKAGE: &str = "glslang-tools";

/// One choice on an axis: the defines it sets.
type Choice = Vec<(String, String)>;

/// The values one define (or a group of defines set together) takes.
struct Axis(Vec<Choice>);

/// `name` takes each of `values`.
fn axis<T: ToString>(name: &str, values: impl IntoIterator<Item = T>) -> Axis {
    Axis(
        values
            .into_iter()
            .map(|v| vec![(name.to_string(), v.to_string())])
            .collect(),
    )
}

/// A single fixed define.
fn fixed<T: ToString>(name: &str, value: T) -> Axis {
    axis(name, [value])
}

/// How one stage is specialised: `product` axes are combined in full, `cycled` axes take their
/// choices in turn over that product.
struct Stage {
    file: &'static str,
    product: Vec<Axis>,
    cycled: Vec<Axis>,
}

/// The image binding block of `engine::layout_defines`: `{NAME}_LAYOUT`, `{NAME}_ACCESS` and
/// five bindings from `binding`, one choice per layout.
fn image_axis(name: &str, layouts: &[Layout], binding: u32, access: &str) -> Axis {
    Axis(
        layouts
            .iter()
            .map(|layout| {
                let mut choice = vec![
                    (format!("{name}_LAYOUT"), layout.glsl_id().to_string()),
                    (format!("{name}_ACCESS"), access.to_string()),
                ];
                for k in 0..5 {
                    choice.push((format!("{name}_BINDING_{k}"), (binding + k).to_string()));
                }
                choice
            })
            .collect(),
    )
}

/// The merge output: flat (an LA-shaped binding block, `OUTPUT_DEEP 0`) or deep in each layout.
fn output_axis() -> Axis {
    let Axis(deep) = image_axis("OUT", &Layout::ALL, 10, "");
    let Axis(flat) = image_axis("OUT", &[Layout::Linearised], 10, "");
    let mut choices: Vec<Choice> = flat
        .into_iter()
        .map(|mut c| {
            c.push(("OUTPUT_DEEP".into(), "0".into()));
            c
        })
        .collect();
    choices.extend(deep.into_iter().map(|mut c| {
        c.push(("OUTPUT_DEEP".into(), "1".into()));
        c
    }));
    Axis(choices)
}

/// Column tables as `ColumnSpec::defines` writes them: none (stride 1, no alphas), alpha only,
/// RGBA under one alpha, and colours with their own alphas (RA, GA, BA).
fn column_tables() -> Vec<ColumnSpec> {
    vec![
        ColumnSpec { alpha_of: vec![] },
        ColumnSpec {
            alpha_of: vec![None],
        },
        ColumnSpec {
            alpha_of: vec![None, Some(0), Some(0), Some(0)],
        },
        ColumnSpec {
            alpha_of: vec![None, None, None, Some(0), Some(1), Some(2)],
        },
    ]
}

fn columns_axis() -> Axis {
    Axis(
        column_tables()
            .iter()
            .map(|spec| spec.defines(Defines::default()).0)
            .collect(),
    )
}

/// Block sizes: 1 (what layouts other than BIA get), an odd one, a middle one and the largest.
fn block_axis() -> Axis {
    axis("BLOCK_SIZE", [1, 3, 8, MAX_BLOCK_SIZE])
}

/// Input counts of a k-way merge: one, two, an odd middle and the most.
fn kway_inputs() -> Vec<usize> {
    vec![1, 2, 5, MAX_KWAY_INPUTS]
}

/// The sort stages every sort runs (`gpu::sort::Stage`); values add a gather and a scatter.
const SORT_KEY_STAGES: [&str; 4] = ["STAGE_SHORT", "STAGE_CHECK", "STAGE_LOCAL", "STAGE_MERGE"];

/// The sort's fixed sizes, from the shared vocabulary.
fn sort_sizes() -> Axis {
    Axis(vec![vec![
        ("GROUP_SIZE".into(), GROUP_SIZE.to_string()),
        ("REG_SORT_SIZE".into(), REG_SORT_SIZE.to_string()),
        ("LOCAL_SORT_SIZE".into(), LOCAL_SORT_SIZE.to_string()),
        ("LOCAL_GROUP_SIZE".into(), LOCAL_GROUP_SIZE.to_string()),
    ]])
}

/// THE list: every stage and the defines its loader gives it.
fn stages() -> Vec<Stage> {
    let ia_bia = [Layout::Interleaved, Layout::BlockedInterleaved];
    let flag_fields = [FlagField::WORD, FlagField::NEEDS_TIDY_IN_FRONT];
    let view_defines = deepmerge::view::display::shader_defines();
    vec![
        // gpu::scan
        Stage {
            file: "scan.comp",
            product: vec![fixed("SCAN_GROUP", format!("{SCAN_GROUP}u"))],
            cycled: vec![],
        },
        Stage {
            file: "scan_add.comp",
            product: vec![fixed("SCAN_GROUP", format!("{SCAN_GROUP}u"))],
            cycled: vec![],
        },
        // gpu::resident: min counts of IA and BIA, the build, the counting passes, the merges.
        Stage {
            file: "min_counts.comp",
            product: vec![
                fixed("GROUP_SIZE", GROUP_SIZE),
                axis("LAYOUT", ia_bia.map(|l| l.glsl_id())),
            ],
            cycled: vec![block_axis()],
        },
        Stage {
            file: "gather_count.comp",
            product: vec![fixed("GROUP_SIZE", GROUP_SIZE), axis("PERMUTED", [0, 1])],
            cycled: vec![fixed("NUM_COLUMNS", 1)],
        },
        Stage {
            file: "gather.comp",
            product: vec![fixed("GROUP_SIZE", GROUP_SIZE), axis("PERMUTED", [0, 1])],
            cycled: vec![axis("NUM_COLUMNS", [1, 4, 6])],
        },
        Stage {
            file: "build.comp",
            product: vec![
                fixed("GROUP_SIZE", GROUP_SIZE),
                image_axis("OUT", &Layout::ALL, 0, ""),
                axis("LL_ASCENDING", [0, 1]),
            ],
            cycled: vec![block_axis(), axis("NUM_COLUMNS", [1, 4, 6])],
        },
        Stage {
            file: "count.comp",
            product: vec![fixed("GROUP_SIZE", GROUP_SIZE), fixed("BLOCK_SIZE", 1)],
            cycled: vec![],
        },
        Stage {
            file: "count_kway.comp",
            product: vec![
                fixed("GROUP_SIZE", GROUP_SIZE),
                fixed("BLOCK_SIZE", 1),
                axis("NUM_INPUTS", kway_inputs()),
                image_axis("IN", &Layout::ALL, 0, "readonly"),
            ],
            cycled: vec![],
        },
        Stage {
            file: "merge.comp",
            product: vec![
                fixed("GROUP_SIZE", GROUP_SIZE),
                axis("MERGE_METHOD", [0, 1]),
                axis("MERGE_DESC", [0, 1]),
                axis("RBM_SHIFT", [0, 1]),
                image_axis("A", &Layout::ALL, 0, "readonly"),
                image_axis("B", &Layout::ALL, 5, "readonly"),
                output_axis(),
            ],
            cycled: vec![block_axis(), columns_axis(), axis("LONG_LISTS", [0, 1])],
        },
        // gpu::merge::coop: the long pixels merge.comp listed, a workgroup each.
        Stage {
            file: "merge_coop.comp",
            product: vec![
                fixed("GROUP_SIZE", GROUP_SIZE),
                fixed("COOP_GROUP", 64),
                fixed("MERGE_METHOD", 0),
                fixed("RBM_SHIFT", 0),
                axis("MERGE_DESC", [0, 1]),
                image_axis("A", &Layout::ALL, 0, "readonly"),
                image_axis("B", &Layout::ALL, 5, "readonly"),
                output_axis(),
            ],
            cycled: vec![block_axis(), columns_axis()],
        },
        Stage {
            file: "merge_kway.comp",
            product: vec![
                fixed("GROUP_SIZE", GROUP_SIZE),
                axis("NUM_INPUTS", kway_inputs()),
                image_axis("IN", &Layout::ALL, 0, "readonly"),
                output_axis(),
            ],
            cycled: vec![block_axis(), columns_axis()],
        },
        // gpu::sort: without values (NUM_COLUMNS 1), the four key stages; with values, also
        // the gather and scatter of the values.
        Stage {
            file: "sort.comp",
            product: vec![
                axis("STAGE", SORT_KEY_STAGES),
                sort_sizes(),
                axis("SERIAL_SORT_SIZE", [0, 128]),
                fixed("WITH_VALUES", 0),
                fixed("NUM_COLUMNS", 1),
            ],
            cycled: vec![],
        },
        Stage {
            file: "sort.comp",
            product: vec![
                axis(
                    "STAGE",
                    SORT_KEY_STAGES
                        .iter()
                        .chain(&["STAGE_GATHER", "STAGE_SCATTER"]),
                ),
                sort_sizes(),
                axis("SERIAL_SORT_SIZE", [0, 128]),
                fixed("WITH_VALUES", 1),
            ],
            cycled: vec![axis("NUM_COLUMNS", [1, 4, 6])],
        },
        // gpu::tidy and gpu::compact
        Stage {
            file: "tidy.comp",
            product: vec![
                fixed("GROUP_SIZE", GROUP_SIZE),
                fixed("WORK_BUDGET", WORK_BUDGET),
                axis("TIDY_MODE", [0, 1, 2]),
                columns_axis(),
            ],
            cycled: vec![],
        },
        Stage {
            file: "tidy_assemble.comp",
            product: vec![
                fixed("GROUP_SIZE", GROUP_SIZE),
                axis("STAGE", 0..4),
                fixed("GATE_LIMIT", GATE_LIMIT),
            ],
            cycled: vec![axis("NUM_COLUMNS", [1, 4, 6])],
        },
        Stage {
            file: "compact.comp",
            product: vec![
                fixed("GROUP_SIZE", GROUP_SIZE),
                axis("STAGE", [0, 1]),
                Axis(
                    flag_fields
                        .iter()
                        .map(|f| {
                            vec![
                                ("FLAG_STRIDE".into(), f.stride.to_string()),
                                ("FLAG_COMPONENT".into(), f.component.to_string()),
                                ("FLAG_MASK".into(), format!("{:#x}u", f.mask)),
                            ]
                        })
                        .collect(),
                ),
            ],
            cycled: vec![],
        },
        // gpu::buffer (zero fill) and bench::gl (the copy floor)
        Stage {
            file: "fill.comp",
            product: vec![],
            cycled: vec![],
        },
        Stage {
            file: "copy.comp",
            product: vec![],
            cycled: vec![],
        },
        // view::gpu: the depth slice and the image pass (vertex and fragment)
        Stage {
            file: "slice.comp",
            product: vec![fixed("GROUP_SIZE_VIEW", 64), columns_axis()],
            cycled: vec![],
        },
        Stage {
            file: "view_image.vert",
            product: vec![],
            cycled: vec![],
        },
        Stage {
            file: "view_image.frag",
            product: vec![
                columns_axis(),
                Axis(vec![view_defines
                    .iter()
                    .map(|(n, v)| (n.to_string(), v.clone()))
                    .collect()]),
            ],
            cycled: vec![],
        },
    ]
}

/// One program to compile: its stage file and defines.
struct Variant {
    file: &'static str,
    defines: Defines,
}

impl Variant {
    fn describe(&self) -> String {
        let defines: Vec<String> = self
            .defines
            .0
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        format!("glsl/{} [{}]", self.file, defines.join(" "))
    }
}

/// Every variant of every stage: the product of `product`, with `cycled` taking turns.
fn variants() -> Vec<Variant> {
    let mut out = Vec::new();
    for stage in stages() {
        let mut combos: Vec<Choice> = vec![Vec::new()];
        for Axis(choices) in &stage.product {
            combos = combos
                .iter()
                .flat_map(|base| {
                    choices.iter().map(move |c| {
                        let mut next = base.clone();
                        next.extend(c.iter().cloned());
                        next
                    })
                })
                .collect();
        }
        for (i, mut combo) in combos.into_iter().enumerate() {
            // Each cycled axis turns at its own pace (i, i / n0, ...), so pairs of them vary too.
            let mut turn = i;
            for Axis(choices) in &stage.cycled {
                combo.extend(choices[turn % choices.len()].iter().cloned());
                turn /= choices.len().max(1);
                turn += i;
            }
            out.push(Variant {
                file: stage.file,
                defines: Defines(combo),
            });
        }
    }
    out
}

fn glsl_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("glsl")
}

/// Every stage (.comp, .vert, .frag) and every include (.glsl), from the registry
/// (`deepmerge::gpu::stages`), which [`the_registry_lists_every_glsl_file_and_real_twins`]
/// holds to the folder.
fn glsl_files() -> (BTreeSet<String>, BTreeSet<String>) {
    let mut stages = BTreeSet::new();
    let mut includes = BTreeSet::new();
    for file in GLSL_FILES {
        let name = file.name.to_string();
        if name.ends_with(".glsl") {
            includes.insert(name);
        } else {
            stages.insert(name);
        }
    }
    (stages, includes)
}

/// The registry names every file in `glsl/` and nothing else, each dispatched stage has a
/// profile label, and every twin it names exists: `a::b::name` is a `fn name` or a type `name`
/// in `src/a/b.rs` (or `src/a/b/mod.rs`).
#[test]
fn the_registry_lists_every_glsl_file_and_real_twins() {
    let on_disk: BTreeSet<String> = std::fs::read_dir(glsl_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let listed: BTreeSet<String> = GLSL_FILES.iter().map(|f| f.name.to_string()).collect();
    assert_eq!(
        on_disk, listed,
        "glsl/ and src/gpu/stages.rs must list the same files"
    );
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for file in GLSL_FILES {
        if file.name.ends_with(".comp") {
            assert!(
                deepmerge::gpu::STAGES.contains(&file.profile),
                "{}: profile label {:?}",
                file.name,
                file.profile
            );
        }
        for twin in file
            .twin
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
        {
            let parts: Vec<&str> = twin.split("::").collect();
            let (item, module) = parts.split_last().unwrap();
            let path = module.join("/");
            let text = std::fs::read_to_string(src.join(format!("{path}.rs")))
                .or_else(|_| std::fs::read_to_string(src.join(&path).join("mod.rs")))
                .unwrap_or_else(|_| panic!("{}: twin {twin}: no module src/{path}", file.name));
            assert!(
                [
                    format!("fn {item}("),
                    format!("struct {item} "),
                    format!("struct {item}<")
                ]
                .iter()
                .any(|decl| text.contains(decl.as_str())),
                "{}: twin {twin}: src/{path} has no {item}",
                file.name
            );
        }
    }
}

#[test]
fn every_stage_and_include_has_variants() {
    let (stages, includes) = glsl_files();
    let variants = variants();
    let mut reached = BTreeSet::new();
    for v in &variants {
        let (_, files) = resolve(v.file, &v.defines).unwrap();
        reached.extend(files);
    }
    for stage in &stages {
        assert!(
            variants.iter().any(|v| v.file == stage),
            "glsl/{stage} has no variant: add it to `stages()` in tests/glsl_validate.rs"
        );
    }
    for include in &includes {
        assert!(
            reached.contains(include),
            "glsl/{include} is included by no stage variant"
        );
    }
}

/// The identifiers of a preprocessor expression (`defined` and numbers left out).
fn identifiers(expression: &str) -> impl Iterator<Item = &str> {
    expression
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty() && !w.starts_with(|c: char| c.is_ascii_digit()))
        .filter(|w| *w != "defined")
}

#[test]
fn conditionals_test_only_defined_macros() {
    let mut missing = BTreeSet::new();
    for v in variants() {
        let (text, _) = resolve(v.file, &v.defines).unwrap();
        let defined: BTreeSet<&str> = text
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("#define"))
            .filter_map(|rest| rest.split_whitespace().next())
            .map(|name| name.split('(').next().unwrap())
            .collect();
        for line in text.lines() {
            let line = line.trim_start();
            // #ifdef / #ifndef ask on purpose whether a macro is there; #if / #elif read values.
            let Some(expression) = line
                .strip_prefix("#if ")
                .or_else(|| line.strip_prefix("#elif "))
                .or_else(|| line.strip_prefix("#if("))
                .or_else(|| line.strip_prefix("#if!"))
            else {
                continue;
            };
            for name in identifiers(expression) {
                if !defined.contains(name) {
                    missing.insert(format!("glsl/{} reads {name}", v.file));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "macros read in #if that no variant defines (GLSL takes them as 0); add them to \
         `stages()` in tests/glsl_validate.rs:\n{}",
        missing.into_iter().collect::<Vec<_>>().join("\n")
    );
}

/// Run the validator on `files`; its report of each file that failed, by file.
fn validate(files: &[PathBuf]) -> HashMap<PathBuf, String> {
    let output = match Command::new(VALIDATOR).args(files).output() {
        Ok(output) => output,
        Err(e) => panic!(
            "{VALIDATOR} is needed to check the shaders without a GPU ({e}): \
             apt-get install {VALIDATOR_PACKAGE}"
        ),
    };
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    // The validator prints each file's name, then its messages.
    let by_name: HashMap<String, &PathBuf> = files
        .iter()
        .map(|f| (f.to_string_lossy().into_owned(), f))
        .collect();
    let mut failed: HashMap<PathBuf, String> = HashMap::new();
    let mut current: Option<&PathBuf> = None;
    for line in text.lines() {
        if let Some(f) = by_name.get(line.trim()) {
            current = Some(f);
        } else if line.contains("ERROR") {
            let key = current.cloned().unwrap_or_default();
            failed
                .entry(key)
                .or_default()
                .push_str(&format!("{line}\n"));
        }
    }
    if !output.status.success() && failed.is_empty() {
        failed.insert(
            PathBuf::new(),
            format!("{VALIDATOR} exited with {}:\n{text}", output.status),
        );
    }
    failed
}

#[test]
fn every_variant_compiles_without_a_gpu() {
    let variants = variants();
    let dir = tempfile::tempdir().unwrap();
    let mut paths = Vec::new();
    let mut tables = Vec::new();
    for (i, v) in variants.iter().enumerate() {
        let (text, files) = resolve(v.file, &v.defines).unwrap();
        // The validator takes the stage from the extension.
        let extension = v.file.rsplit_once('.').unwrap().1;
        let path = dir.path().join(format!("v{i:05}.{extension}"));
        std::fs::write(&path, text).unwrap();
        paths.push(path);
        tables.push(files);
    }
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let chunk = paths.len().div_ceil(workers).max(1);
    let failed: Vec<(PathBuf, String)> = std::thread::scope(|scope| {
        let handles: Vec<_> = paths
            .chunks(chunk)
            .map(|files| scope.spawn(move || validate(files)))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let index_of: HashMap<&PathBuf, usize> =
        paths.iter().enumerate().map(|(i, p)| (p, i)).collect();
    let mut report = Vec::new();
    for (path, messages) in &failed {
        match index_of.get(path) {
            Some(&i) => {
                // Messages say `ERROR: N:LINE`: N is a source number of this table.
                let table: Vec<String> = tables[i]
                    .iter()
                    .enumerate()
                    .map(|(n, f)| format!("{n}={f}"))
                    .collect();
                report.push(format!(
                    "{} (sources {}):\n{messages}",
                    variants[i].describe(),
                    table.join(" ")
                ));
            }
            None => report.push(messages.clone()),
        }
    }
    report.sort();
    assert!(
        report.is_empty(),
        "{} of {} shader variants failed to compile:\n{}",
        report.len(),
        variants.len(),
        report.into_iter().take(20).collect::<Vec<_>>().join("\n")
    );
    // Not a vacuous pass: the list holds every stage, and the validator did read the files.
    assert!(variants.len() > 100, "{} variants", variants.len());
}

#[test]
fn the_validator_rejects_a_broken_shader() {
    // The harness must see an error when there is one, or the test above proves nothing.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.comp");
    std::fs::write(
        &path,
        "#version 430 core\nlayout(local_size_x = 1) in;\nvoid main() { undeclared = 1; }\n",
    )
    .unwrap();
    let failed = validate(std::slice::from_ref(&path));
    let messages = failed
        .get(&path)
        .expect("the broken shader must be reported");
    assert!(messages.contains("undeclared"), "{messages}");
}
