#!/usr/bin/env bash
# Times `make run` on a fresh copy of this tree, with the dependencies already installed:
# seconds from the start to the end of its build, and to its first logged training step
# (the first progress line, at step --log-every). Usage: bench/make_run.sh [JOBS]
set -euo pipefail
source_dir=$(cd "$(dirname "$0")/.." && pwd)
scratch=$(mktemp -d /tmp/lockstep-make-run-bench-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
git -C "$source_dir" ls-files -z --cached --others --exclude-standard | tar -C "$source_dir" --null -T - -cf - |
  tar -C "$scratch" -xf -
cd "$scratch"

start=$(date +%s.%N)
built=""
while IFS= read -r line; do
  now=$(date +%s.%N)
  if [ -z "$built" ] && [[ "$line" == *"Linking CXX executable tools/lockstep"* ]]; then built=$now; fi
  if [[ "$line" == epoch*step* ]]; then
    echo "first step line: $line"
    awk -v s="$start" -v b="$built" -v n="$now" \
      'BEGIN { printf "make run on a fresh tree: built in %.1f s, first logged step at %.1f s\n", b - s, n - s }'
    pkill -f "$scratch/build/tools/lockstep" || true
    exit 0
  fi
done < <(make run BUILD=build JOBS="${1:-2}" 2>&1)
echo "make run ended before a training step"
exit 1
