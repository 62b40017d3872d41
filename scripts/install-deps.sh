#!/usr/bin/env bash
# Installs the Debian packages lockstep builds and tests with; skips what is present.
# The names are the same in Debian 12 (libtorch 1.13) and Debian 13 (libtorch 2.6); each is
# named even where another package pulls it in on one release (libjpeg62-turbo-dev comes with
# Debian 12's libtorch-dev, not with Debian 13's).
# With --test, also what the tests use besides (Python's torch, to make TorchScript models
# and read exported weights; a real Slurm, which tests/cluster starts in network namespaces;
# nginx and openssl, which the data tests start to serve shards over HTTP and HTTPS; iproute2,
# whose `ip netns` makes the tests' hosts; git, which lists the files of a clean checkout;
# clang-format, which checks the layout of the C++ files; Ceph's mon, OSD and RADOS Gateway,
# a real S3 that the S3 tests start on loopback, and curl, whose own SigV4 makes their
# buckets and sessions without the code under test;
# debootstrap, which makes the Debian 13 root of the libtorch 2.6 suite);
# with --bench, what the benchmarks compare against (PyTorch's
# Python DDP).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libtorch-dev libgloo-dev libopenmpi-dev openmpi-bin
  libgtest-dev googletest libcli11-dev
  libtomlplusplus-dev libturbojpeg0-dev libjpeg62-turbo-dev zlib1g-dev dataset-fashion-mnist nlohmann-json3-dev
  libcurl4-openssl-dev
)
case "${1:-}" in
  --test) packages+=(python3-torch slurm-wlm munge nginx openssl iproute2 git debootstrap clang-format
    ceph-mon ceph-osd radosgw ceph-common curl) ;;
  --bench) packages+=(python3-torch) ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing: ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
