#!/usr/bin/env bash
# Prints the path of a Debian 13 (trixie) root holding everything lockstep builds and tests
# with (libtorch 2.6 among them), making it first when this machine has none: debootstrap
# from Debian's archive, then scripts/install-deps.sh --test inside it. The root is kept in
# a cache folder keyed by this script and the package list, so later runs on the same
# machine reuse it and a change to either makes a new one; a fresh machine makes it anew.
#
#   scripts/debian13-root.sh [--cuda]
#
# With --cuda, a root of its own (in the cache's cuda/ folder) that holds Debian 13's CUDA
# libtorch in place of the CPU one: libtorch-cuda-dev 2.6 with CUDA 12.4 and NCCL 2.22, from
# contrib and non-free. Debian's cuDNN package (nvidia-cudnn) downloads cuDNN from NVIDIA's
# site as it installs, which is not Debian's archive; cuDNN runs only on a GPU, so a package
# of that name stands in for it, with a libcudnn.so.9 whose every function libtorch calls
# returns an error. scripts/debian13-suite.sh --cuda builds and tests lockstep's CUDA
# version there.
#
#   LOCKSTEP_CACHE   the cache folder (default ~/.cache/lockstep)
#   DEBIAN_MIRROR    the archive to debootstrap from (default http://deb.debian.org/debian)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${LOCKSTEP_CACHE:-$HOME/.cache/lockstep}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
cuda=false
if [ "${1:-}" = "--cuda" ]; then
  cuda=true
  cache=$cache/cuda
fi
key=$(cat "$0" "$here/install-deps.sh" | sha256sum | cut -c1-12)
root=$cache/debian13-$key

if [ -f "$root/.complete" ]; then
  echo "$root"
  exit 0
fi
[ "$(id -u)" -eq 0 ] || { echo "debian13-root: debootstrap and chroot need root; run as root or with sudo" >&2; exit 1; }
command -v debootstrap > /dev/null || {
  echo "debian13-root: debootstrap is missing: apt-get install debootstrap" >&2; exit 1; }

# Older roots of this cache are stale: their key no longer matches.
mkdir -p "$cache"
rm -rf "$cache"/debian13-*.partial
# A root with something still mounted in it (a suite killed before it could unmount) is left
# alone: removing it would reach through its bind mounts.
for old in "$cache"/debian13-*; do
  [ -d "$old" ] && [ "$old" != "$root" ] || continue
  if grep -qF " $old/" /proc/mounts; then
    echo "debian13-root: $old still has mounts; not removed" >&2
  else
    rm -rf --one-file-system "$old"
  fi
done

partial=$root.partial
echo "debian13-root: making $root (debootstrap trixie from $mirror)" >&2
debootstrap --variant=minbase trixie "$partial" "$mirror" > "$cache/debootstrap.log" 2>&1 || {
  tail -20 "$cache/debootstrap.log" >&2; exit 1; }
mkdir -p "$partial/tmp/lockstep-deps"
cp "$here/install-deps.sh" "$partial/tmp/lockstep-deps/"
# Packages install into the root without starting their services there (nginx, munge).
printf '#!/bin/sh\nexit 101\n' > "$partial/usr/sbin/policy-rc.d"
chmod +x "$partial/usr/sbin/policy-rc.d"
mount -t proc proc "$partial/proc"
trap 'umount "$partial/proc"' EXIT
chroot "$partial" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
  /tmp/lockstep-deps/install-deps.sh --test >&2
if $cuda; then
  echo "deb $mirror trixie main contrib non-free" > "$partial/etc/apt/sources.list"
  chroot "$partial" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root /bin/bash -euo pipefail -c '
    mkdir -p /tmp/cudnn/DEBIAN
    printf "%s\n" "Package: nvidia-cudnn" "Version: 9.0.0.312~cuda12" "Architecture: amd64" \
      "Maintainer: lockstep <lockstep@localhost>" \
      "Description: stands in for the cuDNN downloader in a root without a GPU" > /tmp/cudnn/DEBIAN/control
    dpkg-deb --build /tmp/cudnn /tmp/nvidia-cudnn.deb > /dev/null && dpkg -i /tmp/nvidia-cudnn.deb > /dev/null
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      libtorch-cuda-dev python3-torch-cuda libgloo-cuda-dev libnccl-dev nvidia-cuda-toolkit
    cd /usr/lib/x86_64-linux-gnu
    nm -D --undefined-only libtorch*.so libc10*.so /usr/lib/python3/dist-packages/torch/_C*.so |
      sed -n "s/^ *U \(cudnn[A-Za-z0-9_]*\)@libcudnn.so.9$/int \1(void) { return 1; }/p" | sort -u > /tmp/cudnn.c
    echo "libcudnn.so.9 { global: *; };" > /tmp/cudnn.map
    gcc -shared -fPIC -Wl,-soname,libcudnn.so.9 -Wl,--version-script=/tmp/cudnn.map -o /usr/local/lib/libcudnn.so.9 /tmp/cudnn.c
    ldconfig
    rm -rf /tmp/cudnn /tmp/cudnn.c /tmp/cudnn.map /tmp/nvidia-cudnn.deb' >&2
fi
rm -rf "$partial/tmp/lockstep-deps" "$partial"/var/cache/apt/archives/*.deb
umount "$partial/proc"
trap - EXIT
mv "$partial" "$root"
touch "$root/.complete"
echo "$root"
