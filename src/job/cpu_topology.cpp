#include "job/cpu_topology.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <mutex>
#include <set>
#include <unordered_map>

namespace lockstep {
namespace {

std::string read_word(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  in >> word;
  return word;
}

}  // namespace

const std::string& physical_core_of(int cpu) {
  static std::mutex mutex;
  static std::unordered_map<int, std::string> known;  // the topology does not change while we run
  std::lock_guard<std::mutex> lock(mutex);
  auto found = known.find(cpu);
  if (found != known.end()) return found->second;
  const std::string topology = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
  const std::string package = read_word(topology + "physical_package_id"), core = read_word(topology + "core_id");
  return known[cpu] = package.empty() || core.empty() ? "cpu" + std::to_string(cpu) : package + ":" + core;
}

bool same_physical_core(int a, int b) {
  // Per CPU, the first CPU of its core: read once for all CPUs the system may bring online.
  static const std::vector<int> first_of_core = [] {
    const long count = std::max(1L, sysconf(_SC_NPROCESSORS_CONF));
    std::vector<int> first(count);
    std::unordered_map<std::string, int> seen;
    for (int cpu = 0; cpu < count; ++cpu) first[cpu] = seen.emplace(physical_core_of(cpu), cpu).first->second;
    return first;
  }();
  if (a == b) return true;
  const int known = static_cast<int>(first_of_core.size());
  return a >= 0 && b >= 0 && a < known && b < known && first_of_core[a] == first_of_core[b];
}

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

std::string cpu_list_text(const std::vector<int>& cpus) {
  std::string text;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    text += (text.empty() ? "" : ",") + std::to_string(cpus[i]) + (j > i ? "-" + std::to_string(cpus[j]) : "");
    i = j + 1;
  }
  return text;
}

CoreBinding bind_to_cores(int workers, const std::vector<int>& allowed) {
  CoreBinding binding;
  std::set<std::string> taken;
  std::vector<int> first_of_each_core;
  for (int cpu : allowed) {
    if (taken.insert(physical_core_of(cpu)).second) first_of_each_core.push_back(cpu);
  }
  if (static_cast<int>(first_of_each_core.size()) < workers) {
    binding.unbound_why = "--bind core: CPU(s) " + cpu_list_text(allowed) + " hold " +
                          std::to_string(first_of_each_core.size()) + " physical core(s), fewer than the " +
                          std::to_string(workers) + " workers; they are not bound (as --bind none)";
    return binding;
  }
  binding.cpus.assign(first_of_each_core.begin(), first_of_each_core.begin() + workers);
  return binding;
}

}  // namespace lockstep
