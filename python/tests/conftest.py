"""Shared fixtures of the Python bindings' tests.

They compare the bindings with the CLI binary of the same build (``DEEPMERGE_CLI``, which
``tests/python.rs`` sets; else ``deepmerge`` on the PATH) and with PyPI OpenEXR, on the corpus
``tests/data`` (``DEEPMERGE_DATA``; else found from this file).
"""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

DATA = Path(os.environ.get("DEEPMERGE_DATA", Path(__file__).resolve().parents[2] / "tests/data"))


def data(rel: str) -> str:
    """A file of the corpus."""
    return str(DATA / rel)


def corpus_files():
    """Every EXR of the corpus but the hostile ones (made to be refused), sorted."""
    return sorted(
        str(p.relative_to(DATA)) for p in DATA.rglob("*.exr") if p.parent.name != "hostile"
    )


@pytest.fixture(scope="session")
def cli():
    """A function running the CLI with arguments; returns the CompletedProcess."""
    exe = os.environ.get("DEEPMERGE_CLI") or shutil.which("deepmerge")
    if not exe:
        pytest.fail("no deepmerge CLI: set DEEPMERGE_CLI (tests/python.rs does) or put it on the PATH")

    def run(*args, check=True):
        done = subprocess.run([exe, *map(str, args)], capture_output=True, text=True)
        if check and done.returncode != 0:
            pytest.fail(f"deepmerge {' '.join(map(str, args))} failed: {done.stderr}")
        return done

    return run


def openexr_part(path: str, part: int):
    """Part ``part`` of ``path`` as PyPI OpenEXR reads it (separate channels). OpenEXR 3.5
    refuses files carrying ``deepImageState``; for those the attribute is renamed in a temporary
    copy, as tests/independent/dump_deep.py does."""
    import OpenEXR

    raw = Path(path).read_bytes()
    if b"deepImageState" not in raw:
        return OpenEXR.File(path, separate_channels=True).parts[part]
    with tempfile.NamedTemporaryFile(suffix=".exr", delete=False) as tmp:
        tmp.write(raw.replace(b"deepImageState\0", b"deepImageStatX\0"))
    try:
        return OpenEXR.File(tmp.name, separate_channels=True).parts[part]
    finally:
        os.unlink(tmp.name)


def assert_same_image(a, b, what=""):
    """Two DeepImages hold the same windows, channels, counts and values, bit for bit."""
    assert a.data_window == b.data_window, what
    assert a.display_window == b.display_window, what
    assert a.channel_names == b.channel_names, what
    np.testing.assert_array_equal(a.counts, b.counts, err_msg=what)
    np.testing.assert_array_equal(a.offsets, b.offsets, err_msg=what)
    for name in a.channel_names:
        x, y = a[name], b[name]
        assert x.dtype == y.dtype, f"{what} {name}"
        assert x.tobytes() == y.tobytes(), f"{what} {name} differs"
