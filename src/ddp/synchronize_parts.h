#pragma once

#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include "lockstep/comm/process_group.h"

// The parts of synchronize() that ShardedOptimizer shares: checking that ranks agree on an
// optimizer's parameters, and moving root's values into every rank's tensors.
namespace lockstep::detail {

/// Root's values land in every rank's tensors where they are (a GPU's over the group's
/// device transport), in one broadcast per device and dtype. Non-contiguous tensors travel
/// as a contiguous copy, and tensors of a dtype the collectives do not carry as raw bytes.
void broadcast_into(const std::vector<at::Tensor>& tensors, int root, const ProcessGroup& group);

/// An optimizer's parameters in param-group order, each with the label messages name it by
/// ("param group 0, parameter 3").
struct ParamGroupsLabels {
  std::vector<at::Tensor> params;
  std::vector<std::string> labels;
};

/// Checks that every rank's optimizer has root's kind and parameters of root's shapes and
/// dtypes; MismatchError on every rank, starting with `who` and naming the first difference.
ParamGroupsLabels agree_on_param_groups(const std::string& who, torch::optim::Optimizer& optimizer, int root,
                                        const ProcessGroup& group);

}  // namespace lockstep::detail
