#!/bin/bash
# Device call 3: powerplant Tables 1-4, Table 5 for the three scenes.
for f in .gl/*.deb; do dpkg -x $f / >/dev/null 2>&1; done; ldconfig
B=$PWD/.dev/deepmerge
chmod +x .dev/*
exec > >(tee -a $OUT/log3.txt) 2>&1
date
timeout 210 $B bench --scenes powerplant --size 1920x1080 --repeats 3 --markdown --no-oiiotool --no-tiles --no-kway --rbm-shifted --stages > $OUT/bench3-powerplant.md 2>$OUT/bench3-powerplant.err
echo "bench powerplant exit $?"; date
for s in atrium hairball powerplant; do
timeout 90 $B bench --only-kway --scenes $s --size 1920x1080 --repeats 3 --markdown > $OUT/bench3-kway-$s.md 2>$OUT/bench3-kway-$s.err
echo "bench kway $s exit $?"; date
done
