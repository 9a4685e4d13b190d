//! Loading in the background: read every input, merge them, and prepare what the GPU slices,
//! on a worker thread that reports progress, so the window stays responsive while large inputs
//! decode. Errors come back as the CLI's one-line [`Error`]s.
//!
//! Each layer is handed over as soon as it is made ([`LoadEvent::Layer`]), so the window can
//! upload it and let its host arrays go ([`Layer::release_samples`]) while the next one is
//! made: at production sizes the layers are most of the memory.

use std::path::PathBuf;
use std::sync::Arc;

use crate::composite::{
    merge_images_over, CompositeChannels, MergeOptions, MergeOutput, OutputKind,
};
use crate::deep::{Bounds, DeepImage};
use crate::error::{Error, Result};
use crate::exr::{read_deep, ReadOptions};
use crate::inspect::input_title;

/// One thing the window can show: the merge, or one input, as a tidy deep image flattened to
/// the arrays `slice.comp` reads.
#[derive(Clone, Debug)]
pub struct Layer {
    /// "merged" or the input's file name.
    pub name: String,
    /// The frame (the first input's display window).
    pub display_window: Bounds,
    /// The pixels stored (for the merge: the union of the inputs').
    pub data_window: Bounds,
    /// The composited columns (names, alphas).
    pub columns: CompositeChannels,
    /// Per pixel of the data window, where its samples start; one more entry at the end.
    pub offsets: Vec<u32>,
    /// (Z, ZBack) per sample, in merge order, no two overlapping (tidied).
    pub depths: Vec<[f32; 2]>,
    /// Composited values per sample, `columns.len().max(1)` each.
    pub values: Vec<f32>,
    /// The nearest and farthest finite depths (0, 1 when there are none).
    pub depth_range: (f32, f32),
    /// Samples held (also once the arrays are released).
    pub sample_count: usize,
    /// The id channels the id view can show ([`is_id_channel`]), in the image's channel order.
    pub id_names: Vec<String>,
    /// Per sample, one id per entry of `id_names` (0 where the sample has no id: a float that
    /// is not a whole number, or a merged sample from an input without the channel).
    pub ids: Vec<u32>,
}

impl Layer {
    /// Values per sample on the GPU (GLSL has no empty arrays).
    pub fn stride(&self) -> usize {
        self.columns.len().max(1)
    }

    /// Pixels of the data window.
    pub fn pixels(&self) -> usize {
        self.data_window.area()
    }

    /// Samples held.
    pub fn samples(&self) -> usize {
        self.sample_count
    }

    /// Free the per-pixel and per-sample arrays (the GPU has its copy); what describes the
    /// layer stays. [`Layer::slice_pixel`] needs the arrays.
    pub fn release_samples(&mut self) {
        self.offsets = Vec::new();
        self.depths = Vec::new();
        self.values = Vec::new();
        self.ids = Vec::new();
    }

    /// Ids per sample on the GPU (0: the layer has no id channel).
    pub fn id_stride(&self) -> usize {
        self.id_names.len()
    }
}

/// True for a channel the id view offers: a `uint` channel (an id by type), or a `half` or
/// `float` channel whose name (the part after the last '.') ends in `id` in any case (`id`,
/// `objectId`, `particle_id`), read with the float-id convention of `idselect` (a whole number
/// is the id; anything else is no id).
pub fn is_id_channel(channel: &crate::deep::Channel) -> bool {
    use crate::deep::ChannelRole;
    if channel.role == ChannelRole::Id {
        return true;
    }
    let base = channel.name.rsplit('.').next().unwrap_or(&channel.name);
    channel.role == ChannelRole::Other && base.to_ascii_lowercase().ends_with("id")
}

/// Everything loaded: the inputs as read (for the inspector) and the layers (0: the merge).
/// The loader leaves `layers` empty: they come one by one as [`LoadEvent::Layer`].
pub struct Loaded {
    /// The inputs' section titles (path and part), as `deepmerge info --pixel` prints them.
    pub titles: Vec<String>,
    /// The inputs as read (shared with the worker that builds point clouds).
    pub inputs: Arc<Vec<DeepImage>>,
    /// Layer 0 is the merge, layer i the i-th input.
    pub layers: Vec<Layer>,
}

/// What the worker reports.
pub enum LoadEvent {
    /// How far it is (0..=1) and what it is doing.
    Progress(f32, String),
    /// The next layer (the merge first, then the inputs in order).
    Layer(Box<Layer>),
    /// The end: everything, or the first error.
    Done(Box<Result<Loaded>>),
    /// The point cloud of a layer the window asked for ([`super::cloud::build_cloud`]), or
    /// why not.
    Cloud(usize, Box<Result<super::cloud::PointCloud>>),
}

/// What to load.
#[derive(Clone, Debug)]
pub struct LoadRequest {
    /// The inputs, front-most priority first.
    pub files: Vec<PathBuf>,
    /// How to read them (part, memory limit).
    pub read: ReadOptions,
    /// How to merge them (sort policy).
    pub merge: MergeOptions,
}

/// Load `request`, reporting through `send` (which also wakes the window). Runs on the worker.
pub fn load(request: &LoadRequest, send: &dyn Fn(LoadEvent)) {
    let result = load_inner(request, send);
    send(LoadEvent::Done(Box::new(result)));
}

fn load_inner(request: &LoadRequest, send: &dyn Fn(LoadEvent)) -> Result<Loaded> {
    let n = request.files.len();
    // Reading is most of the time; merging and preparing the layers the rest.
    let steps = (2 * n + 1) as f32;
    let mut inputs = Vec::with_capacity(n);
    let mut titles = Vec::with_capacity(n);
    for (i, path) in request.files.iter().enumerate() {
        send(LoadEvent::Progress(
            i as f32 / steps,
            format!("reading {}", path.display()),
        ));
        // Reading first: a flat or damaged input gets the reader's message, as in the CLI.
        let image = read_deep(path, &request.read)?;
        let part = crate::info::deep_parts(path, Some(&request.read.part))?[0];
        image.check_depths().map_err(|e| e.in_file(path))?;
        titles.push(input_title(path, Some(part)));
        inputs.push(image);
    }
    let refs: Vec<&DeepImage> = inputs.iter().collect();
    let deep = MergeOptions {
        output: OutputKind::Deep,
        tidy: true,
        ..request.merge
    };
    send(LoadEvent::Progress(n as f32 / steps, "merging".into()));
    let paths: Vec<&std::path::Path> = request.files.iter().map(PathBuf::as_path).collect();
    let layer = build_layer("merged", &refs, &deep).map_err(|e| e.in_merge(&paths))?;
    send(LoadEvent::Layer(Box::new(layer)));
    for (i, image) in inputs.iter().enumerate() {
        send(LoadEvent::Progress(
            (n + 1 + i) as f32 / steps,
            format!("tidying {}", request.files[i].display()),
        ));
        let name = request.files[i]
            .file_name()
            .map_or_else(|| titles[i].clone(), |f| f.to_string_lossy().into_owned());
        let layer =
            build_layer(&name, &[image], &deep).map_err(|e| e.in_file(&request.files[i]))?;
        send(LoadEvent::Layer(Box::new(layer)));
    }
    Ok(Loaded {
        titles,
        inputs: Arc::new(inputs),
        layers: Vec::new(),
    })
}

/// Samples merged at a time while a layer is built: the reference merge holds about 70 bytes
/// per sample while it works (keys, tidied rows, output planes), so merging a layer in bands of
/// rows keeps that near 1 GiB at any image size, beside the layer itself.
const BUILD_BAND_SAMPLES: usize = 16 << 20;

/// `inputs` merged as a tidy deep image (the reference merge; one input: tidied on its own)
/// and flattened to a layer, band of rows by band of rows (`merge_images_over` on each band of
/// the union window; pixels merge independently, so the bands join into the whole merge).
fn build_layer(name: &str, inputs: &[&DeepImage], options: &MergeOptions) -> Result<Layer> {
    let window = inputs
        .iter()
        .map(|i| i.data_window)
        .reduce(|a, b| a.union(&b))
        .ok_or_else(|| Error::internal("a layer of no inputs"))?;
    let total: usize = inputs.iter().map(|i| i.sample_count()).sum();
    let height = window.height();
    let rows_per_band = (height.saturating_mul(BUILD_BAND_SAMPLES) / total.max(1)).clamp(1, height);
    let mut builder: Option<LayerBuilder> = None;
    let mut y0 = window.y0;
    while y0 <= window.y1 {
        let y1 = (y0 as i64 + rows_per_band as i64 - 1).min(window.y1 as i64) as i32;
        let band = Bounds { y0, y1, ..window };
        let image = match merge_images_over(inputs, options, Some(band))? {
            MergeOutput::Deep(image) => image,
            MergeOutput::Flat(_) => return Err(Error::internal("a deep merge gave a flat image")),
        };
        builder
            .get_or_insert_with(|| LayerBuilder::new(name, &image, window, total))
            .append(&image)?;
        y0 = y1 + 1;
    }
    let builder = builder.ok_or_else(|| Error::internal("a layer of no rows"))?;
    Ok(builder.finish())
}

/// The arrays `slice.comp` reads, from a tidy deep image.
pub fn layer_of(name: &str, image: &DeepImage) -> Result<Layer> {
    let mut builder = LayerBuilder::new(name, image, image.data_window, image.sample_count());
    builder.append(image)?;
    Ok(builder.finish())
}

/// A layer made from tidy deep images of consecutive bands of rows, top to bottom.
struct LayerBuilder {
    layer: Layer,
}

impl LayerBuilder {
    /// An empty layer over `window` with the columns of `first` (every band of one merge has
    /// the same channels), room for `samples`.
    fn new(name: &str, first: &DeepImage, window: Bounds, samples: usize) -> LayerBuilder {
        let columns = CompositeChannels::of(&[first]);
        let stride = columns.len().max(1);
        let mut offsets = Vec::with_capacity(window.area() + 1);
        offsets.push(0);
        LayerBuilder {
            layer: Layer {
                name: name.to_string(),
                display_window: first.display_window,
                data_window: window,
                columns,
                offsets,
                depths: Vec::with_capacity(samples),
                values: Vec::with_capacity(samples.saturating_mul(stride)),
                depth_range: (f32::INFINITY, f32::NEG_INFINITY),
                sample_count: 0,
                id_names: first
                    .channels
                    .iter()
                    .filter(|c| is_id_channel(c))
                    .map(|c| c.name.clone())
                    .collect(),
                ids: Vec::new(),
            },
        }
    }

    /// Add the next band's pixels and samples.
    fn append(&mut self, image: &DeepImage) -> Result<()> {
        let layer = &mut self.layer;
        let total = layer.sample_count + image.sample_count();
        if total > u32::MAX as usize {
            return Err(Error::Usage(format!(
                "{}: {total} or more samples are more than the viewer addresses (2^32)",
                layer.name
            )));
        }
        let sources = layer.columns.sources_in(image);
        let id_planes: Vec<Option<&crate::deep::Plane>> = layer
            .id_names
            .iter()
            .map(|n| image.channel_index(n).map(|c| &image.planes[c]))
            .collect();
        let (z, zback) = image.depth_channels();
        let base = layer.sample_count as u64;
        layer
            .offsets
            .extend(image.offsets[1..].iter().map(|&o| (base + o) as u32));
        let mut range = layer.depth_range;
        for i in 0..image.sample_count() {
            let zf = z.map_or(0.0, |c| image.planes[c].get_f32(i));
            let zb = zback.map_or(zf, |c| image.planes[c].get_f32(i));
            // The one key rule (ZBack <= Z is a point), as every engine reads keys.
            let (zf, zb) = crate::vocab::depth_key(zf, zb);
            for d in [zf, zb].into_iter().filter(|d| d.is_finite()) {
                range = (range.0.min(d), range.1.max(d));
            }
            layer.depths.push([zf, zb]);
            for src in &sources {
                layer
                    .values
                    .push(src.map_or(0.0, |c| image.planes[c].get_f32(i)));
            }
            if sources.is_empty() {
                layer.values.push(0.0);
            }
            for plane in &id_planes {
                layer.ids.push(
                    plane
                        .and_then(|p| crate::ops::idselect::id_at(p, i))
                        .unwrap_or(0),
                );
            }
        }
        layer.depth_range = range;
        layer.sample_count = total;
        Ok(())
    }

    fn finish(mut self) -> Layer {
        if self.layer.depth_range.0 > self.layer.depth_range.1 {
            self.layer.depth_range = (0.0, 1.0);
        }
        self.layer
    }
}

/// What the slice pass computes for one pixel, on the host: the composited values of the
/// samples between `near` and `far` (volumes cut at the planes with the tidy's split), the
/// depth of the front-most contributing piece and how many samples lie inside. The GPU's
/// `slice.comp` does the same in f32; the window test draws its expectations from this.
#[derive(Clone, Debug, PartialEq)]
pub struct SlicedPixel {
    /// One value per composited column.
    pub values: Vec<f32>,
    /// Front depth of the first piece with any alpha, if any.
    pub front: Option<f32>,
    /// Samples (whole or cut) inside the slice.
    pub count: usize,
    /// The layer's index of the sample that supplies `front` (the one the id view shows).
    pub front_sample: Option<usize>,
}

impl Layer {
    /// The slice of pixel `p` (row-major in the data window) between `near` and `far`.
    pub fn slice_pixel(&self, p: usize, near: f32, far: f32) -> SlicedPixel {
        use crate::composite::tidy::{piece_fraction, split_row};
        use crate::composite::{flatten_pixel, PixelSamples};
        use crate::vocab::Sample;
        let stride = self.stride();
        let mut pieces = PixelSamples::new(self.columns.len());
        for s in self.offsets[p] as usize..self.offsets[p + 1] as usize {
            let [z, zback] = self.depths[s];
            let row = &self.values[s * stride..s * stride + self.columns.len()];
            let (lo, hi) = (z.max(near), zback.min(far));
            let volume = zback > z;
            let fraction = if !volume {
                if z < near || z > far {
                    continue;
                }
                1.0
            } else if hi <= lo {
                continue;
            } else if lo > z || hi < zback {
                piece_fraction(lo as f64, hi as f64, zback as f64 - z as f64)
            } else {
                1.0
            };
            let cut: Vec<f32> = if fraction < 1.0 {
                split_row(row, fraction, &self.columns)
                    .map(|v| v as f32)
                    .collect()
            } else {
                row.to_vec()
            };
            let (pz, pzb) = if volume { (lo, hi) } else { (z, z) };
            pieces.push(
                Sample {
                    z: pz,
                    zback: pzb,
                    input: 0,
                    index: s as u64,
                },
                &cut,
            );
        }
        let flat = flatten_pixel(&pieces, &self.columns);
        SlicedPixel {
            values: flat.values,
            front: flat.front.map(|i| pieces.samples[i].z),
            count: pieces.len(),
            front_sample: flat.front.map(|i| pieces.samples[i].index as usize),
        }
    }

    /// What the id view shows at pixel `p` between `near` and `far`: id channel `k` of the
    /// front-most sample inside the slice with any alpha above 0 (the sample whose depth the
    /// depth view shows), 0 where there is none. The host twin of `view_image.frag`'s id view.
    pub fn front_id(&self, p: usize, near: f32, far: f32, k: usize) -> u32 {
        self.slice_pixel(p, near, far)
            .front_sample
            .map_or(0, |s| self.ids[s * self.id_stride() + k])
    }
}
