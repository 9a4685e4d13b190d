#!/usr/bin/env python3
"""PyPI OpenEXR 3.5 as the stereo tests' peer: makes a stereo pair, reads multi-part outputs.

usage:
  stereo.py pair DST RIGHT LEFT        write DST, a two-part deep file: part 0 "right" (view
                                       right) holding RIGHT's first part, part 1 "left" (view
                                       left) holding LEFT's, both as OpenEXR reads them
  stereo.py parts FILE                 print each part: INDEX<TAB>NAME<TAB>VIEW<TAB>TYPE
                                       (VIEW "-" when the part has none)
  stereo.py same-part A PA B PB        exit 0 when part PA of A and part PB of B hold the same
                                       channels, sample counts (deep) and value bits

OpenEXR's own reader and writer do the work. `deepImageState` (which PyPI OpenEXR 3.5 refuses)
is renamed in a temporary copy first, as in dump_deep.py.
"""
import os
import sys
import tempfile

import numpy as np
import OpenEXR


def open_file(path):
    data = open(path, "rb").read()
    if b"deepImageState\0" not in data:
        return OpenEXR.File(path, separate_channels=True)
    tmp = tempfile.NamedTemporaryFile(suffix=".exr", delete=False)
    try:
        tmp.write(data.replace(b"deepImageState\0", b"deepImageStatX\0"))
        tmp.close()
        return OpenEXR.File(tmp.name, separate_channels=True)
    finally:
        os.unlink(tmp.name)


def pair(dst, right, left):
    parts = []
    for src, view in [(right, "right"), (left, "left")]:
        part = open_file(src).parts[0]
        header = dict(part.header)
        header.pop("deepImageStatX", None)
        header.pop("name", None)
        header["view"] = view
        parts.append(OpenEXR.Part(header, part.channels, view))
    OpenEXR.File(parts).write(dst)


def parts(path):
    for index, part in enumerate(open_file(path).parts):
        header = part.header
        kind = header.get("type")
        kind = getattr(kind, "name", kind)
        print(f"{index}\t{part.name()}\t{header.get('view', '-')}\t{kind}")


def same_values(a, b):
    if a.dtype == object or b.dtype == object:
        if a.shape != b.shape:
            return False
        for x, y in zip(a.reshape(-1), b.reshape(-1)):
            nx = 0 if x is None else len(x)
            ny = 0 if y is None else len(y)
            if nx != ny or (nx and np.asarray(x).tobytes() != np.asarray(y).tobytes()):
                return False
        return True
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def same_part(path_a, part_a, path_b, part_b):
    a = open_file(path_a).parts[part_a]
    b = open_file(path_b).parts[part_b]
    if not np.array_equal(a.header["dataWindow"], b.header["dataWindow"]):
        print(f"data windows {a.header['dataWindow']} vs {b.header['dataWindow']}")
        return 1
    if sorted(a.channels) != sorted(b.channels):
        print(f"channels {sorted(a.channels)} vs {sorted(b.channels)}")
        return 1
    for name in a.channels:
        if not same_values(a.channels[name].pixels, b.channels[name].pixels):
            print(f"channel {name} differs")
            return 1
    print("same")
    return 0


def main():
    command = sys.argv[1]
    if command == "pair":
        pair(sys.argv[2], sys.argv[3], sys.argv[4])
        return 0
    if command == "parts":
        parts(sys.argv[2])
        return 0
    if command == "same-part":
        return same_part(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
