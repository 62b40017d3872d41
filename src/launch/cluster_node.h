#pragma once

// Where a launcher on one node of a cluster learns the job's shape, so that one command line
// runs on 1 or 16 nodes: inside an srun step (`srun --ntasks-per-node=1 lockstep run ...`)
// from Slurm's variables, and inside a Kubernetes PyTorchJob pod from the training
// operator's (PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, MASTER_ADDR, MASTER_PORT).

#include <string>

#include "comm/world/environment.h"
#include "launch/launch_options.h"

namespace lockstep::launch {

/// Whether this process is a node's launcher of a cluster job rather than one of its
/// ranks: in a PyTorchJob pod, or in an srun step of one task per node when `-n` was given;
/// never in a worker a launcher started (it has LOCAL_RANK).
bool launches_a_cluster_node(const EnvLookup& env, bool nproc_given);

/// Fills the nodes, this node's rank, the workers per node (when -n was not given) and the
/// store's address and port from the cluster's variables; the command line's --master-addr
/// and --master-port win. Nothing outside a cluster job. Returns a line to tell the user
/// when the variables disagreed and one was trusted (PyTorchJob's WORLD_SIZE), else "".
/// Throws ConfigError naming the variable that does not fit.
std::string take_node_from_cluster(LaunchOptions& options, bool nproc_given, const EnvLookup& env);

}  // namespace lockstep::launch
