#!/usr/bin/env bash
# On a GPU machine, in the repository with .hwpack/ (or .hw/) and .gl/ from
# benches/hardware/pack.sh: the device, `gpu-info --verify`, then every GL test binary in strict
# mode, then (with --bench) the end-to-end table with the GL engine's variants and the
# paper-style tables. Writes everything to $OUT (or ./hw-out) as a record for docs/hardware/:
# summary.md (date, device, driver, commit, what passed) and the logs. Exits non-zero when
# anything failed.
#
#   benches/hardware/run.sh [--bench] [--budget SECONDS] [--pack FILE]
#   (environment: E2E_CORES, the end-to-end table's core counts, default "all 2 8 4";
#    E2E_VARIANTS=0 leaves the GL variants' columns out of it; BENCH_TABLES=0 leaves the
#    paper-style tables out; BENCH_DEEP_WRITES, their extra columns' ways of writing deep output,
#    default relayout,staged:8K,staged:16K,staged:32K; VERIFY_ALONGSIDE=0 runs
#    `gpu-info --verify` alone, before the tests)
#
# --budget: a device lease is short, so every step runs under `timeout` within what is left of
# SECONDS (default: no limit), most important first; a step with no time left is recorded as
# skipped, and a step cut short keeps what it printed.
# --pack: after every step, the whole record packed into FILE (tar.gz), e.g. $OUT/hw.tgz with
# the record itself written elsewhere: a device call returns at most 8 files, and a call stopped
# at its limit (which is less than its timeout when little device time is left) returns only what
# was already in $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-$PWD/hw-out}
mkdir -p "$out"
bench=false
budget=1000000
pack=
while [ $# -gt 0 ]; do
    case $1 in
        --bench) bench=true; shift ;;
        --budget) budget=$2; shift 2 ;;
        --pack) pack=$2; shift 2 ;;
        *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
deadline=$(($(date +%s) + budget))

# shellcheck source=benches/hardware/setup.sh
. benches/hardware/setup.sh
export DEEPMERGE_GL_STRICT=1

summary=$out/summary.md
status=0
# within CAP CMD...: CMD under `timeout`, at most CAP seconds and what is left of the budget
# (exit 125 without running it when under 10 s are left).
within() {
    local cap=$1; shift
    local left=$((deadline - $(date +%s) - 5))
    [ "$left" -lt "$cap" ] && cap=$left
    [ "$cap" -lt 10 ] && return 125
    timeout "$cap" "$@"
}
checkpoint() { # the record so far into --pack's file
    if [ -n "$pack" ]; then
        # A log still being written (verify's, beside the tests) makes tar exit 1: still a record.
        tar czf "$pack.tmp" --warning=no-file-changed -C "$(dirname "$out")" "$(basename "$out")"
        [ $? -le 1 ] && mv "$pack.tmp" "$pack"
    fi
}
outcome() { # exit status -> words
    case $1 in
        0) echo passed ;;
        124) echo "FAILED (cut short by the time budget)" ;;
        125) echo "skipped (no time left in the budget)" ;;
        *) echo "FAILED (exit $1)" ;;
    esac
}
{
    echo "# Hardware run $(date -u +%Y-%m-%d)"
    echo
    echo "- commit: $(cat .hw/commit)"
    echo "- device (nvidia-smi): $(nvidia-smi -L 2>/dev/null | head -1 || true)"
    echo "- driver (nvidia-smi): $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1 || true)"
    echo "- host: $(nproc) cores"
    # Which CPUs share a core: the end-to-end table's `taskset -c 0-1` is two cores, or one
    # core's two hyperthreads (which would read like this machine's one-core figures).
    echo "- CPU topology (CPU, core, socket): $(lscpu -p=CPU,CORE,SOCKET 2>/dev/null | grep -v '^#' | head -16 | tr '\n' ' ' || true)"
    echo "- CPU model: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1 || true)"
    echo
} > "$summary"
within 30 "$B" gpu-info > "$out/gpu-info.txt" 2>&1
# The GL vendor, renderer and version name the device and driver where nvidia-smi does not.
sed 's/^/    /' "$out/gpu-info.txt" >> "$summary"
echo >> "$summary"

# `gpu-info --verify` runs beside the test binaries (VERIFY_ALONGSIDE=0: before them, alone): both
# only check bytes, and together they take less wall time of a short lease. Its own time is
# taken where it ends (verify.seconds), not where the script waits for it.
verify_section() {
    echo "## gpu-info --verify"
    echo
    echo "- $(outcome "$1") in $(cat "$out/verify.seconds" 2>/dev/null || echo "?") s: $(tail -1 "$out/verify.log")"
    grep "verify:" "$out/verify.log" | head -20 | sed 's/^/    /'
    echo
    grep "^  " "$out/verify.log" | sed 's/^/    /'
    echo
}
verify_start=$(date +%s)
(
    within 240 "$B" gpu-info --verify --data tests/data/openexr-images > "$out/verify.log" 2>&1
    rc=$?
    echo $(($(date +%s) - verify_start)) > "$out/verify.seconds"
    exit $rc
) &
verify_pid=$!
finish_verify() { # wait for it, then its section into the summary
    wait $verify_pid
    local rc=$?
    [ $rc = 0 ] || status=1
    verify_section $rc >> "$summary"
    verify_pid=
}
[ "${VERIFY_ALONGSIDE:-1}" = 0 ] && finish_verify
checkpoint

echo "## GL tests (strict mode, --test-threads 8)" >> "$summary"
echo >> "$summary"
echo "| binary | result |" >> "$summary"
echo "| --- | --- |" >> "$summary"
for t in .hw/gpu_*; do
    name=$(basename "$t")
    start=$(date +%s)
    within 180 "$t" --test-threads 8 > "$out/$name.log" 2>&1
    rc=$?
    [ $rc = 0 ] || status=1
    line=$(grep "^test result" "$out/$name.log" | tail -1)
    echo "| $name | $(outcome $rc): ${line#test result: } ($(($(date +%s) - start)) s) |" >> "$summary"
    grep -E "^test .* FAILED" "$out/$name.log" | sed 's/^/    /' >> "$summary" || true
    checkpoint
done
if [ -n "$verify_pid" ]; then
    echo >> "$summary"
    finish_verify
    checkpoint
fi

if $bench; then
    printf "\n## benchmarks\n\n" >> "$summary"
    unset DEEPMERGE_GL_STRICT
    # --stats of each output kind with the defaults, and of deep output with each variant that
    # changes how its bytes travel (VARIANT=value, or "default"): where the GL engine's time goes.
    pp=/tmp/deepmerge-e2e/powerplant-1920x1080
    mkdir -p /tmp/deepmerge-e2e
    stats_runs() {
        local run kind variant name
        for run in "$@"; do
            read -r kind variant <<<"$run"
            extra=()
            [ "$kind" = deep ] && extra=(--deep)
            envs=()
            [ "$variant" = default ] || envs=("$variant")
            name=stats-$kind-${variant#DEEPMERGE_GL_}
            name=${name//=/-}
            [ -f "${pp}_1.exr" ] || within 90 "$B" scene powerplant --size 1920x1080 --seed 3 -o "$pp" >/dev/null
            within 30 env "${envs[@]}" "$B" "${pp}_0.exr" "${pp}_1.exr" "${extra[@]}" --backend gl --stats \
                -o /tmp/stats.exr > "$out/$name.log" 2>&1
            echo "- GL --stats, $kind, $variant: $(outcome $?) ($name.log)" >> "$summary"
        done
        checkpoint
    }
    stats_runs "flat default" "deep default"
    # The end-to-end table against the codec floor (issue 25); E2E_VARIANTS=0 leaves the GL
    # engine's variants out (transfers, overlap, k-way for a long-list pair, relaid-out deep
    # writes), when a run has them already.
    variants=--gl-variants
    [ "${E2E_VARIANTS:-1}" = 0 ] && variants=
    within 280 benches/end_to_end.sh --bin "$B" --scenes powerplant --cores "${E2E_CORES:-all 2 8 4}" \
        --repeats 1 $variants --dir /tmp/deepmerge-e2e > "$out/end-to-end.md" 2> "$out/end-to-end.err"
    echo "- end to end: $(outcome $?) (end-to-end.md)" >> "$summary"
    checkpoint
    # Where `--backend auto`'s size bound belongs (backend::AUTO_GL_MIN_INPUT_BYTES): a deep
    # merge's whole process on each engine, the GL one paying for its context and shaders, from
    # the bundled pair to the measured 1080p pair. The first GL run of each pair starts from an
    # empty shader cache (NVIDIA's and Mesa's pointed at a fresh folder), as a farm node's first
    # frame would; the second from the cache that run left.
    auto_failed=0
    {
        echo "| inputs | input MiB | CPU engine | GL engine, cold shader cache | GL engine, warm |"
        echo "| --- | ---: | ---: | ---: | ---: |"
        for size in small 480x270 960x540 1920x1080; do
            if [ $size = small ]; then
                pair=(tests/data/openexr-images/Balls.exr tests/data/openexr-images/Leaves.exr)
            else
                base=/tmp/deepmerge-e2e/powerplant-$size
                [ -f "${base}_1.exr" ] || within 90 "$B" scene powerplant --size $size --seed 3 -o "$base" >/dev/null
                pair=("${base}_0.exr" "${base}_1.exr")
            fi
            mib=$(stat -c %s "${pair[@]}" | awk '{ s += $1 } END { printf "%.1f", s / 1048576 }')
            cache=$(mktemp -d)
            wall() {
                local t0 t1
                t0=$(date +%s.%N)
                if ! within 60 env __GL_SHADER_DISK_CACHE_PATH="$cache" MESA_SHADER_CACHE_DIR="$cache" \
                    "$B" "${pair[@]}" --deep -o /tmp/auto-size.exr "$@" >/dev/null 2>&1; then
                    echo "failed"
                    return 1
                fi
                t1=$(date +%s.%N)
                awk "BEGIN { printf \"%.2f s\", $t1 - $t0 }"
            }
            cpu=$(wall --backend cpu) || auto_failed=1
            cold=$(wall --backend gl) || auto_failed=1
            warm=$(wall --backend gl) || auto_failed=1
            echo "| $size | $mib | $cpu | $cold | $warm |"
            rm -rf "$cache"
        done
    } > "$out/auto-size.md" 2> "$out/auto-size.err"
    [ $auto_failed = 0 ]
    echo "- auto's size bound: $(outcome $?) (auto-size.md)" >> "$summary"
    # The CPU engine's bands on every host thread: its default cap (stream::plan::band_cap,
    # 32 MiB up to two threads, 16 MiB a thread beyond) against bands of N rows (`--band-rows`,
    # hidden, for measurements), flat and deep output against the codec floor. On 16 threads
    # the old 32 MiB cap made deep bands of 4-5 rows of the 1080p pair, 1.56x the time of 46 rows.
    pp=/tmp/deepmerge-e2e/powerplant-1920x1080
    rows_failed=0
    {
        echo "| output | band rows | codec floor | CPU engine | CPU / floor |"
        echo "| --- | ---: | ---: | ---: | ---: |"
        for kind in flat deep; do
            for rows in default 46 92 180; do
                args=(--backend cpu --codec-floor -o /tmp/band-rows.exr)
                [ $kind = deep ] && args+=(--deep)
                [ $rows = default ] || args+=(--band-rows "$rows")
                line=$(within 60 "$B" "${pp}_0.exr" "${pp}_1.exr" "${args[@]}" 2>&1 | grep "codec floor:") ||
                    rows_failed=1
                echo "$line" | sed -n "s/codec floor: .* = \([0-9.]*\) s; the merge took \([0-9.]*\) s wall, \([0-9.]*x\).*/| $kind | $rows | \1 s | \2 s | \3 |/p"
            done
        done
    } > "$out/band-rows.md" 2> "$out/band-rows.err"
    [ $rows_failed = 0 ]
    echo "- CPU band heights: $(outcome $?) (band-rows.md)" >> "$summary"
    checkpoint
    stats_runs "deep DEEPMERGE_GL_BUFFERS=mutable" "deep DEEPMERGE_GL_TRANSFER=calls" \
        "deep DEEPMERGE_GL_DEEP_WRITES=relayout" "deep DEEPMERGE_GL_DEEP_READBACK=image"
    # The paper-style tables (BENCH_TABLES=0 leaves them out, when a run has them already).
    # With Table 2 columns for the other ways of writing deep output (DeepWrites; the default
    # writes directly until these cells choose).
    deep_writes=${BENCH_DEEP_WRITES:-relayout,staged:8K,staged:16K,staged:32K}
    if [ "${BENCH_TABLES:-1}" != 0 ]; then
        for s in atrium hairball; do
            within 200 "$B" bench --scenes $s --size 1920x1080 --repeats 3 --markdown --no-oiiotool \
                --stages --deep-writes "$deep_writes" > "$out/bench-$s.md" 2> "$out/bench-$s.err"
            echo "- bench $s: $(outcome $?) (bench-$s.md)" >> "$summary"
            checkpoint
        done
    fi
fi
cat "$summary"
exit $status
