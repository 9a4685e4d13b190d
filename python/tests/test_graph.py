"""deepmerge.Graph (issue 27): the graph built node by node writes deepmerge comp's bytes and
the steps' bytes, reads and writes scripts, and refuses as the script does."""

from pathlib import Path

import pytest

import deepmerge as dm
from conftest import data


def same_bytes(a, b):
    assert Path(a).read_bytes() == Path(b).read_bytes(), f"{a} and {b} differ"

BALLS = data("openexr-images/Balls.exr")
LEAVES = data("openexr-images/Leaves.exr")
TRUNKS = data("openexr-images/Trunks.exr")


def build(out_dir):
    g = dm.Graph()
    balls = g.input(BALLS)
    leaves = g.input(LEAVES)
    trunks = g.input(TRUNKS)
    chars = g.merge([balls, leaves], deep=True)
    held = g.holdout(chars, trunks)
    near = g.slice(held, far=300.0)
    flat = g.flatten(near)
    g.output(flat, out_dir / "comp.exr")
    g.output(held, out_dir / "held.exr", compression="rle")
    return g


def test_a_graph_writes_the_steps_bytes_and_the_cli_comp_bytes(tmp_path, cli):
    g = build(tmp_path)
    g.run()
    cli(BALLS, LEAVES, "--deep", "-o", tmp_path / "chars.exr")
    cli("holdout", tmp_path / "chars.exr", TRUNKS, "--compression", "rle", "-o", tmp_path / "h.exr")
    cli("holdout", tmp_path / "chars.exr", TRUNKS, "-o", tmp_path / "h-zips.exr")
    cli("slice", tmp_path / "h-zips.exr", "--far", "300", "-o", tmp_path / "near.exr")
    cli("flatten", tmp_path / "near.exr", "-o", tmp_path / "steps.exr")
    same_bytes(tmp_path / "comp.exr", tmp_path / "steps.exr")
    same_bytes(tmp_path / "held.exr", tmp_path / "h.exr")
    # Written as a script, the CLI runs it to the same bytes; read back, so does Python.
    script = tmp_path / "g.toml"
    script.write_text(g.to_script())
    (tmp_path / "cli").mkdir()
    text = g.to_script().replace(str(tmp_path / "comp.exr"), str(tmp_path / "cli" / "comp.exr"))
    text = text.replace(str(tmp_path / "held.exr"), str(tmp_path / "cli" / "held.exr"))
    script.write_text(text)
    cli("comp", script)
    same_bytes(tmp_path / "cli" / "comp.exr", tmp_path / "steps.exr")
    back = dm.Graph.from_script(script)
    assert back.to_script() == text
    (tmp_path / "cli" / "comp.exr").unlink()
    back.run()
    same_bytes(tmp_path / "cli" / "comp.exr", tmp_path / "steps.exr")


def test_a_reformat_node_writes_the_reformat_commands_bytes(tmp_path, cli):
    g = dm.Graph()
    small = g.reformat(g.input(BALLS), scale=0.5)
    g.output(small, tmp_path / "small.exr")
    g.run()
    cli("reformat", BALLS, "--scale", "0.5", "-o", tmp_path / "cli.exr")
    same_bytes(tmp_path / "small.exr", tmp_path / "cli.exr")
    assert 'op = "reformat"' in g.to_script()


def test_frames_run_per_frame(tmp_path, cli):
    import shutil

    for f, (a, b) in enumerate([(BALLS, LEAVES), (LEAVES, TRUNKS)], start=1):
        shutil.copy(a, tmp_path / f"a.{f:04d}.exr")
        shutil.copy(b, tmp_path / f"b.{f:04d}.exr")
    g = dm.Graph()
    m = g.merge([g.input(tmp_path / "a.####.exr"), g.input(tmp_path / "b.####.exr")])
    g.output(m, tmp_path / "out.####.exr")
    g.run(frames="1-2")
    for f in (1, 2):
        cli(tmp_path / f"a.{f:04d}.exr", tmp_path / f"b.{f:04d}.exr", "-o", tmp_path / f"one.{f}.exr")
        same_bytes(tmp_path / f"out.{f:04d}.exr", tmp_path / f"one.{f}.exr")
    with pytest.raises(dm.UsageError, match="frames="):
        g.run()


def test_refusals_are_the_scripts(tmp_path):
    g = dm.Graph()
    a = g.input(BALLS)
    s = g.slice(a, far=1.0, farr=2.0)
    g.output(s, tmp_path / "x.exr")
    with pytest.raises(dm.UsageError, match="unknown option farr"):
        g.run()
    g = dm.Graph()
    m = g.merge([g.input(BALLS), "nobody"])
    g.output(m, tmp_path / "x.exr")
    with pytest.raises(dm.UsageError, match="no input or node is named nobody"):
        g.run()
    assert list(tmp_path.iterdir()) == []
