"""holdout takes the CLI's options and writes the CLI's bytes: streamed to out=PATH (deep with
its compression, state, tidy and metadata; flat with --flat, --flat-z, --flat-type; a PNG
preview), on the part asked for; in memory as before; bad arguments are the CLI's lines."""

from pathlib import Path

import pytest

import deepmerge as dm
from conftest import data

IN, HOLD = data("oiio/input-crop.deep.exr"), data("oiio/holdout-crop.deep.exr")
STEREO = data("openexr-images/Stereo-Trunks-multipart.exr")


def same_bytes(a: Path, b: Path):
    assert Path(a).read_bytes() == Path(b).read_bytes(), f"{a} and {b} differ"


@pytest.mark.parametrize(
    "flags, kwargs",
    [
        ([], {}),
        (["--cull"], {"cull": True}),
        (["--compression", "zstd", "--zstd-level", "9"], {"compression": "zstd", "zstd_level": 9}),
        (["--no-deep-state", "--metadata", "none"], {"no_deep_state": True, "metadata": "none"}),
        (["--tidy"], {"tidy": True}),
        (["--flat"], {"flat": True}),
        (["--flat", "--flat-z", "--flat-type", "float", "--compression", "zip"],
         {"flat": True, "flat_z": True, "flat_type": "float", "compression": "zip"}),
        (["--backend", "cpu"], {"backend": "cpu"}),
    ],
)
def test_holdout_writes_the_cli_bytes(cli, tmp_path, flags, kwargs):
    cli("holdout", IN, HOLD, *flags, "-o", tmp_path / "cli.exr")
    assert dm.holdout(IN, HOLD, out=tmp_path / "py.exr", **kwargs) is None
    same_bytes(tmp_path / "cli.exr", tmp_path / "py.exr")


def test_holdout_preview_and_part_write_the_cli_bytes(cli, tmp_path):
    cli("holdout", IN, HOLD, "-o", tmp_path / "cli.png")
    dm.holdout(IN, HOLD, out=tmp_path / "py.png")
    same_bytes(tmp_path / "cli.png", tmp_path / "py.png")
    cli("holdout", STEREO, STEREO, "--part", "rgba.right", "-o", tmp_path / "cli-part.exr")
    dm.holdout(STEREO, STEREO, part="rgba.right", out=tmp_path / "py-part.exr")
    same_bytes(tmp_path / "cli-part.exr", tmp_path / "py-part.exr")


def test_in_memory_holdout_is_the_streamed_one(tmp_path):
    # Written without the input's metadata, the in-memory result has the streamed bytes.
    dm.holdout(IN, HOLD, out=tmp_path / "streamed.exr", metadata="none")
    dm.write(dm.holdout(IN, HOLD), tmp_path / "memory.exr")
    same_bytes(tmp_path / "streamed.exr", tmp_path / "memory.exr")


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda o: dm.holdout(IN, HOLD, out=o, backend="gl"), "holdout has no OpenGL path"),
        (lambda o: dm.holdout(IN, HOLD, out=o, flat=True, tidy=True), "tidy applies to deep output"),
        (lambda o: dm.holdout(IN, HOLD, out=o, flat_z=True), "pass flat=True"),
        (lambda o: dm.holdout(IN, HOLD, compression="rle"), "pass out=PATH"),
        (lambda o: dm.holdout(IN, HOLD, out=o, compression="zip"), "zip"),
        (lambda o: dm.holdout(dm.read(IN), HOLD, out=o), "pass image and holdout as paths"),
    ],
)
def test_refusals_are_one_line_and_write_nothing(tmp_path, call, message):
    with pytest.raises(dm.Error, match=message):
        call(tmp_path / "x.exr")
    assert list(tmp_path.iterdir()) == []
