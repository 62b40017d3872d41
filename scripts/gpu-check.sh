#!/usr/bin/env bash
# lockstep's GPU checks in one command (docs/GPU.md).
#
#   scripts/gpu-check.sh --fetch [DIR]
#       On a Debian 12 machine with apt (a developer's): downloads into DIR (default
#       .gpu-debs, ignored by git) the Debian packages lockstep builds with besides
#       libtorch, for a GPU machine that has a Python torch but no package registry.
#   scripts/gpu-check.sh OUT_DIR [DIR]
#       On the GPU machine: unpacks DIR's packages into a private prefix (dpkg -x), builds
#       lockstep against the Python torch's libtorch, runs every test labelled gpu and the
#       GPU benchmarks, and writes what it found and the logs to OUT_DIR (environment.txt,
#       configure.log, build.log, gpu-tests.log, gpu-bench.log).
set -euo pipefail
cd "$(dirname "$0")/.."

# What CMake finds besides torch (libcurl's among them, for shards over HTTP), the shared
# libraries those need at run time (Debian 12's, whose glibc 2.36 is older than a current GPU
# image's), and Fashion-MNIST for the GPU training test.
packages=(
  libgloo-dev libgloo0 libhiredis-dev libhiredis0.14 libibverbs-dev libibverbs1 libnl-3-200 libnl-route-3-200
  libopenmpi-dev libopenmpi3 openmpi-bin openmpi-common libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7
  libpmix2 libfabric1 libucx0 libpsm2-2 librdmacm1
  libtomlplusplus-dev libtomlplusplus3 libcli11-dev nlohmann-json3-dev libturbojpeg0-dev libturbojpeg0
  libjpeg62-turbo-dev libjpeg62-turbo
  zlib1g-dev zlib1g libgtest-dev
  libcurl4-openssl-dev libcurl4 libnghttp2-14 librtmp1 libssh2-1 libpsl5 libbrotli1 libldap-2.5-0
  libunistring2 libsasl2-2 libsasl2-modules-db libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libkeyutils1
  dataset-fashion-mnist
)

if [ "${1:-}" = "--fetch" ]; then
  dir=${2:-.gpu-debs}
  mkdir -p "$dir"
  (cd "$dir" && apt-get download "${packages[@]}")
  echo "gpu-check: $(ls "$dir"/*.deb | wc -l) packages in $dir; carry $dir to the GPU machine"
  exit 0
fi

out=${1:?usage: scripts/gpu-check.sh --fetch [DIR] | scripts/gpu-check.sh OUT_DIR [DIR]}
# A CUDA libtorch's CMake files look for nvcc (the CUDA toolkit); say so now rather than
# deep in configure.log.
command -v nvcc > /dev/null || {
  echo "gpu-check: nvcc is not on PATH: install the CUDA toolkit matching torch.version.cuda and put its bin/ on PATH (e.g. export PATH=/usr/local/cuda/bin:\$PATH)" >&2
  exit 1
}
dir=${2:-.gpu-debs}
mkdir -p "$out"
# Unpacked afresh each run, at a fixed place: CMake's cache keeps the paths it found.
prefix=$PWD/build-gpu/debian-packages
rm -rf "$prefix" && mkdir -p "$prefix"
for deb in "$dir"/*.deb; do dpkg -x "$deb" "$prefix"; done
# Links to absolute paths (zlib's libz.so -> /lib/...) would dangle, and CMake would take the
# static library instead: point them into the prefix.
find "$prefix" -type l -lname '/*' -exec sh -c 'ln -sfn "$1$(readlink "$2")" "$2"' _ "$prefix" {} \;
multiarch=$prefix/usr/lib/x86_64-linux-gnu
# The packages' CMake files name their libraries and headers under /usr; here they are
# under the prefix ("/usr" alone too: toml++'s falls back to it when its folder is /usr's).
grep -rlZ '"/usr[/"]' "$prefix/usr/share/cmake" "$multiarch/cmake" |
  xargs -0 -r sed -i -e "s|\"/usr/|\"$prefix/usr/|g" -e "s|\"/usr\"|\"$prefix/usr\"|g"
export LD_LIBRARY_PATH="$multiarch:$prefix/lib/x86_64-linux-gnu:$prefix/usr/lib:$multiarch/openmpi/lib:${LD_LIBRARY_PATH:-}"
export PATH="$prefix/usr/bin:$PATH"
export OPAL_PREFIX="$prefix/usr"  # Open MPI finds its own files under the prefix it was unpacked to
# The GPU training test and benchmark read Fashion-MNIST from the unpacked package.
export LOCKSTEP_DATA_PATH_FASHION_MNIST="$prefix/usr/share/datasets/fashion-mnist"
torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
torch_lib=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')

{
  echo "== machine"; grep PRETTY_NAME /etc/os-release || true; ldd --version | sed -n 1p
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
  echo "== torch"; python3 -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version())'
  # Debian's Gloo beside the torch wheel's: do both export gloo:: symbols into one process?
  echo "gloo symbols exported by libtorch_cpu.so: $(nm -D --defined-only "$torch_lib/libtorch_cpu.so" | grep -c ' _ZN4gloo' || true)"
  echo "gloo symbols exported by Debian's libgloo: $(nm -D --defined-only "$prefix/usr/lib/libgloo.so" | grep -c ' _ZN4gloo' || true)"
  echo "gloo headers in the torch wheel: $(ls "$(dirname "$torch_lib")/include/gloo" 2>/dev/null | wc -l) files"
} > "$out/environment.txt" 2>&1

cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$torch_prefix;$prefix/usr;$multiarch/cmake;$prefix/usr/share/cmake" \
  -DMPI_HOME="$multiarch/openmpi" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
grep -E "lockstep:|Found" "$out/configure.log" >> "$out/environment.txt" || true
# Only what the GPU tests and benchmarks run: the whole tree is several times the work.
cmake --build build-gpu -j "$(nproc)" --target lockstep_cli gpu_tests gpu_worker gpu_train_bench gpu_allreduce_bench \
  > "$out/build.log" 2>&1 || { grep -m 20 -E "error|undefined" "$out/build.log"; exit 1; }
echo "== libraries not found" >> "$out/environment.txt"
ldd build-gpu/tools/lockstep | grep "not found" >> "$out/environment.txt" || echo "none" >> "$out/environment.txt"
echo "== the NCCL lockstep links, and libtorch_cuda's" >> "$out/environment.txt"
ldd build-gpu/src/liblockstep.so | grep -i nccl >> "$out/environment.txt" || echo "none" >> "$out/environment.txt"
ldd "$torch_lib/libtorch_cuda.so" | grep -i nccl >> "$out/environment.txt" || echo "none (static?)" >> "$out/environment.txt"

status=0
ctest --test-dir build-gpu -L gpu --timeout 120 --output-on-failure > "$out/gpu-tests.log" 2>&1 || status=$?
tail -15 "$out/gpu-tests.log"
{
  timeout 120 build-gpu/bench/gpu_train
  timeout 120 python3 bench/gpu_train.py
  timeout 60 build-gpu/bench/gpu_allreduce
  timeout 60 build-gpu/tools/lockstep run -n 2 -- build-gpu/bench/gpu_allreduce --transport staged
  if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
    timeout 60 build-gpu/tools/lockstep run -n 2 -- build-gpu/bench/gpu_allreduce --transport nccl
  else
    echo "gpu_allreduce --transport nccl: skipped, NCCL needs a GPU per rank and this machine has one"
  fi
} > "$out/gpu-bench.log" 2>&1 || status=$?
cat "$out/gpu-bench.log"
exit $status
