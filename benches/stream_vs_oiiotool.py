#!/usr/bin/env python3
"""Wall time and peak resident memory of deepmerge's streamed merge against oiiotool on the
same files in the same run: a benchmark, not a test (nothing is asserted).

    benches/stream_vs_oiiotool.py [--repeats N] [--deep] [--baseline OLD_DEEPMERGE]
                                  DEEPMERGE IN1 IN2 [IN...]

Prints markdown rows: the median wall time and CPU time (user + sys: on a shared machine the
less noisy figure) of N runs and the largest peak RSS (VmHWM, as
/usr/bin/time reports it) of `deepmerge IN... -o OUT` (flat; with --deep also `--deep`), of an
optional baseline binary, and of `oiiotool IN1 IN2 --deepmerge IN3 --deepmerge ... --flatten`.
The decode floor is measured too: `deepmerge IN... --decode-only` reads and inflates every
chunk the merge would, with the same bands and threads, and merges and writes nothing; each
deepmerge row's CPU time is also given as a multiple of the floor's.
oiiotool runs under an address-space limit (--oiio-limit-gib, default 16) so a case it cannot
hold fails instead of taking the machine down; its row then says so.
"""
import argparse
import os
import resource
import statistics
import subprocess
import tempfile


def measure(cmd, repeats, limit_bytes=None):
    walls, cpus, peak, failure = [], [], 0, None
    with tempfile.TemporaryDirectory() as tmp:
        timing = os.path.join(tmp, "time.txt")
        for _ in range(repeats):
            def limit():
                if limit_bytes:
                    resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
            run = subprocess.run(["/usr/bin/time", "-f", "%e %M %U %S", "-o", timing] + cmd,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 preexec_fn=limit, text=True)
            wall, rss, user, system = open(timing).read().split("\n")[-2].split()
            walls.append(float(wall))
            cpus.append(float(user) + float(system))
            peak = max(peak, int(rss))
            if run.returncode != 0:
                failure = (run.stderr.strip().splitlines() or ["exit %d" % run.returncode])[-1][:80]
                break
    return statistics.median(walls), statistics.median(cpus), peak / 1024, failure


def row(name, result, reference=None, floor=None):
    wall, cpu, peak, failure = result
    if failure:
        return f"| {name} | failed after {wall:.2f} s: {failure} | {cpu:.2f} s | {peak:.0f} MiB | | |"
    ratio = f"{reference[0] / wall:.1f}x / {reference[1] / cpu:.1f}x" if reference else "1.0"
    over_floor = f"{cpu / floor:.2f}x" if floor else ""
    return f"| {name} | {wall:.2f} s | {cpu:.2f} s | {peak:.0f} MiB | {ratio} | {over_floor} |"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--deep", action="store_true")
    p.add_argument("--baseline")
    p.add_argument("--oiio-limit-gib", type=float, default=16)
    p.add_argument("deepmerge")
    p.add_argument("inputs", nargs="+")
    a = p.parse_args()
    out = tempfile.mkdtemp(prefix="stream-bench-")
    oiio = ["oiiotool", a.inputs[0]]
    for f in a.inputs[1:]:
        oiio += [f, "--deepmerge"]
    oiio += ["--flatten", "-o", os.path.join(out, "oiio.exr")]
    oiio_result = measure(oiio, a.repeats, int(a.oiio_limit_gib * (1 << 30)))
    reference = None if oiio_result[3] else oiio_result[:2]
    rows = []
    dm = [a.deepmerge] + a.inputs + ["-q", "--backend", "cpu", "-o", os.path.join(out, "dm.exr")]
    floor_result = measure(dm + ["--decode-only"], a.repeats)
    floor = None if floor_result[3] else floor_result[1]
    rows.append(row("deepmerge --backend cpu (streamed, flat)", measure(dm, a.repeats), reference, floor))
    auto = [x for x in dm if x not in ("--backend", "cpu")]
    rows.append(row("deepmerge (default --backend auto)", measure(auto, a.repeats), reference, floor))
    if a.baseline:
        base = [a.baseline] + a.inputs + ["-q", "--backend", "cpu", "-o", os.path.join(out, "base.exr")]
        rows.append(row("baseline --backend cpu", measure(base, a.repeats), reference, floor))
        base_auto = [x for x in base if x not in ("--backend", "cpu")]
        rows.append(row("baseline (default --backend auto)", measure(base_auto, a.repeats), reference, floor))
    if a.deep:
        rows.append(row("deepmerge --deep (streamed, ZIPS)", measure(dm + ["--deep"], a.repeats), reference, floor))
    rows.append(row("decode floor (--decode-only: read + inflate, no merge)", floor_result, reference, floor))
    rows.append(row("oiiotool --deepmerge ... --flatten", oiio_result))
    print("| command | wall (median of %d) | CPU (user + sys) | peak RSS | vs oiiotool (wall / CPU) "
          "| CPU / decode floor |" % a.repeats)
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
