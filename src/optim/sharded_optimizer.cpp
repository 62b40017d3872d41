#include "lockstep/optim/sharded_optimizer.h"

#include <algorithm>
#include <numeric>

#include <ATen/ATen.h>
#include <c10/util/Type.h>
#include <torch/utils.h>

#include "comm/tensors/broadcast_into.h"
#include "lockstep/comm/collectives.h"
#include "lockstep/error.h"
#include "optim/optimizer_kinds.h"
#include "optim/optimizer_state_table.h"
#include "optim/param_groups.h"

namespace lockstep {
namespace {

// Parameters broadcast together after a step, at most this many bytes: the packed copy
// each collective makes stays small beside the model.
constexpr int64_t kBroadcastBucketBytes = 32 << 20;

int64_t bytes_of(const torch::Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); }

// Largest first, each to the rank holding the fewest bytes so far (the lowest such rank):
// greedy, deterministic, the same on every rank.
std::vector<int> partition_by_bytes(const std::vector<torch::Tensor>& params, int ranks) {
  std::vector<size_t> order(params.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return bytes_of(params[a]) > bytes_of(params[b]); });
  std::vector<int64_t> load(ranks, 0);
  std::vector<int> owners(params.size(), 0);
  for (size_t i : order) {
    const int rank = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    owners[i] = rank;
    load[rank] += bytes_of(params[i]);
  }
  return owners;
}

template <typename Kind>
void erase_state(torch::optim::Optimizer& optimizer, const std::vector<torch::Tensor>& params) {
  auto& state = optimizer.state();
  for (const auto& p : params) state.erase(detail::state_key<std::decay_t<decltype(state)>>(p));
}

// Moves the state of `params` (one rank's partition) from rank `source` to every rank, then
// drops it again where `keep` is false. Broadcasts carry it, there being no point-to-point
// calls: the others receive it only to let it go.
template <typename Kind>
void share_state(torch::optim::Optimizer& optimizer, const std::vector<torch::Tensor>& params, int source, bool keep,
                 const ProcessGroup& group) {
  torch::Tensor table = detail::state_table<Kind>(optimizer, params);
  broadcast(table, source, group);
  const bool is_source = group.rank() == source;
  detail::broadcast_into(detail::match_state<Kind>(optimizer, params, table, is_source), source, group);
  if (!keep) erase_state<Kind>(optimizer, params);
}

}  // namespace

OptimizerSharding::OptimizerSharding(torch::optim::Optimizer& optimizer, ProcessGroup group)
    : optimizer_(optimizer), group_(std::move(group)) {
  const std::string who = "lockstep::ShardedOptimizer";
  if (!detail::visit_kind(optimizer_, [](auto) {})) {
    const std::string type = c10::demangle(typeid(optimizer_).name());
    const bool lbfgs = type.find("LBFGS") != std::string::npos;
    throw ConfigError(who + " cannot shard " + type +
                      (lbfgs ? ", whose line search needs dot products over every "
                               "parameter; use DistributedOptimizer<LBFGS>"
                             : "") +
                      "; it shards " + detail::kSupportedKindNames);
  }
  params_ = detail::agree_on_param_groups(who, optimizer_, 0, group_).params;
  owners_ = partition_by_bytes(params_, group_.size());
  drop_state_of_others();  // Adagrad makes every parameter's state as it is constructed
}

bool OptimizerSharding::holds_all_state() const { return consolidated_ || group_.size() == 1; }

void OptimizerSharding::check_holds_all_state(const char* what) const {
  if (holds_all_state()) return;
  throw ConfigError(std::string("lockstep::ShardedOptimizer::") + what + ": rank " + std::to_string(group_.rank()) +
                    " holds the state of its own parameters only; call consolidate_state_dict(" +
                    std::to_string(group_.rank()) +
                    ") on every rank first, or save with lockstep's checkpoints, "
                    "which write each rank's shard");
}

void OptimizerSharding::consolidate_state_dict(int root) {
  torch::NoGradGuard no_grad;
  const int me = group_.rank();
  detail::visit_kind(optimizer_, [&](auto kind) {
    for (int r = 0; r < group_.size(); ++r) {
      if (r != root) share_state<decltype(kind)>(optimizer_, partition_of(r), r, me == r || me == root, group_);
    }
  });
  consolidated_ = me == root;
}

void OptimizerSharding::distribute_state(int root) {
  torch::NoGradGuard no_grad;
  const int me = group_.rank();
  detail::visit_kind(optimizer_, [&](auto kind) {
    for (int r = 0; r < group_.size(); ++r) {
      if (r != root) share_state<decltype(kind)>(optimizer_, partition_of(r), root, me == r, group_);
    }
  });
  drop_state_of_others();
}

std::vector<torch::Tensor> OptimizerSharding::partition_of(int rank) const {
  std::vector<torch::Tensor> partition;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (owners_[i] == rank) partition.push_back(params_[i]);
  }
  return partition;
}

void OptimizerSharding::drop_state_of_others() {
  std::vector<torch::Tensor> others;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (owners_[i] != group_.rank()) others.push_back(params_[i]);
  }
  detail::visit_kind(optimizer_, [&](auto kind) { erase_state<decltype(kind)>(optimizer_, others); });
  consolidated_ = false;
}

void OptimizerSharding::step_own_partition(const std::function<void()>& step) {
  if (consolidated_) drop_state_of_others();
  {
    // Parameters without a gradient are skipped by every torch::optim step, so hiding the
    // others' gradients steps this rank's partition with the unsharded arithmetic.
    std::vector<std::pair<size_t, torch::Tensor>> hidden;
    for (size_t i = 0; i < params_.size(); ++i) {
      if (owners_[i] == group_.rank() || !params_[i].grad().defined()) continue;
      hidden.emplace_back(i, params_[i].grad());
      params_[i].mutable_grad() = torch::Tensor();
    }
    auto restore = [&] {
      for (auto& [i, grad] : hidden) params_[i].mutable_grad() = std::move(grad);
    };
    try {
      step();
    } catch (...) {
      restore();
      throw;
    }
    restore();
  }
  broadcast_parameters();
}

void OptimizerSharding::broadcast_parameters() {
  torch::NoGradGuard no_grad;
  for (int owner = 0; owner < group_.size(); ++owner) {
    std::vector<torch::Tensor> bucket;
    int64_t bytes = 0;
    for (size_t i = 0; i < params_.size(); ++i) {
      if (owners_[i] != owner) continue;
      if (!bucket.empty() && bytes + bytes_of(params_[i]) > kBroadcastBucketBytes) {
        detail::broadcast_into(bucket, owner, group_);
        bucket.clear();
        bytes = 0;
      }
      bucket.push_back(params_[i]);
      bytes += bytes_of(params_[i]);
    }
    if (!bucket.empty()) detail::broadcast_into(bucket, owner, group_);
  }
}

}  // namespace lockstep
