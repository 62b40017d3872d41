#!/usr/bin/env bash
# A libtorch in a folder of its own, laid out as pytorch.org's archive (lib/, include/,
# share/cmake/): Debian's libtorch copied there and nothing else moved. lockstep built and
# installed against the copy runs `lockstep train` and a program built with
# find_package(lockstep), with no LD_LIBRARY_PATH, and both load the copy's libraries, not
# Debian's (ldd, and the RUNPATHs that make it so).
#   relocated_libtorch.sh SOURCE_DIR TORCH_DIR TORCH_LIBRARY
set -euo pipefail
source_dir=$1
torch_dir=$2
torch_library=$(readlink -f "$3")
scratch=$(mktemp -d /tmp/lockstep-relocated-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
copy=$scratch/libtorch
mkdir -p "$copy/lib" "$copy/include" "$copy/share/cmake"

# The libraries of the package that holds libtorch, the headers of the one that holds its
# CMake files, and the CMake files of Torch and what it finds beside it (Caffe2, ATen).
runtime_package=$(dpkg -S "$torch_library" | cut -d: -f1)
dev_package=$(dpkg -S "$torch_dir/TorchConfig.cmake" | cut -d: -f1)
dpkg -L "$runtime_package" | grep -E '\.so[.0-9]*$' | while read -r f; do [ -e "$f" ] && cp -a "$f" "$copy/lib/"; done
(cd /usr/include && dpkg -L "$dev_package" | sed -n 's|^/usr/include/||p' |
  while read -r f; do [ -f "/usr/include/$f" ] && echo "$f"; done | tar -cf - -T - | tar -C "$copy/include" -xf -)
for config in Torch Caffe2 ATen; do cp -a "$torch_dir/../$config" "$copy/share/cmake/"; done
# Debian's CMake files name Debian's folders: the prefix four levels above them
# (lib/<triplet>/cmake/Torch), the libraries in lib/<triplet>/, the headers in ../include.
# The archive's are three levels below its prefix and name lib/ and include/.
triplet=$(basename "$(dirname "$torch_library")")
sed -i 's|${CMAKE_CURRENT_LIST_DIR}/../../../../|${CMAKE_CURRENT_LIST_DIR}/../../../|' \
  "$copy/share/cmake/Torch/TorchConfig.cmake" "$copy/share/cmake/Caffe2/Caffe2Config.cmake"
sed -i -e "s|\${_IMPORT_PREFIX}/$triplet/|\${_IMPORT_PREFIX}/lib/|g" -e 's|${_IMPORT_PREFIX}/../include|${_IMPORT_PREFIX}/include|g' \
  "$copy"/share/cmake/Caffe2/Caffe2Targets*.cmake
echo "copied $(ls "$copy/lib" | wc -l) libraries and $(find "$copy/include" -type f | wc -l) headers of $runtime_package and $dev_package to $copy"

# A release build without optimization: what this tests is CMake and the loader, and at
# -O0 the whole test takes 30% less CPU time than at the release's -O3 (223 s against 315).
cmake -S "$source_dir" -B "$scratch/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O0 -DNDEBUG" \
  -DCMAKE_PREFIX_PATH="$copy" -DLOCKSTEP_BUILD_TESTS=OFF -DLOCKSTEP_BUILD_BENCH=OFF -DLOCKSTEP_BUILD_EXAMPLES=OFF > "$scratch/configure.log" ||
  { cat "$scratch/configure.log"; exit 1; }
grep -F "Torch_DIR:PATH=$copy/share/cmake/Torch" "$scratch/build/CMakeCache.txt" ||
  { echo "configure did not find the copy"; grep Torch_DIR "$scratch/build/CMakeCache.txt"; exit 1; }
cmake --build "$scratch/build" --target lockstep_cli -j "${JOBS:-2}" > "$scratch/build.log" ||
  { tail -40 "$scratch/build.log"; exit 1; }
cmake --install "$scratch/build" --prefix "$scratch/prefix" > /dev/null
# A user's project that names only lockstep's prefix: lockstep's package finds the same Torch.
cmake -S "$source_dir/tests/downstream/project" -B "$scratch/downstream" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$scratch/prefix" > /dev/null
cmake --build "$scratch/downstream" > /dev/null
grep -F "Torch_DIR:PATH=$copy/share/cmake/Torch" "$scratch/downstream/CMakeCache.txt"

unset LD_LIBRARY_PATH
tool=$scratch/prefix/bin/lockstep
program=$scratch/downstream/downstream_all_reduce
for binary in "$tool" "$scratch"/prefix/lib/liblockstep.so "$program"; do
  echo "$(basename "$binary"): $(readelf -d "$binary" | grep -E 'RUNPATH|RPATH')"
  loaded=$(ldd "$binary")
  for library in libtorch_cpu.so libc10.so; do
    line=$(grep -F "$library" <<< "$loaded") || { echo "$binary does not load $library"; exit 1; }
    echo "  $line"
    grep -qF "=> $copy/lib/" <<< "$line" || { echo "$binary loads $library from outside the copy"; exit 1; }
  done
done

(cd "$scratch" && "$tool" train --epochs 1 --limit 640 --val-limit 256 --out "$scratch/run") > "$scratch/train.log" 2>&1 ||
  { cat "$scratch/train.log"; exit 1; }
tail -3 "$scratch/train.log"
output=$("$tool" run -n 2 -- "$program")
echo "$output"
for r in 0 1; do
  grep -qF "[rank $r] rank $r of 2: all_reduce right" <<< "$output"
done
