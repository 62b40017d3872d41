#include "lockstep/train/device.h"

#include <torch/cuda.h>

#include "comm/device_call.h"
#include "lockstep/comm/error.h"

namespace lockstep::train {

int visible_gpus() { return built_with_cuda() ? static_cast<int>(torch::cuda::device_count()) : 0; }

torch::Device choose_device(const std::string& choice, int local_rank) {
  if (choice == "cpu") return torch::kCPU;
  if (choice == "auto") return visible_gpus() > 0 ? choose_device("cuda", local_rank) : torch::kCPU;
  if (choice != "cuda" && choice.rfind("cuda:", 0) != 0) {
    throw ConfigError("--device " + choice + " is not a device; use auto, cpu, cuda or cuda:N");
  }
  if (!built_with_cuda()) {
    throw ConfigError("--device " + choice + ": this lockstep was built against a libtorch without CUDA; "
                      "build it against a CUDA libtorch (docs/GPU.md)");
  }
  const int gpus = visible_gpus();
  if (gpus == 0) throw ConfigError("--device " + choice + ": no CUDA device is visible (check nvidia-smi and CUDA_VISIBLE_DEVICES)");
  if (choice == "cuda") return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank % gpus));
  const torch::Device device = [&] {
    try {
      return torch::Device(choice);
    } catch (const c10::Error&) {
      throw ConfigError("--device " + choice + " is not a device; use auto, cpu, cuda or cuda:N");
    }
  }();
  if (device.index() >= gpus) {
    throw ConfigError("--device " + choice + ": only " + std::to_string(gpus) + " CUDA devices are visible");
  }
  return device;
}

}  // namespace lockstep::train
