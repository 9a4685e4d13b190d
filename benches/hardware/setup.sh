# Sourced by the GPU machine's scripts (run.sh, recheck.sh, timeline.sh), in the repository
# root: unpack .hwpack/ into .hw/ where it is not there yet, install the EGL loader packages from
# .gl/, point the loader at NVIDIA's EGL vendor file where it does not find it on its own, lay
# the repository where the binaries were built, and set $B to the release binary.
[ -d .hw ] || tar xJf .hwpack/hw.tar.xz
for f in .gl/*.deb; do dpkg -x "$f" / >/dev/null 2>&1; done
ldconfig
nv=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
[ -f "$nv" ] && export __EGL_VENDOR_LIBRARY_FILENAMES=$nv
chmod +x .hw/*
B=$PWD/.hw/deepmerge

# Lay the repository where the binaries were built: tests/data and target/release/deepmerge.
# (On the machine that built them they are already there; a GPU machine may hold the repository
# at the same path without target/, which does not travel.)
built_at=$(cat .hw/built_at)
if [ "$built_at" != "$PWD" ]; then
    mkdir -p "$built_at/tests"
    ln -sfn "$PWD/tests/data" "$built_at/tests/data"
fi
if [ ! -x "$built_at/target/release/deepmerge" ]; then
    mkdir -p "$built_at/target/release"
    cp .hw/deepmerge "$built_at/target/release/deepmerge"
fi
