#!/usr/bin/env bash
# On a GPU machine (or here, with --bin): where a merge's wall time goes. For the 1080p
# powerplant pair, each engine and output kind with the host limited to each core count, one
# untimed merge (the driver's shader cache, the page cache) and then one with DEEPMERGE_TIMELINE=1
# and --runstats, whose timeline (src/timeline.rs: the GL context, shaders, buffers, and each
# band's decode, staging, GPU work, readback and encode, by thread) goes to
# $OUT/timeline-<output>-<engine>-<cores>.log. Extra environment for the GL runs (a variant to
# compare) comes from TIMELINE_GL_ENV, e.g. "DEEPMERGE_GL_TRANSFER=calls"; for every engine's
# runs from TIMELINE_ENV, e.g. "DEEPMERGE_MALLOC=system".
#
#   benches/hardware/timeline.sh [--bin PATH] [--cores "all 2"] [--outputs "flat deep"]
#                                [--engines "gl cpu"]   (auto too: --engines "gl cpu auto")
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-$PWD/hw-out}
mkdir -p "$out"
cores="all 2"
outputs="flat deep"
engines="gl cpu"
B=
while [ $# -gt 0 ]; do
    case $1 in
        --bin) B=$(realpath "$2"); shift 2 ;;
        --cores) cores=$2; shift 2 ;;
        --outputs) outputs=$2; shift 2 ;;
        --engines) engines=$2; shift 2 ;;
        *) echo "timeline.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
if [ -z "$B" ]; then
    # shellcheck source=benches/hardware/setup.sh
    . benches/hardware/setup.sh
fi
pp=/tmp/deepmerge-e2e/powerplant-1920x1080
mkdir -p "$(dirname "$pp")"
[ -f "${pp}_1.exr" ] || "$B" scene powerplant --size 1920x1080 --seed 3 -o "$pp" >/dev/null
read -ra gl_env <<<"${TIMELINE_GL_ENV:-}"
read -ra all_env <<<"${TIMELINE_ENV:-}"
for c in $cores; do
    [ "$c" = all ] && n=$(nproc) || n=$c
    for kind in $outputs; do
        for engine in $engines; do
            args=("${pp}_0.exr" "${pp}_1.exr" --backend "$engine" -o /tmp/timeline.exr --runstats)
            [ "$kind" = deep ] && args+=(--deep)
            env_args=(${all_env[@]+"${all_env[@]}"})
            [ "$engine" = gl ] && env_args+=(${gl_env[@]+"${gl_env[@]}"})
            log=$out/timeline-$kind-$engine-$c.log
            env "${env_args[@]}" taskset -c "0-$((n - 1))" "$B" "${args[@]}" 2>/dev/null
            # A new output, as end_to_end.sh times it: not the deletion of the untimed run's.
            rm -f /tmp/timeline.exr
            { echo "# $kind output, $engine engine, $n host threads ${env_args[*]}"
              env "${env_args[@]}" DEEPMERGE_TIMELINE=1 taskset -c "0-$((n - 1))" "$B" "${args[@]}"
            } > "$log" 2>&1
            echo "$log: $(grep -o 'total (wall) *[0-9.]* s' "$log")"
        done
    done
done
