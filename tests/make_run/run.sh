#!/usr/bin/env bash
# `make run` on a fresh clone builds the library and the CLI, and no test, benchmark or
# example. The clone is the source tree's files that git keeps or would keep (not what it
# ignores, such as build folders); the commands are the ones make would run (make -n),
# with the build itself asked for its plan (ninja -n).
set -euo pipefail
source_dir=$1
scratch=$(mktemp -d /tmp/lockstep-make-run-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
git -C "$source_dir" ls-files -z --cached --others --exclude-standard | tar -C "$source_dir" --null -T - -cf - | tar -C "$scratch" -xf -
cd "$scratch"

commands=$(make -n run BUILD=build)
echo "$commands"
configure=$(grep -E '^cmake -S ' <<< "$commands")
build=$(grep -E '^cmake --build ' <<< "$commands")
[ "$(grep -c '^cmake --build ' <<< "$commands")" -eq 1 ] || { echo "make run builds more than once"; exit 1; }
$configure > /dev/null
plan=$($build -- -n | grep -E '^\[[0-9]+/[0-9]+\]')
echo "$plan" | tail -3

# Every step makes an object or the link of the library, the launcher's archive or the CLI.
outside=$(grep -vE 'CMakeFiles/(lockstep_core|lockstep|lockstep_launch|lockstep_cli)\.dir/|Linking CXX (shared library src/liblockstep\.so[.0-9]*|static library src/liblockstep_launch\.a|executable tools/lockstep)$|Creating library symlink src/liblockstep\.so|default_registry' <<< "$plan" || true)
if [ -n "$outside" ]; then
  echo "make run would also build:"; echo "$outside"; exit 1
fi
for made in 'Linking CXX shared library src/liblockstep.so' 'Linking CXX executable tools/lockstep'; do
  grep -qF "$made" <<< "$plan" || { echo "make run would not build: $made"; exit 1; }
done
echo "make run builds $(wc -l <<< "$plan") steps: the library and the CLI only"
