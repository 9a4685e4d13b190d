#!/usr/bin/env python3
"""Independent deep EXR reader for the tests: decodes a deep part with PyPI OpenEXR and writes
its sample counts and values in a plain binary form the Rust tests compare against.

usage: dump_deep.py FILE PART_INDEX OUT

OUT holds: u32 width, u32 height, u32 channel count; per channel (sorted by name) a u32 name
length, the name, a u32 type (0 uint, 1 half, 2 float); the u32 sample count of every pixel,
row-major over the data window; then each channel's values for all samples as little-endian
bytes in its own type (255: unknown, only for channels without samples).

PyPI OpenEXR 3.5 refuses files carrying the `deepImageState` attribute; for those the attribute's
name and type name are renamed in a temporary copy, so OpenEXR reads it as an opaque attribute.
"""
import os
import struct
import sys
import tempfile

import numpy as np
import OpenEXR

path, part_index, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
data = open(path, "rb").read()
tmp = None
if b"deepImageState" in data:
    tmp = tempfile.NamedTemporaryFile(suffix=".exr", delete=False)
    tmp.write(data.replace(b"deepImageState\0", b"deepImageStatX\0"))
    tmp.close()
    path = tmp.name
try:
    part = OpenEXR.File(path, separate_channels=True).parts[part_index]
    (x0, y0), (x1, y1) = part.header["dataWindow"]
    w, h = int(x1 - x0 + 1), int(y1 - y0 + 1)
    names = sorted(part.channels)
    # OpenEXR reports no type (NUM_PIXELTYPES) for a channel of an image without samples: 255.
    types = {"UINT": 0, "HALF": 1, "FLOAT": 2, "NUM_PIXELTYPES": 255}
    dtypes = {0: "<u4", 1: "<f2", 2: "<f4", 255: "<f4"}
    with open(out, "wb") as f:
        f.write(struct.pack("<III", w, h, len(names)))
        kinds = []
        for n in names:
            kind = types[part.channels[n].type().name]
            kinds.append(kind)
            f.write(struct.pack("<I", len(n)) + n.encode() + struct.pack("<I", kind))
        first = part.channels[names[0]].pixels
        counts = np.array([0 if p is None else len(p) for p in first.reshape(-1)], dtype="<u4")
        f.write(counts.tobytes())
        for n, kind in zip(names, kinds):
            pixels = part.channels[n].pixels.reshape(-1)
            parts = [np.asarray(p, dtype=dtypes[kind]) for p in pixels if p is not None and len(p)]
            values = np.concatenate(parts) if parts else np.zeros(0, dtype=dtypes[kind])
            f.write(values.astype(dtypes[kind]).tobytes())
finally:
    if tmp:
        os.unlink(tmp.name)
