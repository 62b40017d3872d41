#include "launch/worker_environment.h"

#include <unistd.h>

#include <algorithm>

namespace lockstep::launch {
namespace {

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

// The core library reads these before RANK & co., so a value inherited from the launcher's
// shell or an outer mpirun job would give every worker the same, wrong place.
bool contradicts_worker_place(const std::string& entry) {
  for (const char* name :
       {"PMIX_RANK=", "LOCKSTEP_RANK=", "LOCKSTEP_WORLD_SIZE=", "LOCKSTEP_LOCAL_RANK=", "LOCKSTEP_LOCAL_WORLD_SIZE="}) {
    if (starts_with(entry, name)) {
      return true;
    }
  }
  return starts_with(entry, "OMPI_COMM_WORLD_");
}

// Live recovery's fewest workers: -n's MIN on each of --nnodes' MIN nodes; one by default.
int min_workers(const LaunchOptions& options) {
  if (options.min_nnodes == 0) return std::max(1, options.min_nproc);
  return options.min_nnodes * (options.min_nproc > 0 ? options.min_nproc : options.nproc_per_node);
}

}  // namespace

std::vector<std::string> worker_environment(const std::vector<std::string>& inherited, const LaunchOptions& options,
                                            const WorkerRanks& place, int store_port, int restart_count,
                                            bool stdout_is_terminal, const std::string& restart_reason) {
  const int launched = options.nproc_per_node * options.nnodes;
  const auto [rank, world_size] = place.first_generation.value_or(std::make_pair(place.rank, launched));
  std::vector<std::pair<std::string, std::string>> assigned = {
      {"RANK", std::to_string(rank)},
      {"WORLD_SIZE", std::to_string(world_size)},
      {"LOCAL_RANK", std::to_string(place.local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(options.nproc_per_node)},
      {"GROUP_RANK", std::to_string(options.node_rank)},
      {"MASTER_ADDR", master_addr_of(options)},
      {"MASTER_PORT", std::to_string(store_port)},
      // The launcher on node 0 hosts the store, so rank 0 must join it as a client.
      {"LOCKSTEP_USE_AGENT_STORE", "1"},
      {"LOCKSTEP_RESTART_COUNT", std::to_string(restart_count)},
      {"LOCKSTEP_HEARTBEAT", "1"},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(restart_count)},
      // Always set, so that one inherited from an outer launch cannot claim a terminal.
      {"LOCKSTEP_TERMINAL", stdout_is_terminal ? "1" : "0"},
      {"LOCKSTEP_RECOVERY", options.recovery},
      {"LOCKSTEP_INCARNATION", std::to_string(place.incarnation)},
      {"LOCKSTEP_MEMBER_ID", std::to_string(place.rank)},
      {"LOCKSTEP_JOINS", place.joins ? "1" : "0"},
      {"LOCKSTEP_MIN_WORKERS", std::to_string(min_workers(options))},
      {"LOCKSTEP_MAX_WORKERS", std::to_string(launched)},
  };
  // Why the attempt before this one ended (a timeline marks the restart with it).
  if (restart_count > 0) assigned.emplace_back("LOCKSTEP_RESTART_REASON", restart_reason);
  // --backend nccl, from before the device backend, is --device-backend nccl.
  const bool nccl = options.backend == "nccl";
  if (!options.backend.empty() && !nccl) assigned.emplace_back("LOCKSTEP_BACKEND", options.backend);
  if (!options.device_backend.empty() || nccl) {
    assigned.emplace_back("LOCKSTEP_DEVICE_BACKEND", nccl ? "nccl" : options.device_backend);
  }

  std::vector<std::string> environment;
  for (const std::string& entry : inherited) {
    bool overridden = contradicts_worker_place(entry);
    for (const auto& [name, value] : assigned) {
      overridden = overridden || starts_with(entry, name + "=");
    }
    if (!overridden) {
      environment.push_back(entry);
    }
  }
  for (const auto& [name, value] : assigned) {
    environment.push_back(name + "=" + value);
  }
  // As torchrun does: workers sharing a machine would oversubscribe its cores with one
  // OpenMP thread per core each, unless the user chose otherwise.
  const bool threads_chosen = std::any_of(environment.begin(), environment.end(), [](const std::string& entry) {
    return starts_with(entry, "OMP_NUM_THREADS=");
  });
  if (options.nproc_per_node > 1 && !threads_chosen) environment.push_back("OMP_NUM_THREADS=1");
  return environment;
}

std::vector<std::string> current_environment() {
  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    environment.emplace_back(*entry);
  }
  return environment;
}

}  // namespace lockstep::launch
