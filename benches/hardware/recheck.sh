#!/usr/bin/env bash
# On a GPU machine, after a change to a build whose whole record run.sh took already, when a
# lease has little time left: every GL test binary but gpu_verify in strict mode, four at once
# (about a minute on an H100 host, against run.sh's five with `gpu-info --verify`), with
# RECHECK_VERIFY=1 `gpu-info --verify` in strict mode beside them (about 3 minutes on an H100; the
# timings wait for it), then the
# end-to-end table (benches/end_to_end.sh, one repeat) and the GL engine's timelines
# (timeline.sh, all threads: each engine with the defaults, then each TIMELINE_VARIANTS setting:
# a DEEPMERGE_GL_ one on GL, any other on the CPU and GL engines) into $OUT. Exits non-zero when a
# test binary failed.
#
#   benches/hardware/recheck.sh     (environment: E2E_CORES, default "all 2 8 4";
#                                    E2E_GL_VARIANT and E2E_GL_DEEP_VARIANT, a column each in
#                                    the end-to-end table (benches/end_to_end.sh);
#                                    TIMELINE_VARIANTS, default "DEEPMERGE_MALLOC=system" (glibc's
#                                    own malloc thresholds against the CLI's reuse); a list given
#                                    replaces it, e.g. "DEEPMERGE_MALLOC=system
#                                    DEEPMERGE_GL_STAGING=16M", and an empty one runs none;
#                                    TIMELINE_ENGINES, default "gl auto cpu";
#                                    TIMELINE_CORES, the timelines' host threads, default "all"
#                                    ("all 2" adds two threads: where a GL run's host time goes
#                                    when decoding and encoding leave no core idle);
#                                    BENCH_DEEP_WRITES, e.g. "relayout,staged:8K,staged:16K":
#                                    after the tests, Tables 1-4 of hairball at 1080p with a Table 2
#                                    column for each way of writing deep output, in
#                                    bench-deep-writes.md, within 150 s)
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-$PWD/hw-out}
mkdir -p "$out"
# shellcheck source=benches/hardware/setup.sh
. benches/hardware/setup.sh
failed=0
"$B" gpu-info > "$out/gpu-info.txt" 2>&1
nvidia-smi -L >> "$out/gpu-info.txt" 2>&1
verify_pid=
if [ "${RECHECK_VERIFY:-0}" = 1 ]; then
    (
        start=$(date +%s)
        DEEPMERGE_GL_STRICT=1 timeout 300 "$B" gpu-info --verify --data tests/data/openexr-images \
            > "$out/verify.log" 2>&1
        rc=$?
        echo "verify: exit $rc in $(($(date +%s) - start)) s" >> "$out/tests.txt.verify"
        exit $rc
    ) &
    verify_pid=$!
fi
for t in .hw/gpu_*; do
    [ "$(basename "$t")" = gpu_verify ] || echo "$t"
done | DEEPMERGE_GL_STRICT=1 xargs -P 4 -I{} sh -c \
    'name=$(basename {}); {} --test-threads 4 > "$0/$name.log" 2>&1; echo "$name: exit $? $(grep -h "^test result" "$0/$name.log" | tail -1)"' \
    "$out" > "$out/tests.txt"
grep -v ": exit 0 " "$out/tests.txt" && failed=1
if [ -n "$verify_pid" ]; then
    wait "$verify_pid" || failed=1
    cat "$out/tests.txt.verify" >> "$out/tests.txt" && rm "$out/tests.txt.verify"
fi
if [ -n "${BENCH_DEEP_WRITES:-}" ]; then
    timeout 150 "$B" bench --scenes hairball --size 1920x1080 --repeats 3 --markdown --no-oiiotool \
        --no-kway --no-tiles --stages --deep-writes "$BENCH_DEEP_WRITES" \
        > "$out/bench-deep-writes.md" 2> "$out/bench-deep-writes.err"
fi
benches/end_to_end.sh --bin "$B" --scenes powerplant --cores "${E2E_CORES:-all 2 8 4}" \
    --repeats 1 --dir /tmp/deepmerge-e2e > "$out/end-to-end.md" 2> "$out/end-to-end.err"
OUT=$out/timeline benches/hardware/timeline.sh --bin "$B" --cores "${TIMELINE_CORES:-all}" \
    --engines "${TIMELINE_ENGINES:-gl auto cpu}"
for variant in ${TIMELINE_VARIANTS-DEEPMERGE_MALLOC=system}; do
    name=${variant#DEEPMERGE_GL_}
    name=${name#DEEPMERGE_}
    name=${name//=/-}
    if [ "${variant#DEEPMERGE_GL_}" != "$variant" ]; then
        TIMELINE_GL_ENV=$variant OUT=$out/timeline-${name,,} \
            benches/hardware/timeline.sh --bin "$B" --cores all --engines gl
    else
        TIMELINE_ENV=$variant OUT=$out/timeline-${name,,} \
            benches/hardware/timeline.sh --bin "$B" --cores all --engines "cpu gl"
    fi
done
exit $failed
