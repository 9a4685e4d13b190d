//! Every shader stage in `glsl/`, under every combination of `#define`s the program loader
//! produces, compiled by a GLSL front end that needs no GL context: `glslangValidator` (Debian's
//! `glslang-tools`). A shader error therefore fails `cargo test` on any machine, not only where a
//! GL context exists. The sources are the loader's own ([`resolve`]: includes inlined, the shared
//! vocabulary's defines first), so what is checked is exactly what the driver would be given.
//!
//! The variants are the registry's ([`GLSL_FILES`], `src/gpu/stages/defines.rs`): per stage,
//! the axes of defines its loader sets. A define a shader tests in `#if` that no variant sets
//! fails [`conditionals_test_only_defined_macros`], since GLSL silently reads an undefined macro
//! there as 0.
//!
//! Fast: the variants are written to a temporary folder and compiled by one validator process
//! per core, many files each.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use deepmerge::gpu::program::{resolve, Defines};
use deepmerge::gpu::stages::GLSL_FILES;

/// The validator and the Debian package that has it.
const VALIDATOR: &str = "glslangValidator";
const VALIDATOR_PACKAGE: &str = "glslang-tools";

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

/// Every variant of every stage, from the registry's define sets.
fn variants() -> Vec<Variant> {
    GLSL_FILES
        .iter()
        .flat_map(|file| {
            file.variants().into_iter().map(|defines| Variant {
                file: file.name,
                defines,
            })
        })
        .collect()
}

fn glsl_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("glsl")
}

/// The files under `dir`, as paths relative to `glsl/` (`prefix`: the folder walked so far).
fn files_under(dir: &Path, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = format!("{prefix}{name}");
        if entry.file_type().unwrap().is_dir() {
            out.extend(files_under(&entry.path(), &format!("{path}/")));
        } else {
            out.insert(path);
        }
    }
    out
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
    let on_disk = files_under(&glsl_dir(), "");
    let listed: BTreeSet<String> = GLSL_FILES.iter().map(|f| f.path()).collect();
    assert_eq!(
        on_disk, listed,
        "glsl/ and src/gpu/stages/mod.rs must list the same files"
    );
    // Files are found by name alone (`#include "common.glsl"`), so a name is unique.
    let names: BTreeSet<&str> = GLSL_FILES.iter().map(|f| f.name).collect();
    assert_eq!(names.len(), GLSL_FILES.len(), "two rows share a file name");
    // Includes in glsl/include/, the viewer's shaders in glsl/view/, the engine's stages at the top.
    for file in GLSL_FILES {
        let expected = if file.name.ends_with(".glsl") {
            "include"
        } else if file.name.starts_with("view_") || file.name == "slice.comp" {
            "view"
        } else {
            ""
        };
        assert_eq!(file.folder, expected, "{}", file.name);
    }
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
            "glsl/{stage} has no variant: give its row define sets in src/gpu/stages/defines.rs"
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
         the stage's define sets in src/gpu/stages/defines.rs:\n{}",
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
