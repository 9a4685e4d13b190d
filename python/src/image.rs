//! `deepmerge.DeepImage` and `deepmerge.FlatImage`: the library's images owned by Python objects,
//! with their buffers handed to numpy as read-only views.
//!
//! Both classes are `frozen`: nothing can take `&mut` to the image once Python holds it, so its
//! `Vec`s are never reallocated or freed while a view exists (each view keeps its image alive as
//! its numpy `base`). The views are read-only because writing through them would change data
//! that Rust holds through shared references; `copy()` an array to change it.
//!
//! The one buffer that is not the library's own is `counts`: the library stores offsets, so the
//! per-pixel counts are worked out once, when the Python object is made, and kept beside it.

use deepmerge::deep::{Bounds, Channel, DeepImage, DeepState, FlatImage, FlatValues, Plane};
use numpy::ndarray::{ArrayView1, ArrayView2, Dimension};
use numpy::{Element, PyArray, PyArray1, PyArrayDyn, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors;

/// A window as Python sees it: `((x0, y0), (x1, y1))`, inclusive, as the OpenEXR module's
/// `dataWindow` header entry.
pub type Window = ((i32, i32), (i32, i32));

fn window_of(b: Bounds) -> Window {
    ((b.x0, b.y0), (b.x1, b.y1))
}

fn bounds_of(w: Window) -> Bounds {
    Bounds {
        x0: w.0 .0,
        y0: w.0 .1,
        x1: w.1 .0,
        y1: w.1 .1,
    }
}

/// A read-only numpy view of `data`, kept alive by `owner`.
///
/// # Safety
/// `data` must live inside `owner` (a frozen pyclass) and never move or change while `owner` is
/// alive: the view's `base` is `owner`, so the view keeps it alive.
unsafe fn view<'py, T: Element, D: Dimension>(
    owner: &Bound<'py, PyAny>,
    data: numpy::ndarray::ArrayView<'_, T, D>,
) -> Bound<'py, PyArray<T, D>> {
    // SAFETY: the caller's promise; see the module docs.
    let array = unsafe { PyArray::borrow_from_array(&data, owner.clone()) };
    // A fresh array has no other borrow, so `readwrite` cannot fail here.
    array.readwrite().make_nonwriteable();
    array
}

/// The view of one plane, in its stored type.
fn plane_view<'py>(owner: &Bound<'py, PyAny>, plane: &Plane) -> Bound<'py, PyAny> {
    // SAFETY: planes belong to the frozen image `owner` holds.
    unsafe {
        match plane {
            Plane::U32(v) => view(owner, ArrayView1::from(v.as_slice())).into_any(),
            Plane::F16(v) => view(owner, ArrayView1::from(v.as_slice())).into_any(),
            Plane::F32(v) => view(owner, ArrayView1::from(v.as_slice())).into_any(),
        }
    }
}

/// The name `deep_image_state` uses for a state.
fn state_of_name(name: &str) -> PyResult<DeepState> {
    [
        DeepState::Messy,
        DeepState::Sorted,
        DeepState::NonOverlapping,
        DeepState::Tidy,
    ]
    .into_iter()
    .find(|s| s.name() == name)
    .ok_or_else(|| {
        errors::usage(format!(
            "deep_image_state must be 'messy', 'sorted', 'non-overlapping' or 'tidy', not {name:?}"
        ))
    })
}

/// A deep image: per-pixel sample counts and one flat array per channel over all samples.
///
/// Pixel ``p`` (row-major over the data window) owns samples ``offsets[p]:offsets[p + 1]`` of
/// every channel. The arrays are read-only views of the image's own memory, not copies: they
/// keep the image alive, and ``.copy()`` gives an array to change.
///
/// ``DeepImage(counts, channels, *, data_window=None, display_window=None,
/// deep_image_state="messy", offsets=None)`` builds one from arrays (copied in): ``counts`` an
/// H x W uint32 array, ``channels`` a dict of name to 1-D float32, float16 or uint32 arrays of
/// ``counts.sum()`` values each, windows as ``((x0, y0), (x1, y1))`` inclusive (the data window
/// defaults to ``((0, 0), (W - 1, H - 1))``, the display window to the data window). ``offsets``,
/// when given, must be the exclusive prefix sum of ``counts`` (H*W or H*W + 1 entries). Raises
/// ``deepmerge.FormatError`` (a ``ValueError``) when the arrays disagree or a depth is NaN.
#[pyclass(frozen, name = "DeepImage", module = "deepmerge")]
pub struct PyDeepImage {
    pub image: DeepImage,
    counts: Vec<u32>,
}

impl PyDeepImage {
    /// Wrap an image the library made.
    pub fn new(image: DeepImage) -> Self {
        let counts = image.counts();
        PyDeepImage { image, counts }
    }
}

#[pymethods]
impl PyDeepImage {
    #[new]
    #[pyo3(signature = (counts, channels, *, data_window=None, display_window=None, deep_image_state="messy", offsets=None))]
    fn py_new(
        counts: &Bound<'_, PyAny>,
        channels: &Bound<'_, PyDict>,
        data_window: Option<Window>,
        display_window: Option<Window>,
        deep_image_state: &str,
        offsets: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let state = state_of_name(deep_image_state)?;
        let counts_array = counts.cast::<PyArray<u32, numpy::Ix2>>().map_err(|_| {
            errors::format(format!(
                "counts must be a 2-D numpy array of uint32 (H x W), not {}",
                describe(counts)
            ))
        })?;
        let (height, width) = {
            let shape = counts_array.shape();
            (shape[0], shape[1])
        };
        let counts: Vec<u32> = counts_array.readonly().as_array().iter().copied().collect();
        let data_window = match data_window {
            Some(w) => bounds_of(w),
            None => Bounds::from_origin_size(0, 0, width, height),
        };
        if (data_window.width(), data_window.height()) != (width, height) {
            return Err(errors::format(format!(
                "counts is {height} x {width} but the data window {data_window} is {} x {}",
                data_window.height(),
                data_window.width()
            )));
        }
        let display_window = display_window.map(bounds_of).unwrap_or(data_window);
        let total: u64 = counts.iter().map(|&c| u64::from(c)).sum();
        if let Some(offsets) = offsets {
            check_offsets(offsets, &counts)?;
        }
        let mut named: Vec<(String, Bound<'_, PyAny>)> = channels
            .iter()
            .map(|(k, v)| Ok((k.extract::<String>()?, v)))
            .collect::<PyResult<_>>()?;
        // The library keeps channels in EXR order: sorted by name.
        named.sort_by(|a, b| a.0.cmp(&b.0));
        let mut channel_list = Vec::with_capacity(named.len());
        let mut planes = Vec::with_capacity(named.len());
        for (name, values) in &named {
            let plane = plane_from_array(name, values)?;
            if plane.len() as u64 != total {
                return Err(errors::format(format!(
                    "channel {name} has {} values but counts add up to {total} samples",
                    plane.len()
                )));
            }
            channel_list.push(Channel::new(name.clone(), plane.sample_type()));
            planes.push(plane);
        }
        let image = DeepImage::from_counts(
            display_window,
            data_window,
            channel_list,
            &counts,
            planes,
            state,
        )
        .map_err(errors::to_py)?;
        image.check_depths().map_err(errors::to_py)?;
        Ok(PyDeepImage { image, counts })
    }

    /// Per-pixel sample counts, an H x W uint32 array (read-only view).
    #[getter]
    fn counts<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let this = slf.get();
        let shape = (
            this.image.data_window.height(),
            this.image.data_window.width(),
        );
        let counts = ArrayView2::from_shape(shape, this.counts.as_slice())
            .map_err(|e| errors::new_error(errors::Kind::Internal, e.to_string()))?;
        // SAFETY: `counts` belongs to the frozen object `slf`.
        Ok(unsafe { view(slf.as_any(), counts) }.into_any())
    }

    /// Where each pixel's samples start: the exclusive prefix sum of the counts, H*W + 1 uint64
    /// values, the last being the total (read-only view).
    #[getter]
    fn offsets<'py>(slf: &Bound<'py, Self>) -> Bound<'py, PyArray1<u64>> {
        let offsets = ArrayView1::from(slf.get().image.offsets.as_slice());
        // SAFETY: the offsets belong to the frozen object `slf`.
        unsafe { view(slf.as_any(), offsets) }
    }

    /// Channel names in file order (sorted by name, as EXR stores them).
    #[getter]
    fn channel_names(&self) -> Vec<String> {
        self.image.channels.iter().map(|c| c.name.clone()).collect()
    }

    /// Every channel as ``{name: array}``, each array one value per sample over the whole image,
    /// float32, float16 or uint32 as stored (read-only views).
    #[getter]
    fn channels<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(slf.py());
        let image = &slf.get().image;
        for (channel, plane) in image.channels.iter().zip(&image.planes) {
            dict.set_item(&channel.name, plane_view(slf.as_any(), plane))?;
        }
        Ok(dict)
    }

    /// The values of channel ``name`` (read-only view); ``KeyError`` when there is none.
    fn channel<'py>(slf: &Bound<'py, Self>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let image = &slf.get().image;
        match image.channel_index(name) {
            Some(c) => Ok(plane_view(slf.as_any(), &image.planes[c])),
            None => Err(pyo3::exceptions::PyKeyError::new_err(name.to_string())),
        }
    }

    fn __getitem__<'py>(slf: &Bound<'py, Self>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        Self::channel(slf, name)
    }

    fn __contains__(&self, name: &str) -> bool {
        self.image.channel_index(name).is_some()
    }

    /// The data window ``((x0, y0), (x1, y1))``, inclusive: the pixels stored.
    #[getter]
    fn data_window(&self) -> Window {
        window_of(self.image.data_window)
    }

    /// The display window ``((x0, y0), (x1, y1))``, inclusive: the frame.
    #[getter]
    fn display_window(&self) -> Window {
        window_of(self.image.display_window)
    }

    /// What is known of sample order: ``'messy'``, ``'sorted'``, ``'non-overlapping'`` or
    /// ``'tidy'`` (the file's ``deepImageState``; messy when absent).
    #[getter]
    fn deep_image_state(&self) -> &'static str {
        self.image.state.name()
    }

    /// Columns of the data window.
    #[getter]
    fn width(&self) -> usize {
        self.image.data_window.width()
    }

    /// Rows of the data window.
    #[getter]
    fn height(&self) -> usize {
        self.image.data_window.height()
    }

    /// All samples of all pixels.
    #[getter]
    fn sample_count(&self) -> usize {
        self.image.sample_count()
    }

    fn __repr__(&self) -> String {
        let channels: Vec<String> = self
            .image
            .channels
            .iter()
            .map(|c| format!("{}:{}", c.name, c.sample_type.name()))
            .collect();
        format!(
            "<deepmerge.DeepImage {}x{} at ({}, {}), {} samples, channels {}, {}>",
            self.width(),
            self.height(),
            self.image.data_window.x0,
            self.image.data_window.y0,
            self.image.sample_count(),
            channels.join(" "),
            self.image.state.name()
        )
    }
}

/// What an argument that is not the array wanted is, for messages.
fn describe(value: &Bound<'_, PyAny>) -> String {
    match value.cast::<numpy::PyUntypedArray>() {
        Ok(array) => format!(
            "an array of {} with shape {:?}",
            array
                .dtype()
                .str()
                .map(|s| s.to_string())
                .unwrap_or_default(),
            array.shape()
        ),
        Err(_) => value
            .get_type()
            .name()
            .map(|n| format!("a {n}"))
            .unwrap_or_else(|_| "something else".into()),
    }
}

/// Copy a 1-D float32, float16 or uint32 array into a plane.
fn plane_from_array(name: &str, values: &Bound<'_, PyAny>) -> PyResult<Plane> {
    fn copy<T: Element + Copy>(values: &Bound<'_, PyAny>) -> Option<Vec<T>> {
        let array = values.cast::<PyArrayDyn<T>>().ok()?;
        if array.ndim() != 1 {
            return None;
        }
        Some(array.readonly().as_array().iter().copied().collect())
    }
    if let Some(v) = copy::<f32>(values) {
        return Ok(Plane::F32(v));
    }
    if let Some(v) = copy::<half::f16>(values) {
        return Ok(Plane::F16(v));
    }
    if let Some(v) = copy::<u32>(values) {
        return Ok(Plane::U32(v));
    }
    Err(errors::format(format!(
        "channel {name} must be a 1-D numpy array of float32, float16 or uint32, not {}",
        describe(values)
    )))
}

/// Check that `offsets` (H*W or H*W + 1 integers) is the exclusive prefix sum of `counts`.
fn check_offsets(offsets: &Bound<'_, PyAny>, counts: &[u32]) -> PyResult<()> {
    let wrong = || {
        errors::format(format!(
            "offsets must be a 1-D integer array of {} or {} entries, not {}",
            counts.len(),
            counts.len() + 1,
            describe(offsets)
        ))
    };
    let values: Vec<i128> = if let Ok(a) = offsets.cast::<PyArray1<u64>>() {
        a.readonly().as_array().iter().map(|&v| v as i128).collect()
    } else if let Ok(a) = offsets.cast::<PyArray1<i64>>() {
        a.readonly().as_array().iter().map(|&v| v as i128).collect()
    } else if let Ok(a) = offsets.cast::<PyArray1<u32>>() {
        a.readonly().as_array().iter().map(|&v| v as i128).collect()
    } else if let Ok(a) = offsets.cast::<PyArray1<i32>>() {
        a.readonly().as_array().iter().map(|&v| v as i128).collect()
    } else {
        return Err(wrong());
    };
    if values.len() != counts.len() && values.len() != counts.len() + 1 {
        return Err(wrong());
    }
    let mut expected: i128 = 0;
    for (p, &got) in values.iter().enumerate() {
        if got != expected {
            return Err(errors::format(format!(
                "offsets disagree with counts at pixel {p}: offset {got}, but the counts before it add up to {expected}"
            )));
        }
        if let Some(&c) = counts.get(p) {
            expected += i128::from(c);
        }
    }
    Ok(())
}

/// A flat image: one H x W array per channel (what a flat merge or ``flatten`` returns).
///
/// Channels are float32 (colour, alpha, Z) or uint32 (ids), read-only views of the image's own
/// memory. ``image["R"]``, ``image.channels`` (a dict), ``image.to_dict()`` (a dict of copies).
/// ``deepmerge.write`` writes it as the CLI writes flat output.
#[pyclass(frozen, name = "FlatImage", module = "deepmerge")]
pub struct PyFlatImage {
    pub image: FlatImage,
}

impl PyFlatImage {
    fn channel_view<'py>(slf: &Bound<'py, Self>, at: usize) -> PyResult<Bound<'py, PyAny>> {
        let image = &slf.get().image;
        let shape = (image.data_window.height(), image.data_window.width());
        let internal = |e: numpy::ndarray::ShapeError| {
            errors::new_error(errors::Kind::Internal, e.to_string())
        };
        // SAFETY: the values belong to the frozen object `slf`.
        unsafe {
            Ok(match &image.channels[at].values {
                FlatValues::F32(v) => view(
                    slf.as_any(),
                    ArrayView2::from_shape(shape, v.as_slice()).map_err(internal)?,
                )
                .into_any(),
                FlatValues::U32(v) => view(
                    slf.as_any(),
                    ArrayView2::from_shape(shape, v.as_slice()).map_err(internal)?,
                )
                .into_any(),
            })
        }
    }
}

#[pymethods]
impl PyFlatImage {
    /// Channel names, in the order the file stores them.
    #[getter]
    fn channel_names(&self) -> Vec<String> {
        self.image.channels.iter().map(|c| c.name.clone()).collect()
    }

    /// Every channel as ``{name: H x W array}`` (read-only views).
    #[getter]
    fn channels<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(slf.py());
        for (at, channel) in slf.get().image.channels.iter().enumerate() {
            dict.set_item(&channel.name, Self::channel_view(slf, at)?)?;
        }
        Ok(dict)
    }

    /// Every channel as ``{name: H x W array}``, copies the caller may change.
    fn to_dict<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(slf.py());
        for (at, channel) in slf.get().image.channels.iter().enumerate() {
            let copy = Self::channel_view(slf, at)?.call_method0("copy")?;
            dict.set_item(&channel.name, copy)?;
        }
        Ok(dict)
    }

    fn __getitem__<'py>(slf: &Bound<'py, Self>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        match slf.get().image.channels.iter().position(|c| c.name == name) {
            Some(at) => Self::channel_view(slf, at),
            None => Err(pyo3::exceptions::PyKeyError::new_err(name.to_string())),
        }
    }

    fn __contains__(&self, name: &str) -> bool {
        self.image.channels.iter().any(|c| c.name == name)
    }

    /// The data window ``((x0, y0), (x1, y1))``, inclusive.
    #[getter]
    fn data_window(&self) -> Window {
        window_of(self.image.data_window)
    }

    /// The display window ``((x0, y0), (x1, y1))``, inclusive.
    #[getter]
    fn display_window(&self) -> Window {
        window_of(self.image.display_window)
    }

    fn __repr__(&self) -> String {
        format!(
            "<deepmerge.FlatImage {}x{} at ({}, {}), channels {}>",
            self.image.data_window.width(),
            self.image.data_window.height(),
            self.image.data_window.x0,
            self.image.data_window.y0,
            self.channel_names().join(" ")
        )
    }
}
