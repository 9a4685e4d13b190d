#!/bin/bash
# Device call 2: program binaries with the unroll pragma, end-to-end GL vs CPU, atrium bench again.
for f in .gl/*.deb; do dpkg -x $f / >/dev/null 2>&1; done; ldconfig
B=$PWD/.dev/deepmerge
chmod +x .dev/*
exec > >(tee -a $OUT/log2.txt) 2>&1
date
$B gpu-info --programs /tmp/progs | grep -v "^  merge-LA" 
(cd /tmp && tar czf $OUT/progs2.tgz progs)
TIMEFORMAT="%R s wall, %U s user, %S s sys"
for s in atrium powerplant hairball; do $B scene $s --size 1920x1080 -o /tmp/$s; done
$B scene powerplant --size 3840x2160 --inputs 4 -o /tmp/pp4k
e2e() { # name, runs, args...
  local name=$1 runs=$2; shift 2
  for out in flat deep; do
    extra=""; [ $out = deep ] && extra="--deep"
    for backend in cpu gl; do
      for r in $(seq $runs); do
        echo "-- $name $backend $out run $r"
        { time $B "$@" -o /tmp/out-$backend.exr --backend $backend $extra --runstats --progress none ; } 2>&1 | grep -v "^$"
      done
    done
    cmp /tmp/out-cpu.exr /tmp/out-gl.exr && echo "-- $name $out: GL output identical to CPU"
    echo "-- $name gl $out --stats"
    $B "$@" -o /tmp/out.exr --backend gl $extra --stats --progress none 2>&1
  done
}
e2e atrium1080 3 /tmp/atrium_0.exr /tmp/atrium_1.exr
e2e powerplant1080 3 /tmp/powerplant_0.exr /tmp/powerplant_1.exr
e2e hairball1080 3 /tmp/hairball_0.exr /tmp/hairball_1.exr
e2e powerplant4k4 2 /tmp/pp4k_0.exr /tmp/pp4k_1.exr /tmp/pp4k_2.exr /tmp/pp4k_3.exr
date
timeout 150 $B bench --scenes atrium --size 1920x1080 --repeats 3 --markdown --no-oiiotool --no-tiles --no-kway --rbm-shifted --stages > $OUT/bench2-atrium.md 2>$OUT/bench2-atrium.err
echo "bench atrium exit $?"; date
