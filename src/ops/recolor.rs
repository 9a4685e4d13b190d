//! `recolor`: a deep image keeps its opacity and takes a flat image's colour (Nuke's and
//! Gaffer's DeepRecolor).
//!
//! Exact semantics, per pixel of the deep image, with `a_i` its samples' alphas and
//! `A = 1 - prod(1 - a_i)` its flattened alpha (the product does not depend on the samples'
//! order, and telescopes: `sum_i a_i * prod_{j<i} (1 - a_j) = A`):
//! - Every colour channel of the flat image (each float channel but the alphas, `Z` and
//!   `ZBack`) becomes a channel of the output; each sample's value is `c_i = C * a_i / A`, with
//!   `C` the flat value and `a_i` the alpha the flatten uses for that channel (`RA` for `R`
//!   where there is one, else `A`). The output then flattens to `C` wherever `A > 0`: the sum
//!   above is `C / A * A`, and the rule survives the flatten's split and merge of overlapping
//!   volumes (a piece of a sample keeps the ratio `c / a`, and coincident samples merge to
//!   the ratio of their merged alpha). Where `A = 0` the colour is 0.
//! - The deep image's `Z`, `ZBack`, alphas and uint ids are kept bit for bit; its other colour
//!   channels are replaced by the flat image's (dropped when the flat image lacks them). The
//!   samples, their order, the windows and `deepImageState` are the deep image's. Outside the
//!   flat image's data window the flat image is 0 (EXR's convention), so the colour is 0.
//! - With `target_alpha` the opacities change too, so that the flattened alpha becomes the
//!   flat image's alpha `T` (the flat channel named as the deep alpha; clamped to [0, 1], as
//!   are the `a_i`): each sample's optical depth `u_i = -ln(1 - a_i)` is scaled by
//!   `s = ln(1 - T) / ln(1 - A)`, i.e. `a_i' = 1 - (1 - a_i)^s`, so that
//!   `prod(1 - a_i') = (1 - A)^s = 1 - T` exactly, and the samples keep their share of the
//!   pixel's opacity. Limits: `T = 1` makes every sample with `a_i > 0` opaque (unless the
//!   pixel is opaque already, when nothing changes); `A = 1` (opaque samples, infinite depth)
//!   gives the whole optical depth `-ln(1 - T)` to the opaque samples in equal shares and 0 to
//!   the others (the limit of the same rule); `A = 0` leaves the pixel as it is (no opacity to
//!   scale). The colours then follow the new alphas, as stored (rounded to their type), so the
//!   flattened colour is the flat colour within the rounding of the stored colour.

use std::path::Path;
use std::sync::Mutex;

use half::f16;
use rayon::prelude::*;

use crate::composite::{CompositeChannels, CompositeKind, DEEP_PIXEL_BYTES};
use crate::deep::{Bounds, Channel, ChannelRole, DeepImage, Plane, SampleType};
use crate::error::{Error, Result};
use crate::exr::{ChunkSource, FlatRows, FlatSource};

use super::registry::{
    InputSpec, NodeInputs, NodeWork, OpSpec, Operation, OptionSpec, Produces, Ran,
};
use super::{run_op, DeepOp, OpOutput, OpWindows};
use crate::request::OutputRequest;
use std::path::PathBuf;
use std::sync::Arc;

/// What `recolor` does beyond the colour (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Recolor {
    /// Scale the opacities so that the flattened alpha is the flat image's alpha.
    pub target_alpha: bool,
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

/// Where each output channel's values come from.
#[derive(Clone, Copy, Debug)]
enum Source {
    /// The deep channel at this index, bit for bit.
    Deep(usize),
    /// The deep alpha at this index, re-targeted to the flat channel at `flat`.
    Alpha { deep: usize, flat: usize },
    /// The flat colour channel `flat`, spread by the output alpha channel `alpha`.
    Colour { flat: usize, alpha: usize },
}

/// The output's channels for a band's channels: in name order, with their sources.
struct Layout {
    channels: Vec<Channel>,
    sources: Vec<Source>,
}

/// The operation run on the deep input's bands, with the flat input read in the same rows.
struct RecolorOp {
    recolor: Recolor,
    flat: Mutex<FlatSource>,
    flat_channels: Vec<Channel>,
    flat_path: std::path::PathBuf,
}

impl RecolorOp {
    fn layout(&self, band: &DeepImage) -> Result<Layout> {
        let flat_named = |name: &str| self.flat_channels.iter().position(|c| c.name == name);
        let mut out: Vec<(Channel, Source)> = Vec::new();
        for (d, c) in band.channels.iter().enumerate() {
            let kept = matches!(
                c.role,
                ChannelRole::Z | ChannelRole::ZBack | ChannelRole::Id
            );
            if is_alpha(c.role) {
                let source = if self.recolor.target_alpha {
                    let flat = flat_named(&c.name).ok_or_else(|| {
                        Error::file(
                            &self.flat_path,
                            format!(
                                "has no channel {:?} to take the target alpha from \
                                 (--target-alpha)",
                                c.name
                            ),
                        )
                    })?;
                    Source::Alpha { deep: d, flat }
                } else {
                    Source::Deep(d)
                };
                out.push((c.clone(), source));
            } else if kept {
                out.push((c.clone(), Source::Deep(d)));
            }
        }
        if !out.iter().any(|(c, _)| is_alpha(c.role)) {
            return Err(Error::format(
                "has no alpha channel, so it has no opacity to recolor",
            ));
        }
        for (f, c) in self.flat_channels.iter().enumerate() {
            let colour = c.sample_type != SampleType::U32
                && !is_alpha(c.role)
                && !matches!(c.role, ChannelRole::Z | ChannelRole::ZBack);
            if colour {
                // The deep channel's type where it had this channel, else the flat one's.
                let stored = band
                    .channel_index(&c.name)
                    .map_or(c.sample_type, |d| band.channels[d].sample_type);
                out.push((
                    Channel::new(c.name.clone(), stored),
                    Source::Colour { flat: f, alpha: 0 },
                ));
            }
        }
        if !out.iter().any(|(_, s)| matches!(s, Source::Colour { .. })) {
            return Err(Error::file(
                &self.flat_path,
                "has no colour channel to recolor with",
            ));
        }
        out.sort_by(|a, b| a.0.name.cmp(&b.0.name));
        let (channels, mut sources): (Vec<Channel>, Vec<Source>) = out.into_iter().unzip();
        // Each colour's alpha is the one the flatten of the output uses.
        let template = DeepImage::empty(band.display_window, band.data_window, channels.clone());
        let composite = CompositeChannels::of(&[&template]);
        let out_index = |name: &str| channels.iter().position(|c| c.name == name);
        for (k, source) in sources.iter_mut().enumerate() {
            if let Source::Colour { alpha, .. } = source {
                let column = composite.names.iter().position(|n| n == &channels[k].name);
                match column.map(|col| composite.kinds[col]) {
                    Some(CompositeKind::Colour { alpha: a }) => {
                        *alpha = out_index(&composite.names[a]).expect("an output channel");
                    }
                    _ => {
                        return Err(Error::format(format!(
                            "has no alpha for the flat channel {:?} (it has only per-channel \
                             alphas)",
                            channels[k].name
                        )))
                    }
                }
            }
        }
        Ok(Layout { channels, sources })
    }
}

/// Round `v` to what a channel of type `t` stores.
fn stored(v: f64, t: SampleType) -> f64 {
    match t {
        SampleType::F16 => f16::from_f64(v).to_f64(),
        _ => v as f32 as f64,
    }
}

/// The alphas `alphas` re-targeted so that `1 - prod(1 - a)` is `target` (module docs).
pub fn retarget(alphas: &mut [f64], target: f64) {
    let clamp = |v: f64| if v.is_nan() { 0.0 } else { v.clamp(0.0, 1.0) };
    let target = clamp(target);
    for a in alphas.iter_mut() {
        *a = clamp(*a);
    }
    let opaque = alphas.iter().filter(|&&a| a == 1.0).count();
    if alphas.iter().all(|&a| a == 0.0) || (target == 1.0 && opaque > 0) {
        return;
    }
    if target == 1.0 {
        for a in alphas.iter_mut() {
            *a = if *a > 0.0 { 1.0 } else { 0.0 };
        }
        return;
    }
    let depth = -(-target).ln_1p();
    if opaque > 0 {
        let share = -(-depth / opaque as f64).exp_m1();
        for a in alphas.iter_mut() {
            *a = if *a == 1.0 { share } else { 0.0 };
        }
        return;
    }
    let total: f64 = alphas.iter().map(|&a| -(-a).ln_1p()).sum();
    let scale = depth / total;
    for a in alphas.iter_mut() {
        *a = -((-*a).ln_1p() * scale).exp_m1();
    }
}

impl DeepOp for RecolorOp {
    fn windows(&self, data: Bounds, display: Bounds) -> Result<OpWindows> {
        Ok(OpWindows {
            read: data,
            data,
            display,
        })
    }

    fn apply(&self, band: &DeepImage, _windows: &OpWindows) -> Result<DeepImage> {
        let layout = self.layout(band)?;
        let window = band.data_window;
        let rows = window.y0..=window.y1;
        // A band without samples needs no colour.
        let flat: FlatRows = if band.sample_count() == 0 || window.area() == 0 {
            self.flat
                .lock()
                .expect("flat reader")
                .take_rows(rows.start() + 1..=*rows.start())?
        } else {
            self.flat.lock().expect("flat reader").take_rows(rows)?
        };
        let computed: Vec<usize> = (0..layout.sources.len())
            .filter(|&k| !matches!(layout.sources[k], Source::Deep(_)))
            .collect();
        let alpha_slots: Vec<usize> = (0..layout.sources.len())
            .filter(|&k| is_alpha(layout.channels[k].role))
            .collect();
        let deep_of = |k: usize| match layout.sources[k] {
            Source::Deep(d) | Source::Alpha { deep: d, .. } => d,
            Source::Colour { .. } => unreachable!("alphas come from the deep image"),
        };
        // Per row, the computed channels' values of its samples, sample by sample.
        let width = window.width();
        let row_values: Vec<Vec<f64>> = (0..window.height())
            .into_par_iter()
            .map(|row| {
                let y = window.y0 + row as i32;
                let mut values = Vec::new();
                let mut alphas: Vec<Vec<f64>> = vec![Vec::new(); layout.sources.len()];
                let mut totals = vec![0.0f64; layout.sources.len()];
                for col in 0..width {
                    let x = window.x0 + col as i32;
                    let p = row * width + col;
                    let samples = band.range(p);
                    for &k in &alpha_slots {
                        let d = deep_of(k);
                        let a = &mut alphas[k];
                        a.clear();
                        a.extend(samples.clone().map(|i| band.planes[d].get_f32(i) as f64));
                        if let Source::Alpha { flat: f, .. } = layout.sources[k] {
                            retarget(a, flat.value(f, x, y).unwrap_or(0.0) as f64);
                            for v in a.iter_mut() {
                                *v = stored(*v, layout.channels[k].sample_type);
                            }
                        }
                        totals[k] = 1.0 - a.iter().map(|v| 1.0 - v).product::<f64>();
                    }
                    for (n, _) in samples.clone().enumerate() {
                        for &k in &computed {
                            values.push(match layout.sources[k] {
                                Source::Alpha { .. } => alphas[k][n],
                                Source::Colour { flat: f, alpha } => {
                                    let total = totals[alpha];
                                    let colour = flat.value(f, x, y).unwrap_or(0.0) as f64;
                                    if total == 0.0 || colour == 0.0 {
                                        0.0
                                    } else {
                                        colour * alphas[alpha][n] / total
                                    }
                                }
                                Source::Deep(_) => unreachable!("not computed"),
                            });
                        }
                    }
                }
                values
            })
            .collect();
        let total = band.sample_count();
        let planes: Vec<Plane> = (0..layout.sources.len())
            .into_par_iter()
            .map(|k| match layout.sources[k] {
                Source::Deep(d) => band.planes[d].clone(),
                _ => {
                    let slot = computed.iter().position(|&c| c == k).expect("computed");
                    let mut plane = Plane::with_capacity(layout.channels[k].sample_type, total);
                    for values in &row_values {
                        for v in values.iter().skip(slot).step_by(computed.len()) {
                            plane.push_f32(*v as f32);
                        }
                    }
                    plane
                }
            })
            .collect();
        Ok(DeepImage {
            display_window: band.display_window,
            data_window: window,
            channels: layout.channels,
            offsets: band.offsets.clone(),
            planes,
            state: band.state,
        })
    }
}

/// The recolor of deep bands by the first flat part of `flat`, read in the same rows as the
/// bands asked for (top to bottom): the comp graph's recolor node ([`crate::comp`]).
pub fn recolor_op(recolor: Recolor, flat: &Path, budget: u64) -> Result<Box<dyn DeepOp + Send>> {
    let source = FlatSource::open(flat, &crate::exr::PartSelector::FirstDeep, budget)?;
    Ok(Box::new(RecolorOp {
        recolor,
        flat_channels: source.channels.clone(),
        flat_path: flat.to_path_buf(),
        flat: Mutex::new(source),
    }))
}

/// Recolor the deep part `request.part` of `deep` with the first flat part of `flat`, writing
/// `output` as `request` says. Both are read in the same bands; the deep input's bands are
/// planned in the part of the budget the flat rows leave (a flat row costs its width's pixels
/// twice, unpacked and copied, against at least a deep row's per-pixel tables).
pub fn run_recolor(
    recolor: Recolor,
    deep: &Path,
    flat: &Path,
    output: &Path,
    request: OpOutput,
) -> Result<u64> {
    crate::exr::check_output_is_not_an_input(output, &[deep.to_path_buf(), flat.to_path_buf()])?;
    let mut options = request.stream_options(output)?;
    let source = FlatSource::open(flat, &crate::exr::PartSelector::FirstDeep, options.budget)?;
    let deep_width = ChunkSource::open(deep, &options.part, options.budget)?
        .window
        .width() as u64;
    let flat_row = 2 * source.window.width() as u64 * source.pixel_bytes();
    let deep_row = deep_width * (16 + DEEP_PIXEL_BYTES);
    // The flat band costs at most flat_row / deep_row times what the deep band's tables do.
    options.budget =
        (options.budget as u128 * deep_row as u128 / (deep_row as u128 + flat_row as u128)) as u64;
    let op = RecolorOp {
        recolor,
        flat_channels: source.channels.clone(),
        flat_path: flat.to_path_buf(),
        flat: Mutex::new(source),
    };
    run_op(&op, deep, output, &options, None)
}

/// `recolor` in the table of operations ([`super::registry`]).
pub const SPEC: OpSpec = OpSpec {
    name: "recolor",
    python: "recolor",
    help: "Give a deep image a flat image's colour, keeping its opacity (DeepRecolor); \
           --target-alpha also scales the opacity to the flat alpha",
    doc: "Give the deep EXR ``deep`` the colour of the flat EXR ``flat`` and write it to \
          ``out``, as ``deepmerge recolor``: the samples keep their depths and opacity, and each \
          takes the share ``C * a / A`` of the flat colour ``C`` (``A`` the pixel's flattened \
          alpha), so that ``out`` flattens to the flat colour wherever ``A > 0``. \
          ``target_alpha`` also scales the opacities so that the flattened alpha is the flat \
          alpha. Other options as ``deep_slice`` (``part`` picks the deep part).",
    inputs: &[
        InputSpec {
            name: "input",
            python: "deep",
            flat: false,
            help: "Deep EXR input: its samples, depths and opacity are kept",
        },
        InputSpec {
            name: "flat",
            python: "flat",
            flat: true,
            help: "Flat EXR input: the colour the deep image takes (its first flat part)",
        },
    ],
    options: &[OptionSpec {
        name: "target_alpha",
        help: "Also scale the opacities so that the flattened alpha is the flat image's alpha",
        positional: true,
        ..OptionSpec::NEW
    }],
    produces: Produces::Image,
    comp: true,
    build: |v, _| {
        Ok(Arc::new(Recolor {
            target_alpha: v.flag("target_alpha"),
        }))
    },
};

impl Operation for Recolor {
    fn run(&self, inputs: &[PathBuf], output: &Path, request: OutputRequest) -> Result<Ran> {
        let samples = run_recolor(*self, &inputs[0], &inputs[1], output, request)?;
        Ok(Ran::image(samples))
    }

    fn node(&self, inputs: &NodeInputs) -> Result<NodeWork> {
        let Some((flat, _)) = inputs.flat_files[1] else {
            return Err(Error::internal("recolor's flat input is no flat file"));
        };
        Ok(NodeWork::Band {
            op: recolor_op(*self, flat, inputs.budget)?,
            dy: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flattened(alphas: &[f64]) -> f64 {
        1.0 - alphas.iter().map(|a| 1.0 - a).product::<f64>()
    }

    #[test]
    fn retargeted_alphas_flatten_to_the_target() {
        for (alphas, target) in [
            (vec![0.2, 0.5, 0.1], 0.9),
            (vec![0.2, 0.5, 0.1], 0.05),
            (vec![0.7], 0.3),
            (vec![0.3, 1.0, 0.4, 1.0], 0.6),
            (vec![0.3, 1.0], 0.0),
        ] {
            let mut a = alphas.clone();
            retarget(&mut a, target);
            assert!(
                (flattened(&a) - target).abs() < 1e-12,
                "{alphas:?} -> {a:?}"
            );
        }
        // The relative optical depths are kept.
        let mut a = vec![0.2, 0.5];
        retarget(&mut a, 0.8);
        let ratio = |a: &[f64]| (-a[0]).ln_1p() / (-a[1]).ln_1p();
        assert!((ratio(&a) - ratio(&[0.2, 0.5])).abs() < 1e-12);
    }

    #[test]
    fn retarget_limits() {
        let mut a = vec![0.2, 0.0, 0.5];
        retarget(&mut a, 1.0);
        assert_eq!(a, vec![1.0, 0.0, 1.0]);
        let mut a = vec![0.2, 1.0];
        retarget(&mut a, 1.0);
        assert_eq!(a, vec![0.2, 1.0]);
        let mut a = vec![0.0, 0.0];
        retarget(&mut a, 0.5);
        assert_eq!(a, vec![0.0, 0.0]);
        let mut a = vec![1.5, -0.5, f64::NAN];
        retarget(&mut a, 0.5);
        assert_eq!((a[1], a[2]), (0.0, 0.0));
        assert!((flattened(&a) - 0.5).abs() < 1e-12);
    }
}
