#!/usr/bin/env bash
# lockstep's GPU checks, in phases that each fit one command of a lent GPU machine
# (docs/GPU.md, "scripts/gpu-check.sh").
#
#   scripts/gpu-check.sh --fetch [DIR]
#       On a Debian 12 machine with apt (a developer's): downloads into DIR (default
#       .gpu-debs, ignored by git) the Debian packages lockstep builds with besides libtorch,
#       and Fashion-MNIST, for a GPU machine that has a Python torch but no package registry.
#   scripts/gpu-check.sh [--dry-run] OUT_DIR [PHASE...]
#       On the GPU machine, with .gpu-debs carried beside the tree (or with the packages
#       installed, where it has apt): the phases given, in order, by default all of them:
#         configure  unpacks the packages into build-gpu/debian-packages, configures
#                    build-gpu against the Python torch's libtorch
#         build      builds what the later phases run
#         test       runs the tests labelled gpu, one at a time; a test that passed is not
#                    run again by a later `test` (build-gpu/gpu-check-passed), so a phase cut
#                    off by a command's time limit picks up where it left off
#         install    installs lockstep, checks that the installed tool and library find every
#                    library, and builds and runs tests/downstream against the installed copy
#         bench      the GPU benchmarks
#       Each phase appends to OUT_DIR/summary.txt what passed, what failed and the figures;
#       logs go beside it. --dry-run configures against whatever libtorch is found and runs
#       no GPU work, saying why: how `make test` checks this script on a machine without a GPU.
#       LOCKSTEP_GPU_BUILD names another build folder; LOCKSTEP_GPU_DEBS another package folder.
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

dry_run=false
if [ "${1:-}" = "--dry-run" ]; then
  dry_run=true
  shift
fi
out=${1:?usage: scripts/gpu-check.sh --fetch [DIR] | scripts/gpu-check.sh [--dry-run] OUT_DIR [PHASE...]}
shift
phases=("$@")
[ ${#phases[@]} -gt 0 ] || phases=(configure build test install bench)
for phase in "${phases[@]}"; do
  case $phase in
    configure | build | test | install | bench) ;;
    *) echo "gpu-check: no phase '$phase'; the phases are configure, build, test, install and bench" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
summary=$out/summary.txt
build=${LOCKSTEP_GPU_BUILD:-$PWD/build-gpu}
debs=${LOCKSTEP_GPU_DEBS:-.gpu-debs}

note() { echo "$*" | tee -a "$summary"; }

# Why GPU work cannot run here, or "" where it can.
no_gpu_reason() {
  if $dry_run; then
    echo "a dry run"
  elif ! command -v nvidia-smi > /dev/null || ! nvidia-smi -L > /dev/null 2>&1; then
    echo "no GPU is visible (nvidia-smi)"
  fi
}

# The carried packages, unpacked once into a private prefix (again when the set changes),
# their CMake files pointed at it. Without them, this machine's own packages are used.
prefix=$build/debian-packages
if ls "$debs"/*.deb > /dev/null 2>&1; then
  multiarch=$prefix/usr/lib/x86_64-linux-gnu
  listing=$(ls -l "$debs"/*.deb | md5sum)
  if [ "$(cat "$prefix/.unpacked" 2>/dev/null)" != "$listing" ]; then
    rm -rf "$prefix" && mkdir -p "$prefix"
    for deb in "$debs"/*.deb; do dpkg -x "$deb" "$prefix"; done
    # The CMake files name their libraries and headers under /usr ("/usr" alone too: toml++'s
    # falls back to it when its folder is /usr's).
    grep -rlZ '"/usr[/"]' "$prefix/usr/share/cmake" "$multiarch/cmake" |
      xargs -0 -r sed -i -e "s|\"/usr/|\"$prefix/usr/|g" -e "s|\"/usr\"|\"$prefix/usr\"|g"
    # Links to absolute paths (zlib's libz.so -> /lib/...) would dangle, and CMake would take
    # the static library instead: point them into the prefix.
    find "$prefix" -type l -lname '/*' -exec sh -c 'ln -sfn "$1$(readlink "$2")" "$2"' _ "$prefix" {} \;
    echo "$listing" > "$prefix/.unpacked"
  fi
  export LD_LIBRARY_PATH="$multiarch:$prefix/lib/x86_64-linux-gnu:$prefix/usr/lib:$multiarch/openmpi/lib:${LD_LIBRARY_PATH:-}"
  export PATH="$prefix/usr/bin:$PATH"
  export OPAL_PREFIX="$prefix/usr"  # Open MPI finds its own files under the prefix it was unpacked to
  export LOCKSTEP_DATA_PATH_FASHION_MNIST="$prefix/usr/share/datasets/fashion-mnist"
  # Also read by the downstream project's configure (install phase).
  export CMAKE_PREFIX_PATH="$prefix/usr;$multiarch/cmake;$prefix/usr/share/cmake"
  mpi_home=(-DMPI_HOME="$multiarch/openmpi")
else
  echo "gpu-check: no packages in $debs (scripts/gpu-check.sh --fetch): using this machine's own"
  mpi_home=()
fi
torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null || true)
torch_lib=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>/dev/null || true)

# Notes that PHASE skips, and why, where no GPU work can run here; false where it can.
skipped_without_gpu() {
  local reason
  reason=$(no_gpu_reason)
  [ -n "$reason" ] || return 1
  note "$1: skipped, $reason"
}

phase_configure() {
  # A CUDA libtorch's CMake files look for nvcc: say so now rather than deep in configure.log.
  if [ -z "$(no_gpu_reason)" ] && ! command -v nvcc > /dev/null; then
    note "configure: failed: nvcc is not on PATH: install the CUDA toolkit matching torch.version.cuda and put its bin/ on PATH (export PATH=/usr/local/cuda/bin:\$PATH)"
    return 1
  fi
  {
    echo "== machine"; grep PRETTY_NAME /etc/os-release || true; ldd --version | sed -n 1p
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || true
    echo "== torch"
    python3 -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version() if torch.cuda.is_available() else "")' 2>&1 || true
    if [ -n "$torch_lib" ] && [ -f "$torch_lib/libtorch_cpu.so" ]; then
      # Debian's Gloo beside the torch wheel's: do both export gloo:: symbols into one process?
      echo "gloo symbols exported by libtorch_cpu.so: $(nm -D --defined-only "$torch_lib/libtorch_cpu.so" | grep -c ' _ZN4gloo' || true)"
      echo "std::filesystem symbols exported by libtorch.so: $(nm -D --defined-only "$torch_lib/libtorch.so" | grep -c ' _ZNSt10filesystem' || true)"
    fi
  } > "$out/environment.txt" 2>&1
  local prefixes="${torch_prefix:+$torch_prefix;}${CMAKE_PREFIX_PATH:-}"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    ${prefixes:+-DCMAKE_PREFIX_PATH="$prefixes"} "${mpi_home[@]}" > "$out/configure.log" 2>&1 ||
    { tail -30 "$out/configure.log"; note "configure: failed (configure.log)"; return 1; }
  grep -E "lockstep:" "$out/configure.log" | tee -a "$out/environment.txt" "$summary"
}

# Only what the later phases run: the whole tree is several times the work.
targets=(lockstep_cli gpu_tests gpu_worker gpu_train_bench gpu_allreduce_bench)
phase_build() {
  if $dry_run; then
    note "build: skipped, a dry run (targets: ${targets[*]})"
    return 0
  fi
  cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" > "$out/build.log" 2>&1 ||
    { grep -m 20 -E "error|undefined" "$out/build.log"; note "build: failed (build.log)"; return 1; }
  {
    echo "== libraries the built tool cannot find"
    ldd "$build/tools/lockstep" | grep "not found" || echo "none"
    echo "== the first libraries gpu_tests and liblockstep need (libstdc++ before libtorch, or none where it is linked statically)"
    readelf -d "$build/tests/gpu/gpu_tests" | grep NEEDED | sed -n 1,4p
    readelf -d "$build"/src/liblockstep.so | grep NEEDED | sed -n 1,4p
  } >> "$out/environment.txt"
  # The wheel's std::filesystem copies crash (src/CMakeLists.txt), and where lockstep uses
  # Debian's libgloo, the wheel's Gloo differs from it (cmake/gloo.cmake): no call of
  # lockstep's, of libgloo's or of a program linking them may bind to libtorch's copies.
  # LD_BIND_NOW binds every call at load.
  local callers="gpu_tests|lockstep|liblockstep" copies="_ZN[^ ]*St10filesystem"
  if readelf -d "$build"/src/liblockstep.so | grep -q "NEEDED.*libgloo"; then
    callers="$callers|libgloo" copies="($copies|_ZN4gloo)"
  fi
  local bindings=$out/torch-bindings.txt program
  rm -f "$bindings"
  for program in "$build/tests/gpu/gpu_tests --gtest_list_tests" "$build/tools/lockstep --version"; do
    LD_BIND_NOW=1 LD_DEBUG=bindings $program 2>&1 > /dev/null |
      grep -E "binding file [^ ]*/($callers)[^/ ]* .* to [^ ]*libtorch[^ ]* .*$copies" >> "$bindings" || true
  done
  if [ -s "$bindings" ]; then
    note "build: failed: $(wc -l < "$bindings") calls bind to libtorch's copies of std::filesystem or Gloo (torch-bindings.txt)"
    return 1
  fi
}

phase_test() {
  skipped_without_gpu test && return 0
  local state=$build/gpu-check-passed failed=() passed=0
  touch "$state"
  local names
  names=$(ctest --test-dir "$build" -N -L gpu | sed -n 's/^ *Test *#[0-9]*: //p')
  for name in $names; do
    if grep -qxF "$name" "$state"; then
      passed=$((passed + 1))
      continue
    fi
    if ctest --test-dir "$build" -R "^${name}\$" --timeout "${LOCKSTEP_GPU_TEST_TIMEOUT:-600}" --output-on-failure \
      >> "$out/gpu-tests.log" 2>&1; then
      echo "$name" >> "$state"
      passed=$((passed + 1))
    else
      failed+=("$name")
    fi
  done
  note "test: $passed passed, ${#failed[@]} failed${failed[*]:+: ${failed[*]}} (gpu-tests.log)"
  [ ${#failed[@]} -eq 0 ]
}

phase_install() {
  if $dry_run; then
    note "install: skipped, a dry run"
    return 0
  fi
  local installed=$build/installed
  cmake --install "$build" --prefix "$installed" > "$out/install.log" 2>&1 ||
    { note "install: failed (install.log)"; return 1; }
  # The Debian packages' folder is on LD_LIBRARY_PATH; libtorch's must come from RUNPATH.
  local missing
  missing=$(ldd "$installed/bin/lockstep" "$installed"/lib/liblockstep.so | grep "not found" || true)
  if [ -n "$missing" ]; then
    note "install: failed: the installed tool or library cannot find: $missing"
    return 1
  fi
  tests/downstream/run.sh "$build" >> "$out/install.log" 2>&1 ||
    { note "install: failed: tests/downstream against the installed copy (install.log)"; return 1; }
  note "install: passed (the installed tool finds libtorch, tests/downstream built and ran against it)"
}

phase_bench() {
  skipped_without_gpu bench && return 0
  local status=0 gpus
  gpus=$(nvidia-smi -L | wc -l)
  {
    timeout 300 "$build/bench/gpu_train" || status=1
    timeout 300 python3 bench/gpu_train.py || status=1
    if [ "$gpus" -ge 2 ]; then  # world = GPUs, one worker each
      timeout 300 "$build/tools/lockstep" run -n "$gpus" -- "$build/bench/gpu_train" || status=1
      timeout 300 python3 -m torch.distributed.run --nproc-per-node "$gpus" bench/gpu_train.py || status=1
    fi
    timeout 120 "$build/bench/gpu_allreduce" || status=1
    timeout 120 "$build/tools/lockstep" run -n 2 -- "$build/bench/gpu_allreduce" --transport staged || status=1
    if [ "$gpus" -ge 2 ]; then
      timeout 120 "$build/tools/lockstep" run -n 2 -- "$build/bench/gpu_allreduce" --transport nccl || status=1
    else
      echo "gpu_allreduce --transport nccl: skipped, NCCL needs a GPU per rank and this machine has one"
    fi
  } > "$out/gpu-bench.log" 2>&1
  grep -E "images/s|GB/s|skipped|ratio|/ plain|parameters in" "$out/gpu-bench.log" | sed 's/^/bench: /' | tee -a "$summary"
  # Like for like: lockstep's model and the Python one have the same parameters.
  local models
  models=$( (grep -o "[0-9]* parameters in [0-9]* tensors" "$out/gpu-bench.log" || true) | sort -u | wc -l)
  [ "$models" -le 1 ] || { note "bench: lockstep's ResNet-50 and PyTorch's differ in parameters (gpu-bench.log)"; status=1; }
  [ $status -eq 0 ] || { note "bench: a benchmark failed (gpu-bench.log)"; return 1; }
}

status=0
for phase in "${phases[@]}"; do
  began=$SECONDS
  if ! "phase_$phase"; then
    status=1
    note "$phase: failed after $((SECONDS - began)) s; later phases not run"
    break
  fi
  note "$phase: done in $((SECONDS - began)) s"
done
exit $status
