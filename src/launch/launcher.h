#pragma once

#include "launch/launch_options.h"

namespace lockstep::launch {

/// `lockstep run`: starts options.nproc_per_node workers on this node and returns the exit
/// status the launcher should exit with once they have all ended (0 when every worker exited 0).
/// On node 0 it hosts the job's TCP store for as long as the workers run. When a worker
/// fails, every worker is stopped and, while options.max_restarts allows, all are started
/// afresh (LOCKSTEP_RESTART_COUNT tells them which attempt this is). With backend "mpi"
/// it becomes mpirun instead and does not return. Throws lockstep::ConfigError for options
/// that cannot be launched and lockstep::Error when the store cannot be hosted.
int run_workers(const LaunchOptions& options);

}  // namespace lockstep::launch
