//! The one registry of GLSL files: each stage and include in `glsl/`, its folder, its text
//! (embedded in the binary), the profile label its dispatches are timed under, its CPU twin,
//! named after the shader as in vello (one shader beside one CPU function), and the sets of
//! `#define`s its loader gives it ([`defines`]). The program loader (`program.rs`), the
//! profiler (`profile.rs`) and the shader tests (`tests/glsl_validate.rs`, which compile every
//! define set of every row and fail for a file in `glsl/` that is not listed here or a twin that
//! does not exist) all read this table, so a new stage is its file, one row here and one
//! function in `defines.rs`.
//!
//! Folders: compute stages of the engine sit in `glsl/`, the includes they share in
//! `glsl/include/`, the viewer's shaders in `glsl/view/`. Files are named without their folder
//! (`#include "common.glsl"`, `use_program("slice.comp")`): a name is unique across folders.

pub mod defines;

/// The `#define`s a stage is specialised with, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Defines(pub Vec<(String, String)>);

impl Defines {
    /// Add `#define name value`.
    pub fn set(mut self, name: &str, value: impl ToString) -> Self {
        self.0.push((name.to_string(), value.to_string()));
        self
    }
}

/// One GLSL file of `glsl/`.
#[derive(Clone, Copy, Debug)]
pub struct GlslFile {
    /// The file name (`scan.comp`, `common.glsl`), unique across folders.
    pub name: &'static str,
    /// The folder under `glsl/` (`""`, `"include"`, `"view"`).
    pub folder: &'static str,
    /// Its text.
    pub text: &'static str,
    /// The stage its dispatches are timed as (one of [`super::STAGES`]); `""` for includes
    /// and the viewer's draw shaders, which are not dispatched.
    pub profile: &'static str,
    /// The CPU function (or functions, comma-separated) it must agree with, as a path in this
    /// crate (`cpu::scan::exclusive_scan`); `""` where there is nothing to twin (a plain fill or
    /// copy, the viewer's drawing).
    pub twin: &'static str,
    /// The define sets its loader gives it, as spaces of choices ([`defines::Space`]); none for
    /// an include, which is compiled inside the stages that include it.
    pub define_sets: fn() -> Vec<defines::Space>,
}

impl GlslFile {
    /// Its path under `glsl/` (`include/common.glsl`).
    pub fn path(&self) -> String {
        if self.folder.is_empty() {
            self.name.to_string()
        } else {
            format!("{}/{}", self.folder, self.name)
        }
    }

    /// Every variant its loader can compile, each a set of defines: the spaces of
    /// [`GlslFile::define_sets`], each expanded by [`defines::Space::variants`].
    pub fn variants(&self) -> Vec<Defines> {
        (self.define_sets)()
            .iter()
            .flat_map(defines::Space::variants)
            .collect()
    }
}

/// One row per file: `NAME [in FOLDER] => PROFILE, TWIN, DEFINE_SETS;`.
macro_rules! glsl {
    ($($name:literal $(in $folder:literal)? => $profile:literal, $twin:literal, $defines:path;)*) => {
        &[$(GlslFile {
            name: $name,
            folder: concat!("" $(, $folder)?),
            text: include_str!(concat!("../../../glsl/", $($folder, "/",)? $name)),
            profile: $profile,
            twin: $twin,
            define_sets: $defines,
        }),*]
    };
}

/// Every GLSL file, includes first.
pub const GLSL_FILES: &[GlslFile] = glsl! {
    "common.glsl" in "include" => "", "", defines::included;
    "fragment.glsl" in "include" => "", "vocab::sample::depth_less", defines::included;
    "layout.glsl" in "include" => "", "vocab::layout::address, vocab::built::pixel_holding", defines::included;
    "over.glsl" in "include" => "", "composite::flatten::flatten_pixel", defines::included;
    "flat_walk.glsl" in "include" => "", "composite::tidy::needs_tidy", defines::included;
    "volume_split.glsl" in "include" => "", "cpu::tidy::split_alpha, cpu::tidy::piece_fraction", defines::included;
    "image.glsl" in "include" => "", "vocab::built::BuiltImage", defines::included;
    "out_staging.glsl" in "include" => "", "cpu::merge::merge_built", defines::included;
    "gather.glsl" in "include" => "", "cpu::gather::read_slot", defines::included;
    "scan.comp" => "scan", "cpu::scan::exclusive_scan", defines::scan;
    "scan_add.comp" => "scan", "cpu::scan::exclusive_scan", defines::scan;
    "min_counts.comp" => "build", "vocab::layout::group_min_counts", defines::min_counts;
    "count.comp" => "count", "cpu::merge::merge_built", defines::count;
    "gather_count.comp" => "build", "cpu::gather::gather_counts", defines::gather_count;
    "gather.comp" => "build", "cpu::gather::gather", defines::gather;
    "build.comp" => "build", "cpu::build::build", defines::build;
    "merge.comp" => "merge", "cpu::merge::merge_built", defines::merge;
    "merge_kway.comp" => "merge", "cpu::merge::merge_kway_built", defines::merge_kway;
    "merge_coop.comp" => "merge", "cpu::merge::merge_built", defines::merge_coop;
    "count_kway.comp" => "count", "cpu::merge::merge_kway_built", defines::count_kway;
    "relayout.comp" => "merge", "cpu::relayout::relayout", defines::relayout;
    "sources.comp" => "readback", "cpu::sources::pack_sources", defines::sources;
    "source_runs.comp" => "readback", "cpu::sources::source_runs", defines::source_runs;
    "copy.comp" => "copy", "", defines::plain;
    "fill.comp" => "fill", "", defines::plain;
    "sort.comp" => "sort", "cpu::sort::sort_pixels, cpu::sort::sort_pixels_with_values", defines::sort;
    "tidy.comp" => "tidy", "cpu::tidy::tidy_flatten_pixels, cpu::tidy::tidy_count_pixels, cpu::tidy::tidy_emit_pixels", defines::tidy;
    "tidy_assemble.comp" => "tidy", "cpu::tidy::tidy_gate, cpu::tidy::tidy_deep", defines::tidy_assemble;
    "compact.comp" => "tidy", "cpu::compact::compact_flagged", defines::compact;
    "slice.comp" in "view" => "slice", "cpu::tidy::split_alpha", defines::slice;
    "view_image.vert" in "view" => "", "", defines::plain;
    "view_image.frag" in "view" => "", "", defines::view_image_frag;
    "view_points.vert" in "view" => "", "", defines::plain;
    "view_points.frag" in "view" => "", "", defines::plain;
};

/// The registry's row for `name`, if it has one.
pub fn glsl_file(name: &str) -> Option<&'static GlslFile> {
    GLSL_FILES.iter().find(|f| f.name == name)
}

/// The profile stage a program file belongs to (`glsl/<file>`): its row's label, else "other".
pub fn stage_of_program(file: &str) -> &'static str {
    match glsl_file(file) {
        Some(f) if !f.profile.is_empty() => f.profile,
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dispatched_stage_has_a_profile_stage() {
        for file in GLSL_FILES.iter().filter(|f| f.name.ends_with(".comp")) {
            let stage = stage_of_program(file.name);
            assert!(
                super::super::STAGES.contains(&stage),
                "{} maps to {stage}",
                file.name
            );
        }
        assert_eq!(stage_of_program("view_image.frag"), "other");
        assert_eq!(stage_of_program("no-such.comp"), "other");
    }
}
