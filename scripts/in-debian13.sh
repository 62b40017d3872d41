#!/usr/bin/env bash
# Runs a shell command in the Debian 13 root that scripts/debian13-root.sh makes or reuses,
# with what lockstep's builds and tests need of a machine: processes, devices, fresh shared
# memory, the host's network, and this source tree at /src. Everything mounted is unmounted
# when the command ends, whatever happens. --cuda: the root with Debian 13's CUDA libtorch.
#   scripts/in-debian13.sh [--cuda] 'cmake -S /src -B /build ...'
set -euo pipefail
[ "$(id -u)" -eq 0 ] || exec sudo "$0" "$@"  # chroot and mount need root
source_dir=$(cd "$(dirname "$0")/.." && pwd)
root_options=()
if [ "${1:-}" = "--cuda" ]; then
  root_options=(--cuda)
  shift
fi
root=$("$source_dir/scripts/debian13-root.sh" "${root_options[@]}")

mounted=()
unmount_all() {
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2> /dev/null || true; done
}
trap unmount_all EXIT
mount_into() {  # mount_into PATH-IN-ROOT MOUNT-ARGUMENTS...
  local target=${root}${1%/}
  shift
  mkdir -p "$target"
  mount "$@" "$target"
  mounted+=("$target")
}
# The root a mount point of its own, as on a machine: tests that make mount and network
# namespaces (unshare, ip netns) need to change its propagation.
mount_into / --bind "$root"
mount_into /proc -t proc proc
mount_into /sys --rbind /sys
mount_into /dev --rbind /dev
mount_into /dev/shm -t tmpfs -o size=4g tmpfs
mount_into /run -t tmpfs tmpfs
mount_into /src --bind "$source_dir"
cp /etc/hosts "$root/etc/hosts"

chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/root LANG=C.UTF-8 JOBS="${JOBS:-2}" /bin/bash -euo pipefail -c "$*"
