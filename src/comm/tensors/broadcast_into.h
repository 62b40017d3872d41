#pragma once

#include <vector>

#include <ATen/core/Tensor.h>

#include "lockstep/comm/process_group.h"

namespace lockstep::detail {

/// Root's values land in every rank's tensors where they are (a GPU's over the group's
/// device transport), in one broadcast per device and dtype. Non-contiguous tensors travel
/// as a contiguous copy, and tensors of a dtype the collectives do not carry as raw bytes.
/// With `large_alone`, tensors of 1 MiB or more travel each alone and in place instead,
/// only the rest packed: for a whole model's state (synchronize, live recovery's heal),
/// where packing would copy every byte into a fresh buffer and out again.
void broadcast_into(const std::vector<at::Tensor>& tensors, int root, const ProcessGroup& group,
                    bool large_alone = false);

}  // namespace lockstep::detail
