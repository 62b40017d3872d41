#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "lockstep/comm/process_group.h"
#include "train/signal_requests.h"
#include "train/straggler_watch.h"

// What Trainer::fit does around each step besides the step itself, one small observer per
// feature: a new per-step feature is a new observer, not new lines in fit()'s loop.
namespace lockstep::train {

/// One step's times, as fit() measured them (steady clock; the timeline's own clock for spans).
struct StepTimes {
  int64_t step = 0;            // this step's number, from 1
  double data_seconds = 0;     // waiting for its batch
  double compute_seconds = 0;  // from the batch to the updated parameters, gradient wait included
  double gradient_wait_seconds = 0;
};

class StepObserver {
 public:
  virtual ~StepObserver() = default;
  /// The step's batch arrived; `fetch_started_us` (the timeline's clock) is when fit() asked for it.
  virtual void batch_arrived(int64_t /*step*/, double /*fetch_started_us*/) {}
  /// The step's update is done.
  virtual void updated(const StepTimes& /*times*/) {}
  /// Everything of the step is done, its checkpoint included.
  virtual void step_ended(int64_t /*step*/) {}
};

/// The step's spans in the timeline, while one records: "step" holding "data wait", with the
/// collectives and buckets the step called.
class TimelineSteps : public StepObserver {
 public:
  TimelineSteps(ProcessGroup group, std::function<size_t()> buckets);
  void batch_arrived(int64_t step, double fetch_started_us) override;
  void step_ended(int64_t step) override;

 private:
  ProcessGroup group_;
  std::function<size_t()> buckets_;
  int rank_;
  uint64_t first_collective_ = 0;
};

/// Which rank keeps the others waiting (StragglerWatch), said once through `notice`; its
/// means go into each logged interval.
class StragglerNotices : public StepObserver {
 public:
  StragglerNotices(ProcessGroup group, std::function<void(const std::string&)> notice);
  void updated(const StepTimes& times) override;
  StragglerWatch& watch() { return watch_; }

 private:
  StragglerWatch watch_;
  std::function<void(const std::string&)> notice_;
};

/// When fit() checkpoints and stops: every `checkpoint_every` steps, at `stop_after_step`, and
/// when a signal asks (SIGTERM or SIGINT: checkpoint and stop; SIGUSR1: checkpoint and go on),
/// decided alike on every rank at each step; in live recovery also when a joiner waits
/// (`joiner_waiting`, asked on each rank: stop after the step, to regroup).
class CheckpointPolicy {
 public:
  CheckpointPolicy(ProcessGroup group, bool handle_signals, std::function<bool()> joiner_waiting,
                   int64_t checkpoint_every, int64_t stop_after_step);
  struct Decision {
    bool save = false;
    bool stop = false;
    bool preempted = false;  // stopped by a signal
    bool asked_by_signal = false;
    bool regroup = false;  // stopped for a joiner
  };
  /// For step `step`, after its gradients and before its update (a rank that fails before
  /// here has updated nothing); every rank calls it together.
  Decision at_step(int64_t step);

 private:
  ProcessGroup group_;
  std::function<bool()> joiner_waiting_;
  std::optional<SignalRequests> signals_;
  int64_t checkpoint_every_;
  int64_t stop_after_step_;
};

}  // namespace lockstep::train
