#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "support/tool_process.h"
#include "support/world.h"

namespace lockstep::testing {

/// A real two-node Slurm (slurmctld, two slurmd, munged from Debian's slurm-wlm), each node a
/// network namespace with its own address and host name (n1, n2), all state in a temporary
/// folder: started by the constructor (tests/support/slurm_cluster.sh up) and torn down by
/// the destructor. Where it cannot start (no root, no namespaces, Slurm not installed),
/// available() is false and why_not() says why.
class SlurmCluster {
 public:
  SlurmCluster();
  ~SlurmCluster();
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;

  bool available() const { return why_not_.empty(); }
  const std::string& why_not() const { return why_not_; }
  /// A folder every node sees (the one file system), for scripts, outputs and run folders.
  const std::string& folder() const { return folder_.path(); }
  /// Node `node`'s (0 or 1) host name and address.
  std::string host(int node) const;
  std::string address(int node) const;

  /// A Slurm client command (sbatch, squeue, scontrol, scancel) run where the controller is.
  Finished client(const std::vector<std::string>& command, const Env& env = {}) const;
  /// `command` inside node `node`'s namespace, outside Slurm, as a user logged in there would.
  std::vector<std::string> on(int node, const std::vector<std::string>& command) const;

  /// Submits `script` (a bash script's body) with sbatch `options`; returns the job id.
  std::string submit(const std::string& script, const std::vector<std::string>& options, const Env& env = {}) const;
  /// The job's fields as `scontrol show job` prints them (JobState, ExitCode, Restarts, ...).
  std::map<std::string, std::string> job(const std::string& id) const;
  /// Waits until the job's JobState is one of `states`; returns it, or the last state seen
  /// when `timeout` passed first.
  std::string wait_for_state(const std::string& id, const std::vector<std::string>& states,
                             std::chrono::seconds timeout) const;
  /// How long an ended job ran, from its start to its end (RunTime, whole seconds): the
  /// time the job itself took, without the scheduler's queueing before it.
  std::chrono::seconds run_time(const std::string& id) const;

 private:
  TemporaryDirectory folder_;
  std::map<std::string, std::string> cluster_;  // what `up` printed: SLURM_CONF, NETNS1, ...
  std::string why_not_;
};

}  // namespace lockstep::testing
