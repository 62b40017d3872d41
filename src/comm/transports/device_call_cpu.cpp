// The CPU build's device calls: the libtorch it was built against has no CUDA, so no tensor
// can be on a device, and one that is (from another library) is refused with the reason.
#include "comm/transports/device_call.h"

#include "lockstep/error.h"

namespace lockstep {

std::shared_ptr<DeviceCall> begin_device_call(const std::vector<at::Tensor>& tensors, Collective kind, bool) {
  for (const auto& t : tensors) {
    if (!t.device().is_cpu()) {
      throw Error("lockstep::" + to_string(kind) + ": the tensor is on " + t.device().str() +
                  ", but this lockstep moves CPU tensors only "
                  "(it was built against a libtorch without CUDA; see docs/GPU.md); pass tensor.cpu()");
    }
  }
  return nullptr;
}

bool built_with_cuda() { return false; }

void use_cuda_device(int index) {
  throw ConfigError("lockstep::init: InitOptions::device(" + std::to_string(index) +
                    ") needs a GPU, but this lockstep was "
                    "built against a libtorch without CUDA (docs/GPU.md)");
}

void prefer_cuda_device(int) {}

int visible_cuda_devices() { return 0; }

}  // namespace lockstep
