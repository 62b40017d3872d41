#include "lockstep/ddp/distributed_optimizer.h"

#include <algorithm>

#include <ATen/ATen.h>
#include <torch/utils.h>

namespace lockstep::detail {
namespace {

// Parameters by device, devices in the order they first appear: one collective moves one
// device's tensors, and every rank (its model on its own device) makes the same calls.
std::vector<std::vector<size_t>> by_device(const std::vector<torch::Tensor>& params) {
  std::vector<at::Device> devices;
  std::vector<std::vector<size_t>> groups;
  for (size_t i = 0; i < params.size(); ++i) {
    const size_t d = std::find(devices.begin(), devices.end(), params[i].device()) - devices.begin();
    if (d == devices.size()) {
      devices.push_back(params[i].device());
      groups.emplace_back();
    }
    groups[d].push_back(i);
  }
  return groups;
}

}  // namespace

torch::Tensor average_gradients(const std::vector<torch::Tensor>& params, const torch::Tensor& loss,
                                const ProcessGroup& group) {
  torch::NoGradGuard no_grad;
  torch::Tensor averaged_loss = loss.defined() ? loss.detach().clone().contiguous() : loss;
  if (params.empty()) {
    if (loss.defined()) all_reduce(averaged_loss, ReduceOp::Avg, group);
    return averaged_loss;
  }
  const auto groups = by_device(params);
  for (size_t g = 0; g < groups.size(); ++g) {
    const at::Device device = params[groups[g].front()].device();
    std::vector<torch::Tensor> wire;  // contiguous gradients reduce in place
    std::vector<double> has_grad;
    for (size_t i : groups[g]) {
      const torch::Tensor& grad = params[i].grad();
      has_grad.push_back(grad.defined() ? 1 : 0);
      wire.push_back(grad.defined() ? grad.contiguous() : at::zeros_like(params[i], at::MemoryFormat::Contiguous));
    }
    // Which ranks had each gradient, in the first gradient's dtype: it travels in the same buffer.
    const torch::Tensor mask = at::tensor(has_grad, at::kDouble).to(device, params[groups[g].front()].scalar_type());
    wire.push_back(mask);
    // The loss travels with the first device's gradients: no collective of its own.
    if (g == 0 && loss.defined()) wire.push_back(averaged_loss.to(device));
    all_reduce(wire, ReduceOp::Avg, group);

    const torch::Tensor had = mask.to(at::kCPU, at::kDouble);
    for (size_t k = 0; k < groups[g].size(); ++k) {
      if (had.data_ptr<double>()[k] == 0) continue;
      torch::Tensor& grad = params[groups[g][k]].mutable_grad();
      if (!grad.defined()) {
        grad = wire[k];
      } else if (!wire[k].is_same(grad)) {
        grad.copy_(wire[k]);
      }
    }
    if (g == 0 && loss.defined()) averaged_loss = wire.back().to(loss.device());
  }
  return averaged_loss;
}

}  // namespace lockstep::detail
