#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/optim/optimizer.h>

#include "lockstep/ddp/distributed_data_parallel.h"

namespace lockstep {

namespace elastic {
class Membership;
}

/// Where a step of LiveTraining runs: its index, the same on every member, and this
/// member's place in the group that trains it, which changes as members come and go.
struct LiveStep {
  int64_t step;
  int rank;
  int world_size;
};

/// Live recovery for a training loop of one's own, under `lockstep run --recovery live` (or
/// `-n MIN:MAX`): when a worker fails, the others regroup without it in the same processes
/// and train the failed step again; a replacement its launcher starts (`--max-restarts`)
/// is healed from the members, parameters and optimizer state, and joins at a step's end.
///
///   lockstep::LiveTraining live(model, optimizer, steps);  // instead of init() and DDP
///   while (live.more()) {
///     live.train_step([&](const lockstep::LiveStep& s) {
///       optimizer.zero_grad();
///       loss_of(my_share_of_batch(s.step, s.rank, s.world_size)).backward();
///     });
///   }
///   lockstep::shutdown();
///
/// A step counts once every member has finished its backward: then each applies
/// optimizer.step(); otherwise none does, and the members that go on train the same step
/// again. So `forward_backward` must make the step's samples from the LiveStep alone: the
/// global batch of step s, of which this rank takes its share. The step is a function, not
/// begin/commit calls, because a collective whose peer has gone fails inside backward, and
/// its error must reach the regroup rather than the loop. DDP reduces with its options;
/// to average over a global batch that the members share unevenly (8 samples on 3), take
/// ReduceOp::Sum and divide each rank's loss by the global batch size.
///
/// It trains in the default group (DDPOptions::group is left to it), and its rank 0 writes
/// a line to stderr on each change of members. The optimizer is not sharded: a
/// ShardedOptimizer binds the group it is made in, before a replacement has one
/// (`lockstep train --zero 1 --recovery live` heals ZeRO-1). Without live recovery (LOCKSTEP_RECOVERY
/// unset) it is init() and DDP: each step counts, and a failure ends the worker as it
/// would without it.
class LiveTraining {
 public:
  LiveTraining(std::shared_ptr<torch::nn::Module> module, torch::optim::Optimizer& optimizer, int64_t steps,
               DDPOptions options = DDPOptions());
  template <typename M>
  LiveTraining(const torch::nn::ModuleHolder<M>& module, torch::optim::Optimizer& optimizer, int64_t steps,
               DDPOptions options = DDPOptions())
      : LiveTraining(std::static_pointer_cast<torch::nn::Module>(module.ptr()), optimizer, steps, std::move(options)) {}
  ~LiveTraining();
  LiveTraining(const LiveTraining&) = delete;
  LiveTraining& operator=(const LiveTraining&) = delete;

  /// Whether steps are left to train: false after the last, and at once in a replacement
  /// that found the job done.
  bool more() const { return !done_ && step_ < steps_; }
  /// The steps every member has committed: the index of the next one.
  int64_t step() const { return step_; }
  /// Runs `forward_backward` for step() and, when every member finished it, the optimizer's
  /// update. Returns whether the step counted; when it did not, the members changed, and
  /// the next call trains that step again on the new group. Errors other than a lost peer
  /// end the step with the error, as do fewer members than `-n MIN:MAX` allows.
  bool train_step(const std::function<void(const LiveStep&)>& forward_backward);
  /// The DDP of the current group (a new one after each change of members).
  DistributedDataParallel& ddp() { return *ddp_; }

 private:
  bool live() const { return membership_ != nullptr; }
  void regroup();
  void go_on();
  void heal();

  std::shared_ptr<torch::nn::Module> module_;
  torch::optim::Optimizer& optimizer_;
  int64_t steps_;
  DDPOptions options_;
  std::unique_ptr<elastic::Membership> membership_;
  std::optional<DistributedDataParallel> ddp_;
  int64_t step_ = 0;
  bool holds_state_ = true;  // false in a replacement, and in a member whose heal was cut short
  bool done_ = false;
  std::string why_;  // of the last change of members, for rank 0's line on it
  double regroup_seconds_ = 0;
};

}  // namespace lockstep
