// all_reduce bandwidth of 64 MB float32 tensors between 2 ranks on one GPU, through host
// staging (the ranks are replicas on threads; each call copies to pinned memory, reduces
// there and copies back):
//
//   bench/gpu_allreduce [--device cuda] [--megabytes 64] [--repeats 20]
//
// prints the median time per call and the bus bandwidth as nccl-tests counts it
// (2 (n-1)/n × bytes / time). `--device cpu` times the same call on CPU tensors.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "lockstep/lockstep.h"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> values) {
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string device_name = "cuda";
  int64_t megabytes = 64;
  int repeats = 20;
  CLI::App app{"all_reduce bandwidth between 2 ranks on one GPU, host-staged"};
  app.add_option("--device", device_name, "cuda, cuda:N or cpu")->capture_default_str();
  app.add_option("--megabytes", megabytes, "Size of each rank's tensor")->capture_default_str();
  app.add_option("--repeats", repeats, "Timed calls")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const torch::Device device(device_name);
  const int64_t elements = megabytes * 1024 * 1024 / 4;
  constexpr int kRanks = 2;
  std::vector<double> seconds;  // rank 0's, per call
  lockstep::run_replicas(kRanks, [&](lockstep::ProcessGroup group) {
    auto tensor = torch::ones({elements}, torch::TensorOptions().device(device));
    for (int i = 0; i < 3 + repeats; ++i) {
      lockstep::barrier();
      if (device.is_cuda()) torch::cuda::synchronize(device.index());
      const auto began = Clock::now();
      lockstep::all_reduce(tensor);
      if (device.is_cuda()) torch::cuda::synchronize(device.index());
      if (group.rank() == 0 && i >= 3) seconds.push_back(std::chrono::duration<double>(Clock::now() - began).count());
    }
  });
  const double time = median(seconds);
  const double bytes = static_cast<double>(elements) * 4;
  std::printf("all_reduce of %lld MB float32 between %d ranks on %s%s: %.2f ms, bus bandwidth %.2f GB/s "
              "(median of %d)\n",
              static_cast<long long>(megabytes), kRanks, device.str().c_str(), device.is_cuda() ? ", host-staged" : "",
              1e3 * time,
              2.0 * (kRanks - 1) / kRanks * bytes / time / 1e9, repeats);
  return 0;
}
