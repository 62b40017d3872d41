#include "launch/cluster_node.h"

#include <algorithm>

#include "job/slurm_step.h"
#include "lockstep/error.h"

namespace lockstep::launch {
namespace {

int read_count(const std::string& variable, const std::string& text) {
  if (text.empty() || text.size() > 6 || text.find_first_not_of("0123456789") != std::string::npos) {
    throw ConfigError(variable + "='" + text + "' is not a number");
  }
  return std::stoi(text);
}

int read_port(const std::string& text) {
  const int port = text.size() <= 5 ? read_count("MASTER_PORT", text) : 0;
  if (port < 1 || port > 65535) throw ConfigError("MASTER_PORT='" + text + "' is not a TCP port (1..65535)");
  return port;
}

bool one_task_per_node(const SlurmStep& step) {
  return std::all_of(step.tasks_per_node.begin(), step.tasks_per_node.end(), [](int tasks) { return tasks == 1; });
}

void take_node_from_slurm(LaunchOptions& options, const SlurmStep& step, const EnvLookup& env) {
  const int nodes = static_cast<int>(step.nodes.size());
  if (!one_task_per_node(step)) {
    throw ConfigError(
        "inside srun the launcher starts -n workers on each node, so the step needs one task per node "
        "(srun --ntasks-per-node=1), but SLURM_STEP_TASKS_PER_NODE='" +
        env("SLURM_STEP_TASKS_PER_NODE").value_or(env("SLURM_TASKS_PER_NODE").value_or("")) + "'");
  }
  if (options.nnodes != 1 && options.nnodes != nodes) {
    throw ConfigError("--nnodes " + std::to_string(options.nnodes) + ", but this srun step runs on " +
                      std::to_string(nodes) + " nodes (SLURM_STEP_NODELIST); leave out --nnodes inside srun");
  }
  options.nnodes = nodes;
  options.node_rank = step.node_rank;
  if (!options.master_addr) options.master_addr = env("MASTER_ADDR").value_or(step.first_node());
  if (!options.master_port) options.master_port = env("MASTER_PORT") ? read_port(*env("MASTER_PORT")) : step.port();
}

// The training operator's variables. PET_NNODES is "N", or "MIN:MAX" under an elastic policy,
// whose pods may come and go: as --nnodes MIN:MAX (live recovery).
std::string take_node_from_pod(LaunchOptions& options, bool nproc_given, const EnvLookup& env) {
  const std::string nnodes_text = env("PET_NNODES").value_or("1");
  const size_t colon = nnodes_text.find(':');
  const int nnodes = read_count("PET_NNODES", nnodes_text.substr(colon == std::string::npos ? 0 : colon + 1));
  if (colon != std::string::npos) {
    const int min = read_count("PET_NNODES", nnodes_text.substr(0, colon));
    if (min > nnodes) throw ConfigError("PET_NNODES='" + nnodes_text + "': MIN must not exceed MAX");
    options.min_nnodes = min < nnodes ? min : 0;  // MIN = MAX: a job of fixed size
  }
  if (!nproc_given) options.nproc_per_node = read_count("PET_NPROC_PER_NODE", *env("PET_NPROC_PER_NODE"));
  options.nnodes = nnodes;
  // RANK is the pod's index here: the operator gives each pod one, whatever runs inside it.
  const std::string node_variable = env("PET_NODE_RANK") ? "PET_NODE_RANK" : "RANK";
  options.node_rank = read_count(node_variable, env(node_variable).value_or("0"));
  if (options.node_rank >= nnodes) {
    throw ConfigError(node_variable + "=" + std::to_string(options.node_rank) +
                      " is not a node of PET_NNODES=" + nnodes_text);
  }
  if (!options.master_addr) options.master_addr = env("MASTER_ADDR");
  if (!options.master_port && env("MASTER_PORT")) options.master_port = read_port(*env("MASTER_PORT"));
  if (nnodes > 1 && (!options.master_addr || !options.master_port)) {
    throw ConfigError("PET_NNODES=" + nnodes_text +
                      " but MASTER_ADDR or MASTER_PORT is not set; the training "
                      "operator sets both in every pod");
  }
  // Operator versions differ on whether WORLD_SIZE counts pods or processes.
  const int processes = nnodes * options.nproc_per_node;
  const auto world_size = env("WORLD_SIZE");
  if (world_size && *world_size != std::to_string(processes) && *world_size != std::to_string(nnodes)) {
    return "WORLD_SIZE=" + *world_size + " counts neither the pods (PET_NNODES=" + nnodes_text +
           ") nor the processes; trusting PET_NNODES x PET_NPROC_PER_NODE = " + std::to_string(processes);
  }
  return "";
}

}  // namespace

bool launches_a_cluster_node(const EnvLookup& env, bool nproc_given) {
  if (env("LOCAL_RANK")) return false;
  if (env("PET_NPROC_PER_NODE")) return true;
  const auto step = slurm_step(env);
  return step && nproc_given && one_task_per_node(*step);
}

std::string take_node_from_cluster(LaunchOptions& options, bool nproc_given, const EnvLookup& env) {
  if (env("LOCAL_RANK")) return "";
  if (env("PET_NPROC_PER_NODE")) return take_node_from_pod(options, nproc_given, env);
  if (const auto step = slurm_step(env)) take_node_from_slurm(options, *step, env);
  return "";
}

}  // namespace lockstep::launch
