"""deepmerge.read: agrees with PyPI OpenEXR on every deep part of the corpus, and hands out
views of the engine's memory, not copies."""

import numpy as np
import pytest

import deepmerge as dm
from conftest import assert_same_image, corpus_files, data, openexr_part


def deep_parts():
    """(file, part index) of every deep part of the corpus, found with deepmerge.info."""
    found = []
    for rel in corpus_files():
        for part in dm.info(data(rel)):
            if part["deep"]:
                found.append((rel, part["index"]))
    return found


DEEP_PARTS = deep_parts()


def test_the_corpus_has_deep_parts():
    # Guards the parametrised test below against running on nothing.
    assert len(DEEP_PARTS) >= 20


@pytest.mark.parametrize("rel,part", DEEP_PARTS, ids=[f"{r}:{p}" for r, p in DEEP_PARTS])
def test_read_agrees_with_openexr(rel, part):
    ours = dm.read(data(rel), part=part)
    theirs = openexr_part(data(rel), part)
    (x0, y0), (x1, y1) = theirs.header["dataWindow"]
    assert ours.data_window == ((x0, y0), (x1, y1))
    (x0, y0), (x1, y1) = theirs.header["displayWindow"]
    assert ours.display_window == ((x0, y0), (x1, y1))
    assert ours.channel_names == sorted(theirs.channels)
    first = theirs.channels[ours.channel_names[0]].pixels
    counts = np.array([0 if p is None else len(p) for p in first.reshape(-1)], dtype=np.uint32)
    np.testing.assert_array_equal(ours.counts.reshape(-1), counts)
    np.testing.assert_array_equal(ours.offsets, np.concatenate([[0], np.cumsum(counts)]))
    for name in ours.channel_names:
        pixels = [p for p in theirs.channels[name].pixels.reshape(-1) if p is not None and len(p)]
        if not pixels:
            assert len(ours[name]) == 0
            continue
        values = np.concatenate(pixels)
        assert ours[name].dtype == values.dtype, name
        assert ours[name].tobytes() == values.tobytes(), f"{rel}:{part} channel {name}"
    # The OpenEXR module's form converts to the same image.
    converted = dm.from_openexr(theirs, deep_image_state=ours.deep_image_state)
    assert_same_image(converted, ours, f"{rel}:{part} from_openexr")


def test_arrays_are_read_only_views_of_the_image_not_copies():
    image = dm.read(data("openexr-images/Balls.exr"))
    for get in (lambda: image.counts, lambda: image.offsets, lambda: image["R"],
                lambda: image.channels["Z"]):
        a, b = get(), get()
        assert a is not b
        assert np.shares_memory(a, b), "two accesses share one buffer"
        assert a.base is image, "the array's base is the image that owns the buffer"
        assert not a.flags.writeable
        assert not a.flags.owndata
        with pytest.raises(ValueError):
            a.flags.writeable = True
    assert np.shares_memory(image["R"], image.channels["R"])
    # A view keeps its image alive.
    r = dm.read(data("oiio/tinydeep.exr")).channels
    del image
    assert all(len(v) >= 0 for v in r.values())


def test_counts_shape_offsets_and_types():
    image = dm.read(data("openexr-images/Balls.exr"))
    (x0, y0), (x1, y1) = image.data_window
    assert image.counts.shape == (y1 - y0 + 1, x1 - x0 + 1) == (image.height, image.width)
    assert image.counts.dtype == np.uint32
    assert image.offsets.shape == (image.counts.size + 1,)
    assert image.offsets[-1] == image.sample_count == image.counts.sum()
    assert image["R"].dtype == np.float16 and image["Z"].dtype == np.float32
    ids = dm.read(data("openexr/11.deep.exr"))
    assert any(ids[n].dtype == np.uint32 for n in ids.channel_names)
    assert image.deep_image_state in ("messy", "sorted", "non-overlapping", "tidy")


def test_part_by_index_or_name_and_channel_selection():
    path = data("openexr-images/Stereo-Trunks-multipart.exr")
    parts = [p for p in dm.info(path) if p["deep"]]
    by_name = dm.read(path, part=parts[1]["name"])
    assert_same_image(by_name, dm.read(path, part=parts[1]["index"]))
    assert_same_image(dm.read(path), dm.read(path, part=parts[0]["index"]))
    some = dm.read(data("openexr-images/Balls.exr"), channels=["A", "Z"])
    assert some.channel_names == ["A", "Z"]
    # as the CLI's --channels: the alpha a colour channel needs, and Z, come along
    assert dm.read(data("openexr-images/Balls.exr"), channels=["R"]).channel_names == [
        "A", "R", "Z"]
    full = dm.read(data("openexr-images/Balls.exr"))
    assert some["Z"].tobytes() == full["Z"].tobytes()
    with pytest.raises(dm.UsageError, match='no channel "Q"'):
        dm.read(data("openexr-images/Balls.exr"), channels=["Q"])


def test_info_matches_the_cli(cli):
    path = data("openexr-images/Balls.exr")
    assert dm.info_text(path) == cli("info", path).stdout
    assert dm.info_text(path, channels=["R"]) == cli("info", path, "--channels", "R").stdout
    [part] = dm.info(path)
    assert part["samples"]["total"] == dm.read(path).sample_count
