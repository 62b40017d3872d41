#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

namespace lockstep::train {

// bf16 mixed precision for what runs in its scope on one device type, as Python's
// torch.autocast does: the previous state comes back at the end, and the cache of
// lower-precision weights is cleared when the outermost guard ends. Does nothing when
// not `enabled`.
class AutocastGuard {
 public:
  AutocastGuard(c10::DeviceType device, bool enabled);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType device_;
  bool enabled_;
  bool was_enabled_ = false;
  c10::ScalarType previous_dtype_ = c10::ScalarType::Undefined;
};

}  // namespace lockstep::train
