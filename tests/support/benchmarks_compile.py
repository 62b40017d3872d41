"""Checks that every benchmark compiles, without building it: each of the build's compile
commands for bench/ run again with -fsyntax-only (no code generation, no object file).
`make test` leaves the benchmarks out of its build (-DLOCKSTEP_BENCH_SYNTAX_ONLY=ON): at -O3
code generation is about 40% of their compile time, and only `make bench` runs them.
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


def syntax_only(command):
    """The compile command without its outputs (object and dependency files)."""
    kept, skip_next = [], False
    for word in shlex.split(command):
        if skip_next:
            skip_next = False
        elif word in ("-o", "-MT", "-MF"):
            skip_next = True
        elif word not in ("-c", "-MD"):
            kept.append(word)
    return kept + ["-fsyntax-only"]


build = sys.argv[1]
with open(os.path.join(build, "compile_commands.json")) as f:
    # (target, compile command) of each object under bench/CMakeFiles/<target>.dir/
    entries = [(o.split("/")[2].removesuffix(".dir"), e) for e in json.load(f)
               if (o := object_of(e["command"])).startswith("bench/CMakeFiles/")]
if not entries:
    sys.exit(f"no compile command for bench/ in {build}/compile_commands.json: configure with the benchmarks")

failed = []
for target, entry in entries:
    run = subprocess.run(syntax_only(entry["command"]), cwd=entry["directory"], capture_output=True, text=True)
    print(f"{target}: {'compiles' if run.returncode == 0 else 'does not compile'}", flush=True)
    if run.returncode != 0:
        failed.append(target)
        print(run.stderr, flush=True)
if failed:
    sys.exit(f"benchmarks that do not compile: {' '.join(failed)}")
