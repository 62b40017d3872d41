#pragma once

#include "lockstep/comm/process_group.h"

namespace lockstep::train {

/// SIGTERM and SIGINT (a stop, as Slurm and Kubernetes ask before killing a job) and
/// SIGUSR1 (a checkpoint), turned into decisions that every rank takes after the same step.
/// The handlers are installed, process-wide, by the first SignalRequests and stay; a second
/// SIGTERM or SIGINT ends the process at once, as it would have without them.
class SignalRequests {
 public:
  SignalRequests();

  struct Asked {
    bool stop = false;
    bool checkpoint = false;
  };
  /// What any rank of `group` was asked since the last call: a collective, called after
  /// each step.
  Asked agree(const ProcessGroup& group);

 private:
  int checkpoints_seen_ = 0;
};

}  // namespace lockstep::train
