#!/usr/bin/env bash
# scripts/gpu-check.sh --dry-run on a machine without a GPU: every phase runs or says why it
# skips, configure for real against this machine's libtorch, into a scratch build folder.
set -euo pipefail
source_dir=$1
scratch=$(mktemp -d /tmp/lockstep-gpu-check-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
LOCKSTEP_GPU_BUILD=$scratch/build LOCKSTEP_GPU_DEBS=$scratch/no-debs \
  "$source_dir/scripts/gpu-check.sh" --dry-run "$scratch/out"
cat "$scratch/out/summary.txt"
expected=(
  "configure: done in"
  "build: skipped, a dry run (targets: lockstep_cli gpu_tests gpu_worker gpu_train_bench gpu_allreduce_bench)"
  "test: skipped, a dry run"
  "install: skipped, a dry run"
  "bench: skipped, a dry run"
  "bench: done in"
)
for line in "${expected[@]}"; do
  grep -qF "$line" "$scratch/out/summary.txt" || { echo "summary.txt lacks: $line"; exit 1; }
done
grep -q "lockstep: C++" "$scratch/out/summary.txt" || { echo "summary.txt lacks the configure's lockstep: lines"; exit 1; }
# A phase that does not exist is refused, naming the phases.
if "$source_dir/scripts/gpu-check.sh" --dry-run "$scratch/out" compile 2> "$scratch/err"; then exit 1; fi
grep -qF "no phase 'compile'; the phases are configure, build, test, install and bench" "$scratch/err"
echo "gpu-check dry run ok"
