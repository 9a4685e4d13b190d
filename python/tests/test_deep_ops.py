"""deep_slice, crop and transform write the bytes of the CLI's slice, crop and transform; a merge
of one path with out= is the CLI's flatten; bad arguments are the CLI's one-line refusals."""

from pathlib import Path

import pytest

import deepmerge as dm
from conftest import data

VOLUMES = data("oiio/input-crop.deep.exr")
BALLS = data("openexr-images/Balls.exr")


def same_bytes(a: Path, b: Path):
    assert Path(a).read_bytes() == Path(b).read_bytes(), f"{a} and {b} differ"


@pytest.mark.parametrize(
    "cli_args, call",
    [
        (["slice", VOLUMES, "--far", "6.24"], lambda o: dm.deep_slice(VOLUMES, o, far=6.24)),
        (
            ["slice", VOLUMES, "--near", "6.2", "--far", "6.3", "--keep-outside", "--tidy"],
            lambda o: dm.deep_slice(VOLUMES, o, 6.2, 6.3, keep_outside=True, tidy=True),
        ),
        (
            ["crop", VOLUMES, "--box", "3,4,20,30", "--compression", "rle"],
            lambda o: dm.crop(VOLUMES, o, (3, 4, 20, 30), compression="rle"),
        ),
        (
            ["crop", BALLS, "--box", "200,200,400,300", "--keep-outside", "--no-deep-state"],
            lambda o: dm.crop(BALLS, o, (200, 200, 400, 300), True, no_deep_state=True),
        ),
        (
            ["transform", BALLS, "--translate", "-7,3", "--z-offset", "2.5", "--z-scale", "0.5"],
            lambda o: dm.transform(BALLS, o, translate=(-7, 3), z_offset=2.5, z_scale=0.5),
        ),
    ],
)
def test_operations_write_the_cli_bytes(cli, tmp_path, cli_args, call):
    cli(*cli_args, "-o", tmp_path / "cli.exr")
    assert call(tmp_path / "py.exr") is None
    same_bytes(tmp_path / "cli.exr", tmp_path / "py.exr")


def test_png_previews_and_the_flatten_of_one_path_match_the_cli(cli, tmp_path):
    cli("slice", VOLUMES, "--far", "6.24", "-o", tmp_path / "cli.png")
    dm.deep_slice(VOLUMES, tmp_path / "py.png", far=6.24)
    same_bytes(tmp_path / "cli.png", tmp_path / "py.png")
    cli("flatten", BALLS, "-o", tmp_path / "flat.exr")
    dm.merge([BALLS], backend="cpu", out=tmp_path / "one.exr")
    same_bytes(tmp_path / "flat.exr", tmp_path / "one.exr")


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda o: dm.deep_slice(VOLUMES, o, near=2.0, far=1.0), "behind far="),
        (lambda o: dm.transform(VOLUMES, o, z_scale=0.0), "^z_scale must be"),
        (lambda o: dm.crop(VOLUMES, str(o) + ".tif", (0, 0, 3, 3)), "from the extension"),
    ],
)
def test_refusals_are_usage_errors_and_write_nothing(tmp_path, call, message):
    with pytest.raises(dm.UsageError, match=message):
        call(tmp_path / "x.exr")
    assert list(tmp_path.iterdir()) == []


def test_a_crop_that_leaves_nothing_writes_an_image_without_samples(tmp_path):
    dm.crop(VOLUMES, tmp_path / "empty.exr", (100, 100, 110, 110))
    empty = dm.read(tmp_path / "empty.exr")
    assert empty.data_window == ((100, 100), (110, 110))
    assert empty.sample_count == 0
