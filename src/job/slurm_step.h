#pragma once

// What a task started by `srun` learns from Slurm's variables: its place in the step and
// where the step's first node is, so that init() and `lockstep run` need no MASTER_ADDR
// inside an allocation. The formats are Slurm's own (sbatch(1), srun(1) "OUTPUT ENVIRONMENT
// VARIABLES"); every error names the variable and its value.

#include <optional>
#include <string>
#include <vector>

#include "comm/world/environment.h"

namespace lockstep {

/// `n[01-03,07],gpu-a[1-2]` as Slurm writes node lists, expanded in Slurm's order with zero
/// padding kept (`n01 n02 n03 n07 gpu-a1 gpu-a2`). Throws ConfigError naming `variable`.
std::vector<std::string> expand_node_list(const std::string& list, const std::string& variable);

/// `2(x3),1` as Slurm writes tasks per node: one count per node (`2 2 2 1`).
std::vector<int> expand_tasks_per_node(const std::string& counts, const std::string& variable);

/// The store port of a Slurm step when MASTER_PORT is not set: 15000 + (job id mod 1000) * 16
/// + (step id mod 16), so that steps of one job running at once, and jobs with nearby ids,
/// get different ports below Linux's ephemeral range (32768 and up).
int slurm_step_port(long job_id, long step_id);

/// A task of an `srun` step, as its Slurm variables describe it.
struct SlurmStep {
  std::string job_id;               // SLURM_JOB_ID
  long step_id = 0;                 // SLURM_STEP_ID
  std::vector<std::string> nodes;   // SLURM_STEP_NODELIST (or SLURM_JOB_NODELIST)
  std::vector<int> tasks_per_node;  // one count per node
  int node_rank = 0;                // SLURM_NODEID
  int local_rank = 0;               // SLURM_LOCALID
  int rank = 0;                     // SLURM_PROCID
  int world_size = 1;               // SLURM_NTASKS, checked against the step's task counts
  int restart_count = 0;            // SLURM_RESTART_COUNT: this job's requeues so far

  int local_world_size() const { return tasks_per_node[node_rank]; }
  const std::string& first_node() const { return nodes.front(); }
  int port() const { return slurm_step_port(std::stol(job_id), step_id); }
};

/// The step this process is a task of, or nothing outside `srun` (no SLURM_STEP_ID, as in a
/// batch script's own shell). Throws ConfigError naming the variable whose value does not
/// fit the others.
std::optional<SlurmStep> slurm_step(const EnvLookup& env);

}  // namespace lockstep
