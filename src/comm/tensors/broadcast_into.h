#pragma once

#include <vector>

#include <ATen/core/Tensor.h>

#include "lockstep/comm/process_group.h"

namespace lockstep::detail {

/// Root's values land in every rank's tensors where they are (a GPU's over the group's
/// device transport), in one broadcast per device and dtype. Non-contiguous tensors travel
/// as a contiguous copy, and tensors of a dtype the collectives do not carry as raw bytes.
void broadcast_into(const std::vector<at::Tensor>& tensors, int root, const ProcessGroup& group);

}  // namespace lockstep::detail
