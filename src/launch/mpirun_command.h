#pragma once

#include <string>
#include <vector>

#include "launch/launch_options.h"

namespace lockstep::launch {

/// The mpirun command line that starts `options.command` as an MPI job on this node:
/// `mpirun -n N --oversubscribe -x LOCKSTEP_BACKEND=mpi PROGRAM ARGS...`, plus what mpirun
/// needs to run at all when the launcher is root.
std::vector<std::string> mpirun_command(const LaunchOptions& options, bool running_as_root);

/// Replaces the launcher with mpirun (found in PATH); returns only by throwing lockstep::Error.
[[noreturn]] void exec_mpirun(const LaunchOptions& options);

}  // namespace lockstep::launch
