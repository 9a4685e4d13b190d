"""A measurement, not an assertion: reading Balls.exr with deepmerge.read against the OpenEXR
module's deep read, in the same run. docs/python.md quotes the ratio this prints."""

import time

import deepmerge as dm
from conftest import data, openexr_part

REPEATS = 5


def best_of(read):
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        read()
        best = min(best, time.perf_counter() - start)
    return best


def test_measure_reading_balls_against_openexr():
    path = data("openexr-images/Balls.exr")
    ours = best_of(lambda: dm.read(path))
    theirs = best_of(lambda: openexr_part(path, 0))
    print(
        f"\nread Balls.exr (best of {REPEATS}): deepmerge.read {ours * 1e3:.1f} ms, "
        f"OpenEXR.File(separate_channels=True) {theirs * 1e3:.1f} ms, "
        f"OpenEXR/deepmerge = {theirs / ours:.1f}x"
    )
