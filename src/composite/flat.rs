//! The flat per-pixel path, in one home for both engines: tidy where volumes overlap, flatten
//! front to back, take ids and Z from the front-most contributing sample, and assemble the
//! channels of the flat image. The CPU engine runs all of it per pixel; the GL engine composites
//! on the GPU and comes here for the ids, the channel assembly and the pixels it leaves to the
//! host ([`MergePlan::push_flattened`]).

use super::flatten::flatten_pixel;
use super::merge::MergePlan;
use super::one_alpha::{composite_one_alpha, MAX_ONE_ALPHA_COLUMNS};
use super::pixel::{CompositeKind, PixelSamples};
use super::tidy::{needs_tidy, tidy_pixel};
use super::walk::Walker;
use crate::deep::{ChannelRole, FlatChannel, FlatImage, FlatValues, Plane};
use crate::vocab::Sample;
use rayon::prelude::*;

/// Flat output pixels in row-major order, as the merge produces them: composited values, ids
/// and the Z of the front-most contributing sample. Rows made in parallel are [`Self::append`]ed.
#[derive(Clone, Debug, Default)]
pub struct FlatPixels {
    /// Composited values per pixel.
    columns: usize,
    /// Per input, per id channel, the input's channel of that name.
    id_sources: Vec<Vec<Option<usize>>>,
    values: Vec<f32>,
    ids: Vec<u32>,
    z: Vec<f32>,
}

impl FlatPixels {
    /// Append `other`'s pixels after these (the rows of one merge, in order).
    pub fn append(&mut self, other: &mut FlatPixels) {
        self.values.append(&mut other.values);
        self.ids.append(&mut other.ids);
        self.z.append(&mut other.z);
    }
}

impl MergePlan<'_> {
    /// The channels flat output carries as ids (uint channels), in the deep channels' order.
    fn id_channels(&self) -> impl Iterator<Item = &crate::deep::Channel> {
        self.deep_channels
            .iter()
            .filter(|c| c.role == ChannelRole::Id)
    }

    /// An empty run of flat pixels for this merge, with room for `pixels`.
    pub fn flat_pixels(&self, pixels: usize) -> FlatPixels {
        let id_sources: Vec<Vec<Option<usize>>> = self
            .inputs
            .iter()
            .map(|image| {
                self.id_channels()
                    .map(|c| image.channel_index(&c.name))
                    .collect()
            })
            .collect();
        let id_count = self.id_channels().count();
        FlatPixels {
            columns: self.composite.len(),
            values: Vec::with_capacity(pixels * self.composite.len()),
            ids: Vec::with_capacity(pixels * id_count),
            z: Vec::with_capacity(pixels),
            id_sources,
        }
    }

    /// Append one flattened pixel: its composited values (the first `columns` of `values`), and
    /// the ids and Z of `front`, the front-most contributing sample (0 where there is none or
    /// its input lacks the channel). Ids are never blended: they are copied from that sample.
    pub fn push_flat(&self, out: &mut FlatPixels, values: &[f32], front: Option<Sample>) {
        out.values.extend_from_slice(&values[..out.columns]);
        let id_count = out.id_sources.first().map_or(0, Vec::len);
        match front {
            None => out.ids.extend(std::iter::repeat_n(0, id_count)),
            Some(s) => {
                let image = self.inputs[s.input as usize];
                let index = s.index as usize;
                out.ids
                    .extend(out.id_sources[s.input as usize].iter().map(|source| {
                        source.map_or(0, |c| match &image.planes[c] {
                            Plane::U32(v) => v[index],
                            other => other.get_f32(index) as u32,
                        })
                    }))
            }
        }
        out.z.push(front.map_or(0.0, |s| s.z));
    }

    /// Append `n` pixels without samples: what [`Self::push_flattened`] appends for each
    /// (every value, id and Z 0), in one go.
    pub fn push_empty(&self, out: &mut FlatPixels, n: usize) {
        let id_count = out.id_sources.first().map_or(0, Vec::len);
        out.values.extend(std::iter::repeat_n(0.0, n * out.columns));
        out.ids.extend(std::iter::repeat_n(0, n * id_count));
        out.z.extend(std::iter::repeat_n(0.0, n));
    }

    /// The reference's flat path for one pixel whose `samples` are in merge order: gather their
    /// values into `pixel`, tidy where volumes overlap (`any_volume` false skips even the
    /// check: points-only pixels pay nothing for it), flatten, and append the result.
    ///
    /// A pixel that needs no tidying is flattened straight from the inputs' planes
    /// ([`Self::flatten_untidied`]): the same arithmetic in the same order as gathering and
    /// [`flatten_pixel`], without the copy, and reading no value behind the sample that makes
    /// the pixel opaque.
    pub fn push_flattened(
        &self,
        out: &mut FlatPixels,
        samples: &[Sample],
        any_volume: bool,
        pixel: &mut PixelSamples,
    ) {
        if !(any_volume && needs_tidy(samples)) {
            let front = self.flatten_untidied(samples, pixel);
            self.push_flat(out, &pixel.values[..self.composite.len()], front);
            return;
        }
        pixel.gather(samples, &self.inputs, &self.sources);
        tidy_pixel(pixel, &self.composite);
        let flat = flatten_pixel(pixel, &self.composite);
        let front = flat.front.map(|s| pixel.samples[s]);
        self.push_flat(out, &flat.values, front);
    }

    /// [`flatten_pixel`] of `samples` (merge order, nothing to tidy) read from the planes:
    /// leaves the composited values in the first columns of `scratch.values` and returns the
    /// front-most contributing sample.
    fn flatten_untidied(&self, samples: &[Sample], scratch: &mut PixelSamples) -> Option<Sample> {
        let channels = &self.composite;
        let columns = channels.len();
        if let [alpha] = channels.alphas[..] {
            self.debug_assert_one_alpha(alpha);
            scratch.values.clear();
            scratch.values.resize(columns, 0.0);
            let mut front = [None];
            if composite_one_alpha(
                &self.views,
                &mut [samples.iter().copied()],
                alpha,
                &mut scratch.values,
                &mut front,
            ) {
                return front[0];
            }
        }
        self.flatten_general(samples, scratch)
    }

    /// [`Self::flatten_untidied`] for any composited channels (per-channel alphas too).
    fn flatten_general(&self, samples: &[Sample], scratch: &mut PixelSamples) -> Option<Sample> {
        let channels = &self.composite;
        let columns = channels.len();
        // The accumulated values, then one sample's values.
        scratch.values.clear();
        scratch.values.resize(2 * columns, 0.0);
        let (acc, row) = scratch.values.split_at_mut(columns);
        let mut front = None;
        for s in samples {
            if channels.alphas.iter().all(|&a| acc[a] >= 1.0) && !channels.alphas.is_empty() {
                break;
            }
            for (value, source) in row.iter_mut().zip(&self.views[s.input as usize].columns) {
                *value = source.get(s.index as usize);
            }
            if front.is_none() && channels.alphas.iter().any(|&a| row[a] > 0.0) {
                front = Some(*s);
            }
            // Colours first: they read the alpha accumulated before this sample.
            for (k, kind) in channels.kinds.iter().enumerate() {
                if let CompositeKind::Colour { alpha } = *kind {
                    acc[k] += (1.0 - acc[alpha]) * row[k];
                }
            }
            for &a in &channels.alphas {
                acc[a] += (1.0 - acc[a]) * row[a];
            }
        }
        front
    }

    /// [`Self::push_flattened`] of two neighbouring pixels, in order. Where neither needs
    /// tidying and the channels are one alpha and its colours, both go through one loop
    /// ([`composite_one_alpha`]: two independent chains of dependent operations run side by
    /// side, where one pixel at a time waits on each sample's latency).
    pub fn push_flattened_pair(
        &self,
        out: &mut FlatPixels,
        pixels: [(&[Sample], bool); 2],
        pixel: &mut PixelSamples,
    ) {
        let simple =
            |(samples, any_volume): (&[Sample], bool)| !(any_volume && needs_tidy(samples));
        if simple(pixels[0])
            && simple(pixels[1])
            && self.push_one_alpha(
                out,
                &mut [pixels[0].0.iter().copied(), pixels[1].0.iter().copied()],
            )
        {
            return;
        }
        for (samples, any_volume) in pixels {
            self.push_flattened(out, samples, any_volume, pixel);
        }
    }

    /// [`Self::push_flattened`] of `n` (one or two) neighbouring pixels from absolute (x, y),
    /// walked in merge order straight from the planes and composited until opaque
    /// ([`super::walk`]): the common case's flat path, which orders no sample behind an opaque
    /// one. `false`, with nothing pushed, where the channels or a pixel's runs take the
    /// gathering path.
    pub(crate) fn push_walked(
        &self,
        walker: &Walker,
        out: &mut FlatPixels,
        x: i32,
        y: i32,
        n: usize,
    ) -> bool {
        if walker.pairs() {
            self.push_walks(out, x, n, |x| walker.walk(x, y))
        } else {
            self.push_walks(out, x, n, |x| walker.walk_k(x, y))
        }
    }

    /// [`Self::push_walked`] with the walks of pixels x.. given by `walk`.
    #[inline(always)]
    fn push_walks<I: Iterator<Item = Sample>>(
        &self,
        out: &mut FlatPixels,
        x: i32,
        n: usize,
        walk: impl Fn(i32) -> Option<I>,
    ) -> bool {
        match n {
            1 => walk(x).is_some_and(|walk| self.push_one_alpha(out, &mut [walk])),
            _ => match (walk(x), walk(x + 1)) {
                (Some(first), Some(second)) => self.push_one_alpha(out, &mut [first, second]),
                _ => false,
            },
        }
    }

    /// Composite one or two pixels (`pixels`, each its samples in merge order, nothing to tidy)
    /// in the one-alpha loop ([`composite_one_alpha`]) and append them; `false`, with nothing
    /// appended, where the channels are not one alpha and its colours (2 to
    /// [`MAX_ONE_ALPHA_COLUMNS`]).
    #[inline(always)]
    fn push_one_alpha<I: Iterator<Item = Sample>>(
        &self,
        out: &mut FlatPixels,
        pixels: &mut [I],
    ) -> bool {
        let ([alpha], columns) = (&self.composite.alphas[..], self.composite.len()) else {
            return false;
        };
        if columns > MAX_ONE_ALPHA_COLUMNS {
            return false;
        }
        self.debug_assert_one_alpha(*alpha);
        let n = pixels.len();
        let mut values = [0f32; 2 * MAX_ONE_ALPHA_COLUMNS];
        let mut fronts = [None; 2];
        if !composite_one_alpha(
            &self.views,
            pixels,
            *alpha,
            &mut values[..n * columns],
            &mut fronts[..n],
        ) {
            return false;
        }
        for (row, front) in values[..n * columns].chunks_exact(columns).zip(fronts) {
            self.push_flat(out, row, front);
        }
        true
    }

    /// Every composited column but `alpha` is a colour of `alpha`.
    fn debug_assert_one_alpha(&self, alpha: usize) {
        debug_assert!(self
            .composite
            .kinds
            .iter()
            .enumerate()
            .all(|(k, kind)| { k == alpha || *kind == CompositeKind::Colour { alpha } }));
    }

    /// The flat image over the merge's window from all its pixels (row-major); with `with_z`,
    /// a Z channel of the front-most contributing samples. Channels are sorted by name.
    pub fn flat_image(&self, pixels: FlatPixels, with_z: bool) -> FlatImage {
        let columns = pixels.columns;
        let ids: Vec<&crate::deep::Channel> = self.id_channels().collect();
        // Each channel is one strided pass over the pixels: one task a channel, so a host with
        // cores to spare does not make them in turn (a serial tail of every flat merge).
        let composited = self
            .composite
            .names
            .par_iter()
            .enumerate()
            .map(|(k, name)| FlatChannel {
                name: name.clone(),
                values: FlatValues::F32(
                    pixels
                        .values
                        .chunks_exact(columns)
                        .map(|px| px[k])
                        .collect(),
                ),
            });
        let id_planes = ids.par_iter().enumerate().map(|(k, c)| FlatChannel {
            name: c.name.clone(),
            values: FlatValues::U32(pixels.ids.chunks_exact(ids.len()).map(|px| px[k]).collect()),
        });
        let mut channels: Vec<FlatChannel> = composited.chain(id_planes).collect();
        if with_z {
            channels.push(FlatChannel {
                name: "Z".into(),
                values: FlatValues::F32(pixels.z),
            });
        }
        channels.sort_by(|a, b| a.name.cmp(&b.name));
        FlatImage {
            display_window: self.display_window,
            data_window: self.window,
            channels,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deep::{Bounds, Channel, DeepImage, DeepState, SampleType};
    use half::f16;

    const PIXELS: usize = 200;

    /// An image of `PIXELS` pixels with `channels` (name, type) and a float Z, holding `values`
    /// cycled through, a few samples a pixel at depths that interleave with other inputs'.
    fn image(channels: &[(&str, SampleType)], values: &[f32], shift: usize) -> DeepImage {
        let window = Bounds::from_origin_size(0, 0, PIXELS, 1);
        let counts: Vec<u32> = (0..PIXELS).map(|p| 1 + ((p + shift) % 5) as u32).collect();
        let n: usize = counts.iter().map(|&c| c as usize).sum();
        let value = |i: usize, k: usize| values[(i * 7 + k * 3 + shift) % values.len()];
        let mut planes: Vec<Plane> = channels
            .iter()
            .enumerate()
            .map(|(k, (_, t))| match t {
                SampleType::F16 => Plane::F16((0..n).map(|i| f16::from_f32(value(i, k))).collect()),
                _ => Plane::F32((0..n).map(|i| value(i, k)).collect()),
            })
            .collect();
        planes.push(Plane::F32(
            (0..n)
                .map(|i| ((i * 13 + shift) % 17) as f32 * 0.5)
                .collect(),
        ));
        let channels = channels
            .iter()
            .map(|(name, t)| Channel::new(*name, *t))
            .chain([Channel::new("Z", SampleType::F32)])
            .collect();
        DeepImage::from_counts(window, window, channels, &counts, planes, DeepState::Messy).unwrap()
    }

    /// Flattening by [`MergePlan::flatten_untidied`] (which takes the one-alpha loop where it
    /// can), by [`MergePlan::push_flattened_pair`] (two pixels in one loop) and by the one-alpha
    /// loop with half floats converted in software gives the general loop's values and front
    /// sample bit for bit, over values that test the half conversion: subnormals, infinities,
    /// NaNs, negative zero, alphas past 1 and below 0; and walked from the planes
    /// ([`MergePlan::push_walked`]) as gathered. A NaN compares as any NaN: which of two
    /// NaN operands an add returns (its sign) follows the operand order the compiler picks.
    /// Returns the columns and the alpha's column.
    fn one_alpha_equals_general(inputs: &[&DeepImage]) -> (usize, usize) {
        let plan = MergePlan::new(inputs).unwrap();
        let columns = plan.composite.len();
        let mut sort_scratch = Vec::new();
        let mut scratch = PixelSamples::new(columns);
        let bits = |v: &f32| if v.is_nan() { u32::MAX } else { v.to_bits() };
        let pixels: Vec<(Vec<Sample>, bool)> = (0..PIXELS as i32)
            .map(|x| {
                let mut samples = Vec::new();
                let any_volume = plan.ordered_samples_into(x, 0, &mut samples, &mut sort_scratch);
                assert!(!samples.is_empty());
                (samples, any_volume)
            })
            .collect();
        // Pixel by pixel, the general loop against the one-alpha loop.
        let mut general = plan.flat_pixels(PIXELS);
        let mut single = plan.flat_pixels(PIXELS);
        for (x, (samples, _)) in pixels.iter().enumerate() {
            let fast = plan.flatten_untidied(samples, &mut scratch);
            let fast_values: Vec<u32> = scratch.values[..columns].iter().map(bits).collect();
            plan.push_flat(&mut single, &scratch.values[..columns], fast);
            let front = plan.flatten_general(samples, &mut scratch);
            let general_values: Vec<u32> = scratch.values[..columns].iter().map(bits).collect();
            plan.push_flat(&mut general, &scratch.values[..columns], front);
            assert_eq!(fast_values, general_values, "pixel {x}");
            assert_eq!(fast, front, "pixel {x}");
        }
        // Two at a time (pairs of every alignment: pixel 0 alone first, then in pairs).
        let mut paired = plan.flat_pixels(PIXELS);
        plan.push_flattened(&mut paired, &pixels[0].0, pixels[0].1, &mut scratch);
        for pair in pixels[1..].chunks(2) {
            match pair {
                [a, b] => {
                    plan.push_flattened_pair(&mut paired, [(&a.0, a.1), (&b.0, b.1)], &mut scratch)
                }
                _ => plan.push_flattened(&mut paired, &pair[0].0, pair[0].1, &mut scratch),
            }
        }
        // The software half conversion, two at a time.
        let mut soft = plan.flat_pixels(PIXELS);
        let alpha = plan.composite.alphas[0];
        for pair in pixels.chunks(2) {
            let mut samples: Vec<_> = pair.iter().map(|(s, _)| s.iter().copied()).collect();
            let mut values = vec![0f32; samples.len() * columns];
            let mut fronts = vec![None; samples.len()];
            assert!(super::super::one_alpha::composite_converting(
                &plan.views,
                &mut samples,
                alpha,
                &mut values,
                &mut fronts,
                true,
            ));
            for (row, front) in values.chunks_exact(columns).zip(fronts) {
                plan.push_flat(&mut soft, row, front);
            }
        }
        // Walked straight from the planes (`push_walked`), trusting the runs as they stand, against
        // the gathering path trusting them too: one pixel, then pairs.
        let mut trusting = MergePlan::new(inputs).unwrap();
        trusting.sort = super::super::SortPolicy::AssumeSorted;
        let walker = trusting.walker().expect("float Z, no ZBack");
        let mut walked = trusting.flat_pixels(PIXELS);
        let mut gathered = trusting.flat_pixels(PIXELS);
        let mut x = 0;
        while x < PIXELS as i32 {
            let n = if x == 0 {
                1
            } else {
                2.min(PIXELS - x as usize)
            };
            assert!(trusting.push_walked(&walker, &mut walked, x, 0, n));
            for x in x..x + n as i32 {
                let mut samples = Vec::new();
                let any_volume =
                    trusting.ordered_samples_into(x, 0, &mut samples, &mut sort_scratch);
                trusting.push_flattened(&mut gathered, &samples, any_volume, &mut scratch);
            }
            x += n as i32;
        }
        let values = |p: &FlatPixels| p.values.iter().map(bits).collect::<Vec<u32>>();
        assert_eq!(values(&walked), values(&gathered), "walked values");
        assert_eq!(walked.z, gathered.z, "walked Z");
        assert_eq!(walked.ids, gathered.ids, "walked ids");
        for (name, other) in [("single", &single), ("paired", &paired), ("soft", &soft)] {
            let values = |p: &FlatPixels| p.values.iter().map(bits).collect::<Vec<u32>>();
            let z = |p: &FlatPixels| p.z.iter().map(bits).collect::<Vec<u32>>();
            assert_eq!(values(other), values(&general), "{name} values");
            assert_eq!(z(other), z(&general), "{name} Z");
            assert_eq!(other.ids, general.ids, "{name} ids");
        }
        (columns, alpha)
    }

    const VALUES: [f32; 15] = [
        0.0,
        -0.0,
        0.25,
        0.5,
        1.0,
        1.5,
        -0.25,
        3.0e-7,
        6.1e-5,
        65504.0,
        1.0e9,
        -1.0e9,
        f32::NAN,
        0.999,
        0.0001,
    ];

    #[test]
    fn the_one_alpha_loop_equals_the_general_loop_bit_for_bit() {
        use SampleType::{F16, F32};
        let rgba = [("A", F16), ("B", F16), ("G", F16), ("R", F16)];
        let (a, b) = (image(&rgba, &VALUES, 0), image(&rgba, &VALUES, 4));
        assert_eq!(one_alpha_equals_general(&[&a, &b]), (4, 0));
        // An input without B (read as zero) and one with a float G.
        let no_blue = image(&[("A", F16), ("G", F16), ("R", F16)], &VALUES, 1);
        let float_green = image(
            &[("A", F16), ("B", F16), ("G", F32), ("R", F16)],
            &VALUES,
            2,
        );
        assert_eq!(one_alpha_equals_general(&[&no_blue, &float_green]), (4, 0));
        // The alpha last among the columns (its role is from the name's last part).
        let layer = [("B", F16), ("G", F16), ("R", F16), ("layer.A", F16)];
        let (c, d) = (image(&layer, &VALUES, 3), image(&layer, &VALUES, 1));
        assert_eq!(one_alpha_equals_general(&[&c, &d]), (4, 3));
        // Two columns, and six (alpha in the middle).
        let grey = [("A", F32), ("Y", F16)];
        let (e, f) = (image(&grey, &VALUES, 0), image(&grey, &VALUES, 2));
        assert_eq!(one_alpha_equals_general(&[&e, &f]), (2, 0));
        let six = [
            ("A", F16),
            ("B", F16),
            ("G", F16),
            ("R", F16),
            ("a", F16),
            ("Y", F16),
        ];
        let (g, h) = (image(&six, &VALUES, 0), image(&six, &VALUES, 3));
        assert_eq!(one_alpha_equals_general(&[&g, &h]).0, 6);
    }
}
