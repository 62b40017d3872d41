#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace lockstep::launch {

/// A started worker: its pid (also its process group id) and the read ends of the pipes
/// that carry its stdout and stderr (non-blocking, close-on-exec; the caller closes them).
struct WorkerProcess {
  pid_t pid = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
};

/// Starts `command` (PROGRAM looked up in PATH) with exactly `environment`, in its own
/// process group, killed if the launcher dies. Returns once PROGRAM is running; throws
/// lockstep::Error "cannot run 'PROGRAM': reason" when it could not be executed. With `cpu`
/// (not -1), PROGRAM runs on that CPU alone.
WorkerProcess spawn_worker(const std::vector<std::string>& command, const std::vector<std::string>& environment,
                           int cpu = -1);

}  // namespace lockstep::launch
