#!/usr/bin/env python3
"""PyPI OpenEXR 3.5 as the tests' peer for compressions and metadata.

usage:
  openexr35.py recompress SRC DST COMPRESSION   rewrite every part of SRC (deep or flat) with
                                                COMPRESSION (none, rle, zips, zip, zstd, ...)
  openexr35.py same-pixels A B                  exit 0 when every part of A and B holds the same
                                                channels, sample counts and value bits
  openexr35.py header FILE PART                 print the part's attributes, one per line:
                                                NAME<TAB>PYTHON TYPE<TAB>repr(VALUE)

OpenEXR's own reader and writer do the work, so the Rust tests compare deepmerge with it.
`deepImageState` (which PyPI OpenEXR 3.5 refuses) is renamed in a temporary copy first, as in
dump_deep.py.
"""
import os
import sys
import tempfile

import numpy as np
import OpenEXR

COMPRESSIONS = {
    "none": OpenEXR.NO_COMPRESSION,
    "rle": OpenEXR.RLE_COMPRESSION,
    "zips": OpenEXR.ZIPS_COMPRESSION,
    "zip": OpenEXR.ZIP_COMPRESSION,
    "zstd": OpenEXR.ZSTD_COMPRESSION,
    "piz": OpenEXR.PIZ_COMPRESSION,
    "htj2k256": OpenEXR.HTJ2K256_COMPRESSION,
}


def readable(path):
    """A path PyPI OpenEXR reads: a copy without deepImageState when the file has one."""
    data = open(path, "rb").read()
    if b"deepImageState\0" not in data:
        return path, None
    tmp = tempfile.NamedTemporaryFile(suffix=".exr", delete=False)
    tmp.write(data.replace(b"deepImageState\0", b"deepImageStatX\0"))
    tmp.close()
    return tmp.name, tmp.name


def open_file(path):
    readable_path, tmp = readable(path)
    try:
        return OpenEXR.File(readable_path, separate_channels=True)
    finally:
        if tmp:
            os.unlink(tmp)


def recompress(src, dst, compression):
    f = open_file(src)
    parts = []
    for part in f.parts:
        header = dict(part.header)
        header["compression"] = COMPRESSIONS[compression]
        header.pop("deepImageStatX", None)
        parts.append(OpenEXR.Part(header, part.channels, part.name()))
    OpenEXR.File(parts).write(dst)


def same_values(a, b):
    if a.dtype == object:
        flat_a, flat_b = a.reshape(-1), b.reshape(-1)
        for x, y in zip(flat_a, flat_b):
            nx = 0 if x is None else len(x)
            ny = 0 if y is None else len(y)
            if nx != ny or (nx and np.asarray(x).tobytes() != np.asarray(y).tobytes()):
                return False
        return True
    return a.shape == b.shape and a.tobytes() == b.tobytes()


def same_pixels(path_a, path_b):
    a, b = open_file(path_a), open_file(path_b)
    if len(a.parts) != len(b.parts):
        print(f"{len(a.parts)} parts vs {len(b.parts)}")
        return 1
    for k, (pa, pb) in enumerate(zip(a.parts, b.parts)):
        if sorted(pa.channels) != sorted(pb.channels):
            print(f"part {k}: channels {sorted(pa.channels)} vs {sorted(pb.channels)}")
            return 1
        for name in pa.channels:
            if not same_values(pa.channels[name].pixels, pb.channels[name].pixels):
                print(f"part {k}: channel {name} differs")
                return 1
    print("same")
    return 0


def header(path, part):
    h = open_file(path).parts[part].header
    for name in sorted(h):
        value = h[name]
        text = repr(value.tolist() if isinstance(value, np.ndarray) else value)
        print(f"{name}\t{type(value).__name__}\t{' '.join(text.split())}")


def main():
    command = sys.argv[1]
    if command == "recompress":
        recompress(sys.argv[2], sys.argv[3], sys.argv[4])
        return 0
    if command == "same-pixels":
        return same_pixels(sys.argv[2], sys.argv[3])
    if command == "header":
        header(sys.argv[2], int(sys.argv[3]))
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
