"""merge, flatten, holdout and write give the CLI's results bit for bit: each test runs the CLI
and the bindings on the same inputs and compares the written files byte for byte."""

import threading
from pathlib import Path

import numpy as np
import pytest

import deepmerge as dm
from conftest import assert_same_image, data

BALLS, LEAVES, TRUNKS = (data(f"openexr-images/{n}.exr") for n in ("Balls", "Leaves", "Trunks"))


def same_bytes(a: Path, b: Path):
    assert Path(a).read_bytes() == Path(b).read_bytes(), f"{a} and {b} differ"


def test_flat_merge_equals_the_cli(cli, tmp_path):
    # An image in memory has no header to carry: the CLI's file without the inputs' metadata.
    cli(BALLS, LEAVES, TRUNKS, "-o", tmp_path / "cli.exr", "--backend", "cpu", "-q",
        "--metadata", "none")
    flat = dm.merge([BALLS, LEAVES, TRUNKS], backend="cpu")
    assert isinstance(flat, dm.FlatImage)
    dm.write(flat, tmp_path / "py.exr")
    same_bytes(tmp_path / "cli.exr", tmp_path / "py.exr")
    assert flat["R"].shape == (576, 1024) and flat["R"].dtype == np.float32


def test_flat_merge_with_z_and_float_storage_equals_the_cli(cli, tmp_path):
    # An image in memory has no header to carry: the CLI's file without the inputs' metadata.
    cli(BALLS, LEAVES, "-o", tmp_path / "cli.exr", "--flat-z", "--flat-type", "float", "-q",
        "--metadata", "none")
    flat = dm.merge([BALLS, LEAVES], flat_z=True)
    assert "Z" in flat
    dm.write(flat, tmp_path / "py.exr", flat_type="float")
    same_bytes(tmp_path / "cli.exr", tmp_path / "py.exr")


@pytest.mark.parametrize("tidy", [False, True])
@pytest.mark.parametrize("compression", ["zips", "none"])
def test_deep_merge_equals_the_cli(cli, tmp_path, tidy, compression):
    extra = ["--tidy"] if tidy else []
    cli(BALLS, LEAVES, "-o", tmp_path / "cli.exr", "--deep", "--compression", compression,
        *extra, "-q", "--metadata", "none")
    deep = dm.merge([BALLS, LEAVES], output="deep", tidy=tidy)
    assert isinstance(deep, dm.DeepImage)
    dm.write(deep, tmp_path / "py.exr", compression=compression)
    same_bytes(tmp_path / "cli.exr", tmp_path / "py.exr")


def test_in_memory_inputs_merge_as_their_files(tmp_path):
    balls, leaves = dm.read(BALLS), dm.read(LEAVES)
    from_files = dm.merge([BALLS, LEAVES], output="deep")
    assert_same_image(dm.merge([balls, leaves], output="deep"), from_files)
    assert_same_image(dm.merge([balls, LEAVES], output="deep"), from_files)
    # An image built from arrays (a copy of Balls) merges as Balls does.
    rebuilt = dm.DeepImage(
        balls.counts.copy(),
        {n: balls[n].copy() for n in balls.channel_names},
        data_window=balls.data_window,
        display_window=balls.display_window,
        offsets=balls.offsets.copy(),
    )
    assert_same_image(dm.merge([rebuilt, leaves], output="deep"), from_files)


def test_gl_backend_equals_the_cli(cli, tmp_path):
    a, b = data("oiio/deepalpha.exr"), data("oiio/tinydeep.exr")
    cli(a, b, "-o", tmp_path / "cli.exr", "--backend", "gl", "--layout", "ll", "--stepwise",
        "--deep", "-q", "--metadata", "none")
    deep = dm.merge([a, b], output="deep", backend="gl", layout="ll", method="stepwise")
    dm.write(deep, tmp_path / "py.exr")
    same_bytes(tmp_path / "cli.exr", tmp_path / "py.exr")


@pytest.mark.parametrize("backend", ["cpu", "gl"])
def test_merges_on_several_threads_agree(backend):
    """The GIL is released while the engine runs; each thread gets its own GL context."""
    expected = dm.merge([BALLS, LEAVES], backend="cpu")["R"].copy()
    results, errors = [], []

    def work():
        try:
            for _ in range(2):
                results.append(dm.merge([BALLS, LEAVES], backend=backend)["R"].copy())
        except Exception as e:  # reported below, with the thread's error
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == 6
    for r in results:
        assert r.tobytes() == expected.tobytes()


@pytest.mark.parametrize("cull", [False, True])
def test_holdout_equals_the_cli(cli, tmp_path, cull):
    image, mask = data("oiio/input-crop.deep.exr"), data("oiio/holdout-crop.deep.exr")
    cli("holdout", image, mask, "-o", tmp_path / "cli.exr", *(["--cull"] if cull else []),
        "--metadata", "none")
    held = dm.holdout(dm.read(image), mask, cull=cull)
    dm.write(held, tmp_path / "py.exr")
    same_bytes(tmp_path / "cli.exr", tmp_path / "py.exr")


def test_flatten_is_a_merge_of_one(tmp_path):
    balls = dm.read(BALLS)
    flat = dm.flatten(balls)
    one = dm.merge([balls])
    for name in one.channel_names:
        assert flat[name].tobytes() == one[name].tobytes()
    # Merging with an empty image changes nothing either.
    assert dm.flatten(BALLS)["A"].tobytes() == flat["A"].tobytes()
    d = flat.to_dict()
    d["R"][0, 0] = 7  # copies, free to change
    assert flat["R"][0, 0] != 7 or d["R"] is not flat["R"]


def test_write_then_read_round_trips(tmp_path):
    balls = dm.read(BALLS)
    for compression in ("none", "rle", "zips", "zstd"):
        out = tmp_path / f"balls-{compression}.exr"
        dm.write(balls, out, compression=compression)
        back = dm.read(out)
        assert_same_image(back, balls, compression)
    dm.write(balls, tmp_path / "fast.exr", compression="zstd", zstd_level=1)
    assert_same_image(dm.read(tmp_path / "fast.exr"), balls, "zstd level 1")
    # OpenEXR reads no deep part in ZIP: refused, nothing written.
    with pytest.raises(dm.UsageError, match="OpenEXR accepts none, rle, zips and zstd for deep"):
        dm.write(balls, tmp_path / "zip.exr", compression="zip")
    assert not (tmp_path / "zip.exr").exists()
    # Flat images take every compression, zip (the default) included.
    flat = dm.flatten(balls)
    for compression in ("none", "rle", "zips", "zip", "zstd"):
        dm.write(flat, tmp_path / f"flat-{compression}.exr", compression=compression)


def test_the_gil_is_released_while_the_engine_runs():
    """The main thread keeps running Python while another thread merges: with the GIL held for
    the whole native call, no main-thread tick could fall inside it."""
    import time

    span = {}

    def work():
        start = time.perf_counter()
        dm.merge([BALLS, LEAVES, TRUNKS], output="deep", tidy=True, backend="cpu")
        span["merge"] = (start, time.perf_counter())

    thread = threading.Thread(target=work)
    ticks = []
    thread.start()
    while thread.is_alive():
        ticks.append(time.perf_counter())
        time.sleep(0.001)
    thread.join()
    start, end = span["merge"]
    inside = [t for t in ticks if start < t < end]
    assert len(inside) >= 5, f"{len(inside)} main-thread ticks during a {end - start:.3f} s merge"
