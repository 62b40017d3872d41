#pragma once

#include <vector>

#include <ATen/core/Tensor.h>

namespace lockstep::train {

/// libtorch's clip_grad_norm_ (2-norm) with the same operations and bits, but the total
/// norm is returned as a tensor: libtorch's returns a double, whose .item() makes the host
/// wait for the GPU every step (Python's returns a tensor too).
at::Tensor clip_grad_norm(const std::vector<at::Tensor>& parameters, double max_norm);

}  // namespace lockstep::train
