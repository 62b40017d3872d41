"""Checks that every benchmark compiles, without building it: each of the build's compile
commands for bench/ run again with -fsyntax-only (no code generation, no object file).
`make test` leaves the benchmarks out of its build (-DLOCKSTEP_BENCH_SYNTAX_ONLY=ON): at -O3
code generation is about 40% of their compile time, and only `make bench` runs them. Where the
build made the test programs' precompiled torch/torch.h, the check loads it instead of parsing
libtorch's headers again, at the test programs' -O level, which the header must be used at.
python3 benchmarks_compile.py BUILD_DIR"""
import json
import os
import shlex
import subprocess
import sys


def object_of(command):
    """The object file a compile command writes, relative to the build folder."""
    words = shlex.split(command)
    return words[words.index("-o") + 1]


def precompiled_torch(commands):
    """The flags that load the test programs' precompiled torch/torch.h (tests/CMakeLists.txt),
    with their -O flags (none in a build type without); none where the build has not made it."""
    for command in commands:
        words = shlex.split(command)
        if "-include" in words:
            header = words[words.index("-include") + 1]
            if "lockstep_torch_pch" in header and os.path.exists(header + ".gch"):
                return [w for w in words if w.startswith("-O")] + ["-Winvalid-pch", "-include", header]
    return []


def syntax_only(command, header_flags):
    """The compile command without its outputs (object and dependency files) and, for a
    benchmark built with libtorch where a precompiled header is given, without its own -O level."""
    words = shlex.split(command)
    if not any(word.endswith("torch/csrc/api/include") for word in words):
        header_flags = []
    kept, skip_next = [], False
    for word in words:
        if skip_next:
            skip_next = False
        elif word in ("-o", "-MT", "-MF"):
            skip_next = True
        elif word not in ("-c", "-MD") and not (header_flags and word.startswith("-O")):
            kept.append(word)
    return kept + header_flags + ["-fsyntax-only"]


build = sys.argv[1]
with open(os.path.join(build, "compile_commands.json")) as f:
    every = json.load(f)
# (target, compile command) of each object under bench/CMakeFiles/<target>.dir/
entries = [(o.split("/")[2].removesuffix(".dir"), e) for e in every
           if (o := object_of(e["command"])).startswith("bench/CMakeFiles/")]
header_flags = precompiled_torch(e["command"] for e in every)
if not entries:
    sys.exit(f"no compile command for bench/ in {build}/compile_commands.json: configure with the benchmarks")

failed = []
for target, entry in entries:
    run = subprocess.run(syntax_only(entry["command"], header_flags), cwd=entry["directory"], capture_output=True,
                         text=True)
    print(f"{target}: {'compiles' if run.returncode == 0 else 'does not compile'}", flush=True)
    if run.returncode != 0:
        failed.append(target)
    if run.stderr:  # errors, and warnings such as a precompiled header that could not be used
        print(run.stderr, flush=True)
if failed:
    sys.exit(f"benchmarks that do not compile: {' '.join(failed)}")
