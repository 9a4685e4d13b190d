#!/usr/bin/env bash
# How long `deepmerge view` takes to open FILE... (default: the bundled real files Balls + Leaves
# + Trunks) and to show a depth-slice change, on the display $DISPLAY (start one with
# `Xvfb :91 &` and DISPLAY=:91):
# - load: from starting the process to the first frame drawn (read, merge, upload, first slice);
# - peak memory: the process's maximum resident set (`/usr/bin/time -v`; on a software
#   rasteriser the GPU buffers are host memory and count in it);
# - per slice key (KEYS of them, default 25; each waits for the frame showing the previous one,
#   then half a second): the median and extremes of what the window reports on stderr (input
#   event to finished frame; the slice pass alone; the CPU time the process used, which says how
#   much of the wall time was waiting for a busy machine).
# Extra viewer options go in VIEW_ARGS (e.g. VIEW_ARGS="--gpu-memory 12").
# Needs a release build (cargo build --release), xdotool, GNU time and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then
    data=tests/data/openexr-images
    set -- "$data/Balls.exr" "$data/Leaves.exr" "$data/Trunks.exr"
fi
keys=${KEYS:-25}
log=$(mktemp)
timing=$(mktemp)
start=$(date +%s.%N)
# shellcheck disable=SC2086
/usr/bin/time -v -o "$timing" ./target/release/deepmerge view ${VIEW_ARGS:-} "$@" \
    2>"$log" >/dev/null &
viewer=$!
trap 'pkill -P $viewer 2>/dev/null; rm -f "$log" "$timing"' EXIT
for _ in $(seq 1 18000); do
    grep -aq "drawn layer" "$log" && break
    grep -aq "deepmerge: error" "$log" && { cat "$log" >&2; exit 1; }
    sleep 0.2
done
loaded=$(date +%s.%N)
window=$(xdotool search --name "deepmerge view" | head -1)
xdotool windowfocus --sync "$window"
sequence=(n n n n n n n n n n m m m m m N N N N N M M M M M)
for i in $(seq 0 $((keys - 1))); do
    before=$(grep -ac "shown in" "$log" || true)
    xdotool key "${sequence[$((i % ${#sequence[@]}))]}"
    for _ in $(seq 1 6000); do
        [ "$(grep -ac "shown in" "$log" || true)" -gt "$before" ] && break
        sleep 0.1
    done
    sleep 0.5
done
xdotool key q
wait "$viewer" || true
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
python3 - "$log" "$timing" "$start" "$loaded" <<'PY'
import re, statistics, sys
log, timing, start, loaded = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
text = open(log, errors="replace").read()
merged = re.search(r"loaded (\d+) input\(s\): display window (\S+), (\d+) samples merged", text)
if merged:
    print(f"inputs: {merged.group(1)}, display window {merged.group(2)}, {int(merged.group(3)):,} samples merged")
for line in text.splitlines():
    if "on the GPU:" in line:
        print(line.removeprefix("deepmerge view: "))
print(f"load (start to first frame): {loaded - start:.1f} s")
peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(timing).read())
if peak:
    print(f"peak resident memory: {int(peak.group(1)) / 1024:.0f} MiB")
pattern = re.compile(r"shown in ([0-9.]+) ms \(slice pass ([0-9.]+) ms, ([0-9.]+) ms of CPU\)")
rows = [tuple(map(float, m.groups())) for m in map(pattern.search, text.splitlines()) if m]
if not rows:
    sys.exit("no slice change was reported")
for name, k in (("shown (event to frame)", 0), ("slice pass", 1), ("CPU used", 2)):
    v = [r[k] for r in rows]
    print(f"{name}: median {statistics.median(v):.1f} ms, min {min(v):.1f}, max {max(v):.1f} (n={len(v)})")
PY
