#pragma once

#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include "lockstep/comm/process_group.h"

namespace lockstep::detail {

/// An optimizer's parameters in param-group order, each with the label messages name it by
/// ("param group 0, parameter 3").
struct ParamGroupsLabels {
  std::vector<at::Tensor> params;
  std::vector<std::string> labels;
};

/// An optimizer's parameters in param-group order: how shards and layouts number them.
std::vector<at::Tensor> parameters_of(torch::optim::Optimizer& optimizer);

/// Checks that every rank's optimizer has root's kind and parameters of root's shapes and
/// dtypes; MismatchError on every rank, starting with `who` and naming the first difference.
ParamGroupsLabels agree_on_param_groups(const std::string& who, torch::optim::Optimizer& optimizer, int root,
                                        const ProcessGroup& group);

}  // namespace lockstep::detail
