#pragma once

#include <functional>
#include <type_traits>
#include <utility>
#include <vector>

#include <c10/core/GradMode.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>

#include "lockstep/comm/process_group.h"

namespace lockstep {

/// What every ShardedOptimizer<Opt> has, whatever its Opt: the partition of its parameters
/// among the ranks of its group. lockstep's checkpoints write and read the state through it.
class OptimizerSharding {
 public:
  virtual ~OptimizerSharding() = default;

  const ProcessGroup& group() const { return group_; }
  /// The parameters, in param-group order, as at construction.
  const std::vector<torch::Tensor>& parameters() const { return params_; }
  /// The rank that keeps the state of, and steps, each of parameters().
  const std::vector<int>& owners() const { return owners_; }

  /// Gathers every parameter's state onto `root`, whose state() and save() then hold what
  /// the unsharded optimizer would (PyTorch's ZeroRedundancyOptimizer names it so); the
  /// next step() drops the other ranks' state again. Every rank of the group calls it.
  void consolidate_state_dict(int root = 0);
  /// Whether this rank's state() holds every parameter's state (after
  /// consolidate_state_dict on this rank, or in a group of one).
  bool holds_all_state() const;
  /// Makes each rank keep the state of its own parameters only, taken from `root`, which
  /// holds every parameter's (such as an ordinary checkpoint loaded there). Every rank of
  /// the group calls it.
  void distribute_state(int root = 0);

 protected:
  /// Checks that every rank holds parameters of the same shapes and an optimizer of the same
  /// kind (MismatchError naming the first differing parameter, on every rank), then
  /// partitions them. ConfigError for an optimizer that cannot be sharded (LBFGS).
  OptimizerSharding(torch::optim::Optimizer& optimizer, ProcessGroup group);

  /// Runs `step` with only this rank's parameters visible to it (others' gradients are
  /// hidden, so torch::optim skips them as parameters without gradients), then broadcasts
  /// each rank's updated parameters to every rank.
  void step_own_partition(const std::function<void()>& step);
  /// ConfigError when this rank lacks others' state: saving it would lose it.
  void check_holds_all_state(const char* what) const;
  /// This rank's state() was filled from outside (a load): the next step keeps its own only.
  void note_holds_all_state() { consolidated_ = true; }

 private:
  std::vector<torch::Tensor> partition_of(int rank) const;
  void drop_state_of_others();
  void broadcast_parameters();

  torch::optim::Optimizer& optimizer_;
  ProcessGroup group_;
  std::vector<torch::Tensor> params_;
  std::vector<int> owners_;
  bool consolidated_ = false;  // this rank holds others' state until the next step
};

/// An Opt (torch::optim::SGD, Adam, AdamW, RMSprop or Adagrad) whose state is sharded across
/// ranks (ZeRO stage 1): each rank keeps the state of, and steps, only its partition of the
/// parameters (balanced by bytes, the same on every rank), on the parameter tensors
/// themselves, so each update is the unsharded optimizer's; then every rank receives every
/// updated parameter. Like PyTorch's ZeroRedundancyOptimizer it expects gradients already
/// averaged (DistributedDataParallel does that): every rank holds every averaged gradient,
/// so clipping by global norm works as without sharding. Constructed with Opt's own
/// arguments, optionally the group first; every rank calls step() together.
template <typename Opt>
class ShardedOptimizer : public Opt, public OptimizerSharding {
  static_assert(std::is_base_of_v<torch::optim::Optimizer, Opt>,
                "ShardedOptimizer<Opt> needs a torch::optim::Optimizer");

 public:
  template <typename First, typename... Rest, typename = std::enable_if_t<!std::is_convertible_v<First, ProcessGroup>>>
  explicit ShardedOptimizer(First&& first, Rest&&... rest)
      : Opt(std::forward<First>(first), std::forward<Rest>(rest)...), OptimizerSharding(*this, ProcessGroup()) {}

  /// The same over `group` instead of the default group.
  template <typename... Args>
  explicit ShardedOptimizer(ProcessGroup group, Args&&... args)
      : Opt(std::forward<Args>(args)...), OptimizerSharding(*this, std::move(group)) {}

  /// With a closure, it is called once (gradients enabled) and its loss returned.
  torch::Tensor step(torch::optim::Optimizer::LossClosure closure = nullptr) override {
    torch::Tensor loss;
    if (closure) {
      c10::AutoGradMode enable_grad(true);
      loss = closure();
    }
    step_own_partition([this] { Opt::step(nullptr); });
    return loss;
  }

  /// Saves what the unsharded optimizer would; only where holds_all_state().
  void save(torch::serialize::OutputArchive& archive) const override {
    check_holds_all_state("save");
    Opt::save(archive);
  }

  /// Loads an ordinary optimizer state: on every rank (each then drops the state of others'
  /// parameters at its next step), or on one rank followed by distribute_state(that rank).
  void load(torch::serialize::InputArchive& archive) override {
    Opt::load(archive);
    note_holds_all_state();
  }
};

}  // namespace lockstep
