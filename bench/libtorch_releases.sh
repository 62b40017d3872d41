#!/usr/bin/env bash
# `ddp_cnn against-pytorch` (lockstep's DDP against PyTorch's at 2 workers, each release's
# own python3-torch) on Debian 12's libtorch 1.13, this machine's build, and then on Debian
# 13's 2.6 in the Debian 13 root (scripts/in-debian13.sh), one after the other on one
# machine. As root or with sudo, after `make build`.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --build build --target ddp_cnn > /dev/null
echo "== libtorch $(dpkg-query -W -f='${Version}' libtorch-dev) (this machine), python3-torch $(dpkg-query -W -f='${Version}' python3-torch)"
build/bench/ddp_cnn against-pytorch
scripts/in-debian13.sh "
  cmake -S /src -B /build -DLOCKSTEP_BUILD_BENCH=ON > /dev/null && cmake --build /build -j \$JOBS --target ddp_cnn > /dev/null
  echo \"== libtorch \$(dpkg-query -W -f='\${Version}' libtorch-dev) (Debian 13 root), python3-torch \$(dpkg-query -W -f='\${Version}' python3-torch)\"
  /build/bench/ddp_cnn against-pytorch
"
