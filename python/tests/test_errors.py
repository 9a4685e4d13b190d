"""Errors: every failure is a deepmerge.Error carrying the CLI's one-line message, of the
built-in class it is a kind of; none crashes the interpreter."""

import errno
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import deepmerge as dm
from conftest import DATA, data

BALLS = data("openexr-images/Balls.exr")
PREFIX = "deepmerge: error: "


def cli_error(cli, *args):
    """The CLI's error line for ``args`` (it must fail), without its prefix."""
    done = cli(*args, "-q", check=False)
    assert done.returncode != 0, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(PREFIX), done.stderr
    return lines[0][len(PREFIX):]


def test_a_missing_input_is_a_file_error_with_the_cli_line(cli, tmp_path):
    missing = tmp_path / "missing.exr"
    line = cli_error(cli, missing, BALLS, "-o", tmp_path / "o.exr")
    with pytest.raises(dm.FileError) as caught:
        dm.merge([missing, BALLS])
    assert str(caught.value) == line
    assert isinstance(caught.value, OSError) and caught.value.errno == errno.ENOENT
    with pytest.raises(OSError, match="cannot read"):
        dm.read(missing)


@pytest.mark.parametrize("name", sorted(n for n in os.listdir(DATA / "hostile") if n.endswith(".exr")))
def test_hostile_files_fail_with_the_cli_line(cli, tmp_path, name):
    bad = DATA / "hostile" / name
    done = cli(bad, BALLS, "-o", tmp_path / "o.exr", "-q", check=False)
    if done.returncode == 0:
        # made to stress the merge, not to be refused (overlapping-volumes.exr): the same file
        dm.merge([bad, BALLS], out=tmp_path / "py.exr")
        assert (tmp_path / "py.exr").read_bytes() == (tmp_path / "o.exr").read_bytes()
        return
    line = cli_error(cli, bad, BALLS, "-o", tmp_path / "o.exr")
    with pytest.raises(dm.Error) as caught:
        dm.merge([bad, BALLS], out=tmp_path / "py.exr")  # the CLI's streamed merge
    # a budget refusal names the CLI's flag there and the keyword here
    assert str(caught.value) == line.replace("--memory-budget", "the memory_budget keyword")
    assert isinstance(caught.value, (ValueError, OSError))
    assert not (tmp_path / "py.exr").exists()
    # in memory (whole-file reader) they are refused too, in the same file's words
    with pytest.raises(dm.Error) as whole:
        dm.merge([bad, BALLS])
    assert str(whole.value).startswith(str(bad))
    with pytest.raises(dm.Error):
        dm.read(bad)
    with pytest.raises(dm.Error):
        dm.read(bad, channels=["Z"])


def test_a_file_that_is_not_exr_is_a_format_error(cli, tmp_path):
    text = tmp_path / "notes.exr"
    text.write_text("not an image\n")
    line = cli_error(cli, text, BALLS, "-o", tmp_path / "o.exr")
    with pytest.raises(dm.FormatError) as caught:
        dm.merge([text, BALLS])
    assert str(caught.value) == line and isinstance(caught.value, ValueError)


def test_memory_budget_is_the_cli_memory_budget(cli, tmp_path):
    gib = 0.0001
    line = cli_error(cli, BALLS, BALLS, "-o", tmp_path / "o.exr", "--memory-budget", gib)
    with pytest.raises(dm.BudgetError) as caught:
        dm.merge([BALLS, BALLS], memory_budget=gib * dm.GiB, out=tmp_path / "py.exr")
    assert str(caught.value) == line.replace("--memory-budget", "the memory_budget keyword")
    # In memory the whole inputs are held: the budget refuses a decoded input over it.
    with pytest.raises(dm.BudgetError, match="over the memory budget"):
        dm.merge([BALLS, BALLS], memory_budget=gib * dm.GiB)


def test_a_flat_merge_of_depth_only_inputs_is_a_usage_error(cli, tmp_path):
    only_z = dm.DeepImage(np.ones((2, 2), np.uint32), {"Z": np.arange(4, dtype=np.float32)})
    dm.write(only_z, tmp_path / "z.exr")
    line = cli_error(cli, tmp_path / "z.exr", tmp_path / "z.exr", "-o", tmp_path / "o.exr")
    with pytest.raises(dm.UsageError) as caught:
        dm.merge([tmp_path / "z.exr", tmp_path / "z.exr"])
    assert str(caught.value) == line
    assert isinstance(caught.value, ValueError)


def test_an_unwritable_output_is_a_file_error(tmp_path):
    image = dm.read(data("oiio/tinydeep.exr"))
    with pytest.raises(dm.FileError, match="cannot write"):
        dm.write(image, tmp_path / "no" / "such" / "dir" / "o.exr")


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(backend="metal"), 'the backend must be one of auto, cpu, gl, not "metal"'),
        (dict(output="png"), 'output must be "flat" or "deep", not "png"'),
        (dict(tidy=True), "tidy applies to deep output"),
        (dict(layout="zz"), "layout must be"),
        (dict(method="fast"), "method must be"),
        (dict(backend="cpu", layout="bia"), 'layout chooses how the GPU merges; it does not apply to backend="cpu"'),
        (dict(output="deep", deep_state=False, flat_z=True), 'flat_z applies to flat output, not output="deep"'),
        (dict(deep_state=False), 'deep_state=False applies to deep output; add output="deep"'),
        (dict(drop_hidden=0.5), 'drop_hidden applies to deep output; add output="deep"'),
        (dict(sort=True, assume_sorted=True), "sort and assume_sorted cannot be used together"),
        (dict(block=0, layout="la"), "block must be 1 to 32, not 0"),
        (dict(gpu_stages="sometimes"), 'gpu_stages must be "auto", "gpu" or "host"'),
        (dict(merge_strategy="zigzag"), "the merge strategy must be one of kway, chain"),
    ],
)
def test_bad_arguments_are_usage_errors(kwargs, message):
    with pytest.raises(dm.UsageError, match=message) as caught:
        dm.merge([BALLS, BALLS], **kwargs)
    assert "\n" not in str(caught.value)


def test_bad_argument_types_are_usage_errors():
    with pytest.raises(dm.UsageError, match="not one string"):
        dm.merge(BALLS)
    with pytest.raises(dm.UsageError, match="input 1 must be a path"):
        dm.merge([BALLS, 42])
    with pytest.raises(dm.UsageError, match="compression must be"):
        dm.write(dm.read(data("oiio/tinydeep.exr")), "x.exr", compression="lzw")
    with pytest.raises(dm.UsageError, match="write takes"):
        dm.write(np.zeros(3), "x.exr")
    with pytest.raises(TypeError):
        dm.read(42)


def test_every_error_class_is_a_deepmerge_error():
    assert issubclass(dm.FileError, OSError) and issubclass(dm.FileError, dm.Error)
    assert issubclass(dm.FormatError, ValueError) and issubclass(dm.UsageError, ValueError)
    assert issubclass(dm.GLError, RuntimeError) and issubclass(dm.GLError, dm.Error)


def documented_classes():
    """Kind -> (exit code, Python class name) from the table of docs/cli.md ("Exit codes")."""
    doc = (Path(__file__).resolve().parents[2] / "docs/cli.md").read_text()
    section = doc.split("## Exit codes")[1].split("\n## ")[0]
    table = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) == 6 and cells[1].isdigit() and cells[2]:
            table[cells[2]] = (int(cells[1]), cells[3].split("`")[1])
    return table


def test_each_kind_from_a_real_input_raises_its_documented_class(cli, tmp_path):
    table = documented_classes()
    flat = data("openexr-images/composited.exr")
    text = tmp_path / "notes.exr"
    text.write_text("not an image\n")
    cases = {
        "I/O": (lambda: dm.read(tmp_path / "missing.exr"), [tmp_path / "missing.exr", BALLS]),
        "malformed": (lambda: dm.read(text), [text, BALLS]),
        "unsupported": (lambda: dm.read(flat), [flat, BALLS]),
        "usage": (lambda: dm.read(BALLS, part=4), [BALLS, BALLS, "--part", 4]),
        "over budget": (lambda: dm.read(BALLS, memory_budget=100_000),
                        [BALLS, BALLS, "--memory-budget", 0.0001]),
    }
    for kind, (call, args) in cases.items():
        code, class_name = table[kind]
        with pytest.raises(dm.Error) as caught:
            call()
        assert type(caught.value).__name__ == class_name, (kind, caught.value)
        done = cli(*args, "-o", tmp_path / "o.exr", "-q", check=False)
        assert done.returncode == code, (kind, done.stderr)
    # the narrower classes are still their broader ones, so older handlers keep working
    assert issubclass(dm.UnsupportedError, dm.FormatError)
    assert issubclass(dm.BudgetError, dm.UsageError)


def test_no_opengl_is_a_gl_error(tmp_path):
    """A machine whose EGL finds no vendor library: ``backend="gl"`` raises the GL class."""
    _, class_name = documented_classes()["OpenGL"]
    script = (
        "import sys, deepmerge as dm\n"
        "try:\n"
        f"    dm.merge([{BALLS!r}, {BALLS!r}], backend='gl')\n"
        "except dm.Error as e:\n"
        "    print(type(e).__name__)\n"
    )
    env = dict(os.environ, __EGL_VENDOR_LIBRARY_FILENAMES="/nonexistent")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert done.stdout.strip() == class_name, done


def test_a_misspelt_setting_is_named_at_import():
    """A ``DEEPMERGE_*`` variable the library does not read warns once at import, naming the
    nearest setting, as the CLI does at its start; known ones say nothing."""
    code = "import warnings; warnings.simplefilter('always'); import deepmerge"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEEPMERGE_GL_TRANSF")}
    run = lambda extra: subprocess.run(
        [sys.executable, "-c", code], env={**env, **extra}, capture_output=True, text=True
    )
    quiet = run({"DEEPMERGE_GL_TRANSFER": "calls"})
    assert quiet.returncode == 0, quiet.stderr
    assert "DEEPMERGE_" not in quiet.stderr, quiet.stderr
    warned = run({"DEEPMERGE_GL_TRANSFR": "calls"})
    assert warned.returncode == 0, warned.stderr
    assert warned.stderr.count("UserWarning") == 1, warned.stderr
    assert (
        "DEEPMERGE_GL_TRANSFR is not a setting deepmerge reads "
        "(did you mean DEEPMERGE_GL_TRANSFER?)" in warned.stderr
    ), warned.stderr
