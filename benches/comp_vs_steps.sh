#!/usr/bin/env bash
# Issue 27's measurement: the six-node graph (merge the characters, hold them out by the set,
# recolor as the grade, slice off the far background, merge the volumes, flatten) on the 1080p
# powerplant scene, once as `deepmerge comp` and once as six commands through ZIPS intermediate
# files, in one run on this machine: wall time and peak memory (VmHWM, GNU time's %M) of each,
# beside a single two-input merge. The outputs are compared byte for byte.
#
#   benches/comp_vs_steps.sh [DEEPMERGE] [WORKDIR]
set -euo pipefail
B=${1:-target/release/deepmerge}
W=${2:-$(mktemp -d)}
mkdir -p "$W/steps" "$W/graph"
cd "$W"
[ -f pp_3.exr ] || "$B" scene powerplant --size 1920x1080 --inputs 4 -o pp
[ -f grade.exr ] || "$B" flatten pp_3.exr -o grade.exr
cat > six.toml <<TOML
[input.chars_a]
path = "pp_0.exr"
[input.chars_b]
path = "pp_2.exr"
[input.set]
path = "pp_1.exr"
[input.grade]
path = "grade.exr"
[input.volumes]
path = "pp_3.exr"
[node.chars]
op = "merge"
inputs = ["chars_a", "chars_b"]
deep = true
[node.held]
op = "holdout"
input = "chars"
holdout = "set"
[node.graded]
op = "recolor"
input = "held"
flat = "grade"
[node.near]
op = "slice"
input = "graded"
far = 30
[node.all]
op = "merge"
inputs = ["near", "volumes"]
deep = true
[node.comp]
op = "flatten"
input = "all"
[[output]]
node = "comp"
path = "graph/comp.exr"
TOML
t() { /usr/bin/time -f "%e %M %U %S" -o "$W/t.txt" "$@" >/dev/null; cat "$W/t.txt"; }
steps_wall=0
steps_peak=0
steps_cpu=0
step() {
  read -r wall peak user sys < <(t "$B" "$@")
  steps_wall=$(echo "$steps_wall + $wall" | bc)
  steps_cpu=$(echo "$steps_cpu + $user + $sys" | bc)
  if [ "$peak" -gt "$steps_peak" ]; then steps_peak=$peak; fi
}
step pp_0.exr pp_2.exr --deep -o steps/chars.exr
step holdout steps/chars.exr pp_1.exr -o steps/held.exr
step recolor steps/held.exr grade.exr -o steps/graded.exr
step slice steps/graded.exr --far 30 -o steps/near.exr
step steps/near.exr pp_3.exr --deep -o steps/all.exr
step flatten steps/all.exr -o steps/comp.exr
read -r comp_wall comp_peak comp_user comp_sys < <(t "$B" comp six.toml)
read -r merge_wall merge_peak _ _ < <(t "$B" pp_0.exr pp_2.exr --deep -o merge.exr)
cmp steps/comp.exr graph/comp.exr
comp_cpu=$(echo "$comp_user + $comp_sys" | bc)
echo "six steps through ZIPS files: ${steps_wall} s (CPU ${steps_cpu} s), peak $((steps_peak / 1024)) MiB"
echo "deepmerge comp six.toml:      ${comp_wall} s (CPU ${comp_cpu} s), peak $((comp_peak / 1024)) MiB"
echo "one two-input deep merge:     ${merge_wall} s, peak $((merge_peak / 1024)) MiB"
echo "comp / steps wall time: $(echo "scale=2; $comp_wall / $steps_wall" | bc)"
