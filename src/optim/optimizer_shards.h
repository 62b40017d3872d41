#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>

// A ShardedOptimizer's state in a checkpoint. Beside rank 0's `step-N.pt`, each rank that
// trained writes `step-N.optimizer-R-of-W.pt`: the state of the parameters it owned. Rank
// 0's file records the layout (ShardLayout), so that the state of any parameter can be read
// back at any world size: each rank reads the shards holding its new partition.
namespace lockstep::optim {

/// What rank 0's checkpoint says of the optimizer's shards.
struct ShardLayout {
  std::string kind;             // "Adam", as in optimizer_kinds.h
  int64_t world_size = 0;       // shards written
  std::vector<int64_t> owners;  // the shard holding each parameter, in param-group order
  torch::Tensor options;        // the options table of the optimizer's param groups

  void write(torch::serialize::OutputArchive& archive) const;
  /// False when the checkpoint has no shards (its optimizer state is in the file itself).
  bool read(torch::serialize::InputArchive& archive);
};

/// `dir/step-0000000100.pt` -> `dir/step-0000000100.optimizer-2-of-3.pt`
std::string optimizer_shard_path(const std::string& checkpoint, int rank, int world_size);

/// The layout of `optimizer`'s state when each parameter's is kept by `owners`' rank.
ShardLayout shard_layout(torch::optim::Optimizer& optimizer, const std::vector<int>& owners, int world_size);

/// Writes this rank's shard of `checkpoint` (the state of the parameters `owners` gives
/// `rank`) atomically: a temporary file, fsync, rename. The folder's fsync is rank 0's.
void write_optimizer_shard(const std::string& checkpoint, int64_t step, torch::optim::Optimizer& optimizer,
                           const std::vector<int>& owners, int rank, int world_size);

/// Reads the state of the parameters at `indices` (param-group order) from the shards of
/// `checkpoint` into `optimizer`, on its parameters' devices, and sets the options of its
/// param groups. DataError naming the file for a missing, truncated or foreign shard, or
/// state that does not fit this optimizer's parameters.
void read_optimizer_shards(const std::string& checkpoint, int64_t step, const ShardLayout& layout,
                           const std::vector<size_t>& indices, torch::optim::Optimizer& optimizer);

}  // namespace lockstep::optim
