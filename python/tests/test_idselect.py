"""idselect writes the bytes of the CLI's idselect (and its --mask); merge's bbox keyword writes
the bytes of --bbox, streamed and in memory; bad arguments are the CLI's one-line refusals."""

from pathlib import Path

import pytest

import deepmerge as dm
from conftest import data

IDS = data("openexr/11.deep.exr")
VOLUMES = data("oiio/input-crop.deep.exr")
OTHER = data("openexr/multivariate.deep.exr")


def same_bytes(a: Path, b: Path):
    assert Path(a).read_bytes() == Path(b).read_bytes(), f"{a} and {b} differ"


def some_ids(path: str, channel: str):
    image = dm.read(path)
    ids = sorted(set(int(v) for v in image.channel(channel)))
    assert len(ids) >= 2, "the file holds several ids"
    return ids


@pytest.mark.parametrize("invert", [False, True])
def test_idselect_writes_the_cli_bytes(cli, tmp_path, invert):
    ids = some_ids(IDS, "id")[::2]
    text = "id=" + ",".join(map(str, ids))
    flags = ["--invert"] if invert else []
    cli("idselect", IDS, "--id", text, *flags, "--mask", tmp_path / "cli-m.exr", "-o", tmp_path / "cli.exr")
    for i, form in enumerate([text, [text], {"id": ids}]):
        out, mask = tmp_path / f"py{i}.exr", tmp_path / f"py{i}-m.exr"
        assert dm.idselect(IDS, out, form, invert, mask=mask) is None
        same_bytes(tmp_path / "cli.exr", out)
        same_bytes(tmp_path / "cli-m.exr", mask)


@pytest.mark.parametrize("bbox, flag", [("intersection", "intersection"), ("first", "first"), ((-3, 5, 300, 9), "-3,5,300,9")])
def test_merge_bbox_writes_the_cli_bytes(cli, tmp_path, bbox, flag):
    cli(VOLUMES, IDS, "--bbox", flag, "--backend", "cpu", "-o", tmp_path / "cli.exr")
    dm.merge([VOLUMES, IDS], backend="cpu", out=tmp_path / "py.exr", bbox=bbox)
    same_bytes(tmp_path / "cli.exr", tmp_path / "py.exr")
    # In memory, then written: the same window and bytes. An image in memory has no header to
    # carry, so it is the CLI's file without the inputs' metadata.
    cli(VOLUMES, IDS, "--bbox", flag, "--backend", "cpu", "--metadata", "none",
        "-o", tmp_path / "cli-none.exr")
    merged = dm.merge([VOLUMES, IDS], backend="cpu", bbox=bbox)
    dm.write(merged, tmp_path / "mem.exr")
    same_bytes(tmp_path / "cli-none.exr", tmp_path / "mem.exr")


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda o: dm.idselect(IDS, o, "object=1"), "its channels: A, B, G, R, Z, id, particleid"),
        (lambda o: dm.idselect(IDS, o, "id=-1"), "^ids takes"),
        (lambda o: dm.idselect(IDS, o, 7), "ids must be"),
        (lambda o: dm.merge([VOLUMES, IDS], out=o, bbox="all"), "union, intersection, first or X0,Y0,X1,Y1"),
        (lambda o: dm.merge([VOLUMES, IDS], out=o, bbox=(1, 2, 3)), "bbox must be"),
    ],
)
def test_refusals_are_the_cli_lines_and_write_nothing(tmp_path, call, message):
    with pytest.raises(dm.Error, match=message):
        call(tmp_path / "x.exr")
    assert list(tmp_path.iterdir()) == []


def test_idselect_by_manifest_names_writes_the_cli_bytes(cli, tmp_path):
    cli("idselect", IDS, "--id", "id=blob/*,green", "-o", tmp_path / "cli.exr")
    dm.idselect(IDS, tmp_path / "py.exr", "id=blob/*,green")
    same_bytes(tmp_path / "cli.exr", tmp_path / "py.exr")
    with pytest.raises(dm.Error, match='is named "chair\\*"'):
        dm.idselect(IDS, tmp_path / "x.exr", "id=chair*")
    assert not (tmp_path / "x.exr").exists()
