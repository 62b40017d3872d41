#pragma once

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

  /// Under live recovery (LOCKSTEP_RECOVERY=live) each rank also keeps, and steps, the
  /// partition of the next rank (the last rank that of rank 0), so that every parameter's
  /// state outlives the loss of any one rank: twice the state and the optimizer arithmetic
  /// of a partition per rank.
  bool mirrored() const { return mirrored_; }
  /// Whether this rank keeps the state of parameters()[index]: its own, or its mirror's.
  bool keeps(size_t index) const;
  /// Live recovery: steps the parameters this rank keeps and sends none, for a member that
  /// holds the averaged gradients of a step that others applied before one of them was lost.
  void step_kept_partitions();
  /// Live recovery, after a regroup: every rank of `group` (the new group) calls it. `holds`:
  /// the parameters and state this rank keeps are at the step the members go on from (false
  /// for a replacement, or a member behind). Each parameter's value and state come from the
  /// lowest rank that keeps it; then the parameters are partitioned over `group`. Error on
  /// every rank when no member keeps some parameter (both its keepers were lost at once).
  void reshard(ProcessGroup group, bool holds);

  /// Clips the gradients of parameters() to a global L2 norm with the bits of libtorch's
  /// clip_grad_norm_ over all of them, where each rank holds the gradients of its partition
  /// only (ZeRO-2: DistributedDataParallel::shard_gradients) or all of them: each norm is
  /// taken on the rank that steps the parameter. Every rank of the group calls it; returns
  /// the total norm.
  torch::Tensor clip_grad_norm(double max_norm);

 protected:
  /// Checks that every rank holds parameters of the same shapes and an optimizer of the same
  /// kind (MismatchError naming the first differing parameter, on every rank), then
  /// partitions them (under live recovery the check waits for the first step or reshard).
  /// ConfigError for an optimizer that cannot be sharded (LBFGS).
  OptimizerSharding(torch::optim::Optimizer& optimizer, ProcessGroup group);

  /// Opt's own step of the parameters with gradients.
  virtual void step_visible() = 0;
  /// Runs step_visible() with only the parameters this rank keeps visible to it (others'
  /// gradients are hidden, so torch::optim skips them as parameters without gradients), then
  /// broadcasts each rank's updated parameters to every rank.
  void step_own_partition();
  /// ConfigError when this rank lacks others' state: saving it would lose it.
  void check_holds_all_state(const char* what) const;
  /// This rank's state() was filled from outside (a load): the next step keeps its own only.
  void note_holds_all_state() { consolidated_ = true; }

 private:
  /// Checks that every rank of `group` holds the same parameters (MismatchError naming the
  /// first difference, on every rank), and lists them.
  void agree(const ProcessGroup& group);
  std::vector<torch::Tensor> partition_of(int rank) const;
  /// Whether `rank` of a group of `size` keeps the partition of `owner`.
  bool keeps_partition(int rank, int owner, int size) const;
  void step_kept_parameters_only();
  void drop_state_of_others();
  void broadcast_parameters();

  torch::optim::Optimizer& optimizer_;
  ProcessGroup group_;
  std::vector<torch::Tensor> params_;
  std::vector<int> owners_;
  // The group owners_ partitions for, as it was: a default group handle stands for the next
  // generation's group once live recovery regroups, before reshard() repartitions.
  int layout_ranks_ = 1;
  int layout_rank_ = 0;
  bool consolidated_ = false;  // this rank holds others' state until the next step
  bool mirrored_ = false;
  bool agreed_ = false;  // the ranks of group_ checked that they hold the same parameters
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
    step_own_partition();
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

 protected:
  void step_visible() override { Opt::step(nullptr); }
};

}  // namespace lockstep
