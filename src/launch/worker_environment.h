#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launch/launch_options.h"

namespace lockstep::launch {

/// Where one worker sits in the job.
struct WorkerRanks {
  /// Its rank as launched: node_rank * nproc_per_node + local_rank, live recovery's name for
  /// it (LOCKSTEP_MEMBER_ID).
  int rank = 0;
  int local_rank = 0;
  /// Which start of this worker it is, in live recovery: 0, then 1, ... for the starts after.
  int incarnation = 0;
  /// Its rank and world size in the first generation, where live recovery started the job
  /// with some nodes only (--nnodes MIN:MAX); otherwise, or for a worker that joins later,
  /// `rank` of nproc_per_node * nnodes.
  std::optional<std::pair<int, int>> first_generation;
  /// Joins a live job in progress (LOCKSTEP_JOINS=1): started again, or on a node that came
  /// after the job started.
  bool joins = false;
};

/// The environment ("NAME=value" entries) one worker starts with: `inherited` minus the
/// variables that would contradict its place (OMPI_COMM_WORLD_*, PMIX_RANK, LOCKSTEP_RANK,
/// LOCKSTEP_WORLD_SIZE, LOCKSTEP_LOCAL_RANK, LOCKSTEP_LOCAL_WORLD_SIZE), plus the
/// torchrun-compatible ones (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,
/// MASTER_ADDR, MASTER_PORT), LOCKSTEP_USE_AGENT_STORE=1, the restart count
/// (LOCKSTEP_RESTART_COUNT, and torchrun's TORCHELASTIC_RESTART_COUNT), LOCKSTEP_TERMINAL
/// (1 when `stdout_is_terminal`: the launcher shows rank 0's progress bar, else 0), how a
/// failure is recovered from (LOCKSTEP_RECOVERY, LOCKSTEP_INCARNATION, LOCKSTEP_MEMBER_ID,
/// LOCKSTEP_JOINS, LOCKSTEP_MIN_WORKERS, LOCKSTEP_MAX_WORKERS) and, with --backend,
/// LOCKSTEP_BACKEND.
std::vector<std::string> worker_environment(const std::vector<std::string>& inherited, const LaunchOptions& options,
                                            const WorkerRanks& place, int store_port, int restart_count = 0,
                                            bool stdout_is_terminal = false, const std::string& restart_reason = "");

/// This process's environment as "NAME=value" entries.
std::vector<std::string> current_environment();

}  // namespace lockstep::launch
