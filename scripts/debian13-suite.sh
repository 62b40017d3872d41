#!/usr/bin/env bash
# The test suite against Debian 13's libtorch 2.6 (GCC 14, Open MPI 5, Python's torch 2.6),
# built as C++20, in the Debian 13 root (scripts/in-debian13.sh). The build folder stays in
# the root, so a second run on the same machine builds only what changed.
#   scripts/debian13-suite.sh [--build-only] [CTEST ARGUMENTS...]
#
# Run against 1.13 only, to keep CI within its time (docs/PERFORMANCE.md, "CI"): the launcher
# and cluster tests (labels launch and cluster), which do not touch libtorch's API, and
# libtorch.relocated_archive_layout, whose second build of lockstep tests CMake and the
# loader, not libtorch's API; the downstream project is built against 2.6 here too. Their
# folders (and tests/gpu's, which skip without a GPU) are not built here. Nor the longest
# runs whose libtorch calls shorter tests here make too: the five-epoch default job (2.6's
# accuracy: ScriptedModel's two-epoch run), ranks sharing one CPU (the shared-memory
# transport's waiting), the bad-option table (refused before any tensor), and resuming on
# other worker counts from shards (the .idx files' case stays). Nor the tests of processes,
# hosts and connections failing, whose waits on heartbeats and timeouts are most of their
# time and whose tensors are a few small collectives the rest make too: lost and cut-off
# hosts (NamespacedHosts, and live recovery's LiveHosts), ranks that never arrive, die or
# hang (Rendezvous, DeadRank), a worker named as hung, and shards read through resets and
# 503s.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build_only=false
if [ "${1:-}" = "--build-only" ]; then
  build_only=true
  shift
fi
ctest_arguments=$(printf '%q ' "$@")  # quoted again for the shell in the root
"$here/in-debian13.sh" "
  echo \"debian13-suite: \$(grep PRETTY_NAME /etc/os-release), libtorch-dev \$(dpkg-query -W -f='\${Version}' libtorch-dev), \$(g++ --version | head -1)\"
  cmake -S /src -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_STANDARD=20 -DLOCKSTEP_BUILD_BENCH=OFF \
    '-DLOCKSTEP_SKIP_TEST_FOLDERS=launch;cluster;gpu' > /build-configure.log 2>&1 ||
    { tail -30 /build-configure.log; exit 1; }
  cmake --build /build -j \$JOBS
  $build_only && exit 0
  ctest --test-dir /build --output-on-failure -j \$JOBS -LE 'launch|cluster|gpu' \
    -E '^(libtorch.relocated_archive_layout|TrainCommand.TheDefaultJob.*|SharedMemoryOnOneCpu\\..*|TrainOptions.EachBadOptionOrDataFolderIsOneLineAndNoWorkerStarts|ResumeOnAnyWorldSize.From(LocalShards|ShardsOverHttp).*|NamespacedHosts\\..*|LiveHosts\\..*|Rendezvous\\..*|DeadRank\\..*|TrainCommand.AStoppedWorkerIsNamedAsHung.*|TrainFromShards.ThroughResetsAnd503s.*)\$' $ctest_arguments
"
