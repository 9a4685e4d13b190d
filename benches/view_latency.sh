#!/usr/bin/env bash
# How long `deepmerge view` takes to show a depth-slice change on the bundled real files
# (Balls + Leaves + Trunks) on the display $DISPLAY (start one with `Xvfb :91 &` and
# DISPLAY=:91): 25 slice keys half a second apart, then the median and extremes of what the
# window reports per change on stderr (input event to finished frame; the slice pass alone; the
# CPU time the process used, which says how much of the wall time was waiting for a busy machine).
# Needs a release build (cargo build --release), xdotool and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
data=tests/data/openexr-images
log=$(mktemp)
./target/release/deepmerge view "$data/Balls.exr" "$data/Leaves.exr" "$data/Trunks.exr" \
    2>"$log" >/dev/null &
viewer=$!
trap 'kill $viewer 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 1 600); do grep -aq "drawn layer" "$log" && break; sleep 0.2; done
window=$(xdotool search --name "deepmerge view" | head -1)
xdotool windowfocus --sync "$window"
for key in n n n n n n n n n n m m m m m N N N N N M M M M M; do
    xdotool key "$key"
    sleep 0.5
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
python3 - "$log" <<'PY'
import re, statistics, sys
pattern = re.compile(r"shown in ([0-9.]+) ms \(slice pass ([0-9.]+) ms, ([0-9.]+) ms of CPU\)")
rows = [tuple(map(float, m.groups())) for m in map(pattern.search, open(sys.argv[1], errors="replace")) if m]
if not rows:
    sys.exit("no slice change was reported")
for name, k in (("shown (event to frame)", 0), ("slice pass", 1), ("CPU used", 2)):
    v = [r[k] for r in rows]
    print(f"{name}: median {statistics.median(v):.1f} ms, min {min(v):.1f}, max {max(v):.1f} (n={len(v)})")
PY
