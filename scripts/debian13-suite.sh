#!/usr/bin/env bash
# The test suite against Debian 13's libtorch 2.6 (GCC 14, Open MPI 5, Python's torch 2.6),
# built as C++20, in the Debian 13 root (scripts/in-debian13.sh). The build folder stays in
# the root, so a second run on the same machine builds only what changed.
#   scripts/debian13-suite.sh [--cuda] [--build-only] [CTEST ARGUMENTS...]
#
# --cuda: lockstep's CUDA version (CUDA and NCCL on), built in the root with Debian 13's CUDA
# libtorch (scripts/debian13-root.sh --cuda) in /build-cuda, then scripts/gpu-check.sh's
# configure, build, test and install phases as a GPU machine runs them (its tests and the
# gpu-labelled ones skip, saying why: the machine has no GPU), then the same suite: CPU jobs
# of a CUDA build. Not part of CI: its packages are 2.5 GB more (`make test-cuda-build`).
#
# Run against 1.13 only, to keep CI within its time (docs/dev/CI.md): the launcher
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
# 503s; and, likewise, workers killed, stopped or lost mid-run whose peers restart or train on
# (a killed worker's restart, a kill while a checkpoint is written, live recovery's and the
# live loop's lost workers and too few left). Live recovery's runs without a fault, its
# healing of a killed worker's replacement and of ZeRO-1's state stay: their tensors are the
# healing's own.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cuda=false root_option="" build=/build libtorch=libtorch-dev bench=OFF skipped_labels="launch|cluster|gpu"
if [ "${1:-}" = "--cuda" ]; then
  cuda=true root_option=--cuda build=/build-cuda libtorch=libtorch-cuda-dev bench=ON skipped_labels="launch|cluster"
  shift
fi
build_only=false
if [ "${1:-}" = "--build-only" ]; then
  build_only=true
  shift
fi
ctest_arguments=$(printf '%q ' "$@")  # quoted again for the shell in the root
"$here/in-debian13.sh" $root_option "
  echo \"debian13-suite: \$(grep PRETTY_NAME /etc/os-release), $libtorch \$(dpkg-query -W -f='\${Version}' $libtorch), \$(g++ --version | head -1)\"
  cmake -S /src -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_STANDARD=20 -DLOCKSTEP_BUILD_BENCH=$bench \
    '-DLOCKSTEP_SKIP_TEST_FOLDERS=${skipped_labels//|/;}' > $build-configure.log 2>&1 ||
    { tail -30 $build-configure.log; exit 1; }
  cmake --build $build -j \$JOBS
  $build_only && exit 0
  if $cuda; then
    LOCKSTEP_GPU_BUILD=$build /src/scripts/gpu-check.sh $build/gpu-check configure build test install
  fi
  ctest --test-dir $build --output-on-failure -j \$JOBS -LE '$skipped_labels' \
    -E '^(libtorch.relocated_archive_layout|TrainCommand.TheDefaultJob.*|SharedMemoryOnOneCpu\\..*|TrainOptions.EachBadOptionOrDataFolderIsOneLineAndNoWorkerStarts|ResumeOnAnyWorldSize.From(LocalShards|ShardsOverHttp).*|NamespacedHosts\\..*|LiveHosts\\..*|Rendezvous\\..*|DeadRank\\..*|TrainCommand.AStoppedWorkerIsNamedAsHung.*|TrainFromShards.ThroughResetsAnd503s.*|Checkpoint.SigkillWhileWriting.*|TrainCommand.AWorkerKilledAtARandomStep.*|LiveRecovery.(AWorkerKilledMidStep|AStoppedWorker|AWorkerLostWhileTheOthersHeal|BelowTheFewestWorkers).*|LiveTraining.(AWorkerLostWhileTheOthersHeal|BelowTheFewestWorkers).*)\$' $ctest_arguments
"
