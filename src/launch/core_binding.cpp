#include "launch/core_binding.h"

#include <set>

#include "comm/world/cpu_topology.h"

namespace lockstep::launch {

CoreBinding bind_to_cores(int workers, const std::vector<int>& allowed) {
  CoreBinding binding;
  std::set<std::string> taken;
  std::vector<int> first_of_each_core;
  for (int cpu : allowed) {
    if (taken.insert(physical_core_of(cpu)).second) first_of_each_core.push_back(cpu);
  }
  if (static_cast<int>(first_of_each_core.size()) < workers) {
    binding.unbound_why = "--bind core: the launcher may run on CPU(s) " + cpu_list_text(allowed) + ", " +
                          std::to_string(first_of_each_core.size()) + " physical core(s), fewer than the " +
                          std::to_string(workers) + " workers; they are not bound (as --bind none)";
    return binding;
  }
  binding.cpus.assign(first_of_each_core.begin(), first_of_each_core.begin() + workers);
  return binding;
}

}  // namespace lockstep::launch
