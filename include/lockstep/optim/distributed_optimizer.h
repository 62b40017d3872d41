#pragma once

#include <type_traits>
#include <utility>
#include <vector>

#include <torch/optim/optimizer.h>

#include "lockstep/comm/collectives.h"

namespace lockstep {
namespace detail {

/// Averages the gradients of `params` across `group` where they are (a GPU's over the
/// group's device transport, with no host copy), and `loss` with them; returns the averaged
/// loss. A rank without a parameter's gradient sends zeros, as DistributedDataParallel does;
/// a gradient no rank has stays undefined, like in single-process training.
torch::Tensor average_gradients(const std::vector<torch::Tensor>& params, const torch::Tensor& loss,
                                const ProcessGroup& group);

}  // namespace detail

/// An Opt (torch::optim::SGD, Adam, AdamW, RMSprop, Adagrad, ...) whose step() first
/// averages every gradient across ranks, in one all_reduce: data parallelism without
/// DistributedDataParallel's hooks, at the price of no overlap with backward. Constructed
/// with Opt's own arguments; every rank must call step() together, as with any collective.
template <typename Opt>
class DistributedOptimizer : public Opt {
  static_assert(std::is_base_of_v<torch::optim::Optimizer, Opt>,
                "DistributedOptimizer<Opt> needs a torch::optim::Optimizer");

 public:
  using Opt::Opt;

  /// The same over `group` instead of the default group.
  template <typename... Args>
  explicit DistributedOptimizer(ProcessGroup group, Args&&... args)
      : Opt(std::forward<Args>(args)...), group_(std::move(group)) {}

  /// Averages gradients, then steps. With a closure, gradients are averaged after each call
  /// of it, and so is the loss it returns, so that every rank's step (LBFGS's line search
  /// included) sees the same numbers; step() then returns that averaged loss.
  torch::Tensor step(torch::optim::Optimizer::LossClosure closure = nullptr) override {
    if (!closure) {
      average_gradients(torch::Tensor());
      return Opt::step(nullptr);
    }
    return Opt::step([this, closure = std::move(closure)] { return average_gradients(closure()); });
  }

 private:
  torch::Tensor average_gradients(const torch::Tensor& loss) {
    std::vector<torch::Tensor> params;
    for (auto& group : this->param_groups()) {
      for (auto& p : group.params()) {
        if (p.requires_grad()) params.push_back(p);
      }
    }
    return detail::average_gradients(params, loss, group_);
  }

  ProcessGroup group_;
};

}  // namespace lockstep
