"""Every merge option of the CLI has its keyword, with the CLI's result: Python's merge maps its
keywords onto the library's one merge request, as the CLI maps its flags, so the same options
give the same bytes and the same refusals (in each front end's words)."""

from pathlib import Path

import numpy as np
import pytest

import deepmerge as dm
from conftest import assert_same_image, data

BALLS, LEAVES, TRUNKS = (data(f"openexr-images/{n}.exr") for n in ("Balls", "Leaves", "Trunks"))
IDS = data("openexr/11.deep.exr")


@pytest.mark.parametrize(
    "flags,keywords",
    [
        (["--deep", "--no-deep-state"], dict(output="deep", deep_state=False)),
        (["--deep", "--sort"], dict(output="deep", sort=True)),
        (["--assume-sorted"], dict(assume_sorted=True)),
        (["--merge-strategy", "chain"], dict(merge_strategy="chain")),
        (["--drop-transparent", "0.05"], dict(drop_transparent=0.05)),
        (["--deep", "--drop-hidden", "0.9"], dict(output="deep", drop_hidden=0.9)),
        (["--deep", "--tidy", "--compression", "rle"], dict(output="deep", tidy=True, compression="rle")),
    ],
)
def test_each_keyword_gives_the_flags_bytes(cli, tmp_path, flags, keywords):
    cli(BALLS, LEAVES, TRUNKS, "-o", tmp_path / "cli.exr", "--backend", "cpu", "-q", *flags)
    dm.merge([BALLS, LEAVES, TRUNKS], backend="cpu", out=tmp_path / "py.exr", **keywords)
    assert (tmp_path / "cli.exr").read_bytes() == (tmp_path / "py.exr").read_bytes()
    # The in-memory merge takes the same keywords and gives the same pixels.
    in_memory = {k: v for k, v in keywords.items() if k not in ("compression", "deep_state")}
    merged = dm.merge([BALLS, LEAVES, TRUNKS], backend="cpu", **in_memory)
    if keywords.get("output") == "deep":
        assert_same_image(merged, dm.read(tmp_path / "cli.exr"), str(flags))
    else:
        # Flat: the in-memory composite written, against the CLI's file, read by PyPI OpenEXR.
        import OpenEXR

        dm.write(merged, tmp_path / "memory.exr")
        ours = OpenEXR.File(str(tmp_path / "memory.exr"), separate_channels=True).parts[0]
        theirs = OpenEXR.File(str(tmp_path / "cli.exr"), separate_channels=True).parts[0]
        assert sorted(ours.channels) == sorted(theirs.channels)
        for name in ours.channels:
            np.testing.assert_array_equal(
                ours.channels[name].pixels, theirs.channels[name].pixels, err_msg=name
            )


def test_deep_state_false_leaves_the_attribute_out(tmp_path):
    image = dm.read(BALLS)
    dm.write(image, tmp_path / "with.exr")
    dm.write(image, tmp_path / "without.exr", deep_state=False)
    assert b"deepImageState" in (tmp_path / "with.exr").read_bytes()
    assert b"deepImageState" not in (tmp_path / "without.exr").read_bytes()
    assert_same_image(dm.read(tmp_path / "without.exr"), image)
    dm.merge([BALLS, LEAVES], output="deep", deep_state=False, out=tmp_path / "merged.exr")
    assert b"deepImageState" not in (tmp_path / "merged.exr").read_bytes()
    with pytest.raises(dm.UsageError, match="deep_state applies to a DeepImage"):
        dm.write(dm.merge([BALLS]), tmp_path / "flat.exr", deep_state=False)


def lying_tidy_pixel():
    """One pixel whose samples are in reverse depth order, labelled tidy: an opaque red 0.9 at
    depth 5 stored before an opaque red 0.1 at depth 1."""
    return dm.DeepImage(
        np.array([[2]], dtype=np.uint32),
        {
            "Z": np.array([5.0, 1.0], dtype=np.float32),
            "R": np.array([0.9, 0.1], dtype=np.float32),
            "A": np.array([1.0, 1.0], dtype=np.float32),
        },
        deep_image_state="tidy",
    )


def test_sort_keyword_sorts_a_file_wrongly_labelled_tidy(cli, tmp_path):
    liar = lying_tidy_pixel()
    # Trusted, the label keeps the stored order; sorted, the front sample (0.1) wins.
    assert dm.merge([liar])["R"][0, 0] == pytest.approx(0.9, abs=1e-3)
    assert dm.merge([liar], sort=True)["R"][0, 0] == pytest.approx(0.1, abs=1e-3)
    # The same file, merged by the CLI with --sort and by Python with sort=True.
    path = tmp_path / "liar.exr"
    dm.write(liar, path)
    raw = path.read_bytes()
    marker = b"deepImageState\0deepImageState\0\x01\0\0\0"
    at = raw.index(marker) + len(marker)
    path.write_bytes(raw[:at] + b"\x03" + raw[at + 1 :])  # stamp it tidy, as the liar says
    cli(path, "-o", tmp_path / "cli.exr", "--sort", "-q")
    dm.merge([path], sort=True, out=tmp_path / "py.exr")
    assert (tmp_path / "cli.exr").read_bytes() == (tmp_path / "py.exr").read_bytes()
    assert dm.merge([path], sort=True)["R"][0, 0] == pytest.approx(0.1, abs=1e-3)


def test_unknown_channel_names_are_refused_alike_in_memory_and_streamed(cli, tmp_path):
    expected = "no input has a channel \"Q\" \\(the inputs' channels: A, B, G, R, Z\\)"
    with pytest.raises(dm.UsageError, match=expected):
        dm.merge([BALLS, LEAVES], channels="R,Q")
    with pytest.raises(dm.UsageError, match=expected):
        dm.merge([BALLS, LEAVES], channels="R,Q", out=tmp_path / "o.exr")
    assert not (tmp_path / "o.exr").exists()
    done = cli(BALLS, LEAVES, "--channels", "R,Q", "-o", tmp_path / "o.exr", check=False)
    assert done.returncode == 2 and "no input has a channel \"Q\"" in done.stderr
    # A name only one input has is kept from that input, in memory as streamed.
    merged = dm.merge([BALLS, IDS], output="deep", channels="id")
    dm.merge([BALLS, IDS], output="deep", channels="id", out=tmp_path / "ids.exr")
    assert_same_image(merged, dm.read(tmp_path / "ids.exr"))
    assert merged.channel_names == ["Z", "id"]


def test_gl_keywords_are_refused_with_the_cpu_backend_in_keyword_words():
    for keyword, value in [("block", 4), ("rbm_blocks", "indexed"), ("pixel_order", "tiled"),
                           ("gpu_stages", "host")]:
        with pytest.raises(dm.UsageError, match=f'{keyword} chooses how the GPU merges; it does '
                                                f'not apply to backend="cpu"'):
            dm.merge([BALLS, LEAVES], backend="cpu", **{keyword: value})
