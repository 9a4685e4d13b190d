#!/usr/bin/env bash
# The frame time of `deepmerge view`'s points mode while the camera orbits, on FILE... (default:
# the procedural hairball pair at 1920x1080, made with `deepmerge scene hairball` into a temporary
# directory), on the display $DISPLAY (start one with `Xvfb :91 &` and DISPLAY=:91):
# - the cloud: points held, and the time from the key `p` to the cloud on the GPU (built on a
#   worker thread from the inputs as read, then uploaded);
# - orbiting: the left button held while the pointer moves STEPS times (default 150) by 6 window
#   pixels, 20 ms apart; every frame drawn meanwhile, as `--frame-stats` reports it (median, 90th
#   percentile, extremes, and the points each drew);
# - at rest: the time from releasing the button to a frame that shows every point, and the
#   frames on the way (each adds passes within the viewer's 100 ms).
# Extra viewer options go in VIEW_ARGS; the binary is DEEPMERGE (default ./target/release/deepmerge).
# Needs a release build (cargo build --release), xdotool and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${DEEPMERGE:-./target/release/deepmerge}
steps=${STEPS:-150}
tmp=$(mktemp -d)
if [ $# -eq 0 ]; then
    "$bin" scene hairball --size 1920x1080 -o "$tmp/hb" >/dev/null
    set -- "$tmp/hb_0.exr" "$tmp/hb_1.exr"
fi
log="$tmp/log"
# shellcheck disable=SC2086
"$bin" view --frame-stats --size 1600x900 ${VIEW_ARGS:-} "$@" 2>"$log" >/dev/null &
viewer=$!
trap 'kill $viewer 2>/dev/null || true; rm -rf "$tmp"' EXIT
wait_for() {
    for _ in $(seq 1 18000); do
        grep -aqE "$1" "$log" && return 0
        grep -aq "deepmerge: error" "$log" && { cat "$log" >&2; exit 1; }
        sleep 0.1
    done
    echo "timed out waiting for $1" >&2
    exit 1
}
wait_for "drawn layer"
window=$(xdotool search --name "deepmerge view" | head -1)
xdotool windowfocus --sync "$window"
asked=$(date +%s.%N)
xdotool key p
wait_for "points of layer .* on the GPU"
held=$(date +%s.%N)
# Let every pass of the first view be drawn.
wait_for "passes ([0-9]+) of \1 shown"
sleep 0.5
xdotool mousemove --window "$window" 400 450 mousedown 1
begin=$(wc -l <"$log")
for _ in $(seq 1 "$steps"); do
    xdotool mousemove_relative -- 6 0
    sleep 0.02
done
end=$(wc -l <"$log")
xdotool mouseup 1
released=$(date +%s.%N)
for _ in $(seq 1 6000); do
    tail -n +"$((end + 1))" "$log" | grep -aqE "passes ([0-9]+) of \1 shown" && break
    sleep 0.05
done
full=$(date +%s.%N)
xdotool key q
wait "$viewer" || true
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
python3 - "$log" "$begin" "$end" "$asked" "$held" "$released" "$full" <<'PY'
import re, statistics, sys
log, begin, end = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
asked, held, released, full = map(float, sys.argv[4:8])
lines = open(log, errors="replace").read().splitlines()
for line in lines:
    if "window open on" in line or "on the GPU:" in line or "samples merged" in line:
        print(line.removeprefix("deepmerge view: "))
print(f"p to the cloud on the GPU: {held - asked:.1f} s")
frame = re.compile(r"frame ([0-9.]+) ms \(points: (\d+) drawn, passes (\d+) of (\d+) shown, (\d+) held\)")
moving = [tuple(map(float, m.groups())) for m in map(frame.search, lines[begin:end]) if m]
if not moving:
    sys.exit("no frame was drawn while orbiting")
ms = sorted(r[0] for r in moving)
points = [int(r[1]) for r in moving]
p90 = ms[min(len(ms) - 1, int(0.9 * len(ms)))]
print(f"orbiting: {len(ms)} frames, frame time median {statistics.median(ms):.1f} ms, "
      f"90th percentile {p90:.1f}, min {ms[0]:.1f}, max {ms[-1]:.1f}; "
      f"points per frame median {int(statistics.median(points)):,} of {int(moving[0][4]):,}")
rest = [tuple(map(float, m.groups())) for m in map(frame.search, lines[end:]) if m]
if rest:
    print(f"released to every point shown: {full - released:.1f} s in {len(rest)} frames, "
          f"frame time max {max(r[0] for r in rest):.1f} ms")
PY
