"""Conversions: the OpenEXR module's object-array form and OpenImageIO's DeepData, both ways,
and DeepImages built from arrays."""

import numpy as np
import pytest

import deepmerge as dm
from conftest import assert_same_image, data

SMALL = ["oiio/tinydeep.exr", "oiio/deepalpha.exr", "openexr/11.deep.exr",
         "oiio/deep-nosamples.exr"]


@pytest.mark.parametrize("rel", SMALL + ["openexr-images/Balls.exr"])
def test_openexr_object_arrays_round_trip_through_a_file(rel, tmp_path):
    import OpenEXR

    image = dm.read(data(rel))
    pixels = dm.to_openexr(image)
    # Pixel entries are views into the image, not copies.
    some = next((p for p in pixels[image.channel_names[0]].reshape(-1) if p is not None), None)
    if some is not None:
        assert np.shares_memory(some, image[image.channel_names[0]])
    # Written by the OpenEXR module, read back by deepmerge.
    header = {"type": OpenEXR.deepscanline, "compression": OpenEXR.ZIPS_COMPRESSION,
              "dataWindow": image.data_window, "displayWindow": image.display_window}
    channels = {n: OpenEXR.Channel(n, p) for n, p in pixels.items()}
    if image.sample_count:
        OpenEXR.File(header, channels).write(str(tmp_path / "rt.exr"))
        assert_same_image(dm.read(tmp_path / "rt.exr"), image, rel)
    # And straight back from the object arrays.
    back = dm.from_openexr(pixels, data_window=image.data_window,
                           display_window=image.display_window,
                           deep_image_state=image.deep_image_state)
    assert_same_image(back, image, rel)


def test_from_openexr_refuses_channels_that_disagree():
    a = np.empty((1, 2), dtype=object)
    a[0, 0], a[0, 1] = np.array([1.0], np.float32), None
    b = np.empty((1, 2), dtype=object)
    b[0, 0], b[0, 1] = None, np.array([1.0], np.float32)
    with pytest.raises(dm.FormatError, match="channel B has 0 samples at pixel 0"):
        dm.from_openexr({"A": a, "B": b})


@pytest.mark.parametrize("rel", SMALL)
def test_oiio_deepdata_round_trips(rel):
    import OpenImageIO as oiio  # pinned in tests/requirements.txt: required, never skipped
    image = dm.read(data(rel))
    deep = dm.to_deepdata(image)
    assert isinstance(deep, oiio.DeepData)
    assert deep.pixels == image.counts.size
    assert [deep.samples(p) for p in range(deep.pixels)] == image.counts.reshape(-1).tolist()
    back = dm.from_deepdata(deep, image.width, image.height, data_window=image.data_window,
                            display_window=image.display_window,
                            deep_image_state=image.deep_image_state)
    assert_same_image(back, image, rel)


def test_a_deep_image_from_arrays():
    counts = np.array([[1, 0], [2, 1]], dtype=np.uint32)
    image = dm.DeepImage(
        counts,
        {"Z": np.array([1, 2, 3, 4], np.float32), "A": np.array([1, 1, 0.5, 1], np.float16),
         "id": np.array([7, 8, 9, 10], np.uint32)},
        data_window=((10, 20), (11, 21)),
        deep_image_state="sorted",
    )
    assert image.channel_names == ["A", "Z", "id"]
    assert image.display_window == image.data_window == ((10, 20), (11, 21))
    assert image.deep_image_state == "sorted"
    assert image.offsets.tolist() == [0, 1, 1, 3, 4]
    assert image["id"].dtype == np.uint32 and image["A"].dtype == np.float16
    # The image holds copies: changing the arrays given does not change it.
    given = np.array([5.0], np.float32)
    one = dm.DeepImage(np.ones((1, 1), np.uint32), {"Z": given, "A": np.ones(1, np.float32)})
    given[0] = 6
    assert one["Z"][0] == 5


def test_arrays_that_do_not_make_a_deep_image_are_value_errors():
    counts = np.array([[1, 2]], dtype=np.uint32)
    z = np.array([1, 2, 3], np.float32)
    a = np.ones(3, np.float32)
    cases = [
        (dict(counts=counts, channels={"Z": z[:2], "A": a}), "channel Z has 2 values but counts add up to 3"),
        (dict(counts=counts, channels={"Z": z, "A": a}, offsets=np.array([0, 2], np.uint64)),
         "offsets disagree with counts at pixel 1: offset 2, but the counts before it add up to 1"),
        (dict(counts=counts, channels={"Z": z, "A": a}, offsets=np.array([0, 1, 4], np.uint64)),
         "offsets disagree with counts at pixel 2"),
        (dict(counts=counts, channels={"Z": np.array([1, np.nan, 3], np.float32), "A": a}),
         r"channel Z is NaN at pixel \(1, 0\) sample 0; depths must be numbers"),
        (dict(counts=counts.astype(np.int64), channels={"Z": z, "A": a}),
         "counts must be a 2-D numpy array of uint32"),
        (dict(counts=counts, channels={"Z": z.astype(np.float64), "A": a}),
         "channel Z must be a 1-D numpy array of float32, float16 or uint32"),
        (dict(counts=counts, channels={"Z": z, "A": a}, data_window=((0, 0), (5, 5))),
         "counts is 1 x 2 but the data window"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message) as caught:
            dm.DeepImage(**kwargs)
        assert isinstance(caught.value, dm.Error)
        assert "\n" not in str(caught.value)
    with pytest.raises(dm.UsageError, match="deep_image_state must be"):
        dm.DeepImage(counts, {"Z": z}, deep_image_state="neat")
