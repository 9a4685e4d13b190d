#!/usr/bin/env python3
"""Independent check of `deepmerge grade --gain G --near N --far F` with PyPI OpenEXR and numpy:
a gain inside a depth range changes exactly those samples, by exactly that amount after
unpremultiplying.

usage: grade_check.py IN OUT GAIN NEAR FAR

Reads IN and OUT (first part) with OpenEXR and checks, sample by sample: the sample counts are
equal; Z, ZBack, every alpha and every uint channel are bit for bit the input's; a colour
channel's value is the input's times GAIN, rounded to the channel's type, exactly where
NEAR <= Z < FAR and the channel's alpha (RA for R where there is one, else A) is not 0, and the
input's bits everywhere else. Unpremultiplying by alpha, multiplying by GAIN and premultiplying
again is GAIN times the stored value in exact arithmetic; the tool computes it in f64 and rounds
once, which is what is compared. Prints one line per failure and a summary; exits 1 on any
failure. `deepImageState` (which PyPI OpenEXR 3.5 refuses) is renamed in a temporary copy, as
in dump_deep.py.
"""
import os
import sys
import tempfile

import numpy as np
import OpenEXR


def open_part(path):
    data = open(path, "rb").read()
    if b"deepImageState\0" not in data:
        return OpenEXR.File(path, separate_channels=True).parts[0]
    tmp = tempfile.NamedTemporaryFile(suffix=".exr", delete=False)
    try:
        tmp.write(data.replace(b"deepImageState\0", b"deepImageStatX\0"))
        tmp.close()
        return OpenEXR.File(tmp.name, separate_channels=True).parts[0]
    finally:
        os.unlink(tmp.name)


def flat_values(channel):
    pixels = channel.pixels.reshape(-1)
    parts = [np.asarray(p) for p in pixels if p is not None and len(p)]
    counts = np.array([0 if p is None else len(p) for p in pixels])
    return (np.concatenate(parts) if parts else np.zeros(0)), counts


def main():
    src, out, gain, near, far = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(
        sys.argv[4]), float(sys.argv[5])
    a, b = open_part(src), open_part(out)
    failures = []
    if sorted(a.channels) != sorted(b.channels):
        print(f"channels {sorted(a.channels)} vs {sorted(b.channels)}")
        return 1
    values_in, values_out, counts = {}, {}, None
    for name in a.channels:
        values_in[name], counts_in = flat_values(a.channels[name])
        values_out[name], counts_out = flat_values(b.channels[name])
        if not np.array_equal(counts_in, counts_out):
            print(f"sample counts differ in {name}")
            return 1
        counts = counts_in
    z = values_in["Z"].astype(np.float64)
    inside = (near <= z) & (z < far)
    alphas = {"A", "RA", "GA", "BA"}
    depth_or_alpha = alphas | {"Z", "ZBack"}
    changed_total = 0
    for name in sorted(a.channels):
        vin, vout = values_in[name], values_out[name]
        base = name.rsplit(".", 1)[-1]
        if base in depth_or_alpha or vin.dtype == np.uint32:
            if vin.tobytes() != vout.tobytes():
                failures.append(f"{name} changed; it must be kept bit for bit")
            continue
        own = {"R": "RA", "G": "GA", "B": "BA"}.get(base)
        prefix = name[: len(name) - len(base)]
        alpha_name = prefix + own if own and prefix + own in a.channels else prefix + "A"
        alpha = values_in[alpha_name].astype(np.float64)
        graded = inside & (alpha != 0)
        expected = vin.copy()
        expected[graded] = (vin[graded].astype(np.float64) * gain).astype(vin.dtype)
        wrong = np.flatnonzero(expected.view(f"u{expected.itemsize}") !=
                               vout.view(f"u{vout.itemsize}"))
        if len(wrong):
            i = wrong[0]
            failures.append(
                f"{name}: {len(wrong)} samples differ, first #{i}: in {vin[i]} alpha {alpha[i]} "
                f"Z {z[i]} -> out {vout[i]}, expected {expected[i]}")
        changed_total += int(np.count_nonzero(graded & (vin != 0)))
    for f in failures:
        print(f)
    print(f"{len(z)} samples, {int(np.count_nonzero(inside))} inside [{near}, {far}), "
          f"{changed_total} colour values changed, {len(failures)} failures")
    if changed_total == 0:
        print("nothing was graded: the check would prove nothing")
        return 1
    return 1 if failures else 0


sys.exit(main())
