// all_reduce bandwidth of 64 MB float32 tensors between 2 ranks on one GPU:
//
//   bench/gpu_allreduce [--device cuda] [--megabytes 64] [--repeats 20]
//       host-staged between 2 replicas on threads (each call copies to pinned memory,
//       reduces there and copies back);
//   lockstep run -n 2 -- bench/gpu_allreduce --transport staged|nccl
//       between 2 processes: staged over gloo (DeviceBackend::Staged), or over NCCL. NCCL takes two
//       ranks on one GPU only when they claim different hosts, so with nccl each rank sets
//       its own NCCL_HOSTID (and loopback sockets): a benchmark-only arrangement.
//
// prints the median time per call and the bus bandwidth as nccl-tests counts it
// (2 (n-1)/n × bytes / time). `--device cpu` times the same call on CPU tensors.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "lockstep/lockstep.h"
#include "median.h"

namespace {

using lockstep::bench::median;

using Clock = std::chrono::steady_clock;

// Seconds of each timed all_reduce on this rank of `group`, after 3 untimed ones.
std::vector<double> time_all_reduce(const lockstep::ProcessGroup& group, torch::Device device, int64_t elements,
                                    int repeats) {
  auto tensor = torch::ones({elements}, torch::TensorOptions().device(device));
  std::vector<double> seconds;
  for (int i = 0; i < 3 + repeats; ++i) {
    lockstep::barrier(group);
    if (device.is_cuda()) torch::cuda::synchronize(device.index());
    const auto began = Clock::now();
    lockstep::all_reduce(tensor, lockstep::ReduceOp::Sum, group);
    if (device.is_cuda()) torch::cuda::synchronize(device.index());
    if (i >= 3) seconds.push_back(std::chrono::duration<double>(Clock::now() - began).count());
  }
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  std::string device_name = "cuda";
  std::string transport = "staged";
  int64_t megabytes = 64;
  int repeats = 20;
  CLI::App app{"all_reduce bandwidth between 2 ranks on one GPU"};
  app.add_option("--device", device_name, "cuda, cuda:N or cpu")->capture_default_str();
  app.add_option("--transport", transport, "staged, or nccl (processes under lockstep run only)")
      ->check(CLI::IsMember({"staged", "nccl"}))
      ->capture_default_str();
  app.add_option("--megabytes", megabytes, "Size of each rank's tensor")->capture_default_str();
  app.add_option("--repeats", repeats, "Timed calls")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const torch::Device device(device_name);
  const int64_t elements = megabytes * 1024 * 1024 / 4;
  std::vector<double> seconds;  // rank 0's, per call
  int ranks = 2;
  std::string how = device.is_cuda() ? "host-staged, replicas on threads" : "replicas on threads";
  if (lockstep::launched()) {
    if (transport == "nccl") {
      const std::string rank = std::getenv("RANK") ? std::getenv("RANK") : "0";
      setenv("NCCL_HOSTID", ("lockstep-bench-rank-" + rank).c_str(), /*overwrite=*/1);
      setenv("NCCL_SOCKET_IFNAME", "lo", /*overwrite=*/0);
    }
    lockstep::init(lockstep::InitOptions().device_backend(transport == "nccl" ? lockstep::DeviceBackend::Nccl
                                                                              : lockstep::DeviceBackend::Staged));
    ranks = lockstep::world_size();
    seconds = time_all_reduce(lockstep::ProcessGroup(), device, elements, repeats);
    how = std::string(transport == "staged" && device.is_cuda() ? "host-staged over " : "") +
          lockstep::ProcessGroup().transport() + ", processes";
    const bool report = lockstep::rank() == 0;
    lockstep::shutdown();
    if (!report) return 0;
  } else if (transport == "nccl") {
    std::fprintf(stderr, "--transport nccl needs processes: lockstep run -n 2 -- %s --transport nccl\n", argv[0]);
    return 2;
  } else {
    lockstep::run_replicas(ranks, [&](lockstep::ProcessGroup group) {
      auto mine = time_all_reduce(group, device, elements, repeats);
      if (group.rank() == 0) seconds = mine;
    });
  }
  const double time = median(seconds);
  const double bytes = static_cast<double>(elements) * 4;
  std::printf(
      "all_reduce of %lld MB float32 between %d ranks on %s (%s): %.2f ms, bus bandwidth %.2f GB/s "
      "(median of %d)\n",
      static_cast<long long>(megabytes), ranks, device.str().c_str(), how.c_str(), 1e3 * time,
      2.0 * (ranks - 1) / ranks * bytes / time / 1e9, repeats);
  return 0;
}
