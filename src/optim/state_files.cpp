#include "optim/state_files.h"

#include "comm/tensors/encoding.h"
#include "comm/tensors/first_error.h"
#include "lockstep/comm/collectives.h"
#include "lockstep/error.h"
#include "lockstep/optim/sharded_optimizer.h"
#include "optim/optimizer_kinds.h"
#include "optim/optimizer_state_table.h"
#include "optim/param_groups.h"

namespace lockstep::optim {
namespace {

// Rank 0's learning rates, betas, ... on every rank.
void broadcast_options(torch::optim::Optimizer& optimizer, const ProcessGroup& group) {
  detail::visit_kind(optimizer, [&](auto kind) { detail::broadcast_options<decltype(kind)>(optimizer, 0, group); });
}

}  // namespace

// The one place that tells a ShardedOptimizer apart.
StateFiles::StateFiles(torch::optim::Optimizer& optimizer)
    : optimizer_(optimizer), sharding_(dynamic_cast<OptimizerSharding*>(&optimizer)) {}

bool StateFiles::sharded() const { return sharding_ != nullptr && sharding_->group().size() > 1; }

bool StateFiles::holds_all_state() const { return sharding_ == nullptr || sharding_->holds_all_state(); }

ShardLayout StateFiles::layout() const {
  return shard_layout(optimizer_, sharding_->owners(), sharding_->group().size());
}

void StateFiles::write_shard(const std::string& checkpoint, int64_t step) const {
  const ProcessGroup& group = sharding_->group();
  std::string error;
  try {
    write_optimizer_shard(checkpoint, step, optimizer_, sharding_->owners(), group.rank(), group.size());
  } catch (const Error& e) {
    error = e.what();
  }
  detail::throw_first_error(error, group);
}

std::vector<size_t> StateFiles::indices_to_read() const {
  std::vector<size_t> indices;
  if (sharding_ != nullptr) {
    for (size_t i = 0; i < sharding_->owners().size(); ++i) {
      if (sharding_->keeps(i)) indices.push_back(i);  // under live recovery, its neighbour's too
    }
    return indices;
  }
  for (size_t i = 0; i < detail::parameters_of(optimizer_).size(); ++i) indices.push_back(i);
  return indices;
}

void StateFiles::resume_from_rank_zero(const std::string& checkpoint, int64_t step, int64_t shards,
                                       const ShardLayout& layout) const {
  const ProcessGroup& group = sharding_->group();
  if (shards == 0) {
    sharding_->distribute_state(0);
  } else {
    // Rank 0 checked the layout against this model; the others read their partitions by it.
    at::Tensor owners = group.rank() == 0 ? at::tensor(layout.owners, at::kLong)
                                          : at::zeros({static_cast<int64_t>(sharding_->owners().size())}, at::kLong);
    broadcast(owners, 0, group);
    std::string error;
    if (group.rank() != 0) {
      ShardLayout theirs = shard_layout(optimizer_, sharding_->owners(), static_cast<int>(shards));
      theirs.owners = detail::as_int64_vector(owners);
      try {
        read_optimizer_shards(checkpoint, step, theirs, indices_to_read(), optimizer_);
      } catch (const Error& e) {
        error = e.what();
      }
    }
    detail::throw_first_error(error, group);
  }
  broadcast_options(optimizer_, group);
}

void move_state_to_parameters(torch::optim::Optimizer& optimizer) {
  const auto params = detail::parameters_of(optimizer);
  detail::visit_kind(optimizer,
                     [&](auto kind) { detail::move_state_to_parameters<decltype(kind)>(optimizer, params); });
}

}  // namespace lockstep::optim
