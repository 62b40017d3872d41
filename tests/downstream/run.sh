#!/usr/bin/env bash
# Installs lockstep from BUILD_DIR into a scratch prefix, then builds two projects against it
# with find_package and runs each on 2 processes with the installed tool: the one beside this
# script, and README.md's complete example, extracted from the page as a user copies it.
set -euo pipefail
build_dir=$1
here=$(cd "$(dirname "$0")" && pwd)
readme="$here/../../README.md"
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

# The fenced block after the line "<!-- readme-example: NAME -->".
example_file() {
  awk -v marker="<!-- readme-example: $1 -->" '
    $0 == marker { found = 1; next }
    found && /^```/ { if (inside) exit; inside = 1; next }
    inside { print }' "$readme"
}
mkdir "$scratch/example"
for name in CMakeLists.txt main.cpp; do
  example_file "$name" > "$scratch/example/$name"
  if [ ! -s "$scratch/example/$name" ]; then
    echo "README.md has no example $name (a line <!-- readme-example: $name --> before its block)" >&2
    exit 1
  fi
done
cmake -S "$scratch/example" -B "$scratch/example/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$scratch/prefix" > /dev/null
cmake --build "$scratch/example/build"
output=$("$scratch/prefix/bin/lockstep" run -n 2 -- "$scratch/example/build/app")
echo "$output"
# Two epochs of the whole training split, the second with a lower loss than the first.
losses=$(sed -n 's/^\[rank 0\] epoch [12]: loss \([0-9.]*\) on 2 workers$/\1/p' <<< "$output")
[ "$(wc -l <<< "$losses")" = 2 ] || { echo "README example: no two epochs' losses on 2 workers" >&2; exit 1; }
awk 'NR == 1 { first = $1 } NR == 2 { exit !($1 < first && $1 < 0.5) }' <<< "$losses" ||
  { echo "README example: the loss did not fall below 0.5: $losses" >&2; exit 1; }
