#include "train/autocast_guard.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

namespace lockstep::train {
namespace {

// libtorch 2.4 made autocast's switches per device type; before, each type had its own.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
bool is_enabled(c10::DeviceType device) { return at::autocast::is_autocast_enabled(device); }
void set_enabled(c10::DeviceType device, bool on) { at::autocast::set_autocast_enabled(device, on); }
c10::ScalarType get_dtype(c10::DeviceType device) { return at::autocast::get_autocast_dtype(device); }
void set_dtype(c10::DeviceType device, c10::ScalarType dtype) { at::autocast::set_autocast_dtype(device, dtype); }
#else
bool is_enabled(c10::DeviceType device) {
  return device == c10::DeviceType::CUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
}
void set_enabled(c10::DeviceType device, bool on) {
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_enabled(on);
  } else {
    at::autocast::set_cpu_enabled(on);
  }
}
c10::ScalarType get_dtype(c10::DeviceType device) {
  return device == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                         : at::autocast::get_autocast_cpu_dtype();
}
void set_dtype(c10::DeviceType device, c10::ScalarType dtype) {
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
}
#endif

}  // namespace

AutocastGuard::AutocastGuard(c10::DeviceType device, bool enabled) : device_(device), enabled_(enabled) {
  if (!enabled_) return;
  was_enabled_ = is_enabled(device_);
  previous_dtype_ = get_dtype(device_);
  set_enabled(device_, true);
  set_dtype(device_, c10::ScalarType::BFloat16);
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (!enabled_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_enabled(device_, was_enabled_);
  set_dtype(device_, previous_dtype_);
}

}  // namespace lockstep::train
