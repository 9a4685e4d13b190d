"""Type stubs of deepmerge's native module (python/src/*.rs); import ``deepmerge``, not this."""

import os
from typing import Dict, List, Literal, Mapping, Optional, Sequence, Tuple, TypedDict, Union, overload

import numpy as np
import numpy.typing as npt

Window = Tuple[Tuple[int, int], Tuple[int, int]]
"""((x0, y0), (x1, y1)), inclusive, as the OpenEXR module's dataWindow."""
PathLike = Union[str, "os.PathLike[str]"]
DeepState = Literal["messy", "sorted", "non-overlapping", "tidy"]
Part = Union[int, str, None]

# The Python names of the deep operations, one function each (the engine's table).
OPERATIONS: Tuple[str, ...]
Parts = Union[int, str, Sequence[Union[int, str]], None]
"""``merge``'s ``part``: one part for every input, or one per input (the CLI's ``--part``)."""

__version__: str
GiB: int
"""1 << 30 bytes: ``memory_budget=2 * GiB`` is the CLI's ``--memory-budget 2``."""
DEFAULT_MEMORY_BUDGET: int
"""The streamed merge's default budget, 1 GiB (the CLI's ``--memory-budget`` default)."""
Bytes = Union[int, float]
"""A memory budget in bytes; a float (``1.5 * GiB``) is truncated to whole bytes."""
Channels = Union[Sequence[str], str]
"""Channel names, or one comma-separated string as the CLI's ``--channels R,G,B``."""

class _PartByPart(TypedDict, total=False):
    parts: List[str]
    """The output's part names, when it was merged part by part (stereo); absent otherwise."""

class MergeReport(_PartByPart):
    """What ``merge(..., out=PATH)`` returns."""

    streamed: bool
    """True: the CLI's streamed merge ran (every input a path); False: merged in memory, then
    written (a ``DeepImage`` input)."""
    bands: int
    max_band_rows: int
    data_window: Window
    memory_budget: int
    """The budget it ran in, bytes."""
    backend: Literal["cpu", "gl"]

class DeepImage:
    """A deep image: per-pixel sample counts and one flat array per channel over all samples.

    The arrays are read-only views of the image's memory (their ``base`` is the image)."""

    def __init__(
        self,
        counts: npt.NDArray[np.uint32],
        channels: Mapping[str, npt.NDArray[Union[np.float32, np.float16, np.uint32]]],
        *,
        data_window: Optional[Window] = None,
        display_window: Optional[Window] = None,
        deep_image_state: DeepState = "messy",
        offsets: Optional[npt.NDArray[np.integer]] = None,
    ) -> None: ...
    @property
    def counts(self) -> npt.NDArray[np.uint32]:
        """Per-pixel sample counts, H x W."""
    @property
    def offsets(self) -> npt.NDArray[np.uint64]:
        """Exclusive prefix sum of the counts, H*W + 1 entries (the last is the total)."""
    @property
    def channel_names(self) -> List[str]: ...
    @property
    def channels(self) -> Dict[str, np.ndarray]:
        """{name: 1-D array over all samples}, float32, float16 or uint32 as stored."""
    def channel(self, name: str) -> np.ndarray: ...
    def __getitem__(self, name: str) -> np.ndarray: ...
    def __contains__(self, name: str) -> bool: ...
    @property
    def data_window(self) -> Window: ...
    @property
    def display_window(self) -> Window: ...
    @property
    def deep_image_state(self) -> DeepState: ...
    @property
    def width(self) -> int: ...
    @property
    def height(self) -> int: ...
    @property
    def sample_count(self) -> int: ...

class FlatImage:
    """A flat image: one H x W float32 (or uint32 for ids) array per channel, read-only views."""

    @property
    def channel_names(self) -> List[str]: ...
    @property
    def channels(self) -> Dict[str, np.ndarray]: ...
    def to_dict(self) -> Dict[str, np.ndarray]:
        """{name: H x W array}, copies the caller may change."""
    def __getitem__(self, name: str) -> np.ndarray: ...
    def __contains__(self, name: str) -> bool: ...
    @property
    def data_window(self) -> Window: ...
    @property
    def display_window(self) -> Window: ...

def read(
    path: PathLike,
    part: Part = None,
    channels: Optional[Channels] = None,
    *,
    memory_budget: Optional[Bytes] = None,
) -> DeepImage:
    """Read a deep part of an OpenEXR file (default: the first deep part).

    ``channels`` keeps what the CLI's ``--channels`` keeps: the named channels, Z and ZBack
    always, and every alpha (A, RA, GA, BA, any layer) when a colour channel is named; the
    others are never stored. A name the part lacks is a ``FormatError``. ``memory_budget``
    (bytes, default 8 GiB, the CLI's ``--max-memory``) refuses a file whose decoded counts and
    kept samples would take more."""

BBox = Optional[Union[Literal["union", "intersection", "first"], Tuple[int, int, int, int]]]

@overload
def merge(
    inputs: Sequence[Union[PathLike, DeepImage]],
    output: Literal["flat", "deep"] = "flat",
    tidy: bool = False,
    backend: Literal["auto", "cpu", "gl"] = "auto",
    layout: Optional[Literal["ll", "la", "ia", "bia"]] = None,
    method: Optional[Literal["rbm", "stepwise"]] = None,
    memory_budget: Optional[Bytes] = None,
    *,
    part: Parts = None,
    flat_z: bool = False,
    out: None = None,
    channels: Optional[Channels] = None,
    bbox: BBox = None,
) -> Union[FlatImage, DeepImage]:
    """Merge in memory: a FlatImage for output="flat", a DeepImage for output="deep".
    ``memory_budget`` (bytes, default 8 GiB) only refuses: the most one decoded input or the
    result may take, since both are held whole."""
@overload
def merge(
    inputs: Sequence[Union[PathLike, DeepImage]],
    output: Literal["flat", "deep"] = "flat",
    tidy: bool = False,
    backend: Literal["auto", "cpu", "gl"] = "auto",
    layout: Optional[Literal["ll", "la", "ia", "bia"]] = None,
    method: Optional[Literal["rbm", "stepwise"]] = None,
    memory_budget: Optional[Bytes] = None,
    *,
    part: Parts = None,
    flat_z: bool = False,
    out: PathLike,
    compression: Optional[Literal["none", "rle", "zips", "zip", "zstd"]] = None,
    flat_type: Optional[Literal["half", "float"]] = None,
    channels: Optional[Channels] = None,
    zstd_level: Optional[int] = None,
    metadata: Optional[Literal["first", "none"]] = None,
    bbox: BBox = None,
    all_parts: bool = False,
) -> MergeReport:
    """``deepmerge IN... -o OUT``: with every input a path, the streamed merge, a band of rows
    at a time within ``memory_budget`` bytes (default 1 GiB; ``2 * GiB`` is
    ``--memory-budget 2``); a row too dense for its share, or a window whose tables do not
    fit, is refused with the CLI's one line. Writes the CLI's bytes (``compression``,
    ``zstd_level``, ``metadata`` and ``flat_type`` as ``--compression``, ``--zstd-level``,
    ``--metadata`` and ``--flat-type``; zip is for flat output only); ``channels`` as
    ``--channels``; ``bbox`` as ``--bbox``: "union" (default), "intersection", "first" or
    (x0, y0, x1, y1)."""

Compression = Optional[Literal["none", "rle", "zips", "zip", "zstd"]]

def deep_slice(
    input: PathLike,
    out: PathLike,
    near: Optional[float] = None,
    far: Optional[float] = None,
    keep_outside: bool = False,
    *,
    compression: Compression = None,
    no_deep_state: bool = False,
    tidy: bool = False,
    part: Part = None,
    memory_budget: Optional[Bytes] = None,
) -> None:
    """``deepmerge slice``: keep the parts of samples in [near, far) (``keep_outside``: the
    rest); ``out`` is a deep EXR or a ``*.png`` preview. The CLI's bytes."""

def crop(
    input: PathLike,
    out: PathLike,
    box: Tuple[int, int, int, int],
    keep_outside: bool = False,
    *,
    compression: Compression = None,
    no_deep_state: bool = False,
    tidy: bool = False,
    part: Part = None,
    memory_budget: Optional[Bytes] = None,
) -> None:
    """``deepmerge crop --box X0,Y0,X1,Y1`` (inclusive). The CLI's bytes."""

def transform(
    input: PathLike,
    out: PathLike,
    translate: Optional[Tuple[int, int]] = None,
    z_offset: float = 0.0,
    z_scale: float = 1.0,
    *,
    move_display: bool = False,
    compression: Compression = None,
    no_deep_state: bool = False,
    tidy: bool = False,
    part: Part = None,
    memory_budget: Optional[Bytes] = None,
) -> None:
    """``deepmerge transform``: whole-pixel translation (the display window stays unless
    ``move_display``), Z' = Z * z_scale + z_offset (half depths written as float). The CLI's
    bytes."""

def flatten(image: Union[DeepImage, PathLike], z: bool = False) -> FlatImage:
    """Composite one deep image front to back."""

def holdout(
    image: Union[DeepImage, PathLike],
    holdout: Union[DeepImage, PathLike],
    cull: bool = False,
    *,
    out: Optional[PathLike] = None,
    flat: bool = False,
    flat_z: bool = False,
    flat_type: Optional[Literal["half", "float"]] = None,
    compression: Optional[Literal["none", "rle", "zips", "zip", "zstd"]] = None,
    zstd_level: Optional[int] = None,
    metadata: Optional[Literal["first", "none"]] = None,
    no_deep_state: bool = False,
    tidy: bool = False,
    part: Union[int, str, None] = None,
    memory_budget: Optional[float] = None,
    backend: Literal["auto", "cpu", "gl"] = "auto",
) -> Optional[DeepImage]:
    """Hold ``image`` out by ``holdout``, as ``deepmerge holdout``: in memory (a ``DeepImage``),
    or with ``out=PATH`` streamed to a file with the CLI's options and bytes (``None``)."""

def write(
    image: Union[DeepImage, FlatImage],
    path: PathLike,
    compression: Optional[Literal["none", "rle", "zips", "zip", "zstd"]] = None,
    *,
    flat_type: Optional[Literal["half", "float"]] = None,
    zstd_level: Optional[int] = None,
) -> None:
    """Write as the CLI writes its output (deep: compression none, rle, zips (default) or zstd;
    flat: those or zip (default), and flat_type, default half; zstd_level 1 to 22, default 5)."""

def info(path: PathLike, *, memory_budget: Optional[Bytes] = None) -> List[dict]:
    """``deepmerge info`` as data: one dict per part."""

def info_text(
    path: PathLike, *, memory_budget: Optional[Bytes] = None, channels: Optional[Channels] = None
) -> str:
    """``deepmerge info [--channels LIST]``'s report, word for word."""

def idselect(
    input: PathLike,
    out: PathLike,
    ids: Union[str, Sequence[str], Mapping[str, Union[int, Sequence[int]]]],
    invert: bool = False,
    mask: Optional[PathLike] = None,
    *,
    compression: Compression = None,
    no_deep_state: bool = False,
    tidy: bool = False,
    part: Part = None,
    memory_budget: Optional[Bytes] = None,
) -> None:
    """``deepmerge idselect --id CHANNEL=N[,N...]``: ``ids`` is one such text, a list of them
    (ANDed), or ``{channel: id or [ids]}``; ``invert``, ``mask`` as ``--invert``, ``--mask``.
    The CLI's bytes."""

def deepen(
    input: PathLike,
    out: PathLike,
    z: Optional[float] = None,
    z_channel: Optional[str] = None,
    thickness: Optional[float] = None,
    zback_channel: Optional[str] = None,
    *,
    compression: Compression = None,
    no_deep_state: bool = False,
    tidy: bool = False,
    part: Part = None,
    memory_budget: Optional[Bytes] = None,
) -> None:
    """``deepmerge deepen``: a flat EXR made deep, one sample per pixel at ``z`` or the
    ``z_channel`` depth (exactly one), a volume to ``Z + thickness`` or ``zback_channel``.
    The CLI's bytes."""

def recolor(
    deep: PathLike,
    flat: PathLike,
    out: PathLike,
    target_alpha: bool = False,
    *,
    compression: Compression = None,
    no_deep_state: bool = False,
    tidy: bool = False,
    part: Part = None,
    memory_budget: Optional[Bytes] = None,
) -> None:
    """``deepmerge recolor [--target-alpha]``: the deep image with the flat image's colour,
    its opacity kept (or scaled to the flat alpha). The CLI's bytes."""

ChannelValues = Union[float, str, Sequence[float], Dict[str, float], None]

def grade(
    input: PathLike,
    out: PathLike,
    *,
    lift: ChannelValues = None,
    gain: ChannelValues = None,
    offset: ChannelValues = None,
    gamma: ChannelValues = None,
    contrast: ChannelValues = None,
    saturation: Optional[float] = None,
    near: Optional[float] = None,
    far: Optional[float] = None,
    ramp: float = 0.0,
    ids: Union[str, Sequence[str], Dict[str, Union[int, Sequence[int]]], None] = None,
    compression: Compression = None,
    no_deep_state: bool = False,
    tidy: bool = False,
    part: Part = None,
    memory_budget: Optional[Bytes] = None,
) -> None:
    """``deepmerge grade``: lift, gain, offset, gamma, contrast (each a number, ``(r, g, b)``,
    ``{channel: value}`` or the CLI's text) and saturation on unpremultiplied colour, mixed by
    the depth mask (``near``, ``far``, ``ramp``) and the id mask (``ids``, as ``idselect``'s).
    The CLI's bytes."""

def reformat(
    input: PathLike,
    out: PathLike,
    size: Optional[Tuple[int, int]] = None,
    scale: Optional[float] = None,
    *,
    filter: str = "box",
    max_gather: int = 65536,
    compression: Compression = None,
    no_deep_state: bool = False,
    tidy: bool = False,
    part: Part = None,
    memory_budget: Optional[Bytes] = None,
) -> None:
    """``deepmerge reformat``: a new resolution (``size`` or ``scale``, exactly one) with the
    ``"box"`` filter (flattening commutes with resizing) or ``"nearest"``. The CLI's bytes."""

def points(
    input: PathLike,
    out: PathLike,
    min_alpha: float = 0.0,
    *,
    camera: str = "auto",
    frame: Optional[Tuple[int, int, int, int]] = None,
    top_view: Optional[PathLike] = None,
    part: Part = None,
    memory_budget: Optional[Bytes] = None,
) -> int:
    """``deepmerge points``: every sample with alpha at least ``min_alpha`` as a point of a
    binary PLY file, placed by the header's camera; returns the number of points. The CLI's
    bytes."""

NodeLike = Union["Node", str]

class Node:
    """A node of a ``Graph``, as its methods return it."""

    name: str

class Graph:
    """A compositing graph run in one streamed pass, as ``deepmerge comp SCRIPT``: each method
    adds a node (its options are the command's, as keywords) and returns its handle."""

    def __init__(self) -> None: ...
    @staticmethod
    def from_script(path: PathLike) -> "Graph":
        """The graph of a ``deepmerge comp`` script (refusals name its line)."""
    def input(self, path: PathLike, part: Part = None, name: Optional[str] = None) -> Node: ...
    def merge(self, inputs: Sequence[NodeLike], name: Optional[str] = None, **options: object) -> Node: ...
    def holdout(self, input: NodeLike, holdout: NodeLike, name: Optional[str] = None, **options: object) -> Node: ...
    def slice(self, input: NodeLike, name: Optional[str] = None, **options: object) -> Node: ...
    def crop(self, input: NodeLike, name: Optional[str] = None, **options: object) -> Node: ...
    def transform(self, input: NodeLike, name: Optional[str] = None, **options: object) -> Node: ...
    def idselect(self, input: NodeLike, name: Optional[str] = None, **options: object) -> Node: ...
    def grade(self, input: NodeLike, name: Optional[str] = None, **options: object) -> Node: ...
    def reformat(self, input: NodeLike, name: Optional[str] = None, **options: object) -> Node: ...
    def recolor(self, input: NodeLike, flat: NodeLike, name: Optional[str] = None, **options: object) -> Node: ...
    def deepen(self, input: NodeLike, name: Optional[str] = None, **options: object) -> Node: ...
    def flatten(self, input: NodeLike, name: Optional[str] = None, **options: object) -> Node: ...
    def tidy(self, input: NodeLike, name: Optional[str] = None) -> Node: ...
    def output(self, node: NodeLike, path: PathLike, **options: object) -> None:
        """Write ``node`` to ``path`` (``compression``, ``zstd_level``, ``metadata``,
        ``deep_state``)."""
    def to_script(self) -> str:
        """The script ``deepmerge comp`` reads."""
    def run(
        self,
        frames: Union[str, Sequence[int], None] = None,
        memory_budget: Optional[Bytes] = None,
    ) -> None:
        """Run once, or once per frame for paths with frame tokens; the CLI's bytes."""
