"""merge(..., out=PATH) is the CLI's streamed merge: the same bytes, the same budget, the same
refusals; read(channels=) keeps what the CLI's --channels keeps."""

from pathlib import Path

import numpy as np
import pytest

import deepmerge as dm
from conftest import assert_same_image, data

BALLS, LEAVES, TRUNKS = (data(f"openexr-images/{n}.exr") for n in ("Balls", "Leaves", "Trunks"))
LAYERED = data("oiio/input-crop.deep.exr")  # R, G, B, A, RA, GA, BA, Z, ZBack
PREFIX = "deepmerge: error: "


def same_bytes(a: Path, b: Path):
    assert Path(a).read_bytes() == Path(b).read_bytes(), f"{a} and {b} differ"


def cli_error(cli, *args):
    done = cli(*args, "-q", check=False)
    assert done.returncode != 0, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(PREFIX), done.stderr
    return lines[0][len(PREFIX):]


def test_streamed_flat_merge_equals_the_cli(cli, tmp_path):
    cli(BALLS, LEAVES, TRUNKS, "-o", tmp_path / "cli.exr", "--backend", "cpu", "-q")
    report = dm.merge([BALLS, LEAVES, Path(TRUNKS)], backend="cpu", out=tmp_path / "py.exr")
    same_bytes(tmp_path / "cli.exr", tmp_path / "py.exr")
    assert report["streamed"] is True and report["backend"] == "cpu"
    assert report["bands"] >= 1 and report["memory_budget"] == dm.DEFAULT_MEMORY_BUDGET == dm.GiB
    assert report["data_window"] == ((0, 0), (1023, 575))


def test_streamed_flat_merge_with_z_and_float_equals_the_cli(cli, tmp_path):
    cli(BALLS, LEAVES, "-o", tmp_path / "cli.exr", "--flat-z", "--flat-type", "float", "-q")
    dm.merge([BALLS, LEAVES], flat_z=True, flat_type="float", out=str(tmp_path / "py.exr"))
    same_bytes(tmp_path / "cli.exr", tmp_path / "py.exr")


@pytest.mark.parametrize("tidy", [False, True])
@pytest.mark.parametrize("compression", ["zips", "none"])
def test_streamed_deep_merge_equals_the_cli(cli, tmp_path, tidy, compression):
    extra = ["--tidy"] if tidy else []
    cli(BALLS, LEAVES, "-o", tmp_path / "cli.exr", "--deep", "--compression", compression,
        *extra, "-q")
    dm.merge([BALLS, LEAVES], output="deep", tidy=tidy, compression=compression,
             out=tmp_path / "py.exr")
    same_bytes(tmp_path / "cli.exr", tmp_path / "py.exr")
    # And the in-memory merge written by write() is the same file but for the inputs' header
    # attributes, which an image in memory does not have.
    cli(BALLS, LEAVES, "-o", tmp_path / "cli-none.exr", "--deep", "--compression", compression,
        *extra, "-q", "--metadata", "none")
    deep = dm.merge([BALLS, LEAVES], output="deep", tidy=tidy)
    dm.write(deep, tmp_path / "mem.exr", compression=compression)
    same_bytes(tmp_path / "cli-none.exr", tmp_path / "mem.exr")


@pytest.mark.parametrize("output", ["flat", "deep"])
def test_zstd_and_metadata_keywords_equal_the_cli(cli, tmp_path, output):
    extra = ["--deep"] if output == "deep" else []
    for metadata in ("first", "none"):
        cli(BALLS, LEAVES, "-o", tmp_path / "cli.exr", "--compression", "zstd", "--zstd-level",
            3, "--metadata", metadata, *extra, "-q")
        dm.merge([BALLS, LEAVES], output=output, compression="zstd", zstd_level=3,
                 metadata=metadata, out=tmp_path / "py.exr")
        same_bytes(tmp_path / "cli.exr", tmp_path / "py.exr")


@pytest.mark.parametrize("output", ["flat", "deep"])
def test_a_small_budget_streams_in_many_bands_and_still_equals_the_cli(cli, tmp_path, output):
    gib = 1 / 256  # 4 MiB
    extra = ["--deep"] if output == "deep" else []
    cli(BALLS, LEAVES, "-o", tmp_path / "cli.exr", "--memory-budget", gib, *extra, "-q")
    report = dm.merge([BALLS, LEAVES], output=output, memory_budget=gib * dm.GiB,
                      out=tmp_path / "py.exr")
    same_bytes(tmp_path / "cli.exr", tmp_path / "py.exr")
    assert report["memory_budget"] == 4 << 20
    assert report["bands"] > 1 and report["max_band_rows"] < 576, report
    whole = dm.merge([BALLS, LEAVES], output=output, out=tmp_path / "whole.exr")
    assert whole["bands"] < report["bands"]
    same_bytes(tmp_path / "whole.exr", tmp_path / "py.exr")


@pytest.mark.parametrize("output", ["flat", "deep"])
def test_a_budget_too_small_is_the_cli_line(cli, tmp_path, output):
    gib = 0.0001
    extra = ["--deep"] if output == "deep" else []
    line = cli_error(cli, BALLS, LEAVES, "-o", tmp_path / "cli.exr", "--memory-budget", gib,
                     *extra)
    with pytest.raises(dm.Error) as caught:
        dm.merge([BALLS, LEAVES], output=output, memory_budget=gib * dm.GiB,
                 out=tmp_path / "py.exr")
    # the library's words, each front end naming its own way to raise the budget
    assert line.endswith(" (raise it with --memory-budget)")
    assert str(caught.value) == line.replace("--memory-budget", "the memory_budget keyword")
    assert isinstance(caught.value, dm.BudgetError) and isinstance(caught.value, dm.UsageError)
    assert not (tmp_path / "py.exr").exists()
    # int bytes are the same budget as the float
    with pytest.raises(dm.BudgetError) as again:
        dm.merge([BALLS, LEAVES], output=output, memory_budget=int(gib * dm.GiB),
                 out=tmp_path / "py.exr")
    assert str(again.value) == str(caught.value)


@pytest.mark.parametrize("bad", [0, -1, 0.5, float("nan"), float("inf"), True, "1G"])
def test_a_budget_that_is_not_a_positive_number_of_bytes_is_a_usage_error(tmp_path, bad):
    with pytest.raises(dm.UsageError, match="memory_budget must be a positive number of bytes"):
        dm.merge([BALLS, LEAVES], memory_budget=bad, out=tmp_path / "py.exr")


def test_gl_streamed_merge_equals_the_cli(cli, tmp_path):
    cli(BALLS, LEAVES, "-o", tmp_path / "cli.exr", "--backend", "gl", "--layout", "ll",
        "--stepwise", "--deep", "--memory-budget", 1 / 128, "-q")
    report = dm.merge([BALLS, LEAVES], output="deep", backend="gl", layout="ll",
                      method="stepwise", memory_budget=dm.GiB / 128, out=tmp_path / "py.exr")
    same_bytes(tmp_path / "cli.exr", tmp_path / "py.exr")
    assert report["backend"] == "gl" and report["bands"] > 1


def test_image_inputs_with_out_merge_in_memory_and_write_the_cli_file(cli, tmp_path):
    # The first input is an image in memory: no header to carry, as the CLI's --metadata none.
    cli(BALLS, LEAVES, "-o", tmp_path / "cli.exr", "--deep", "-q", "--metadata", "none")
    report = dm.merge([dm.read(BALLS), LEAVES], output="deep", out=tmp_path / "py.exr")
    same_bytes(tmp_path / "cli.exr", tmp_path / "py.exr")
    assert report["streamed"] is False and report["bands"] == 1


def test_output_that_is_an_input_is_refused_as_the_cli(cli, tmp_path):
    copy = tmp_path / "balls.exr"
    copy.write_bytes(Path(BALLS).read_bytes())
    line = cli_error(cli, copy, LEAVES, "-o", copy)
    with pytest.raises(dm.Error) as caught:
        dm.merge([copy, LEAVES], out=copy)
    assert str(caught.value) == line
    assert copy.read_bytes() == Path(BALLS).read_bytes()


def test_write_options_without_out_or_for_the_other_kind_are_usage_errors(tmp_path):
    with pytest.raises(dm.UsageError, match="pass out=PATH"):
        dm.merge([BALLS, LEAVES], compression="none")
    with pytest.raises(dm.UsageError, match="OpenEXR accepts none, rle, zips and zstd for deep"):
        dm.merge([BALLS, LEAVES], output="deep", compression="zip", out=tmp_path / "o.exr")
    with pytest.raises(dm.UsageError, match="metadata must be"):
        dm.merge([BALLS, LEAVES], metadata="all", out=tmp_path / "o.exr")
    with pytest.raises(dm.UsageError, match='zstd_level applies to compression="zstd"'):
        dm.merge([BALLS, LEAVES], zstd_level=3, out=tmp_path / "o.exr")
    with pytest.raises(dm.UsageError, match="flat_type applies to flat output"):
        dm.merge([BALLS, LEAVES], output="deep", flat_type="float", out=tmp_path / "o.exr")
    with pytest.raises(dm.UsageError, match="channels applies to path inputs"):
        dm.merge([dm.read(BALLS), LEAVES], channels=["R"])


@pytest.mark.parametrize("channels", ["R", "R,G,B", "Z", "A"])
def test_streamed_merge_with_channels_equals_the_cli(cli, tmp_path, channels):
    cli(LAYERED, LAYERED, "-o", tmp_path / "cli.exr", "--deep", "--channels", channels, "-q")
    dm.merge([LAYERED, LAYERED], output="deep", channels=channels.split(","),
             out=tmp_path / "py.exr")
    same_bytes(tmp_path / "cli.exr", tmp_path / "py.exr")
    # read(channels=) keeps the channels the CLI's output has ...
    kept = dm.read(LAYERED, channels=channels)
    [part] = dm.info(tmp_path / "cli.exr")
    assert kept.channel_names == [name for name, _ in part["channels"]]
    # ... with the values of a full read, and an in-memory merge of path inputs keeps them too
    full = dm.read(LAYERED)
    assert_same_image(kept, dm.DeepImage(
        full.counts.copy(), {n: full[n].copy() for n in kept.channel_names},
        data_window=full.data_window, display_window=full.display_window))
    assert kept.deep_image_state == full.deep_image_state
    in_memory = dm.merge([LAYERED, LAYERED], output="deep", channels=channels)
    assert in_memory.channel_names == kept.channel_names


def test_read_channels_keeps_z_zback_and_the_alphas_a_colour_needs():
    assert dm.read(LAYERED, channels=["R"]).channel_names == [
        "A", "BA", "GA", "R", "RA", "Z", "ZBack"]
    assert dm.read(LAYERED, channels=["Z"]).channel_names == ["Z", "ZBack"]
    assert dm.read(BALLS, channels=("G",)).channel_names == ["A", "G", "Z"]
    assert dm.read(BALLS, channels="A,Z").channel_names == ["A", "Z"]
    with pytest.raises(dm.UsageError, match='no channel "Q"'):
        dm.read(BALLS, channels=["R", "Q"])
    with pytest.raises(dm.UsageError, match="has a comma"):
        dm.read(BALLS, channels=["R,G"])
    with pytest.raises(dm.UsageError, match="the channel list names no channel"):
        dm.read(BALLS, channels=[])


def test_read_channels_applies_the_memory_budget_to_the_kept_samples():
    full = dm.read(BALLS)
    # counts and offsets (16 bytes a pixel) plus the kept samples (A, Z: 6 bytes each) twice:
    # the planes and the inflated chunks they are copied from are held at once at the peak
    kept_bytes = full.width * full.height * 16 + full.sample_count * 6 * 2
    assert dm.read(BALLS, channels=["A"], memory_budget=kept_bytes).channel_names == ["A", "Z"]
    with pytest.raises(dm.BudgetError, match="over the memory budget"):
        dm.read(BALLS, channels=["A"], memory_budget=kept_bytes - 1)
    with pytest.raises(dm.BudgetError, match="over the memory budget"):
        dm.read(BALLS, memory_budget=kept_bytes)


PEAK = """
import sys, deepmerge as dm

def hwm():  # peak resident set of this process image, bytes (ru_maxrss survives exec)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024

a, b, out, budget, mode = sys.argv[1:]
base = hwm()
if mode == "stream":
    dm.merge([a, b], output="deep", backend="cpu", memory_budget=int(budget), out=out)
else:
    dm.write(dm.merge([a, b], output="deep", backend="cpu"), out)
print(hwm() - base)
"""


def test_the_streamed_merge_stays_in_its_budget(cli, tmp_path):
    """Peak resident memory (Linux VmHWM) over what importing took, in a fresh process: the
    streamed merge of a 1920x1080 scene (11 M samples merged) within a 64 MiB budget, against
    the same merge in memory."""
    import subprocess
    import sys

    cli("scene", "atrium", "--size", "1920x1080", "-o", tmp_path / "at")
    a, b = tmp_path / "at_0.exr", tmp_path / "at_1.exr"
    budget = 64 << 20

    def peak(mode, out):
        done = subprocess.run([sys.executable, "-c", PEAK, a, b, out, str(budget), mode],
                              capture_output=True, text=True, check=True)
        return int(done.stdout.strip())

    streamed = peak("stream", tmp_path / "s.exr")
    in_memory = peak("memory", tmp_path / "m.exr")
    same_bytes(tmp_path / "s.exr", tmp_path / "m.exr")
    print(f"\ntests/python: streamed merge peak +{streamed / 2**20:.0f} MiB in a 64 MiB budget, "
          f"in memory +{in_memory / 2**20:.0f} MiB")
    assert streamed < budget * 3 // 2, streamed
    assert in_memory > 3 * streamed, (in_memory, streamed)
