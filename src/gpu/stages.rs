//! The one registry of GLSL files: each stage and include in `glsl/`, its text (embedded in the
//! binary), the profile label its dispatches are timed under, and its CPU twin, named after the
//! shader as in vello (one shader beside one CPU function). The program loader
//! (`program.rs`), the profiler (`profile.rs`) and the shader tests (`tests/glsl_validate.rs`,
//! which also holds each stage's define sets, and fails for a file in `glsl/` that is not listed
//! here or a twin that does not exist) all read this table, so a new stage is one row here, its
//! file, its twin and its define axes.

/// One GLSL file of `glsl/`.
#[derive(Clone, Copy, Debug)]
pub struct GlslFile {
    /// The file name (`scan.comp`, `common.glsl`).
    pub name: &'static str,
    /// Its text.
    pub text: &'static str,
    /// The stage its dispatches are timed as (one of [`super::STAGES`]); `""` for includes
    /// and the viewer's draw shaders, which are not dispatched.
    pub profile: &'static str,
    /// The CPU function (or functions, comma-separated) it must agree with, as a path in this
    /// crate (`cpu::scan::exclusive_scan`); `""` where there is nothing to twin (a plain fill or
    /// copy, the viewer's drawing).
    pub twin: &'static str,
}

macro_rules! glsl {
    ($($name:literal => $profile:literal, $twin:literal;)*) => {
        &[$(GlslFile {
            name: $name,
            text: include_str!(concat!("../../glsl/", $name)),
            profile: $profile,
            twin: $twin,
        }),*]
    };
}

/// Every GLSL file, includes first.
pub const GLSL_FILES: &[GlslFile] = glsl! {
    "common.glsl" => "", "";
    "fragment.glsl" => "", "vocab::sample::depth_less";
    "layout.glsl" => "", "vocab::address::address";
    "over.glsl" => "", "composite::flatten::flatten_pixel";
    "flat_walk.glsl" => "", "composite::tidy::needs_tidy";
    "volume_split.glsl" => "", "cpu::tidy::split_alpha, cpu::tidy::piece_fraction";
    "image.glsl" => "", "vocab::built::BuiltImage";
    "gather.glsl" => "", "cpu::gather::read_slot";
    "scan.comp" => "scan", "cpu::scan::exclusive_scan";
    "scan_add.comp" => "scan", "cpu::scan::exclusive_scan";
    "min_counts.comp" => "build", "vocab::address::group_min_counts";
    "count.comp" => "count", "cpu::merge::merge_built";
    "gather_count.comp" => "build", "cpu::gather::gather_counts";
    "gather.comp" => "build", "cpu::gather::gather";
    "build.comp" => "build", "cpu::build::build";
    "merge.comp" => "merge", "cpu::merge::merge_built";
    "merge_kway.comp" => "merge", "cpu::merge::merge_kway_built";
    "merge_coop.comp" => "merge", "cpu::merge::merge_built";
    "count_kway.comp" => "count", "cpu::merge::merge_kway_built";
    "copy.comp" => "copy", "";
    "fill.comp" => "fill", "";
    "sort.comp" => "sort", "cpu::sort::sort_pixels, cpu::sort::sort_pixels_with_values";
    "tidy.comp" => "tidy", "cpu::tidy::tidy_flatten_pixels, cpu::tidy::tidy_count_pixels, cpu::tidy::tidy_emit_pixels";
    "tidy_assemble.comp" => "tidy", "cpu::tidy::tidy_gate, cpu::tidy::tidy_deep";
    "compact.comp" => "tidy", "cpu::compact::compact_flagged";
    "slice.comp" => "slice", "cpu::tidy::split_alpha";
    "view_image.vert" => "", "";
    "view_image.frag" => "", "";
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
