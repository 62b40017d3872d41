// OptimizerSharding::clip_grad_norm: libtorch's clip_grad_norm_ over gradients spread across
// the ranks (ZeRO-2), with its bits.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "lockstep/comm/collectives.h"
#include "lockstep/optim/sharded_optimizer.h"

namespace lockstep {

torch::Tensor OptimizerSharding::clip_grad_norm(double max_norm) {
  c10::NoGradGuard no_grad;
  const int64_t count = static_cast<int64_t>(params_.size());
  if (count == 0) return at::zeros({});
  at::ScalarType dtype = params_.front().scalar_type();
  for (const auto& p : params_) dtype = c10::promoteTypes(dtype, p.scalar_type());
  // Each gradient's norm from the rank that steps it, and whether it has one, in one vector
  // summed across the ranks: one term is non-zero per element, so the sum is exact, and the
  // total below is taken from the very norms libtorch would stack, in its order.
  at::Tensor norms_and_flags = at::zeros({2 * count}, params_.front().options().dtype(dtype));
  for (int64_t i = 0; i < count; ++i) {
    const at::Tensor& grad = params_[i].grad();
    if (owners_[i] != layout_rank_ || !grad.defined()) continue;
    norms_and_flags[i].copy_(grad.norm(2));
    norms_and_flags[count + i].fill_(1);
  }
  all_reduce(norms_and_flags, ReduceOp::Sum, group_);
  const at::Tensor with_gradient = norms_and_flags.narrow(0, count, count).nonzero().flatten();
  if (with_gradient.numel() == 0) return at::zeros({}, norms_and_flags.options());
  const at::Tensor norms = norms_and_flags.narrow(0, 0, count).index_select(0, with_gradient);
  const at::Tensor total = norms.numel() == 1 ? norms[0] : norms.norm(2);
  const at::Tensor coefficient = at::clamp(max_norm / (total + 1e-6), c10::nullopt, 1.0);
  for (const auto& p : params_) {
    if (p.grad().defined()) p.grad().mul_(coefficient);
  }
  return total;
}

}  // namespace lockstep
