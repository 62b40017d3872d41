#include "lockstep/optim/distributed_optimizer.h"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include "comm/tensors/tensors_by_device.h"

namespace lockstep::detail {

torch::Tensor average_gradients(const std::vector<torch::Tensor>& params, const torch::Tensor& loss,
                                const ProcessGroup& group) {
  torch::NoGradGuard no_grad;
  torch::Tensor averaged_loss = loss.defined() ? loss.detach().clone().contiguous() : loss;
  if (params.empty()) {
    if (loss.defined()) all_reduce(averaged_loss, ReduceOp::Avg, group);
    return averaged_loss;
  }
  const auto groups = indices_by_device(params);
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
