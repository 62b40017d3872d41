#!/usr/bin/env bash
# Installs lockstep from BUILD_DIR into a scratch prefix, builds the project beside this
# script against it with find_package, and runs it on 2 processes with the installed tool.
set -euo pipefail
build_dir=$1
here=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d /tmp/lockstep-downstream-XXXXXX)
trap 'rm -rf "$scratch"' EXIT

cmake --install "$build_dir" --prefix "$scratch/prefix" > /dev/null
cmake -S "$here/project" -B "$scratch/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$scratch/prefix" > /dev/null
cmake --build "$scratch/build"
output=$("$scratch/prefix/bin/lockstep" run -n 2 -- "$scratch/build/downstream_all_reduce")
echo "$output"
for r in 0 1; do
  grep -qF "[rank $r] rank $r of 2: all_reduce right" <<< "$output"
done
