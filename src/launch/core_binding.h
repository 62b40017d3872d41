#pragma once

#include <string>
#include <vector>

namespace lockstep::launch {

/// Where `lockstep run --bind core` pins a node's workers: worker i to one CPU of its own
/// physical core, taken in order from the launcher's affinity mask (a Slurm allocation or a
/// taskset is respected), as mpirun binds by default. With fewer physical cores in the mask
/// than workers, no binding, and why.
struct CoreBinding {
  std::vector<int> cpus;     // per local worker; empty: not bound
  std::string unbound_why;   // set when --bind core could not be honoured
};

CoreBinding bind_to_cores(int workers, const std::vector<int>& allowed);

}  // namespace lockstep::launch
