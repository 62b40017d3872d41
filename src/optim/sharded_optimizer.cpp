#include "lockstep/optim/sharded_optimizer.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <string>

#include <ATen/ATen.h>
#include <c10/util/StringUtil.h>
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

// Live recovery keeps each partition on two ranks (mirrored()); its launcher says so to
// every worker alike.
bool recovery_is_live() {
  const char* recovery = std::getenv("LOCKSTEP_RECOVERY");
  return recovery != nullptr && std::string(recovery) == "live";
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
    : optimizer_(optimizer), group_(std::move(group)), mirrored_(recovery_is_live()) {
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
  if (mirrored_) {
    // A replacement makes its optimizer before it has peers to agree with: under live
    // recovery the parameters are agreed on as a group forms (its first step, each reshard).
    params_ = detail::parameters_of(optimizer_);
  } else {
    agree(group_);
  }
  layout_ranks_ = group_.size();
  layout_rank_ = group_.rank();
  owners_ = partition_by_bytes(params_, layout_ranks_);
  drop_state_of_others();  // Adagrad makes every parameter's state as it is constructed
}

void OptimizerSharding::agree(const ProcessGroup& group) {
  params_ = detail::agree_on_param_groups("lockstep::ShardedOptimizer", optimizer_, 0, group).params;
  agreed_ = true;
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
  if (!agreed_) agree(group_);
  const int me = group_.rank();
  detail::visit_kind(optimizer_, [&](auto kind) {
    for (int r = 0; r < group_.size(); ++r) {
      const bool keep = me == root || keeps_partition(me, r, group_.size());
      if (r != root) share_state<decltype(kind)>(optimizer_, partition_of(r), r, keep, group_);
    }
  });
  consolidated_ = me == root;
}

void OptimizerSharding::distribute_state(int root) {
  torch::NoGradGuard no_grad;
  if (!agreed_) agree(group_);
  const int me = group_.rank();
  detail::visit_kind(optimizer_, [&](auto kind) {
    for (int r = 0; r < group_.size(); ++r) {
      // Root keeps its own partition already; only its mirror needs it sent.
      if (r == root && !mirrored_) continue;
      share_state<decltype(kind)>(optimizer_, partition_of(r), root, keeps_partition(me, r, group_.size()), group_);
    }
  });
  drop_state_of_others();
}

bool OptimizerSharding::keeps_partition(int rank, int owner, int size) const {
  return owner == rank || (mirrored_ && owner == (rank + 1) % size);
}

bool OptimizerSharding::keeps(size_t index) const {
  return keeps_partition(layout_rank_, owners_.at(index), layout_ranks_);
}

void OptimizerSharding::step_kept_partitions() {
  if (consolidated_) drop_state_of_others();
  step_kept_parameters_only();
}

void OptimizerSharding::reshard(ProcessGroup group, bool holds) {
  torch::NoGradGuard no_grad;
  agree(group);
  const int ranks = group.size(), me = group.rank();
  // Each member's layout, (ranks, rank) in the group it kept partitions for, where it holds.
  at::Tensor layouts = at::zeros({ranks, 2}, at::kLong);
  if (holds) {
    layouts[me][0] = layout_ranks_;
    layouts[me][1] = layout_rank_;
  }
  all_reduce(layouts, ReduceOp::Sum, group);
  // Each parameter from the lowest rank that keeps it.
  std::vector<int> source(params_.size(), -1);
  for (int m = 0; m < ranks; ++m) {
    const int size = static_cast<int>(layouts[m][0].item<int64_t>());
    if (size == 0) continue;
    const std::vector<int> owners = partition_by_bytes(params_, size);
    for (size_t i = 0; i < params_.size(); ++i) {
      if (source[i] < 0 && keeps_partition(static_cast<int>(layouts[m][1].item<int64_t>()), owners[i], size)) {
        source[i] = m;
      }
    }
  }
  const auto lost = std::find(source.begin(), source.end(), -1);
  if (lost != source.end()) {
    const size_t i = static_cast<size_t>(lost - source.begin());
    throw Error("lockstep::ShardedOptimizer: no member keeps the state of parameter " + std::to_string(i) + " (" +
                c10::str(params_[i].sizes()) +
                ") any more: both ranks that kept its partition were lost at once; resume from the last "
                "checkpoint");
  }
  const std::vector<int> owners = partition_by_bytes(params_, ranks);
  std::vector<torch::Tensor> unneeded;  // received, but neither kept before nor after
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!keeps_partition(me, owners[i], ranks) && !(holds && keeps(i))) unneeded.push_back(params_[i]);
  }
  for (int m = 0; m < ranks; ++m) {
    std::vector<torch::Tensor> sent;
    for (size_t i = 0; i < params_.size(); ++i) {
      if (source[i] == m) sent.push_back(params_[i]);
    }
    if (sent.empty()) continue;
    detail::visit_kind(optimizer_, [&](auto kind) {
      share_state<decltype(kind)>(optimizer_, sent, m, /*keep=*/true, group);
      erase_state<decltype(kind)>(optimizer_, unneeded);
    });
    detail::broadcast_into(sent, m, group);
  }
  if (!source.empty()) {
    detail::visit_kind(optimizer_,
                       [&](auto kind) { detail::broadcast_options<decltype(kind)>(optimizer_, source[0], group); });
  }
  group_ = std::move(group);
  owners_ = owners;
  layout_ranks_ = ranks;
  layout_rank_ = me;
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
    if (!keeps(i)) others.push_back(params_[i]);
  }
  detail::visit_kind(optimizer_, [&](auto kind) { erase_state<decltype(kind)>(optimizer_, others); });
  consolidated_ = false;
}

void OptimizerSharding::step_own_partition() {
  if (!agreed_) agree(group_);
  if (consolidated_) drop_state_of_others();
  step_kept_parameters_only();
  broadcast_parameters();
}

void OptimizerSharding::step_kept_parameters_only() {
  // Parameters without a gradient are skipped by every torch::optim step, so hiding the
  // others' gradients steps the kept partitions with the unsharded arithmetic.
  std::vector<std::pair<size_t, torch::Tensor>> hidden;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (keeps(i) || !params_[i].grad().defined()) continue;
    hidden.emplace_back(i, params_[i].grad());
    params_[i].mutable_grad() = torch::Tensor();
  }
  auto restore = [&] {
    for (auto& [i, grad] : hidden) params_[i].mutable_grad() = std::move(grad);
  };
  try {
    step_visible();
  } catch (...) {
    restore();
    throw;
  }
  restore();
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
