#include "lockstep/train/device.h"

#include <cstdlib>
#include <mutex>

#include <ATen/Context.h>

#include "comm/transports/device_call.h"
#include "lockstep/error.h"

namespace lockstep::train {

int visible_gpus() { return visible_cuda_devices(); }

torch::Device choose_device(const std::string& choice, int local_rank) {
  if (choice == "cpu") return torch::kCPU;
  if (choice == "auto") return visible_gpus() > 0 ? choose_device("cuda", local_rank) : torch::kCPU;
  if (choice != "cuda" && choice.rfind("cuda:", 0) != 0) {
    throw ConfigError(choice + " is not a device; use auto, cpu, cuda or cuda:N");
  }
  if (!built_with_cuda()) {
    throw ConfigError(choice +
                      ": this lockstep was built against a libtorch without CUDA; "
                      "build it against a CUDA libtorch (docs/GPU.md)");
  }
  const int gpus = visible_gpus();
  if (gpus == 0) throw ConfigError(choice + ": no CUDA device is visible (check nvidia-smi and CUDA_VISIBLE_DEVICES)");
  if (choice == "cuda")
    return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(*gpu_of_local_rank(local_rank, gpus)));
  const torch::Device device = [&] {
    try {
      return torch::Device(choice);
    } catch (const c10::Error&) {
      throw ConfigError(choice + " is not a device; use auto, cpu, cuda or cuda:N");
    }
  }();
  if (device.index() >= gpus) {
    throw ConfigError(choice + ": only " + std::to_string(gpus) + " CUDA devices are visible");
  }
  return device;
}

void use_deterministic_algorithms() {
  static std::once_flag once;  // replicas on threads each ask; setenv is not thread-safe
  std::call_once(once, [] {
    setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
    at::globalContext().setDeterministicCuDNN(true);
    at::globalContext().setBenchmarkCuDNN(false);
    at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
  });
}

}  // namespace lockstep::train
