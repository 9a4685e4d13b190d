"""Stereo and multi-part inputs: merge(part=..., all_parts=...) as the CLI's --part and
--all-parts, the same bytes, the same refusals, the CLI's stderr note as a UserWarning."""

from pathlib import Path

import pytest

import deepmerge as dm
from conftest import data

STEREO = data("openexr-images/Stereo-Trunks-multipart.exr")
BALLS = data("openexr-images/Balls.exr")


def same_bytes(a: Path, b: Path):
    assert Path(a).read_bytes() == Path(b).read_bytes(), f"{a} and {b} differ"


@pytest.mark.parametrize("output", ["flat", "deep"])
def test_stereo_inputs_merge_part_by_part_as_the_cli(cli, tmp_path, output):
    deep = ["--deep"] if output == "deep" else []
    cli(STEREO, STEREO, *deep, "-o", tmp_path / "cli.exr", "--backend", "cpu", "-q")
    report = dm.merge([STEREO, STEREO], output, backend="cpu", out=tmp_path / "py.exr")
    same_bytes(tmp_path / "cli.exr", tmp_path / "py.exr")
    assert report["parts"] == ["rgba.left", "rgba.right"]
    asked = dm.merge([STEREO, STEREO], output, backend="cpu", out=tmp_path / "all.exr", all_parts=True)
    same_bytes(tmp_path / "cli.exr", tmp_path / "all.exr")
    assert asked["parts"] == report["parts"]


def test_a_part_per_input_is_the_cli_part_given_once_per_input(cli, tmp_path):
    cli(STEREO, BALLS, "--part", "rgba.right", "--part", "0", "--deep", "-o", tmp_path / "cli.exr",
        "--backend", "cpu", "-q")
    report = dm.merge([STEREO, BALLS], "deep", backend="cpu", part=["rgba.right", 0],
                      out=tmp_path / "py.exr")
    same_bytes(tmp_path / "cli.exr", tmp_path / "py.exr")
    assert "parts" not in report
    # In memory too: the right eye, not the left.
    image = dm.merge([STEREO, BALLS], "deep", backend="cpu", part=["rgba.right", 0])
    assert image.data_window == dm.read(tmp_path / "py.exr").data_window
    with pytest.raises(dm.UsageError, match="part names 3 parts for 2 inputs"):
        dm.merge([STEREO, BALLS], out=tmp_path / "x.exr", part=[0, 0, 0])


def test_a_missing_part_and_an_unchosen_one(tmp_path):
    # A part the file lacks is a usage error (the CLI's exit code 2), with all_parts as with part.
    with pytest.raises(dm.UsageError, match=r'Balls\.exr: has no deep part "rgba\.right"'):
        dm.merge([STEREO, BALLS], backend="cpu", out=tmp_path / "x.exr", all_parts=True)
    assert not (tmp_path / "x.exr").exists()
    with pytest.warns(UserWarning, match=r'merging its first deep part "rgba\.left" of 2'):
        report = dm.merge([STEREO, BALLS], backend="cpu", out=tmp_path / "y.exr")
    assert "parts" not in report
    with pytest.raises(dm.UsageError, match="all_parts writes a multi-part file"):
        dm.merge([STEREO, STEREO], all_parts=True)
