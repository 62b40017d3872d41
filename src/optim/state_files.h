#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/optim/optimizer.h>

#include "lockstep/comm/process_group.h"
#include "optim/optimizer_shards.h"

namespace lockstep {
class OptimizerSharding;
}  // namespace lockstep

// How an optimizer's state goes into a checkpoint and comes back, for the checkpoint code,
// which need not know which optimizers are sharded: a ShardedOptimizer of more than one rank
// writes a shard per rank beside the checkpoint, whose file records their layout; any other
// optimizer's state is in the checkpoint file itself.
namespace lockstep::optim {

class StateFiles {
 public:
  explicit StateFiles(torch::optim::Optimizer& optimizer);

  /// Whether the state goes into shard files: every rank of the optimizer's group answers
  /// alike (unlike holds_all_state(), which a consolidation or a load makes true on one).
  bool sharded() const;
  /// Whether this process's state() holds every parameter's state, so that the checkpoint
  /// file can take it whole (not sharded, a group of one, or consolidated here).
  bool holds_all_state() const;
  /// What the checkpoint file records of the shards.
  ShardLayout layout() const;
  /// Writes this rank's shard of `checkpoint`. Every rank of the group calls it; the first
  /// error is thrown on all of them.
  void write_shard(const std::string& checkpoint, int64_t step) const;
  /// The parameters (in param-group order) whose state this process reads from a sharded
  /// checkpoint: those it keeps where the optimizer is sharded, else every one.
  std::vector<size_t> indices_to_read() const;
  /// After rank 0 loaded `checkpoint` (its own parameters' state from `shards` shard files
  /// laid out as `layout`, or every parameter's where `shards` is 0), every rank of the group
  /// gets the state of its own parameters and rank 0's options. Every rank calls it.
  void resume_from_rank_zero(const std::string& checkpoint, int64_t step, int64_t shards,
                             const ShardLayout& layout) const;

 private:
  torch::optim::Optimizer& optimizer_;
  OptimizerSharding* sharding_;  // null: not a ShardedOptimizer
};

/// Moves each parameter's state tensors to its parameter's device: state loaded onto the
/// CPU, for parameters on a GPU (or the other way round).
void move_state_to_parameters(torch::optim::Optimizer& optimizer);

}  // namespace lockstep::optim
