#pragma once

#include <algorithm>
#include <vector>

#include <ATen/core/Tensor.h>

namespace lockstep::detail {

/// The indices of `tensors` grouped by device, devices in the order they first appear: one
/// collective moves one device's tensors, and every rank (its model on its own device)
/// makes the same calls.
inline std::vector<std::vector<size_t>> indices_by_device(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Device> devices;
  std::vector<std::vector<size_t>> groups;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const size_t d = std::find(devices.begin(), devices.end(), tensors[i].device()) - devices.begin();
    if (d == devices.size()) {
      devices.push_back(tensors[i].device());
      groups.emplace_back();
    }
    groups[d].push_back(i);
  }
  return groups;
}

}  // namespace lockstep::detail
