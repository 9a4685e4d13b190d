#!/usr/bin/env bash
# The end-to-end table (docs/benchmarks.md, "End to end against the codec floor"): for each
# scene pair, flat and deep output, and the host limited to 2, 4, 8 and all cores (taskset), the
# CPU engine's and the GL engine's wall time beside the codec floor (decoding the inputs plus
# encoding the output, each alone, same threads, same process: `deepmerge --codec-floor`), and
# each engine's peak memory, and how busy the threads were in the floor's decode and in each
# engine's merge (CPU time over threads x wall: busy threads can only go faster by doing less;
# idle ones wait on something serial; every thread of the process counts, a GL driver's too).
# The engines' columns are the merge alone, timed inside that process, whose GL context is made
# before the timing starts; "whole process" is a plain run's total wall time (`--runstats`), what
# a user waits for, the GL context made beside the inputs as in any run.
# Median of --repeats runs. GL runs in whatever GL the machine has
# (llvmpipe here, the GPU's driver on a GPU host). Every GL output (each variant's too) is
# compared with the CPU engine's, byte for byte: the last column says which differ, and the
# script then exits 1 after the table.
#
#   benches/end_to_end.sh [--bin PATH] [--scenes "powerplant atrium hairball"] [--size 1920x1080]
#                         [--cores "2 4 8 all"] [--repeats 3] [--dir /tmp/e2e] [--gl-variants]
#
# --gl-variants adds the GL engine's variants as more columns, so a GPU host's run says which
# default to keep: transfers by calls (DEEPMERGE_GL_TRANSFER=calls), bands not overlapped
# (DEEPMERGE_GL_OVERLAP=0), the k-way kernel for a long-list pair (DEEPMERGE_GL_PAIRWISE=0) and,
# for deep output, the merge written interleaved and relaid out (DEEPMERGE_GL_DEEP_WRITES=relayout)
# and the merged image read back instead of its packed sources (DEEPMERGE_GL_DEEP_READBACK=image),
# and storage buffers allocated mutable (DEEPMERGE_GL_BUFFERS=mutable).
# E2E_GL_DEEP_VARIANT (environment), e.g. "DEEPMERGE_GL_DEEP_READBACK=sources", adds one column:
# the GL engine's deep merge with that setting (a GPU default not yet measured, against what it
# replaced), in either table. E2E_GL_VARIANT, e.g. "DEEPMERGE_GL_BAND_CAP=64M", adds one column
# for both outputs: the GL engine's merge with that setting.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=target/release/deepmerge
scenes="powerplant"
size=1920x1080
cores="2 4 8 all"
repeats=3
dir=/tmp/deepmerge-e2e
variants=0
while [ $# -gt 0 ]; do
    case $1 in
        --bin) bin=$2; shift 2 ;;
        --scenes) scenes=$2; shift 2 ;;
        --size) size=$2; shift 2 ;;
        --cores) cores=$2; shift 2 ;;
        --repeats) repeats=$2; shift 2 ;;
        --dir) dir=$2; shift 2 ;;
        --gl-variants) variants=1; shift ;;
        *) echo "end_to_end.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -x "$bin" ] || { echo "end_to_end.sh: no $bin (cargo build --release first)" >&2; exit 2; }
mkdir -p "$dir"
all=$(nproc)

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# One configuration, $repeats times: prints "merge_s floor_s peak_mib decode_busy% merge_busy%"
# (medians).
measure() {
    local cpus=$1; shift
    local merges=() floors=() peaks=() decode_busies=() merge_busies=()
    for _ in $(seq "$repeats"); do
        local err
        # A fresh output, as the floor's encode writes one: replacing the last run's file would
        # add its deletion (0.1 s for 386 MB on a disk mounted with discard) to the merge alone.
        rm -f "$dir/out.exr"
        err=$(taskset -c "0-$((cpus - 1))" "$bin" "$@" --codec-floor --runstats 2>&1 >/dev/null) || {
            echo "end_to_end.sh: failed: $bin $*" >&2; echo "$err" >&2; exit 1; }
        merges+=("$(sed -n 's/.*the merge took \([0-9.]*\) s wall.*/\1/p' <<<"$err")")
        floors+=("$(sed -n 's/.*encode [0-9.]* s = \([0-9.]*\) s;.*/\1/p' <<<"$err")")
        peaks+=("$(sed -n 's/.*peak memory *\([0-9.]*\) MiB.*/\1/p' <<<"$err")")
        decode_busies+=("$(sed -n 's/.* busy: decode \([0-9]*\)%.*/\1/p' <<<"$err")")
        merge_busies+=("$(sed -n 's/.* busy: decode [0-9]*%, merge \([0-9]*\)%.*/\1/p' <<<"$err")")
    done
    echo "$(printf '%s\n' "${merges[@]}" | median) $(printf '%s\n' "${floors[@]}" | median) $(printf '%s\n' "${peaks[@]}" | median)" \
        "$(printf '%s\n' "${decode_busies[@]}" | median) $(printf '%s\n' "${merge_busies[@]}" | median)"
}

# A plain run of one configuration, $repeats times: the median of its total wall time.
whole() {
    local cpus=$1; shift
    local walls=()
    for _ in $(seq "$repeats"); do
        local err
        rm -f "$dir/out.exr"
        err=$(taskset -c "0-$((cpus - 1))" "$bin" "$@" --runstats 2>&1 >/dev/null) || {
            echo "end_to_end.sh: failed: $bin $*" >&2; echo "$err" >&2; exit 1; }
        walls+=("$(sed -n 's/^ *total (wall) *\([0-9.]*\) s.*/\1/p' <<<"$err")")
    done
    printf '%s\n' "${walls[@]}" | median
}

echo "host: $all cores; $("$bin" gpu-info 2>/dev/null | sed -n 's/^renderer: *//p' | head -1)"
echo
deep_variant=${E2E_GL_DEEP_VARIANT:-}
gl_variant=${E2E_GL_VARIANT:-}
extra_head=
extra_rule=
if [ -n "$deep_variant" ]; then
    extra_head=" GL deep, $deep_variant |"
    extra_rule=" ---: |"
fi
if [ -n "$gl_variant" ]; then
    extra_head+=" GL, $gl_variant |"
    extra_rule+=" ---: |"
fi
if [ "$variants" = 1 ]; then
    echo "| scene | output | cores | codec floor | CPU engine | GL engine | CPU / floor | GL / floor | whole process: CPU / GL | peak CPU / GL | threads busy: decode / CPU / GL | GL calls | GL no overlap | GL k-way | GL relayout | GL image readback | GL mutable buffers |$extra_head GL bytes = CPU's |"
    echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |$extra_rule --- |"
else
    echo "| scene | output | cores | codec floor | CPU engine | GL engine | CPU / floor | GL / floor | whole process: CPU / GL | peak CPU / GL | threads busy: decode / CPU / GL |$extra_head GL bytes = CPU's |"
    echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |$extra_rule --- |"
fi
differs=0
# same LABEL: whether the last output equals the CPU engine's; else LABEL joins the row's list.
same() {
    cmp -s "$dir/out.exr" "$dir/out-cpu.exr" || { mismatch+=" $1"; differs=1; }
}
for scene in $scenes; do
    base=$dir/$scene-$size
    [ -f "${base}_1.exr" ] || "$bin" scene "$scene" --size "$size" --seed 3 -o "$base" >/dev/null
    # One untimed GL merge of each output kind first: a driver compiles the shaders on first use
    # and caches them (NVIDIA's first GL run took 0.7 s longer), as a user's runs after the first.
    "$bin" "${base}_0.exr" "${base}_1.exr" --backend gl -q -o "$dir/out.exr"
    "$bin" "${base}_0.exr" "${base}_1.exr" --backend gl --deep -q -o "$dir/out.exr"
    # Core counts outside, so that a run cut short (a device lease ends) has both output kinds
    # of the counts it reached, in the order --cores gives.
    for c in $cores; do
        [ "$c" = all ] && c=$all
        [ "$c" -le "$all" ] || continue
        for kind in flat deep; do
            extra=()
            [ "$kind" = deep ] && extra=(--deep)
            mismatch=""
            read -r cpu_s floor_s cpu_peak decode_busy cpu_busy < <(measure "$c" "${base}_0.exr" "${base}_1.exr" "${extra[@]}" --backend cpu -o "$dir/out.exr")
            cp "$dir/out.exr" "$dir/out-cpu.exr"
            read -r gl_s _ gl_peak _ gl_busy < <(measure "$c" "${base}_0.exr" "${base}_1.exr" "${extra[@]}" --backend gl -o "$dir/out.exr")
            same default
            cpu_whole=$(whole "$c" "${base}_0.exr" "${base}_1.exr" "${extra[@]}" --backend cpu -o "$dir/out.exr")
            gl_whole=$(whole "$c" "${base}_0.exr" "${base}_1.exr" "${extra[@]}" --backend gl -o "$dir/out.exr")
            same whole-process
            printf '| %s %s | %s | %s | %.2f s | %.2f s | %.2f s | %.2fx | %.2fx | %.2f / %.2f s | %.0f / %.0f MiB | %s / %s / %s%% |' \
                "$scene" "$size" "$kind" "$c" "$floor_s" "$cpu_s" "$gl_s" \
                "$(awk "BEGIN {print $cpu_s / $floor_s}")" "$(awk "BEGIN {print $gl_s / $floor_s}")" "$cpu_whole" "$gl_whole" "$cpu_peak" "$gl_peak" \
                "${decode_busy:--}" "${cpu_busy:--}" "${gl_busy:--}"
            if [ "$variants" = 1 ]; then
                read -r calls_s _ _ < <(DEEPMERGE_GL_TRANSFER=calls measure "$c" "${base}_0.exr" "${base}_1.exr" "${extra[@]}" --backend gl -o "$dir/out.exr")
                same calls
                read -r serial_s _ _ < <(DEEPMERGE_GL_OVERLAP=0 measure "$c" "${base}_0.exr" "${base}_1.exr" "${extra[@]}" --backend gl -o "$dir/out.exr")
                same no-overlap
                read -r kway_s _ _ < <(DEEPMERGE_GL_PAIRWISE=0 measure "$c" "${base}_0.exr" "${base}_1.exr" "${extra[@]}" --backend gl -o "$dir/out.exr")
                same k-way
                relayout=-
                image=-
                if [ "$kind" = deep ]; then
                    read -r relayout_s _ _ < <(DEEPMERGE_GL_DEEP_WRITES=relayout measure "$c" "${base}_0.exr" "${base}_1.exr" "${extra[@]}" --backend gl -o "$dir/out.exr")
                    same relayout
                    relayout=$(printf '%.2f s' "$relayout_s")
                    read -r image_s _ _ < <(DEEPMERGE_GL_DEEP_READBACK=image measure "$c" "${base}_0.exr" "${base}_1.exr" "${extra[@]}" --backend gl -o "$dir/out.exr")
                    same image-readback
                    image=$(printf '%.2f s' "$image_s")
                fi
                read -r mutable_s _ _ < <(DEEPMERGE_GL_BUFFERS=mutable measure "$c" "${base}_0.exr" "${base}_1.exr" "${extra[@]}" --backend gl -o "$dir/out.exr")
                same mutable
                printf ' %.2f s | %.2f s | %.2f s | %s | %s | %.2f s |' "$calls_s" "$serial_s" "$kway_s" "$relayout" "$image" "$mutable_s"
            fi
            if [ -n "$deep_variant" ]; then
                if [ "$kind" = deep ]; then
                    read -r variant_s _ _ < <(export "${deep_variant?}"; measure "$c" "${base}_0.exr" "${base}_1.exr" "${extra[@]}" --backend gl -o "$dir/out.exr")
                    same "$deep_variant"
                    printf ' %.2f s |' "$variant_s"
                else
                    printf ' - |'
                fi
            fi
            if [ -n "$gl_variant" ]; then
                read -r variant_s _ _ < <(export "${gl_variant?}"; measure "$c" "${base}_0.exr" "${base}_1.exr" "${extra[@]}" --backend gl -o "$dir/out.exr")
                same "$gl_variant"
                printf ' %.2f s |' "$variant_s"
            fi
            if [ -z "$mismatch" ]; then echo " yes |"; else echo " **NO:$mismatch** |"; fi
        done
    done
done
if [ "$differs" = 1 ]; then
    echo "end_to_end.sh: a GL output differs from the CPU engine's (the last column)" >&2
    exit 1
fi
