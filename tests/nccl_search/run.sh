#!/usr/bin/env bash
# cmake/nccl.cmake links the NCCL beside torch (the torch wheel's libnccl.so.2, which
# libtorch loads) even when another NCCL's libnccl.so is on CMake's paths, and falls back
# to that other one only where torch has none; either way the header is the one beside the
# library, never another NCCL's on the include paths. Each case configures ./project over fake
# trees, made in a scratch folder under DIR (the test's build folder) and removed after.
#
#   tests/nccl_search/run.sh DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$1"
scratch=$(mktemp -d "$(cd "$1" && pwd)/nccl-search-XXXXXX")
trap 'rm -rf "$scratch"' EXIT
# Only what each case passes may point CMake at an NCCL.
unset NCCL_ROOT CMAKE_PREFIX_PATH CMAKE_LIBRARY_PATH CMAKE_INCLUDE_PATH

# tree DIR LIBRARY: an NCCL install as DIR/lib/LIBRARY and DIR/include/nccl.h (empty files).
tree() { mkdir -p "$1/lib" "$1/include"; touch "$1/lib/$2" "$1/include/nccl.h"; }
site=$scratch/site-packages          # the torch wheel's site-packages
system=$scratch/system               # another NCCL, as a distribution installs it
root=$scratch/root                   # one that NCCL_ROOT names
tree "$site/nvidia/nccl" libnccl.so.2  # wheels ship only the soname
tree "$system" libnccl.so
tree "$root" libnccl.so.2
multiarch=$scratch/multiarch         # as Debian installs it: lib/x86_64-linux-gnu/libnccl.so.2
mkdir -p "$multiarch/lib/x86_64-linux-gnu" "$multiarch/include"
touch "$multiarch/lib/x86_64-linux-gnu/libnccl.so.2" "$multiarch/include/nccl.h"
headerless=$scratch/headerless       # a library without its header
mkdir -p "$headerless/lib" && touch "$headerless/lib/libnccl.so.2"
bare=$scratch/bare-site-packages     # a torch without the nvidia-nccl wheel
mkdir -p "$site/torch" "$bare/torch"

failed=0
# expect NAME TREE [ENV=VALUE...] -- [CMAKE ARGS...]: configured so, ./project finds TREE's
# library (its only file under lib/) and TREE's header.
expect() {
  local name=$1 tree=$2; shift 2
  local env=(); while [ "$1" != -- ]; do env+=("$1"); shift; done; shift
  local lib; lib=$(find "$tree/lib" -type f)
  local want="-- lockstep: NCCL ON ($lib, $tree/include)"
  local output
  if ! output=$(env "${env[@]}" cmake -S "$here/project" -B "$scratch/build-$name" "$@" 2>&1); then
    echo "FAIL $name: configure failed"; echo "$output"; failed=1; return
  fi
  if grep -qxF -- "$want" <<< "$output"; then
    echo "ok   $name"
  else
    echo "FAIL $name: want '$want', got '$(grep 'lockstep: NCCL' <<< "$output")'"; failed=1
  fi
}

# The other NCCL on the system library and include paths, where a distribution puts it.
expect wheel_over_system_paths "$site/nvidia/nccl" -- -DTORCH_INSTALL_PREFIX="$site/torch" \
  -DCMAKE_SYSTEM_LIBRARY_PATH="$system/lib" -DCMAKE_SYSTEM_INCLUDE_PATH="$system/include"
# On CMAKE_PREFIX_PATH, which CMake searches before any HINTS: the harder case.
expect wheel_over_prefix_path "$site/nvidia/nccl" -- -DTORCH_INSTALL_PREFIX="$site/torch" \
  -DCMAKE_PREFIX_PATH="$system"
# NCCL_ROOT names the NCCL to use, ahead of the wheel.
expect nccl_root_over_wheel "$root" NCCL_ROOT="$root" -- \
  -DTORCH_INSTALL_PREFIX="$site/torch" -DCMAKE_PREFIX_PATH="$system"
# No NCCL beside torch: the system's, by either way in.
expect system_without_wheel_paths "$system" -- -DTORCH_INSTALL_PREFIX="$bare/torch" \
  -DCMAKE_SYSTEM_LIBRARY_PATH="$system/lib" -DCMAKE_SYSTEM_INCLUDE_PATH="$system/include"
expect system_without_wheel_prefix "$system" -- -DTORCH_INSTALL_PREFIX="$bare/torch" \
  -DCMAKE_PREFIX_PATH="$system"
# Another NCCL's header on a path searched first (as /usr/include is, where a distribution's
# NCCL is installed beside the one found) is not taken.
expect system_header_beside_its_library "$system" -- -DTORCH_INSTALL_PREFIX="$bare/torch" \
  -DCMAKE_SYSTEM_LIBRARY_PATH="$system/lib" -DCMAKE_INCLUDE_PATH="$root/include"
expect system_multiarch "$multiarch" -- -DTORCH_INSTALL_PREFIX="$bare/torch" \
  -DCMAKE_SYSTEM_LIBRARY_PATH="$multiarch/lib/x86_64-linux-gnu" -DCMAKE_INCLUDE_PATH="$root/include"
# A library with no header beside it: NCCL off, saying so, rather than another's header.
output=$(cmake -S "$here/project" -B "$scratch/build-headerless" -DTORCH_INSTALL_PREFIX="$bare/torch" \
  -DCMAKE_SYSTEM_LIBRARY_PATH="$headerless/lib" -DCMAKE_INCLUDE_PATH="$root/include" 2>&1)
if grep -qxF -- "-- lockstep: $headerless/lib/libnccl.so.2 has no nccl.h in its tree; NCCL_ROOT names an NCCL with both lib/ and include/" <<< "$output" &&
  grep -qxF -- "-- lockstep: NCCL OFF ($headerless/lib/libnccl.so.2, NCCL_INCLUDE_DIR-NOTFOUND)" <<< "$output"; then
  echo "ok   headerless_library"
else
  echo "FAIL headerless_library: got '$(grep 'lockstep:' <<< "$output")'"; failed=1
fi
exit $failed
