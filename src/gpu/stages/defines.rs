//! The define sets of each GLSL stage: per stage, the axes of `#define`s its loader sets (in
//! `src/gpu/*.rs` and `src/view/gpu.rs`), read by the registry's rows ([`super::GLSL_FILES`])
//! and compiled in every variant by `tests/glsl_validate.rs` without a GPU.
//!
//! Structural axes (layouts, methods, output kinds, modes, input counts) are combined in full;
//! numeric axes (block sizes, column tables) cycle through that product, so every value meets
//! every structural choice without multiplying the count. A new define is one more axis in its
//! stage's function; a define a shader tests in `#if` that no variant sets fails the shader
//! tests, since GLSL silently reads an undefined macro there as 0. The values come from the
//! loaders' own constants and functions ([`ColumnSpec::defines`], the shared vocabulary), so
//! what is compiled is what the driver is given.

use super::Defines;
use crate::gpu::resident::ColumnSpec;
use crate::gpu::scan::SCAN_GROUP;
use crate::gpu::tidy::WORK_BUDGET;
use crate::vocab::{
    FlagField, Layout, GATE_LIMIT, GROUP_SIZE, LOCAL_GROUP_SIZE, LOCAL_SORT_SIZE, MAX_BLOCK_SIZE,
    MAX_KWAY_INPUTS, REG_SORT_SIZE,
};

/// One choice on an axis: the defines it sets.
pub type Choice = Vec<(String, String)>;

/// The values one define (or a group of defines set together) takes.
pub struct Axis(pub Vec<Choice>);

/// How one stage is specialised: `product` axes are combined in full, `cycled` axes take their
/// choices in turn over that product. No axes at all is one variant without defines.
#[derive(Default)]
pub struct Space {
    /// Axes combined in full.
    pub product: Vec<Axis>,
    /// Axes that take turns over the product.
    pub cycled: Vec<Axis>,
}

impl Space {
    /// Every variant of this space: the product of `product`, with `cycled` taking turns.
    pub fn variants(&self) -> Vec<Defines> {
        let mut combos: Vec<Choice> = vec![Vec::new()];
        for Axis(choices) in &self.product {
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
        combos
            .into_iter()
            .enumerate()
            .map(|(i, mut combo)| {
                // Each cycled axis turns at its own pace (i, i / n0, ...), so pairs vary too.
                let mut turn = i;
                for Axis(choices) in &self.cycled {
                    combo.extend(choices[turn % choices.len()].iter().cloned());
                    turn /= choices.len().max(1);
                    turn += i;
                }
                Defines(combo)
            })
            .collect()
    }
}

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

/// One space of `product` and `cycled` axes.
fn space(product: Vec<Axis>, cycled: Vec<Axis>) -> Vec<Space> {
    vec![Space { product, cycled }]
}

/// The image binding block of `resident::layout_defines`: `{NAME}_LAYOUT`, `{NAME}_ACCESS` and
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

/// The merge output: flat (an LA-shaped binding block, `OUTPUT_DEEP 0`) or deep in each layout,
/// its values written or its keys alone (`OUT_VALUES 0`, `GpuImage::with_values`).
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
    for mut c in deep {
        c.push(("OUTPUT_DEEP".into(), "1".into()));
        let mut keys_only = c.clone();
        keys_only.push(("OUT_VALUES".into(), "0".into()));
        choices.push(c);
        choices.push(keys_only);
    }
    Axis(choices)
}

/// [`output_axis`] and deep output in each array layout written through shared memory
/// (`resident::DeepWrites::Staged`: `OUT_STAGED`, `STAGE_SAMPLES`), with values and keys alone
/// by turns: the merges that include `out_staging.glsl`.
fn staged_output_axis() -> Axis {
    let Axis(mut choices) = output_axis();
    let Axis(staged) = image_axis(
        "OUT",
        &[
            Layout::Linearised,
            Layout::Interleaved,
            Layout::BlockedInterleaved,
        ],
        10,
        "",
    );
    for (i, mut c) in staged.into_iter().enumerate() {
        c.push(("OUTPUT_DEEP".into(), "1".into()));
        c.push(("OUT_STAGED".into(), "1".into()));
        c.push(("STAGE_SAMPLES".into(), "256".into()));
        if i % 2 == 1 {
            c.push(("OUT_VALUES".into(), "0".into()));
        }
        choices.push(c);
    }
    Axis(choices)
}

/// Column tables as `ColumnSpec::defines` writes them: none (stride 1, no alphas), alpha only,
/// RGBA under one alpha, and colours with their own alphas (RA, GA, BA).
fn columns_axis() -> Axis {
    let tables = [
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
    ];
    Axis(
        tables
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

/// IA and BIA, the layouts whose minimum counts are grouped.
const IA_BIA: [Layout; 2] = [Layout::Interleaved, Layout::BlockedInterleaved];

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

/// An include: no variants of its own, it is compiled inside the stages that include it.
pub fn included() -> Vec<Space> {
    Vec::new()
}

/// A stage compiled as it is, without defines of its own (`fill.comp`, `copy.comp`, the
/// viewer's vertex shader).
pub fn plain() -> Vec<Space> {
    vec![Space::default()]
}

/// `gpu::scan`: `scan.comp` and `scan_add.comp`.
pub fn scan() -> Vec<Space> {
    space(vec![fixed("SCAN_GROUP", format!("{SCAN_GROUP}u"))], vec![])
}

/// `gpu::resident`: the minimum counts of IA and BIA.
pub fn min_counts() -> Vec<Space> {
    space(
        vec![
            fixed("GROUP_SIZE", GROUP_SIZE),
            axis("LAYOUT", IA_BIA.map(|l| l.glsl_id())),
        ],
        vec![block_axis()],
    )
}

/// `gpu::resident`: the build of an image in each layout.
pub fn build() -> Vec<Space> {
    space(
        vec![
            fixed("GROUP_SIZE", GROUP_SIZE),
            image_axis("OUT", &Layout::ALL, 0, ""),
            axis("LL_ASCENDING", [0, 1]),
        ],
        vec![
            block_axis(),
            axis("NUM_COLUMNS", [1, 4, 6]),
            axis("OUT_VALUES", [1, 0]),
        ],
    )
}

/// `gpu::gather`: the counting pass over one staged input.
pub fn gather_count() -> Vec<Space> {
    space(
        vec![
            fixed("GROUP_SIZE", GROUP_SIZE),
            axis("PERMUTED", [0, 1]),
            axis("PINNED_PLANES", [0, 1]),
        ],
        vec![fixed("NUM_COLUMNS", 1)],
    )
}

/// `gpu::gather`: one staged input's samples into the stream.
pub fn gather() -> Vec<Space> {
    space(
        vec![
            fixed("GROUP_SIZE", GROUP_SIZE),
            axis("PERMUTED", [0, 1]),
            axis("PINNED_PLANES", [0, 1]),
        ],
        vec![axis("NUM_COLUMNS", [1, 4, 6]), axis("WITH_VALUES", [1, 0])],
    )
}

/// `gpu::resident`: the pairwise counting pass.
pub fn count() -> Vec<Space> {
    space(
        vec![fixed("GROUP_SIZE", GROUP_SIZE), fixed("BLOCK_SIZE", 1)],
        vec![],
    )
}

/// `gpu::resident`: the k-way counting pass.
pub fn count_kway() -> Vec<Space> {
    space(
        vec![
            fixed("GROUP_SIZE", GROUP_SIZE),
            fixed("BLOCK_SIZE", 1),
            axis("NUM_INPUTS", kway_inputs()),
            image_axis("IN", &Layout::ALL, 0, "readonly"),
        ],
        vec![],
    )
}

/// `gpu::resident::relayout`: an interleaved image rewritten linearised, or blocked interleaved
/// in blocks of every size.
pub fn relayout() -> Vec<Space> {
    let mut spaces = space(
        vec![
            fixed("GROUP_SIZE", GROUP_SIZE),
            fixed("BLOCK_SIZE", 1),
            image_axis("IN", &[Layout::Interleaved], 0, "readonly"),
            image_axis("OUT", &[Layout::Linearised], 10, ""),
        ],
        vec![columns_axis(), axis("OUT_VALUES", [1, 0])],
    );
    spaces.extend(space(
        vec![
            fixed("GROUP_SIZE", GROUP_SIZE),
            image_axis("IN", &[Layout::Interleaved], 0, "readonly"),
            image_axis("OUT", &[Layout::BlockedInterleaved], 10, ""),
        ],
        vec![block_axis(), columns_axis(), axis("OUT_VALUES", [1, 0])],
    ));
    spaces
}

/// `gpu::resident::pack_sources`: a merged image of every layout (BIA in blocks of every size,
/// LL either way) packed in one word (with one, two or several inputs) or two.
pub fn sources() -> Vec<Space> {
    space(
        vec![
            fixed("GROUP_SIZE", GROUP_SIZE),
            image_axis("IN", &Layout::ALL, 0, "readonly"),
        ],
        vec![
            block_axis(),
            packings_axis(false),
            axis("LIST_ASCENDING", [1, 0]),
        ],
    )
}

/// Every packing of a deep output's sources (`vocab::SourcePacking`: one word with 32, 31 or
/// 28 bits of index, or two words), as `sources.comp` takes it, with the words of a run's record
/// too (`with_runs`) as `source_runs.comp` takes it.
fn packings_axis(with_runs: bool) -> Axis {
    let packings = [(1u32, 32u32), (1, 31), (1, 28), (2, 32)]
        .iter()
        .map(|&(words, bits)| {
            let mut defines = vec![
                ("SOURCE_WORDS".to_string(), words.to_string()),
                ("INDEX_BITS".to_string(), bits.to_string()),
            ];
            if with_runs {
                defines.push(("RUN_WORDS".to_string(), (words + 1).to_string()));
            }
            defines
        })
        .collect();
    Axis(packings)
}

/// `gpu::resident::source_runs`: both stages, every packing of `sources.comp`.
pub fn source_runs() -> Vec<Space> {
    space(
        vec![
            fixed("GROUP_SIZE", GROUP_SIZE),
            axis("STAGE", [0, 1]),
            packings_axis(true),
        ],
        vec![],
    )
}

/// `gpu::resident`: the pairwise merge, both methods, both orders, every layout and output.
pub fn merge() -> Vec<Space> {
    space(
        vec![
            fixed("GROUP_SIZE", GROUP_SIZE),
            axis("MERGE_METHOD", [0, 1]),
            axis("MERGE_DESC", [0, 1]),
            axis("RBM_SHIFT", [0, 1]),
            image_axis("A", &Layout::ALL, 0, "readonly"),
            image_axis("B", &Layout::ALL, 5, "readonly"),
            staged_output_axis(),
        ],
        vec![block_axis(), columns_axis(), axis("LONG_LISTS", [0, 1])],
    )
}

/// `gpu::merge::coop`: the long pixels `merge.comp` listed, a workgroup each.
pub fn merge_coop() -> Vec<Space> {
    space(
        vec![
            fixed("GROUP_SIZE", GROUP_SIZE),
            fixed("COOP_GROUP", 64),
            fixed("MERGE_METHOD", 0),
            fixed("RBM_SHIFT", 0),
            axis("MERGE_DESC", [0, 1]),
            image_axis("A", &Layout::ALL, 0, "readonly"),
            image_axis("B", &Layout::ALL, 5, "readonly"),
            output_axis(),
        ],
        vec![block_axis(), columns_axis()],
    )
}

/// `gpu::resident`: the k-way merge.
pub fn merge_kway() -> Vec<Space> {
    space(
        vec![
            fixed("GROUP_SIZE", GROUP_SIZE),
            axis("NUM_INPUTS", kway_inputs()),
            image_axis("IN", &Layout::ALL, 0, "readonly"),
            staged_output_axis(),
        ],
        vec![block_axis(), columns_axis()],
    )
}

/// `gpu::sort`: without values (`NUM_COLUMNS 1`) the four key stages; with values also the
/// gather and scatter of the values.
pub fn sort() -> Vec<Space> {
    vec![
        Space {
            product: vec![
                axis("STAGE", SORT_KEY_STAGES),
                sort_sizes(),
                axis("SERIAL_SORT_SIZE", [0, 128]),
                fixed("WITH_VALUES", 0),
                fixed("NUM_COLUMNS", 1),
            ],
            cycled: vec![],
        },
        Space {
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
    ]
}

/// `gpu::tidy`: the three modes over every column table.
pub fn tidy() -> Vec<Space> {
    space(
        vec![
            fixed("GROUP_SIZE", GROUP_SIZE),
            fixed("WORK_BUDGET", WORK_BUDGET),
            axis("TIDY_MODE", [0, 1, 2]),
            columns_axis(),
        ],
        vec![],
    )
}

/// `gpu::tidy`: the assembly's four stages.
pub fn tidy_assemble() -> Vec<Space> {
    space(
        vec![
            fixed("GROUP_SIZE", GROUP_SIZE),
            axis("STAGE", 0..4),
            fixed("GATE_LIMIT", GATE_LIMIT),
        ],
        vec![axis("NUM_COLUMNS", [1, 4, 6])],
    )
}

/// `gpu::compact`: both stages over each flag field.
pub fn compact() -> Vec<Space> {
    let flag_fields = [FlagField::WORD, FlagField::NEEDS_TIDY_IN_FRONT];
    space(
        vec![
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
        vec![],
    )
}

/// `view::gpu`: the depth slice.
pub fn slice() -> Vec<Space> {
    space(vec![fixed("GROUP_SIZE_VIEW", 64), columns_axis()], vec![])
}

/// `view::gpu`: the image pass's fragment shader, with the display constants the viewer sets.
/// Without the `view` feature there is no viewer to load it, so no variant: the shader tests,
/// built with it, fail for a stage without one rather than pass it by.
pub fn view_image_frag() -> Vec<Space> {
    #[cfg(feature = "view")]
    {
        let view_defines = crate::view::display::shader_defines()
            .into_iter()
            .map(|(n, v)| (n.to_string(), v))
            .collect();
        space(vec![columns_axis(), Axis(vec![view_defines])], vec![])
    }
    #[cfg(not(feature = "view"))]
    {
        Vec::new()
    }
}
