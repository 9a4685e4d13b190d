"""grade, reformat and points write the bytes of the CLI's grade, reformat and points (deep
output, PNG previews, PLY files, with the output options); bad arguments are the CLI's one-line
refusals."""

from pathlib import Path

import pytest

import deepmerge as dm
from conftest import data

BALLS = data("openexr-images/Balls.exr")
IDS = data("openexr/11.deep.exr")
ARNOLD = data("oiio/deepalpha.exr")


def same_bytes(a: Path, b: Path):
    assert Path(a).read_bytes() == Path(b).read_bytes(), f"{a} and {b} differ"


@pytest.mark.parametrize(
    "source, kwargs, flags, name",
    [
        (BALLS, {"gain": 2.0, "near": 200.0, "far": 300.0}, ["--gain", "2", "--near", "200", "--far", "300"], "g.exr"),
        (BALLS, {"gain": (1.0, 2.0, 0.5), "gamma": {"G": 2.0}, "saturation": 0.5, "ramp": 10.0, "near": 200.0,
                 "compression": "rle", "no_deep_state": True},
         ["--gain", "1,2,0.5", "--gamma", "G=2", "--saturation", "0.5", "--ramp", "10", "--near", "200",
          "--compression", "rle", "--no-deep-state"], "g.exr"),
        (BALLS, {"lift": "0.1", "offset": 0.05, "contrast": 1.2, "tidy": True},
         ["--lift", "0.1", "--offset", "0.05", "--contrast", "1.2", "--tidy"], "g.exr"),
        (BALLS, {"gain": 3.0}, ["--gain", "3"], "g.png"),
        (IDS, {"gain": 2.0, "ids": "id=blob*"}, ["--gain", "2", "--id", "id=blob*"], "g.exr"),
    ],
)
def test_grade_writes_the_cli_bytes(cli, tmp_path, source, kwargs, flags, name):
    cli("grade", source, *flags, "-o", tmp_path / f"cli-{name}")
    assert dm.grade(source, tmp_path / f"py-{name}", **kwargs) is None
    same_bytes(tmp_path / f"cli-{name}", tmp_path / f"py-{name}")


@pytest.mark.parametrize(
    "args, kwargs, flags, name",
    [
        ((), {"scale": 0.25}, ["--scale", "0.25"], "r.exr"),
        (((300, 100),), {"filter": "nearest", "compression": "none"}, ["--size", "300x100", "--filter", "nearest",
                                                                        "--compression", "none"], "r.exr"),
        ((), {"scale": 0.5, "tidy": True, "memory_budget": 64 << 20}, ["--scale", "0.5", "--tidy",
                                                                       "--memory-budget", "64MiB"], "r.exr"),
        ((), {"scale": 0.125}, ["--scale", "0.125"], "r.png"),
    ],
)
def test_reformat_writes_the_cli_bytes(cli, tmp_path, args, kwargs, flags, name):
    cli("reformat", BALLS, *flags, "-o", tmp_path / f"cli-{name}")
    assert dm.reformat(BALLS, tmp_path / f"py-{name}", *args, **kwargs) is None
    same_bytes(tmp_path / f"cli-{name}", tmp_path / f"py-{name}")


def test_points_writes_the_cli_bytes(cli, tmp_path):
    cli("points", ARNOLD, "--min-alpha", "0.1", "-o", tmp_path / "cli.ply")
    count = dm.points(ARNOLD, tmp_path / "py.ply", 0.1)
    same_bytes(tmp_path / "cli.ply", tmp_path / "py.ply")
    header = (tmp_path / "py.ply").read_bytes().split(b"end_header\n")[0].decode()
    assert f"element vertex {count}" in header and count > 0
    cli("points", BALLS, "--camera", "pixels", "-o", tmp_path / "cli.ply", "--top-view", tmp_path / "cli.png")
    dm.points(BALLS, tmp_path / "py.ply", camera="pixels", top_view=tmp_path / "py.png")
    same_bytes(tmp_path / "cli.ply", tmp_path / "py.ply")
    same_bytes(tmp_path / "cli.png", tmp_path / "py.png")


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda o: dm.grade(BALLS, o, gamma=-1.0), dm.UsageError, "--gamma -1"),
        (lambda o: dm.grade(BALLS, o, gain={"Q": 2.0}), dm.UsageError, "no colour channel \"Q\""),
        (lambda o: dm.reformat(BALLS, o, size=(0, 10)), dm.UsageError, "--size takes"),
        (lambda o: dm.reformat(BALLS, o), dm.UsageError, "--size WxH or --scale S"),
        (lambda o: dm.reformat(BALLS, o, scale=0.5, filter="cubic"), dm.UsageError, "nearest or box"),
        (lambda o: dm.points(BALLS, str(o) + ".ply", camera="file"), dm.FormatError, "no camera"),
    ],
)
def test_bad_arguments_raise_the_cli_messages(tmp_path, call, error, message):
    out = tmp_path / "o.exr"
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")) as caught:
        call(out)
    assert "\n" not in str(caught.value)
    assert not out.exists()
