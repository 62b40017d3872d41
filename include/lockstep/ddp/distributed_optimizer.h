#pragma once

#include <type_traits>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>
#include <torch/utils.h>

#include "lockstep/comm/collectives.h"

namespace lockstep {

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
    return Opt::step([this, closure = std::move(closure)] {
      return average_gradients(closure());
    });
  }

 private:
  // Parameters that require grad, of every group. A rank without a parameter's gradient sends
  // zeros, so that every rank sends the same list, and a mask says which ranks had one: a
  // gradient no rank has stays undefined, like in single-process training.
  torch::Tensor average_gradients(const torch::Tensor& loss) {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> params;
    for (auto& group : this->param_groups()) {
      for (auto& p : group.params()) {
        if (p.requires_grad()) params.push_back(p);
      }
    }
    if (params.empty() && !loss.defined()) return loss;

    std::vector<torch::Tensor> wire;  // contiguous CPU tensors, as the collectives want
    std::vector<double> has_grad;
    for (const auto& p : params) {
      const torch::Tensor& grad = p.grad();
      has_grad.push_back(grad.defined() ? 1 : 0);
      wire.push_back(grad.defined() ? grad.to(at::kCPU).contiguous()
                                    : at::zeros(p.sizes(), p.options().device(at::kCPU)));
    }
    // The mask shares the first gradient's dtype so that it travels in the same buffer.
    const auto mask_dtype = params.empty() ? at::kFloat : params[0].scalar_type();
    const torch::Tensor mask = at::tensor(has_grad, at::kDouble).to(mask_dtype);
    if (!params.empty()) wire.push_back(mask);
    if (loss.defined()) wire.push_back(loss.detach().to(at::kCPU).contiguous().clone());
    all_reduce(wire, ReduceOp::Avg, group_);

    const torch::Tensor had = mask.to(at::kDouble).contiguous();
    for (size_t i = 0; i < params.size(); ++i) {
      if (had.data_ptr<double>()[i] == 0) continue;
      torch::Tensor& grad = params[i].mutable_grad();
      if (!grad.defined()) {
        grad = wire[i].to(params[i].device());
      } else if (!wire[i].is_same(grad)) {
        grad.copy_(wire[i]);
      }
    }
    return loss.defined() ? wire.back().to(loss.device()) : loss;
  }

  ProcessGroup group_;
};

}  // namespace lockstep
