#pragma once

#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace lockstep::tools {

/// Writes named tensors to `path` as Python's torch.save(state_dict) does: a zip archive whose
/// data.pkl is a plain dict of tensors, each tensor's bytes in a record of its own. A plain
/// torch.load(path) reads it in every PyTorch from 1.13 on, with weights_only=True (2.6's
/// default) too. (libtorch's pickle_save wraps its dict in torch.jit._pickle.restore_type_tag,
/// which weights_only refuses.) Tensors are written from the CPU, contiguous.
void save_for_torch_load(const std::vector<std::pair<std::string, at::Tensor>>& tensors, const std::string& path);

}  // namespace lockstep::tools
