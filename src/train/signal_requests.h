#pragma once

#include "lockstep/comm/process_group.h"

namespace lockstep::train {

/// SIGTERM and SIGINT (a stop, as Slurm and Kubernetes ask before killing a job) and
/// SIGUSR1 (a checkpoint), turned into decisions that every rank takes after the same step.
/// The handlers are installed, process-wide, by the first SignalRequests and stay; a second
/// SIGTERM or SIGINT ends the process at once, as it would have without them.
///
/// The same all_reduce carries live recovery's question whether a joiner waits, so that
/// asking costs no round trip of its own.
class SignalRequests {
 public:
  /// `handle_signals`: install the handlers; without, only joiners are agreed on.
  explicit SignalRequests(bool handle_signals);

  struct Asked {
    bool stop = false;
    bool checkpoint = false;
    bool joiner = false;
  };
  /// What any rank of `group` was asked since the last call, and whether any saw a joiner
  /// waiting: a collective, called at each step.
  Asked agree(const ProcessGroup& group, bool joiner_waiting);

 private:
  bool handle_signals_;
  int checkpoints_seen_ = 0;
};

}  // namespace lockstep::train
