#pragma once

#include <string>
#include <utility>
#include <vector>

// glibc's malloc as a training process wants it. By default glibc hands large blocks back to
// the system when they are freed (with munmap, or by trimming the heap's top), so a process
// that frees a step's activations faults the same pages in again on the next step: the CNN
// of bench/ddp_cnn trains at about 0.56 of its speed in a process of its own
// (docs/USAGE.md, "Launching"). Told to keep that memory, glibc serves the next step from it.
namespace lockstep {

/// The environment that keeps it: MALLOC_MMAP_THRESHOLD_ and MALLOC_TRIM_THRESHOLD_ of
/// 4 GiB (no block under 4 GiB gets a mapping of its own, and the heap is not trimmed until
/// 4 GiB of it are free) and MALLOC_TOP_PAD_ of 256 MiB (the heap grows in large steps).
const std::vector<std::pair<std::string, std::string>>& malloc_tuning_environment();

/// Whether an environment entry ("NAME=value") chooses how its process allocates: one of
/// glibc's MALLOC_*_ variables, GLIBC_TUNABLES naming glibc.malloc, or an LD_PRELOAD (another
/// allocator, or a tool that wraps malloc). Such a choice is the user's, never overwritten.
bool chooses_allocator(const std::string& entry);

/// For `lockstep` itself: unless refused (LOCKSTEP_MALLOC_TUNING=0) or the environment chooses an allocator already,
/// sets malloc_tuning_environment() in this process's environment (so that every worker it
/// starts has it) and the same through mallopt() for this process. Returns whether it did.
bool tune_malloc_here();

/// Whether this process's environment holds malloc_tuning_environment() (given, or set by
/// tune_malloc_here()).
bool malloc_tuned();

}  // namespace lockstep
