"""deepmerge: read, merge, flatten, hold out and write OpenEXR deep images, with numpy.

The engine is the Rust library behind the ``deepmerge`` command line; these functions are its
operations under the CLI's and OpenImageIO's names, and they give the same results, bit for bit:

- ``read(path, part=None, channels=None)`` -> ``DeepImage``; ``channels`` keeps what the CLI's
  ``--channels`` keeps (the names, Z, ZBack, the alphas they need), the rest is never stored
- ``merge(inputs, output="flat"|"deep", tidy=False, backend="auto", layout=None, method=None,
  memory_budget=None, *, out=None, ...)``; inputs are paths or ``DeepImage``\\ s. With
  ``out=PATH`` and path inputs it is the CLI's streamed merge (bands of rows within
  ``memory_budget`` bytes, default 1 GiB = ``DEFAULT_MEMORY_BUDGET``; ``2 * GiB`` is
  ``--memory-budget 2``), writes the CLI's bytes and returns a small report dict; without
  ``out`` it returns a ``FlatImage`` or ``DeepImage`` held in memory
- ``flatten(image)`` -> ``FlatImage``; ``holdout(image, holdout, cull=False)`` -> ``DeepImage``
  (``out=PATH`` streams to a file as ``deepmerge holdout``)
- ``deep_slice(input, out, near, far)``, ``crop(input, out, box)``, ``transform(input, out,
  translate, z_offset, z_scale)``: the CLI's ``slice``, ``crop`` and ``transform``, file to
  file with the CLI's bytes; ``merge([path], out=...)`` is the CLI's ``flatten``
- ``idselect(input, out, ids, invert=False, mask=None)``: the CLI's ``idselect``; ``merge``'s
  ``bbox`` keyword is ``--bbox``
- ``deepen(input, out, z=None, z_channel=None, thickness=None, zback_channel=None)`` and
  ``recolor(deep, flat, out, target_alpha=False)``: the CLI's ``deepen`` and ``recolor``
- ``grade(input, out, gain=..., near=..., far=..., ids=...)``, ``reformat(input, out,
  size=None, scale=None, filter="box")`` and ``points(input, out, min_alpha=0.0)``: the CLI's
  ``grade``, ``reformat`` and ``points``
- ``write(image, path, compression="zips")``; ``info(path)`` -> one dict per part

A ``DeepImage`` exposes ``counts`` (H x W uint32), ``offsets`` (their exclusive prefix sum) and
each channel as one flat array over all samples; these are read-only views of the engine's
memory, not copies. ``to_openexr``/``from_openexr`` convert to and from the OpenEXR module's
deep form (an H x W object array of per-pixel arrays per channel), ``to_deepdata``/
``from_deepdata`` to and from OpenImageIO's ``DeepData``.

The engine runs with the GIL released, so merges on several threads overlap. With
``backend="gl"`` each thread gets its own OpenGL context, made on its first GL merge and kept
for the thread's later ones (a context is bound to the thread that made it).

Errors are ``deepmerge.Error`` s carrying the CLI's one-line message: ``FileError`` (an
``OSError``), ``FormatError`` and ``UsageError`` (``ValueError`` s) with their kinds
``UnsupportedError`` (a ``FormatError``) and ``BudgetError`` (a ``UsageError``), ``GLError`` (a
``RuntimeError``).
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np

from . import _deepmerge
from ._deepmerge import (
    DEFAULT_MEMORY_BUDGET,
    GiB,
    DeepImage,
    FlatImage,
    Graph,
    Node,
    __version__,
    flatten,
    holdout,
    info,
    info_text,
    merge,
    read,
    write,
)

# The deep operations (deep_slice, crop, transform, idselect, deepen, recolor, grade, reformat,
# points): one function per row of the engine's table of operations, named in OPERATIONS.
from ._deepmerge import *  # noqa: E402,F401,F403
from ._errors import (
    BudgetError,
    Error,
    FileError,
    FormatError,
    GLError,
    UnsupportedError,
    UsageError,
)

__all__ = [
    "DeepImage",
    "FlatImage",
    "Error",
    "FileError",
    "FormatError",
    "UnsupportedError",
    "UsageError",
    "BudgetError",
    "GLError",
    "read",
    "merge",
    "flatten",
    "holdout",
    "write",
    "info",
    "info_text",
    "Graph",
    "Node",
    "to_openexr",
    "from_openexr",
    "to_deepdata",
    "from_deepdata",
    "GiB",
    "DEFAULT_MEMORY_BUDGET",
    "__version__",
] + list(_deepmerge.OPERATIONS)

Window = Tuple[Tuple[int, int], Tuple[int, int]]

# The OpenEXR module's pixel type names and the dtypes they are stored as.
_OPENEXR_DTYPES = {"UINT": np.uint32, "HALF": np.float16, "FLOAT": np.float32}
# OpenImageIO's TypeDesc names.
_OIIO_DTYPES = {"uint": np.uint32, "uint32": np.uint32, "half": np.float16, "float": np.float32}


def to_openexr(image: DeepImage) -> Dict[str, np.ndarray]:
    """The OpenEXR module's deep form of ``image``: ``{name: H x W object array}``, each pixel's
    entry a 1-D array of its samples (views into ``image``'s memory, not copies), or ``None``
    for a pixel without samples, as ``OpenEXR.File(...).parts[i].channels[name].pixels`` holds
    it. ``OpenEXR.Channel(name, pixels)`` takes each of these to write a deep file."""
    counts = image.counts
    offsets = image.offsets
    height, width = counts.shape
    out: Dict[str, np.ndarray] = {}
    for name, values in image.channels.items():
        pixels = np.empty((height, width), dtype=object)
        flat = pixels.reshape(-1)
        for p in np.flatnonzero(counts.reshape(-1)):
            flat[p] = values[offsets[p] : offsets[p + 1]]
        out[name] = pixels
    return out


def from_openexr(
    source: Any,
    data_window: Optional[Window] = None,
    display_window: Optional[Window] = None,
    deep_image_state: str = "messy",
) -> DeepImage:
    """A ``DeepImage`` from the OpenEXR module's deep form.

    ``source`` is an ``OpenEXR.Part`` (or a one-part ``OpenEXR.File``), whose header gives the
    windows, or a mapping ``{name: H x W object array}`` of per-pixel sample arrays (``None``
    or empty for a pixel without samples), with the windows given here (the data window
    defaults to ``((0, 0), (W - 1, H - 1))``). Every channel must have the same number of
    samples in each pixel; values keep their dtype (float32, float16 or uint32).
    """
    channels: Mapping[str, Any]
    types: Dict[str, Any] = {}
    if hasattr(source, "parts") and not hasattr(source, "channels"):
        if len(source.parts) != 1:
            raise UsageError(
                f"from_openexr: the file has {len(source.parts)} parts; pass one of file.parts"
            )
        source = source.parts[0]
    if hasattr(source, "channels") and hasattr(source, "header"):
        header = source.header
        if data_window is None and "dataWindow" in header:
            (x0, y0), (x1, y1) = header["dataWindow"]
            data_window = ((int(x0), int(y0)), (int(x1), int(y1)))
        if display_window is None and "displayWindow" in header:
            (x0, y0), (x1, y1) = header["displayWindow"]
            display_window = ((int(x0), int(y0)), (int(x1), int(y1)))
        channels = {name: ch.pixels for name, ch in source.channels.items()}
        for name, ch in source.channels.items():
            kind = ch.type().name if hasattr(ch, "type") else None
            if kind in _OPENEXR_DTYPES:
                types[name] = _OPENEXR_DTYPES[kind]
    else:
        channels = source
    if not channels:
        raise FormatError("from_openexr: no channels")
    counts = None
    arrays: Dict[str, np.ndarray] = {}
    for name, pixels in channels.items():
        pixels = np.asarray(pixels, dtype=object)
        if pixels.ndim != 2:
            raise FormatError(
                f"from_openexr: channel {name} must be an H x W object array, "
                f"not of shape {pixels.shape}"
            )
        flat = pixels.reshape(-1)
        these = np.fromiter(
            (0 if p is None else len(p) for p in flat), dtype=np.uint32, count=flat.size
        )
        if counts is None:
            counts = these.reshape(pixels.shape)
        elif these.size != counts.size:
            raise FormatError(
                f"from_openexr: channel {name} is {pixels.shape[0]} x {pixels.shape[1]}, "
                f"the others {counts.shape[0]} x {counts.shape[1]}"
            )
        elif not np.array_equal(these, counts.reshape(-1)):
            p = int(np.flatnonzero(these != counts.reshape(-1))[0])
            raise FormatError(
                f"from_openexr: channel {name} has {these[p]} samples at pixel {p}, "
                f"the other channels {counts.reshape(-1)[p]}"
            )
        present = [np.asarray(p) for p in flat if p is not None and len(p)]
        dtype = types.get(name) or (present[0].dtype if present else np.float32)
        if present:
            arrays[name] = np.ascontiguousarray(np.concatenate(present), dtype=dtype)
        else:
            arrays[name] = np.zeros(0, dtype=dtype)
    return DeepImage(
        counts,
        arrays,
        data_window=data_window,
        display_window=display_window,
        deep_image_state=deep_image_state,
    )


def to_deepdata(image: DeepImage) -> Any:
    """``image`` as an OpenImageIO ``DeepData`` (pixels row-major over the data window).

    Needs the ``OpenImageIO`` module. ``DeepData``'s Python interface sets one value per call,
    so this is slow on large images; it is here to hand images to code that wants OIIO."""
    import OpenImageIO as oiio

    names = image.channel_names
    channels = image.channels
    type_names = {np.dtype(np.float32): "float", np.dtype(np.float16): "half",
                  np.dtype(np.uint32): "uint"}
    types = [oiio.TypeDesc(type_names[channels[n].dtype]) for n in names]
    counts = image.counts.reshape(-1)
    offsets = image.offsets
    deep = oiio.DeepData()
    deep.init(int(counts.size), len(names), types, list(names))
    for p in np.flatnonzero(counts):
        deep.set_samples(int(p), int(counts[p]))
    for c, name in enumerate(names):
        values = channels[name]
        is_uint = values.dtype == np.uint32
        setter = deep.set_deep_value_uint if is_uint else deep.set_deep_value
        for p in np.flatnonzero(counts):
            start = int(offsets[p])
            for s in range(int(counts[p])):
                v = values[start + s]
                setter(int(p), c, s, int(v) if is_uint else float(v))
    return deep


def from_deepdata(
    deep: Any,
    width: int,
    height: int,
    data_window: Optional[Window] = None,
    display_window: Optional[Window] = None,
    deep_image_state: str = "messy",
) -> DeepImage:
    """A ``DeepImage`` from an OpenImageIO ``DeepData`` of ``width`` x ``height`` pixels
    (row-major; ``DeepData`` holds no window, so give it here). Float values are read through
    ``deep_value`` (a float), so half channels round-trip exactly and uint channels through
    ``deep_value_uint``."""
    npixels = deep.pixels
    if npixels != width * height:
        raise FormatError(f"from_deepdata: {npixels} pixels is not {width} x {height}")
    counts = np.fromiter((deep.samples(p) for p in range(npixels)), dtype=np.uint32,
                         count=npixels)
    arrays: Dict[str, np.ndarray] = {}
    for c in range(deep.channels):
        name = deep.channelname(c)
        dtype = _OIIO_DTYPES.get(str(deep.channeltype(c)), np.float32)
        getter = deep.deep_value_uint if dtype == np.uint32 else deep.deep_value
        values = [getter(p, c, s) for p in np.flatnonzero(counts).tolist()
                  for s in range(int(counts[p]))]
        arrays[name] = np.asarray(values, dtype=dtype)
    if data_window is None:
        data_window = ((0, 0), (width - 1, height - 1))
    return DeepImage(
        counts.reshape(height, width),
        arrays,
        data_window=data_window,
        display_window=display_window,
        deep_image_state=deep_image_state,
    )
