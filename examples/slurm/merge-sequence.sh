#!/usr/bin/env bash
# Slurm job array: merge two deep EXR sequences, one chunk of CHUNK frames per array task.
#
#   export A=/shots/a.####.exr B=/shots/b.####.exr OUT=/shots/comp.####.exr
#   FIRST=1 LAST=100 CHUNK=10 sbatch --array=0-9 --export=ALL examples/slurm/merge-sequence.sh
#
# (--array=0-N with N = ceil((LAST-FIRST+1)/CHUNK) - 1.) A task whose frames fail exits 1 after
# writing its other frames, so Slurm marks it FAILED and `sbatch --array=<failed ids>` reruns just
# those chunks; outputs are renamed into place whole, so a killed task leaves no partial frame.
#SBATCH --job-name=deepmerge
#SBATCH --cpus-per-task=4
#SBATCH --mem=16G
#SBATCH --output=deepmerge-%A_%a.log
set -euo pipefail
: "${A:?input sequence A}" "${B:?input sequence B}" "${OUT:?output sequence}"
: "${FIRST:?first frame}" "${LAST:?last frame}" "${CHUNK:=10}"
task=${SLURM_ARRAY_TASK_ID:?run as a Slurm array task (sbatch --array)}
start=$((FIRST + task * CHUNK))
end=$((start + CHUNK - 1))
if ((end > LAST)); then end=$LAST; fi
if ((start > LAST)); then
    echo "array task $task has no frames (last frame $LAST)" >&2
    exit 0
fi
# Frames of the chunk run side by side on the task's cores.
exec "${DEEPMERGE:-deepmerge}" "$A" "$B" -o "$OUT" --frames "$start-$end" \
    -j "${SLURM_CPUS_PER_TASK:-1}" --progress plain
