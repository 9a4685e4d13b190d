#!/usr/bin/env python3
"""A mutation campaign against the `deepmerge` binary (issue 11): the CLI as users run it.

`tests/fuzz.rs` mutates files in-process on every `cargo test`; this runs the real binary on
mutants of the corpus files, each run in a child shell capped in address space (`ulimit -v`)
and in wall-clock time, and classifies what happened:

- abort: killed by a signal, or a panic (exit 101), or an allocation failure;
- hang: still running at the time limit;
- multi-line: a failure whose stderr is not exactly one line;
- unnamed: a failure whose one line names neither the mutant nor the output;
- leftover: a `.tmp` file left beside the output, or an output after a failure;
- ok / refused: the run succeeded, or failed well.

Deterministic for a given --seed. Mutants that misbehave are kept in --keep (default
/tmp/deepmerge-campaign) as `<class>-<n>.exr` with the command line in `<class>-<n>.txt`.

Usage: python3 tests/campaign/cli_mutants.py --binary target/release/deepmerge \\
           --mutants 3000 --seed 11 [--jobs 2] [--gl-share 0.05]
"""

import argparse
import collections
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data"

# Small deep files of every kind the corpus has: scanline and tiled, each codec, points and
# volumes, one and many parts.
SEEDS = [
    "oiio/deep-nosamples.exr",
    "oiio/deep-onesample.exr",
    "oiio/tinydeep.exr",
    "oiio/az.exr",
    "openexr/11.deep.exr",
    "oiio/input-crop.deep.exr",
    "oiio/ref-cull-crop.deep.exr",
    "oiio/holdout-crop.deep.exr",
    "oiio/deepalpha.exr",
    # Uncompressed, so that mutated sample data reaches the merge rather than the inflater.
    "variants/Balls_scan_none.exr",
    "variants/Balls_deeptile17x13_none.exr",
]

GOOD = "oiio/tinydeep.exr"

INTERESTING = [0, 1, -1, 2, 16, 255, 0x7FFF, 0x8000, 2**31 - 1, -(2**31), 1 << 28, 1 << 30,
               2**32 - 1, 2**63 - 1]

HEADER_KEYS = [b"dataWindow\0box2i\0", b"displayWindow\0box2i\0", b"tiles\0tiledesc\0",
               b"chunkCount\0int\0", b"compression\0compression\0", b"channels\0chlist\0",
               b"type\0string\0", b"version\0int\0", b"lineOrder\0lineOrder\0"]

# Option sets a run picks from (flat, deep, tidy deep, per-channel types, info).
OPTIONS = [
    [],
    ["--deep"],
    ["--deep", "--tidy"],
    ["--flat-z", "--flat-type", "float"],
    ["--deep", "--compression", "none"],
    ["--deep", "--tidy", "--compression", "zstd"],
]


def put(data, at, value):
    if 0 <= at and at + len(value) <= len(data):
        data[at:at + len(value)] = value


def mutate(seed, rng):
    data = bytearray(seed)
    # Mostly one mutation, so that many mutants get past the first check they break.
    for _ in range(rng.choice([1, 1, 1, 2, 3, 4])):
        n = max(len(data), 1)
        kind = rng.randrange(8)
        if kind == 3 and rng.randrange(3):
            kind = 0  # truncation ends most runs in the header: a third as often as the others
        if kind == 0:
            for _ in range(rng.randint(1, 8)):
                at = rng.randrange(n)
                if at < len(data):
                    data[at] ^= 1 << rng.randrange(8)
        elif kind == 1:
            v = rng.choice(INTERESTING)
            size = rng.choice([4, 8])
            put(data, rng.randrange(n), (v & (2**(8 * size) - 1)).to_bytes(size, "little"))
        elif kind == 2:
            fields = [data.find(k) + len(k) + 4 for k in HEADER_KEYS if data.find(k) >= 0]
            if fields:
                at = rng.choice(fields) + 4 * rng.randrange(4)
                put(data, at, (rng.choice(INTERESTING) & 0xFFFFFFFF).to_bytes(4, "little"))
        elif kind == 3:
            del data[rng.randrange(n):]
        elif kind == 4:
            at = rng.randrange(n)
            k = min(rng.randint(1, 64), len(data) - at)
            if k > 0:
                if rng.randrange(2):
                    del data[at:at + k]
                else:
                    data[at:at] = data[at:at + k]
        elif kind == 5 and len(data) > 8:
            # An 8-byte little-endian offset or size somewhere past the header, nudged.
            at = rng.randrange(len(data) - 8)
            v = int.from_bytes(data[at:at + 8], "little")
            v = (v + rng.choice([1, -1, 7, 1 << 20, -(1 << 20), 1 << 40])) % 2**64
            put(data, at, v.to_bytes(8, "little"))
        else:
            at = rng.randrange(n)
            if at < len(data):
                data[at] = rng.randrange(256)
    return bytes(data)


def classify(binary, work, mutant, args, timeout, vmem_kib):
    """Run one mutant; returns (class, detail)."""
    out = work / "out.exr"
    cmd = [str(binary)] + [str(a) for a in args]
    script = f"ulimit -v {vmem_kib}; exec \"$0\" \"$@\""
    start = time.monotonic()
    proc = subprocess.Popen(["sh", "-c", script] + cmd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, cwd=work, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return "hang", f"over {timeout} s"
    elapsed = time.monotonic() - start
    err = err.decode("utf-8", "replace")
    leftovers = [p.name for p in work.iterdir() if p.name.endswith(".tmp")]
    rc = proc.returncode
    if rc < 0 or rc == 101 or "panicked" in err or "memory allocation" in err:
        return "abort", f"rc {rc}: {err.strip()[-300:]}"
    if leftovers:
        return "leftover", f"{leftovers}"
    if rc == 0:
        return "ok", f"{elapsed:.2f} s"
    if out.exists():
        return "leftover", "output after a failure"
    lines = err.splitlines()
    if len(lines) != 1 or not err.endswith("\n"):
        return "multi-line", err[-500:]
    if str(mutant) not in err and "mutant.exr" not in err and "out.exr" not in err:
        return "unnamed", err.strip()
    return "refused", err.strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default="target/release/deepmerge")
    ap.add_argument("--mutants", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--vmem-gib", type=float, default=6.0)
    ap.add_argument("--gl-share", type=float, default=0.0,
                    help="share of runs on --backend gl (llvmpipe is slow: hangs may be GL's)")
    ap.add_argument("--keep", default="/tmp/deepmerge-campaign")
    a = ap.parse_args()
    binary = Path(a.binary).resolve()
    keep = Path(a.keep)
    keep.mkdir(parents=True, exist_ok=True)
    seeds = [(name, (DATA / name).read_bytes()) for name in SEEDS]
    # Uncompressed volumetric seeds made by the binary itself from the corpus (overlapping
    # volumes of two inputs, merged deep), so that mutated depths and alphas reach the tidy.
    with tempfile.TemporaryDirectory(prefix="dm-seeds-") as d:
        for name, extra in [("derived/volumes-none.exr", []),
                            ("derived/volumes-tidy-none.exr", ["--tidy"])]:
            out = Path(d) / "seed.exr"
            subprocess.run([str(binary), str(DATA / "oiio/input-crop.deep.exr"),
                            str(DATA / "oiio/holdout-crop.deep.exr"), "--deep", *extra,
                            "--compression", "none", "--backend", "cpu", "-q", "-o", str(out)],
                           check=True)
            # Weighted: three entries each, as many mutants as three corpus files.
            seeds += [(name, out.read_bytes())] * 3
    good = DATA / GOOD
    vmem_kib = int(a.vmem_gib * 1024 * 1024)

    def one(i):
        rng = random.Random(a.seed * 1_000_003 + i)
        name, seed = rng.choice(seeds)
        mutant = mutate(seed, rng)
        options = list(rng.choice(OPTIONS))
        backend = "gl" if rng.random() < a.gl_share else "cpu"
        info = rng.random() < 0.1
        with tempfile.TemporaryDirectory(prefix="dm-campaign-") as d:
            work = Path(d)
            path = work / "mutant.exr"
            path.write_bytes(mutant)
            if info:
                args = ["info", path]
            else:
                inputs = [path, good] if rng.randrange(2) else [good, path]
                args = inputs + options + ["--backend", backend, "-q", "-o", work / "out.exr"]
            cls, detail = classify(binary, work, path, args, a.timeout, vmem_kib)
            if cls not in ("ok", "refused"):
                stem = keep / f"{cls}-{i}"
                shutil.copy(path, stem.with_suffix(".exr"))
                stem.with_suffix(".txt").write_text(
                    f"seed file: {name}\nargs: {[str(x) for x in args]}\n{detail}\n")
            return cls, name, detail

    counts = {}
    examples = {}
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=a.jobs) as pool:
        for cls, name, detail in pool.map(one, range(a.mutants)):
            counts[cls] = counts.get(cls, 0) + 1
            examples.setdefault(cls, []).append((name, detail))
    print(f"{a.mutants} runs in {time.monotonic() - start:.0f} s (seed {a.seed})")
    for cls in ["ok", "refused", "abort", "hang", "multi-line", "unnamed", "leftover"]:
        print(f"  {cls}: {counts.get(cls, 0)}")
    for cls in ["abort", "hang", "multi-line", "unnamed", "leftover"]:
        for name, detail in examples.get(cls, [])[:5]:
            print(f"  {cls} ({name}): {detail[:300]}")
    # What the refusals said, numbers and paths masked: a check that the runs reach past the
    # first checks, not a pass criterion.
    said = collections.Counter(
        re.sub(r"-?\b[0-9][0-9.e+-]*|/[^ :]*", "#", d.split("error: ", 1)[-1])[:90]
        for _, d in examples.get("refused", []))
    for text, n in said.most_common(12):
        print(f"  refused {n}: {text}")
    bad = sum(counts.get(c, 0) for c in ["abort", "hang", "multi-line", "unnamed", "leftover"])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
