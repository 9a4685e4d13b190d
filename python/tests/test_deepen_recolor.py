"""deepen and recolor write the bytes of the CLI's deepen and recolor (deep output and PNG
previews, with the output options); bad arguments are the CLI's one-line refusals."""

from pathlib import Path

import pytest

import deepmerge as dm
from conftest import data

FLAT = data("openexr-images/composited.exr")
DEEP = data("openexr-images/Balls.exr")


def same_bytes(a: Path, b: Path):
    assert Path(a).read_bytes() == Path(b).read_bytes(), f"{a} and {b} differ"


@pytest.mark.parametrize(
    "kwargs, flags, name",
    [
        ({"z": 1.0}, ["--z", "1"], "d.exr"),
        ({"z": 2.0, "thickness": 0.5, "compression": "rle", "no_deep_state": True}, ["--z", "2", "--thickness", "0.5", "--compression", "rle", "--no-deep-state"], "d.exr"),
        ({"z": 1.0}, ["--z", "1"], "d.png"),
    ],
)
def test_deepen_writes_the_cli_bytes(cli, tmp_path, kwargs, flags, name):
    cli("deepen", FLAT, *flags, "-o", tmp_path / f"cli-{name}")
    assert dm.deepen(FLAT, tmp_path / f"py-{name}", **kwargs) is None
    same_bytes(tmp_path / f"cli-{name}", tmp_path / f"py-{name}")


def test_deepen_takes_depths_from_channels(cli, tmp_path):
    flat_z = tmp_path / "fz.exr"
    cli("flatten", DEEP, "--flat-z", "-o", flat_z)
    cli("deepen", flat_z, "--z-channel", "Z", "--zback-channel", "Z", "-o", tmp_path / "cli.exr")
    dm.deepen(flat_z, tmp_path / "py.exr", z_channel="Z", zback_channel="Z")
    same_bytes(tmp_path / "cli.exr", tmp_path / "py.exr")


@pytest.mark.parametrize("target", [False, True])
@pytest.mark.parametrize("name", ["r.exr", "r.png"])
def test_recolor_writes_the_cli_bytes(cli, tmp_path, target, name):
    flags = ["--target-alpha"] if target else []
    cli("recolor", DEEP, FLAT, *flags, "-o", tmp_path / f"cli-{name}")
    assert dm.recolor(DEEP, FLAT, tmp_path / f"py-{name}", target) is None
    same_bytes(tmp_path / f"cli-{name}", tmp_path / f"py-{name}")


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda o: dm.deepen(FLAT, o), dm.UsageError, "needs the depth: z or z_channel"),
        (lambda o: dm.deepen(FLAT, o, z=1.0, z_channel="Z"), dm.UsageError, "cannot be used together"),
        (lambda o: dm.deepen(FLAT, o, z_channel="depth"), dm.UsageError, "no channel \"depth\""),
        (lambda o: dm.deepen(DEEP, o, z=1.0), dm.FormatError, "is a deep EXR"),
        (lambda o: dm.recolor(FLAT, FLAT, o), dm.FormatError, "flat (non-deep)"),
        (lambda o: dm.recolor(DEEP, DEEP, o), dm.FormatError, "is a deep EXR"),
    ],
)
def test_bad_arguments_are_the_cli_refusals(tmp_path, call, error, message):
    out = tmp_path / "out.exr"
    with pytest.raises(error, match=None) as caught:
        call(out)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)
    assert not out.exists()
