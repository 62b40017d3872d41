#!/usr/bin/env bash
# Configuring against a Torch whose flags say the other C++ ABI (an old wheel's
# -D_GLIBCXX_USE_CXX11_ABI=0) stops at once, with one line that names both ABIs and what to
# do, instead of a link that fails on undefined references. The Torch is the real one, its
# CMake config wrapped to say the old ABI.
set -euo pipefail
source_dir=$1
torch_dir=$2
scratch=$(mktemp -d /tmp/lockstep-abi-XXXXXX)
trap 'rm -rf "$scratch"' EXIT

mkdir "$scratch/torch"
cat > "$scratch/torch/TorchConfig.cmake" <<CONFIG
include("$torch_dir/TorchConfig.cmake")
set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=0")
set_property(TARGET torch PROPERTY INTERFACE_COMPILE_OPTIONS "\${TORCH_CXX_FLAGS}")
CONFIG

if cmake -S "$source_dir" -B "$scratch/build" -G Ninja -DTorch_DIR="$scratch/torch" \
     -DLOCKSTEP_BUILD_TESTS=OFF -DLOCKSTEP_BUILD_BENCH=OFF -DLOCKSTEP_BUILD_EXAMPLES=OFF > "$scratch/out" 2>&1; then
  cat "$scratch/out"
  echo "configure went on against a Torch of the other ABI"
  exit 1
fi
cat "$scratch/out"
expected="lockstep: Torch at $scratch/torch is built with _GLIBCXX_USE_CXX11_ABI=0 (its TORCH_CXX_FLAGS) but this system's libraries (Gloo, GTest, toml++, Open MPI) use _GLIBCXX_USE_CXX11_ABI=1: use a libtorch built with _GLIBCXX_USE_CXX11_ABI=1"
grep -qF "$expected" "$scratch/out" || { echo "no line: $expected"; exit 1; }
echo "configure stopped with: $(grep -F "$expected" "$scratch/out")"
