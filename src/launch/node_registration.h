#pragma once

#include "launch/launch_options.h"

namespace lockstep::launch {

/// Every launcher of a job of several nodes registers its node rank, --nnodes and -n in the
/// job's store (at options.master_addr and `store_port`) and waits, up to
/// options.rdzv_timeout, until every node has. Launchers started inconsistently fail within
/// moments, each with one line naming both values: two with one --node-rank, or with
/// different --nnodes or -n. Throws ConfigError for those and TimeoutError naming the nodes
/// that never came. Does nothing for a single node.
void register_node(const LaunchOptions& options, int store_port);

}  // namespace lockstep::launch
