#!/usr/bin/env bash
# Pack what a GPU machine needs to run the GL test suite, `gpu-info --verify` and the benchmark
# tables (docs/hardware/README.md): the release binary and every GL test binary, stripped, in
# .hw/, the same compressed in .hwpack/hw.tar.xz (what travels: the working tree a device call
# sends is limited to 64 MiB), and the EGL loader packages in .gl/ (all ignored by git). Run
# here, in the repository, on a machine with the same processor as the GPU machine; then send
# the repository with .hwpack and .gl to the GPU machine and run benches/hardware/run.sh there.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

cargo build --release --quiet
# The test binaries' paths, from cargo's own report (no guessing at hashes).
mapfile -t tests < <(cargo test --release --no-run --message-format=json 2>/dev/null |
    python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["target"]["name"], m["executable"])
' | awk '$1 ~ /^gpu_/ || $1 == "gpu_strict" { print $2 }')
rm -rf .hw
mkdir -p .hw
strip -o .hw/deepmerge target/release/deepmerge
for t in "${tests[@]}"; do
    name=$(basename "$t" | sed 's/-[0-9a-f]*$//')
    strip -o ".hw/$name" "$t"
done
# The tests find their data and the CLI at the absolute paths they were built with.
echo "$root" > .hw/built_at
git rev-parse HEAD > .hw/commit
ls .hw
rm -rf .hwpack
mkdir -p .hwpack
tar cJf .hwpack/hw.tar.xz .hw

if ! ls .gl/*.deb >/dev/null 2>&1; then
    mkdir -p .gl /tmp/amd64/partial
    o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
    # shellcheck disable=SC2086
    apt-get $o update -qq
    # shellcheck disable=SC2086
    (cd .gl && apt-get $o download libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
fi
grep -qx '/.hw/' .git/info/exclude 2>/dev/null || echo /.hw/ >> .git/info/exclude
grep -qx '/.gl/' .git/info/exclude 2>/dev/null || echo /.gl/ >> .git/info/exclude
grep -qx '/.hwpack/' .git/info/exclude 2>/dev/null || echo /.hwpack/ >> .git/info/exclude
du -sh .hw .hwpack .gl
