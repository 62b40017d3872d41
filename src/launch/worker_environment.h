#pragma once

#include <string>
#include <vector>

#include "launch/launch_options.h"

namespace lockstep::launch {

/// Where one worker sits in the job.
struct WorkerRanks {
  int rank = 0;
  int local_rank = 0;
  /// Which start of this worker it is, in live recovery: 0, then 1 for its first replacement.
  int incarnation = 0;
};

/// The environment ("NAME=value" entries) one worker starts with: `inherited` minus the
/// variables that would contradict its place (OMPI_COMM_WORLD_*, PMIX_RANK, LOCKSTEP_RANK,
/// LOCKSTEP_WORLD_SIZE, LOCKSTEP_LOCAL_RANK, LOCKSTEP_LOCAL_WORLD_SIZE), plus the
/// torchrun-compatible ones (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,
/// MASTER_ADDR, MASTER_PORT), LOCKSTEP_USE_AGENT_STORE=1, the restart count
/// (LOCKSTEP_RESTART_COUNT, and torchrun's TORCHELASTIC_RESTART_COUNT), LOCKSTEP_TERMINAL
/// (1 when `stdout_is_terminal`: the launcher shows rank 0's progress bar, else 0), how a
/// failure is recovered from (LOCKSTEP_RECOVERY, LOCKSTEP_INCARNATION) and, with --backend,
/// LOCKSTEP_BACKEND.
std::vector<std::string> worker_environment(const std::vector<std::string>& inherited, const LaunchOptions& options,
                                            const WorkerRanks& place, int store_port, int restart_count = 0,
                                            bool stdout_is_terminal = false, const std::string& restart_reason = "");

/// This process's environment as "NAME=value" entries.
std::vector<std::string> current_environment();

}  // namespace lockstep::launch
