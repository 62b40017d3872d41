#!/usr/bin/env bash
# The test suite against Debian 13's libtorch 2.6 (GCC 14, Open MPI 5, Python's torch 2.6),
# built as C++20, in the Debian 13 root that scripts/debian13-root.sh makes or reuses. The
# build folder stays in the root, so a second run on the same machine builds only what
# changed. Extra arguments go to ctest (e.g. -R DDP).
#
# The launcher and cluster tests (labels launch and cluster) do not touch libtorch's API and
# run on the host's release only, which keeps CI within its time (docs/BUILDING.md).
set -euo pipefail
[ "$(id -u)" -eq 0 ] || exec sudo "$0" "$@"  # chroot and mount need root
source_dir=$(cd "$(dirname "$0")/.." && pwd)
root=$("$source_dir/scripts/debian13-root.sh")

# What the tests need of a machine, from the host: processes, devices, shared memory, and the
# source tree at /src.
mounted=()
unmount_all() {
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2> /dev/null || true; done
}
trap unmount_all EXIT
mount_into() {  # mount_into TARGET MOUNT-ARGUMENTS...
  local target=$root$1
  shift
  mkdir -p "$target"
  mount "$@" "$target"
  mounted+=("$target")
}
mount_into /proc -t proc proc
mount_into /sys --rbind /sys
mount_into /dev --rbind /dev
mount_into /dev/shm -t tmpfs -o size=4g tmpfs
mount_into /run -t tmpfs tmpfs
mount_into /src --bind "$source_dir"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2> /dev/null || true
cp /etc/hosts "$root/etc/hosts"

jobs=${JOBS:-2}
chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/root LANG=C.UTF-8 /bin/bash -euo pipefail -c "
  echo \"debian13-suite: \$(grep PRETTY_NAME /etc/os-release), libtorch \$(dpkg-query -W -f='\${Version}' libtorch-dev), \$(g++ --version | head -1)\"
  cmake -S /src -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_STANDARD=20 -DLOCKSTEP_BUILD_BENCH=OFF > /build-configure.log 2>&1 ||
    { tail -30 /build-configure.log; exit 1; }
  cmake --build /build -j $jobs
  ctest --test-dir /build --output-on-failure -j $jobs -LE 'launch|cluster|gpu' $*
"
