#!/usr/bin/env bash
# On a GPU machine (after setup.sh's set-up, as run.sh and recheck.sh do): does the merge stage
# wait for cores the reader's decode of the next band holds? The powerplant 1080p pair, flat and
# deep, on each engine at each core count, with each setting in VARIANTS (environment
# assignments, `+` joining several; "default" for none), REPEATS runs each, interleaved so that
# drift spreads over every variant. Prints a markdown table of the median wall time
# (`--runstats`'s total: the whole process but its start) against the codec floor of the same
# cores, the median peak memory, and whether each output's bytes equal the CPU engine's default;
# exits 1 where any differ. Then a timeline of each GL
# variant's flat merge on all cores in $OUT/timeline-<variant>.log.
#
#   OUT=/tmp/c benches/hardware/contention.sh    (environment: CORES, default "all 8";
#       REPEATS, default 3; VARIANTS, default "default DEEPMERGE_GL_READER_STAGING=1
#       DEEPMERGE_GL_READER_STAGING=64M DEEPMERGE_GL_READER_STAGING=1+DEEPMERGE_READ_AHEAD=0
#       DEEPMERGE_GL_COPY_THREADS=0 DEEPMERGE_GL_STAGING=4M DEEPMERGE_READ_AHEAD=0"; a variant
#       of DEEPMERGE_GL_ settings alone runs on the GL engine only, any other on both)
#
# Its first run (docs/hardware/h100-2026-11-27b, contention/) measured a lower priority for the
# decode threads (niceness 5 and 19, a pool of their own) and 0 or 16 copy threads: neither
# changed the flat merge at 16 threads, so the niceness switch was removed again; transfers by
# calls were slower than the default there, and left the list. DEEPMERGE_GL_READER_STAGING=1
# (the reader's threads stage each band's planes, off the merging thread) is to be chosen here,
# and whether the reader's decoding ahead (eighteenth session; DEEPMERGE_READ_AHEAD=0 is the
# hand-over before it) pays on each engine. Staging by the reader with its two bands of blocks
# stages fewer bands where the reader runs further ahead (the rest as before), hence both. glibc's allocator left the list for it (recheck.sh
# timed it on the fourth H100 run: docs/hardware/h100-2026-11-27b/recheck/timeline-malloc-system).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-$PWD/hw-out}
mkdir -p "$out"
# shellcheck source=benches/hardware/setup.sh
. benches/hardware/setup.sh
cores=${CORES:-all 8}
repeats=${REPEATS:-3}
variants=${VARIANTS:-default DEEPMERGE_GL_READER_STAGING=1 DEEPMERGE_GL_READER_STAGING=64M DEEPMERGE_GL_READER_STAGING=1+DEEPMERGE_READ_AHEAD=0 DEEPMERGE_GL_COPY_THREADS=0 DEEPMERGE_GL_STAGING=4M DEEPMERGE_READ_AHEAD=0}
pp=/tmp/deepmerge-e2e/powerplant-1920x1080
mkdir -p /tmp/deepmerge-e2e "$out/runs"
[ -f "${pp}_1.exr" ] || "$B" scene powerplant --size 1920x1080 --seed 3 -o "$pp" >/dev/null
all=$(nproc)
# Untimed first GL runs: the driver compiles and caches the shaders on first use.
"$B" "${pp}_0.exr" "${pp}_1.exr" --backend gl -q -o /tmp/deepmerge-e2e/warm.exr
"$B" "${pp}_0.exr" "${pp}_1.exr" --backend gl --deep -q -o /tmp/deepmerge-e2e/warm.exr
engines_of() { # a variant -> the engines it runs on
    local rest=${1//DEEPMERGE_GL_[A-Z_]*=[^+]*/}
    if [ "$1" != default ] && [ -z "${rest//+/}" ]; then echo gl; else echo "cpu gl"; fi
}
# run CPUS ENGINE KIND VARIANT FILE: one merge; its wall seconds appended to FILE.
run() {
    local cpus=$1 engine=$2 kind=$3 variant=$4 file=$5 envs=() extra=()
    [ "$variant" = default ] || IFS=+ read -r -a envs <<<"$variant"
    [ "$kind" = deep ] && extra=(--deep)
    local tag=${variant//[=+]/-}
    local dst=/tmp/deepmerge-e2e/out-$engine-$kind-$tag.exr
    rm -f "$dst"
    taskset -c "0-$((cpus - 1))" env "${envs[@]}" "$B" "${pp}_0.exr" "${pp}_1.exr" "${extra[@]}" \
        --backend "$engine" --runstats -o "$dst" > "$out/runs/last.log" 2>&1 || {
        echo "failed" >> "$file"
        cat "$out/runs/last.log" >&2
        return
    }
    awk '/total \(wall\)/ { print $3 }' "$out/runs/last.log" >> "$file"
    awk '/peak memory/ { print $3 }' "$out/runs/last.log" >> "${file%.txt}.peak"
}
median() { grep -v failed | sort -g | awk '{a[NR]=$1} END { if (NR) print a[int((NR+1)/2)]; else print "failed" }'; }
failed=0
echo "host: $all cores; $("$B" gpu-info 2>/dev/null | sed -n 's/^renderer: *//p')"
echo
echo "| output | cores | codec floor | engine | variant | wall (median of $repeats) | / floor | peak (median) | bytes = CPU default's |"
echo "| --- | ---: | ---: | --- | --- | ---: | ---: | ---: | --- |"
for c in $cores; do
    cpus=$c
    [ "$c" = all ] && cpus=$all
    for kind in flat deep; do
        extra=()
        [ "$kind" = deep ] && extra=(--deep)
        floor=$(taskset -c "0-$((cpus - 1))" "$B" "${pp}_0.exr" "${pp}_1.exr" "${extra[@]}" --backend cpu \
            --codec-floor --runstats -o /tmp/deepmerge-e2e/floor.exr 2>&1 >/dev/null |
            sed -n 's/.*encode [0-9.]* s = \([0-9.]*\) s;.*/\1/p')
        rm -f "$out"/runs/*.txt "$out"/runs/*.peak
        for _ in $(seq "$repeats"); do
            for variant in $variants; do
                for engine in $(engines_of "$variant"); do
                    run "$cpus" "$engine" "$kind" "$variant" "$out/runs/$engine-${variant//[=+]/-}.txt"
                done
            done
        done
        ref=/tmp/deepmerge-e2e/out-cpu-$kind-default.exr
        for variant in $variants; do
            for engine in $(engines_of "$variant"); do
                tag=${variant//[=+]/-}
                wall=$(median < "$out/runs/$engine-$tag.txt")
                peak=$(median < "$out/runs/$engine-$tag.peak")
                ratio=$(awk -v w="$wall" -v f="$floor" 'BEGIN { if (f > 0 && w + 0 > 0) printf "%.2fx", w / f; else print "-" }')
                same=yes
                cmp -s "$ref" "/tmp/deepmerge-e2e/out-$engine-$kind-$tag.exr" || { same=NO; failed=1; }
                echo "| $kind | $cpus | ${floor:-?} s | $engine | $variant | $wall s | $ratio | $peak MiB | $same |"
            done
        done
    done
done
for variant in $variants; do
    [[ $(engines_of "$variant") == *gl* ]] || continue
    envs=()
    [ "$variant" = default ] || IFS=+ read -r -a envs <<<"$variant"
    env "${envs[@]}" DEEPMERGE_TIMELINE=1 "$B" "${pp}_0.exr" "${pp}_1.exr" --backend gl --runstats \
        -o /tmp/deepmerge-e2e/timeline.exr > "$out/timeline-${variant//[=+]/-}.log" 2>&1
done
exit $failed
