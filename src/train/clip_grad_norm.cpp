#include "train/clip_grad_norm.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

namespace lockstep::train {

at::Tensor clip_grad_norm(const std::vector<at::Tensor>& parameters, double max_norm) {
  c10::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  for (const auto& p : parameters) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return at::zeros({});
  std::vector<at::Tensor> norms;
  norms.reserve(grads.size());
  for (const auto& g : grads) norms.push_back(g.norm(2));
  const at::Tensor total = norms.size() == 1 ? norms[0] : at::stack(norms).norm(2);
  const at::Tensor coefficient = at::clamp(max_norm / (total + 1e-6), c10::nullopt, 1.0);
  for (auto& g : grads) g.mul_(coefficient);
  return total;
}

}  // namespace lockstep::train
