#!/usr/bin/env bash
# On a GPU machine, in the repository with .hw/ and .gl/ from benches/hardware/pack.sh: the
# device, `gpu-info --verify`, then every GL test binary in strict mode, then (with --bench) the
# benchmark tables. Writes everything to $OUT (or ./hw-out) as a record for docs/hardware/:
# summary.md (date, device, driver, commit, what passed) and the logs. Exits non-zero when
# anything failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-$PWD/hw-out}
mkdir -p "$out"
bench=false
[ "${1:-}" = --bench ] && bench=true

for f in .gl/*.deb; do dpkg -x "$f" / >/dev/null 2>&1; done
ldconfig
# NVIDIA's EGL vendor file, where the loader does not find it on its own.
nv=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
[ -f "$nv" ] && export __EGL_VENDOR_LIBRARY_FILENAMES=$nv
export DEEPMERGE_GL_STRICT=1

# Lay the repository where the binaries were built: tests/data and target/release/deepmerge.
# (On the machine that built them they are already there.)
built_at=$(cat .hw/built_at)
if [ "$built_at" != "$PWD" ]; then
    mkdir -p "$built_at/tests" "$built_at/target/release"
    ln -sfn "$PWD/tests/data" "$built_at/tests/data"
    cp .hw/deepmerge "$built_at/target/release/deepmerge"
fi
chmod +x .hw/*
B=.hw/deepmerge

summary=$out/summary.md
status=0
{
    echo "# Hardware run $(date -u +%Y-%m-%d)"
    echo
    echo "- commit: $(cat .hw/commit)"
    echo "- device (nvidia-smi): $(nvidia-smi -L 2>/dev/null | head -1 || true)"
    echo "- driver (nvidia-smi): $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1 || true)"
    echo "- host: $(nproc) cores"
    echo
} > "$summary"
$B gpu-info > "$out/gpu-info.txt" 2>&1
# The GL vendor, renderer and version name the device and driver where nvidia-smi does not.
sed 's/^/    /' "$out/gpu-info.txt" >> "$summary"
echo >> "$summary"

echo "## gpu-info --verify" >> "$summary"
echo >> "$summary"
start=$(date +%s)
if $B gpu-info --verify --data tests/data/openexr-images > "$out/verify.log" 2>&1; then
    echo "- passed in $(($(date +%s) - start)) s: $(tail -1 "$out/verify.log")" >> "$summary"
else
    status=1
    echo "- FAILED in $(($(date +%s) - start)) s (verify.log):" >> "$summary"
    grep "verify:" "$out/verify.log" | head -20 | sed 's/^/    /' >> "$summary"
fi
echo >> "$summary"
grep "^  " "$out/verify.log" | sed 's/^/    /' >> "$summary"
echo >> "$summary"

echo "## GL tests (strict mode, --test-threads 4)" >> "$summary"
echo >> "$summary"
echo "| binary | result |" >> "$summary"
echo "| --- | --- |" >> "$summary"
for t in .hw/gpu_*; do
    name=$(basename "$t")
    start=$(date +%s)
    if "$t" --test-threads 4 > "$out/$name.log" 2>&1; then r=passed; else r=FAILED; status=1; fi
    line=$(grep "^test result" "$out/$name.log" | tail -1)
    echo "| $name | $r: ${line#test result: } ($(($(date +%s) - start)) s) |" >> "$summary"
    grep -E "^test .* FAILED" "$out/$name.log" | sed 's/^/    /' >> "$summary" || true
done

if $bench; then
    printf "\n## benchmark tables\n\n" >> "$summary"
    for s in atrium hairball; do
        timeout 170 $B bench --scenes $s --size 1920x1080 --repeats 3 --markdown --no-oiiotool \
            --stages > "$out/bench-$s.md" 2> "$out/bench-$s.err"
        echo "- bench $s: exit $? (bench-$s.md)" >> "$summary"
    done
    # The end-to-end table against the codec floor (issue 25), at 2, 4, 8 and all cores, with
    # the GL engine's transfer (mapped or calls) and overlap variants beside its defaults.
    timeout 300 benches/end_to_end.sh --bin "$B" --scenes powerplant --cores "2 4 8 all" \
        --repeats 1 --gl-variants --dir /tmp/deepmerge-e2e > "$out/end-to-end.md" 2> "$out/end-to-end.err"
    echo "- end to end: exit $? (end-to-end.md)" >> "$summary"
fi
cat "$summary"
exit $status
