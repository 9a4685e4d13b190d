//! `idselect`: keep the samples whose id channels hold chosen ids (OpenEXR's `deepidselect`;
//! Nuke's DeepExpression or a Cryptomatte-style id matte on deep data).
//!
//! Exact semantics:
//! - Each `--id CHANNEL=N[,N...]` is one condition: the sample's value in `CHANNEL` is one of
//!   the numbers (OR within one option). A sample is selected when every condition holds (AND
//!   across options, so two options on one channel select the ids both list). With `invert`
//!   the samples that are *not* selected are kept, so a selection and its inverse share no
//!   sample and together hold every sample of the input.
//! - Ids are unsigned 32-bit numbers. A `uint` channel is compared exactly. A `half` or
//!   `float` channel follows the **float-id convention**: it holds the id as an integral value
//!   (2.0 is id 2), compared exactly, with no rounding: a value with a fraction, a negative
//!   value, NaN or infinity is no id and matches nothing. A float holds every integer up to
//!   2^24 (a half up to 2048) exactly; a larger id that the type cannot hold matches nothing.
//!   (Cryptomatte's hashes stored as the bits of a float are not this convention.)
//! - Kept samples are copied bit for bit and in order; the windows, channels and
//!   `deepImageState` are the input's (dropping samples keeps a sorted or tidy pixel so).
//! - An id channel the input lacks is an error naming the file and listing its channels.
//! - **Names.** Where the input carries an id manifest (the `idManifest` attribute,
//!   [`crate::exr::IdManifest`]), an id may be given by name: `--id "id=blob/*"`. A name is
//!   a shell-style pattern (`*`, `?`, `[...]`; `*` also matches `/`), and it stands for every
//!   id of the channel's manifest group one of whose names (one per component of the group,
//!   e.g. model and material) it matches. Numbers and names mix in one option (`id=3,blob/*`).
//!   An item is a number when it is an unsigned 32-bit integer; an item made only of digits,
//!   signs, points and exponents that is not one (`-1`, `1.5`) is refused as a bad id rather
//!   than looked up. A name that matches no id of the channel, a channel the manifest does not
//!   name, or a file without a manifest is an error naming the file, the channel and the name.
//! - The mask ([`IdSelect::mask`]) is the same selection reduced to its alpha and depth
//!   channels, which the flat output composites into the flat alpha of the selection.

use crate::deep::{Bounds, ChannelRole, DeepImage, Plane};
use crate::error::{Error, Result};
use crate::request::{FieldNames, MergeOption, OptionNames};

use std::path::Path;

use crate::composite::{MergeOptions, OutputKind};
use crate::exr::select_part;
use crate::exr::{read_parts_info, IdManifest, PartSelector};
use crate::preview::check_output_name;
use crate::stream::StreamOptions;

use super::registry::{
    NodeInputs, NodeWork, OpSpec, Operation, OptionSpec, Produces, Ran, ValueKind, DEEP_INPUT,
};
use super::{run_op, DeepOp, OpOutput, OpWindows};
use crate::deep::builder::{build_band, RowBuilder};
use crate::request::OutputRequest;
use std::path::PathBuf;
use std::sync::Arc;

/// One `--id` condition: the channel and the ids it may hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdCondition {
    /// The id channel's full name.
    pub channel: String,
    /// The ids selected (any of them).
    pub ids: Vec<u32>,
    /// Names (shell-style patterns) still to be looked up in the input's id manifest; each
    /// adds the ids it matches ([`IdSelect::with_names_resolved`]).
    pub names: Vec<String>,
}

impl IdCondition {
    /// A condition from `CHANNEL=N[,N...]`; refusals name the field ([`Self::parse_named`]).
    pub fn parse(text: &str) -> Result<Self> {
        Self::parse_named(text, &FieldNames)
    }

    /// [`Self::parse`], its refusals naming the option as `names` spells it.
    pub fn parse_named(text: &str, names: &dyn OptionNames) -> Result<Self> {
        let bad = |why: &str| {
            Error::Usage(format!(
                "{} takes CHANNEL=N[,N...] (ids are unsigned 32-bit integers), not {text:?}: {why}",
                names.spell(MergeOption::Id)
            ))
        };
        let (channel, list) = text.split_once('=').ok_or_else(|| bad("no '='"))?;
        let channel = channel.trim();
        if channel.is_empty() {
            return Err(bad("no channel name"));
        }
        let mut ids = Vec::new();
        let mut names = Vec::new();
        for item in list.split(',').map(str::trim) {
            if let Ok(id) = item.parse::<u32>() {
                ids.push(id);
            } else if item.is_empty()
                || item
                    .chars()
                    .all(|c| c.is_ascii_digit() || matches!(c, '+' | '-' | '.' | 'e' | 'E'))
            {
                return Err(bad("not an id"));
            } else {
                glob::Pattern::new(item).map_err(|e| bad(&format!("bad name pattern: {e}")))?;
                names.push(item.to_string());
            }
        }
        Ok(IdCondition {
            channel: channel.to_string(),
            ids,
            names,
        })
    }
}

/// Which samples `idselect` keeps (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdSelect {
    /// The conditions, all of which a selected sample meets.
    pub conditions: Vec<IdCondition>,
    /// Keep the samples that are not selected instead.
    pub invert: bool,
    /// Write only the alpha and depth channels (the mask's deep source).
    pub alpha_only: bool,
}

impl IdSelect {
    /// A selection from `--id` texts; at least one is needed. Refusals name the field
    /// ([`Self::parse_named`] for a front end's words).
    pub fn parse<S: AsRef<str>>(conditions: &[S], invert: bool) -> Result<Self> {
        Self::parse_named(conditions, invert, &FieldNames)
    }

    /// [`Self::parse`], its refusals naming the option as `names` spells it.
    pub fn parse_named<S: AsRef<str>>(
        conditions: &[S],
        invert: bool,
        names: &dyn OptionNames,
    ) -> Result<Self> {
        if conditions.is_empty() {
            return Err(Error::Usage(format!(
                "idselect needs at least one {} CHANNEL=N[,N...]",
                names.spell(MergeOption::Id)
            )));
        }
        Ok(IdSelect {
            conditions: conditions
                .iter()
                .map(|c| IdCondition::parse_named(c.as_ref(), names))
                .collect::<Result<_>>()?,
            invert,
            alpha_only: false,
        })
    }

    /// Whether some condition names ids rather than numbering them.
    pub fn has_names(&self) -> bool {
        self.conditions.iter().any(|c| !c.names.is_empty())
    }

    /// The selection with every name replaced by the ids it matches in `manifest` (the input's
    /// id manifest, if it has one). Errors (a format error, for the caller to name the file)
    /// for a missing manifest, a channel it does not name, or a name matching no id.
    pub fn with_names_resolved(&self, manifest: Option<&IdManifest>) -> Result<Self> {
        let mut resolved = self.clone();
        for condition in &mut resolved.conditions {
            if condition.names.is_empty() {
                continue;
            }
            let channel = &condition.channel;
            let manifest = manifest.ok_or_else(|| {
                Error::format(format!(
                    "has no idManifest attribute, so the names in --id {channel}={} cannot be \
                     looked up (give ids as numbers)",
                    condition.names.join(",")
                ))
            })?;
            let group = manifest.group_of(channel).ok_or_else(|| {
                let named: Vec<String> = manifest
                    .groups
                    .iter()
                    .flat_map(|g| g.channels.iter().cloned())
                    .collect();
                Error::format(format!(
                    "its idManifest names no ids of channel {channel:?} (it names {})",
                    named.join(", ")
                ))
            })?;
            for name in std::mem::take(&mut condition.names) {
                let pattern = glob::Pattern::new(&name).expect("checked when parsed");
                let matched: Vec<u32> = group
                    .entries
                    .iter()
                    .filter(|(_, names)| names.iter().any(|n| pattern.matches(n)))
                    .filter_map(|&(id, _)| u32::try_from(id).ok())
                    .collect();
                if matched.is_empty() {
                    return Err(Error::format(format!(
                        "no id of channel {channel:?} in its idManifest is named {name:?}{}",
                        if group.components.is_empty() {
                            " (the manifest gives them no names)".to_string()
                        } else {
                            // The names themselves, which a user can copy, not the columns.
                            let mut names: Vec<&str> = group
                                .entries
                                .iter()
                                .flat_map(|(_, n)| n.iter().map(String::as_str))
                                .collect();
                            names.sort_unstable();
                            names.dedup();
                            const SHOWN: usize = 12;
                            let more = names.len().saturating_sub(SHOWN);
                            format!(
                                " (its {} names: {}{}; `deepmerge info --ids` lists them)",
                                group.components.join(", "),
                                names[..names.len().min(SHOWN)].join(", "),
                                if more > 0 {
                                    format!(", and {more} more")
                                } else {
                                    String::new()
                                }
                            )
                        }
                    )));
                }
                condition.ids.extend(matched);
            }
        }
        Ok(resolved)
    }

    /// The same selection reduced to its alpha and depth channels: run with flat output, it
    /// writes the flat alpha of the selection.
    pub fn mask(&self) -> Self {
        IdSelect {
            alpha_only: true,
            ..self.clone()
        }
    }

    /// The index of every condition's channel in `channels`, or the error naming the first
    /// one missing with the channels there are.
    fn resolve(&self, image: &DeepImage) -> Result<Vec<(usize, &[u32])>> {
        if self.has_names() {
            return Err(Error::internal(
                "idselect names must be looked up in the manifest before the run",
            ));
        }
        self.conditions
            .iter()
            .map(|c| {
                image
                    .channel_index(&c.channel)
                    .map(|i| (i, c.ids.as_slice()))
                    .ok_or_else(|| {
                        let names: Vec<&str> =
                            image.channels.iter().map(|c| c.name.as_str()).collect();
                        // A usage error, as `--channels` naming a channel no input has.
                        Error::of_kind(
                            crate::error::ErrorKind::Usage,
                            format!(
                                "has no channel {:?} to select ids in (its channels: {})",
                                c.channel,
                                names.join(", ")
                            ),
                        )
                    })
            })
            .collect()
    }
}

/// The id held by value `i` of `plane`: the value of a uint, the integral value of a float
/// (float-id convention), none for a float that is not a whole number in the u32 range.
pub fn id_at(plane: &Plane, i: usize) -> Option<u32> {
    let whole = |f: f32| {
        let f = f as f64;
        ((0.0..=u32::MAX as f64).contains(&f) && f.fract() == 0.0).then_some(f as u32)
    };
    match plane {
        Plane::U32(v) => Some(v[i]),
        Plane::F16(v) => whole(v[i].to_f32()),
        Plane::F32(v) => whole(v[i]),
    }
}

fn is_alpha(role: ChannelRole) -> bool {
    matches!(
        role,
        ChannelRole::Alpha
            | ChannelRole::RedAlpha
            | ChannelRole::GreenAlpha
            | ChannelRole::BlueAlpha
    )
}

/// `image` reduced to its alpha, Z and ZBack channels; an error when it has no alpha.
fn alpha_and_depth(image: DeepImage) -> Result<DeepImage> {
    if !image.channels.iter().any(|c| is_alpha(c.role)) {
        return Err(Error::format(
            "has no alpha channel, so --mask has no alpha to write",
        ));
    }
    let DeepImage {
        display_window,
        data_window,
        channels,
        offsets,
        planes,
        state,
    } = image;
    let (channels, planes) = channels
        .into_iter()
        .zip(planes)
        .filter(|(c, _)| is_alpha(c.role) || matches!(c.role, ChannelRole::Z | ChannelRole::ZBack))
        .unzip();
    Ok(DeepImage {
        display_window,
        data_window,
        channels,
        offsets,
        planes,
        state,
    })
}

impl DeepOp for IdSelect {
    fn windows(&self, data: Bounds, display: Bounds) -> Result<OpWindows> {
        Ok(OpWindows {
            read: data,
            data,
            display,
        })
    }

    fn apply(&self, band: &DeepImage, _windows: &OpWindows) -> Result<DeepImage> {
        let conditions = self.resolve(band)?;
        let window = band.data_window;
        let selected = |i: usize| {
            conditions
                .iter()
                .all(|&(c, ids)| id_at(&band.planes[c], i).is_some_and(|id| ids.contains(&id)))
        };
        let kept = build_band(
            &band.channels,
            window,
            band.display_window,
            band.state,
            |y, row: &mut RowBuilder| {
                for x in window.x0..=window.x1 {
                    let p = window.index_of(x, y).expect("inside");
                    for i in band.range(p) {
                        if selected(i) != self.invert {
                            row.copy(band, i);
                        }
                    }
                    row.end_pixel();
                }
            },
        );
        if self.alpha_only {
            alpha_and_depth(kept)
        } else {
            Ok(kept)
        }
    }
}

/// The id manifest of the part `part` of `input`, if it carries one.
pub fn read_id_manifest(input: &Path, part: &PartSelector) -> Result<Option<IdManifest>> {
    let parts = read_parts_info(input)?;
    let index = select_part(&parts, part).map_err(|e| e.in_file(input))?;
    parts[index]
        .attributes
        .iter()
        .find(|a| a.name == "idManifest" && a.kind == "idmanifest")
        .map(|a| IdManifest::from_attribute(&a.value).map_err(|e| e.in_file(input)))
        .transpose()
}

/// Run `select` on `input`, writing `output` as `request` says and, with `mask`, the flat
/// alpha of the selection to `mask` (a flat EXR, or `*.png` for a preview): a second pass
/// over the input, streamed the same way. Names are looked up in the input's id manifest
/// first. The mask's name is checked before anything is written, and it may be neither the
/// output nor the input.
pub fn run_idselect(
    select: &IdSelect,
    input: &Path,
    output: &Path,
    mask: Option<&Path>,
    request: OpOutput,
) -> Result<u64> {
    let mask_options = match mask {
        Some(mask) => {
            check_output_name(mask, false)?;
            if mask == output {
                return Err(Error::Usage(format!(
                    "{}: the mask is the output itself",
                    mask.display()
                )));
            }
            crate::exr::check_output_is_not_an_input(mask, &[input.to_path_buf()])?;
            Some(StreamOptions {
                part: request.part.clone(),
                merge: MergeOptions {
                    output: OutputKind::Flat { z: false },
                    ..MergeOptions::default()
                },
                budget: request.memory_budget,
                band_rows: request.band_rows,
                // The mask is a flat file like a flatten's: its default compression, and the
                // input's attributes as the selection carries them.
                flat_write: crate::exr::OutputOptions::default().flat(crate::exr::FlatType::Half),
                metadata: request.metadata.unwrap_or_default(),
                ..StreamOptions::default()
            })
        }
        None => None,
    };
    let options = request.stream_options(output)?;
    let resolved;
    let select = if select.has_names() {
        let manifest = read_id_manifest(input, &options.part)?;
        resolved = select
            .with_names_resolved(manifest.as_ref())
            .map_err(|e| e.in_file(input))?;
        &resolved
    } else {
        select
    };
    let samples = run_op(select, input, output, &options, None)?;
    if let (Some(mask), Some(mask_options)) = (mask, mask_options) {
        run_op(&select.mask(), input, mask, &mask_options, None)?;
    }
    Ok(samples)
}

/// `idselect` in the table of operations ([`super::registry`]).
pub const SPEC: OpSpec = OpSpec {
    name: "idselect",
    python: "idselect",
    help: "Keep the samples whose id channels hold the given ids (OpenEXR's deepidselect): --id \
           options are ANDed, the ids of one are ORed; --invert keeps the rest",
    doc: "Keep the samples of ``input`` whose id channels hold the given ids and write them to \
          ``out``, as ``deepmerge idselect``. ``ids`` is ``\"CHANNEL=N[,N...]\"``, a list of \
          them (the CLI's ``--id`` options: ANDed across, the ids of one ORed), or \
          ``{channel: id or [ids]}``. uint channels are compared exactly; half and float \
          channels hold ids as whole numbers. ``invert`` keeps the other samples; \
          ``mask=PATH`` also writes the flat alpha of the kept samples (a flat EXR, or \
          ``*.png``). Other options as ``deep_slice``.",
    inputs: DEEP_INPUT,
    options: &[
        OptionSpec {
            name: "ids",
            flag: "id",
            field: "id",
            kind: ValueKind::Ids,
            value_name: "CHANNEL=N|NAME[,...]",
            help: "CHANNEL=N[,N...]: keep the samples whose CHANNEL holds one of the ids (uint \
                   channels, or float channels holding whole numbers). With an idManifest, \
                   names (shell patterns, e.g. \"id=blob/*\") stand for the ids they name. \
                   Repeat for more channels: all must match",
            positional: true,
            required: true,
            ..OptionSpec::NEW
        },
        OptionSpec {
            name: "invert",
            help: "Keep the samples that are not selected instead",
            positional: true,
            ..OptionSpec::NEW
        },
        OptionSpec {
            name: "mask",
            kind: ValueKind::Path,
            value_name: "MASK",
            help: "Also write the flat alpha of the kept samples to MASK (a flat EXR, or \
                   `*.png`)",
            positional: true,
            in_script: false,
            ..OptionSpec::NEW
        },
    ],
    produces: Produces::Image,
    comp: true,
    build: |v, names| {
        let select = IdSelect::parse_named(v.texts("ids"), v.flag("invert"), names)?;
        Ok(Arc::new(IdSelectRun {
            select,
            mask: v.path("mask").map(Path::to_path_buf),
        }))
    },
};

/// An id selection as the front ends ask for it: with its mask file, if any.
#[derive(Debug)]
struct IdSelectRun {
    select: IdSelect,
    mask: Option<PathBuf>,
}

impl Operation for IdSelectRun {
    fn run(&self, inputs: &[PathBuf], output: &Path, request: OutputRequest) -> Result<Ran> {
        let samples = run_idselect(
            &self.select,
            &inputs[0],
            output,
            self.mask.as_deref(),
            request,
        )?;
        Ok(Ran::image(samples))
    }

    /// A mask is a flat file of one part: with one, the first deep part is selected from.
    fn part_by_part(&self) -> bool {
        self.mask.is_none()
    }

    fn node(&self, inputs: &NodeInputs) -> Result<NodeWork> {
        let select = if self.select.has_names() {
            self.select.with_names_resolved(inputs.manifest.as_ref())?
        } else {
            self.select.clone()
        };
        Ok(NodeWork::Band {
            op: Box::new(select),
            dy: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    #[test]
    fn conditions_parse_a_channel_and_its_ids() {
        let c = IdCondition::parse("object.id=3, 4294967295,0").unwrap();
        assert_eq!(c.channel, "object.id");
        assert_eq!(c.ids, vec![3, u32::MAX, 0]);
        let named = IdCondition::parse("id=3,blob/*,circle/b?g").unwrap();
        assert_eq!(
            (named.ids, named.names),
            (vec![3], vec!["blob/*".into(), "circle/b?g".into()])
        );
        for bad in [
            "id",
            "=3",
            "id=",
            "id=-1",
            "id=1.5",
            "id=1e5",
            "id=4294967296",
            "id=1,,2",
            "id=[unclosed",
        ] {
            assert!(
                matches!(IdCondition::parse(bad), Err(Error::Usage(_))),
                "{bad}"
            );
        }
        assert!(IdSelect::parse::<&str>(&[], false).is_err());
    }

    #[test]
    fn float_ids_are_whole_numbers_compared_exactly() {
        let floats = Plane::F32(vec![
            2.0,
            2.5,
            -1.0,
            f32::NAN,
            16777216.0,
            -0.0,
            4294967296.0,
        ]);
        let ids: Vec<Option<u32>> = (0..7).map(|i| id_at(&floats, i)).collect();
        assert_eq!(
            ids,
            vec![Some(2), None, None, None, Some(16777216), Some(0), None]
        );
        let halves = Plane::F16(vec![f16::from_f32(7.0), f16::from_f32(7.5)]);
        assert_eq!((id_at(&halves, 0), id_at(&halves, 1)), (Some(7), None));
        let uints = Plane::U32(vec![3236172513]);
        assert_eq!(id_at(&uints, 0), Some(3236172513));
    }
}
