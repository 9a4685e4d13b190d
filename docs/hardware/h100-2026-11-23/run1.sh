#!/bin/bash
# Device call 1: gpu-info + program binaries, end-to-end GL vs CPU, bench atrium + hairball.
for f in .gl/*.deb; do dpkg -x $f / >/dev/null 2>&1; done; ldconfig
B=$PWD/.dev/deepmerge
chmod +x .dev/*
L=$OUT/log1.txt
exec > >(tee -a $L) 2>&1
date; nvidia-smi -L; nproc
$B gpu-info --programs /tmp/progs || { export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json; $B gpu-info --programs /tmp/progs; }
(cd /tmp && tar czf $OUT/progs.tgz progs)
strings /tmp/progs/merge-BIA-RBM-indexed-b8-flat.bin | grep -n "lmem\|NVcp\|TEMP" | head -20
echo "== e2e"
TIMEFORMAT="%R s wall, %U s user, %S s sys"
for s in atrium powerplant hairball; do $B scene $s --size 1920x1080 -o /tmp/$s; done
$B scene powerplant --size 3840x2160 --inputs 4 -o /tmp/pp4k
ls -la /tmp/*.exr
e2e() { # name, args...
  local name=$1; shift
  for backend in gl cpu; do
    for out in flat deep; do
      extra=""; [ $out = deep ] && extra="--deep"
      for r in 1 2 3; do
        echo "-- $name $backend $out run $r"
        { time $B "$@" -o /tmp/out.exr --backend $backend $extra --runstats -q ; } 2>&1 | grep -v "^$"
      done
    done
  done
  echo "-- $name gl flat --stats"
  $B "$@" -o /tmp/out.exr --backend gl --stats -q 2>&1
  echo "-- $name gl deep --stats"
  $B "$@" -o /tmp/out.exr --backend gl --deep --stats -q 2>&1
}
e2e atrium1080 /tmp/atrium_0.exr /tmp/atrium_1.exr
e2e powerplant1080 /tmp/powerplant_0.exr /tmp/powerplant_1.exr
e2e hairball1080 /tmp/hairball_0.exr /tmp/hairball_1.exr
e2e powerplant4k4 /tmp/pp4k_0.exr /tmp/pp4k_1.exr /tmp/pp4k_2.exr /tmp/pp4k_3.exr
echo "-- powerplant1080 gl chain vs kway, rbm indexed vs shifted, flat and deep; outputs compared"
for out in flat deep; do extra=""; [ $out = deep ] && extra="--deep"
$B /tmp/powerplant_0.exr /tmp/powerplant_1.exr -o /tmp/ref-$out.exr --backend cpu $extra -q
for st in kway chain; do for rb in indexed shifted; do
  echo "-- $out strategy $st rbm-blocks $rb"; { time $B /tmp/powerplant_0.exr /tmp/powerplant_1.exr -o /tmp/o-$st-$rb-$out.exr --backend gl --merge-strategy $st --rbm-blocks $rb $extra -q ; } 2>&1
  cmp /tmp/ref-$out.exr /tmp/o-$st-$rb-$out.exr && echo "identical to the CPU engine's output"
done; cmp /tmp/o-$st-indexed-$out.exr /tmp/o-$st-shifted-$out.exr && echo "$out $st: shifted identical to indexed"
done; done
date
echo "== bench"
for s in atrium hairball; do
  timeout 170 $B bench --scenes $s --size 1920x1080 --repeats 3 --markdown --no-oiiotool --no-tiles --no-kway --rbm-shifted --stages > $OUT/bench-$s.md 2>$OUT/bench-$s.err
  echo "bench $s exit $?"; date
done
