// A rank of the GPU tests that need real processes: NCCL makes one communicator per process.
// It joins the world its environment describes (nccl_test.cpp sets LOCKSTEP_DEVICE_BACKEND=nccl
// and a NCCL_HOSTID per rank), runs the scenario its first argument names on cuda:0, prints
// what went wrong, and exits non-zero when anything did.
#include <link.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <string>
#include <thread>

#include <ATen/Context.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "cuda_checks.h"
#include "ddp_scenarios.h"
#include "lockstep/lockstep.h"

namespace {

using Clock = std::chrono::steady_clock;
using torch::Tensor;

const torch::Device kGpu(torch::kCUDA, 0);

int report(const std::string& wrong) {
  if (wrong.empty()) return 0;
  std::cerr << "rank " << lockstep::rank() << ": " << wrong << std::endl;
  return 1;
}

int collectives() {
  std::string wrong;
  for (int64_t length : {5, 100003})
    wrong += lockstep::testing::wrong_collectives(lockstep::ProcessGroup(), length, kGpu);
  return report(wrong);
}

// The stream rules, and an _async call returning before the kernels queued before it end.
int ordering() {
  std::string wrong = lockstep::testing::wrong_stream_order(lockstep::ProcessGroup(), kGpu);
  lockstep::testing::queue_slow_kernels(kGpu);  // warm-up: cuBLAS handles, allocations
  torch::cuda::synchronize();
  const auto began = Clock::now();
  lockstep::testing::queue_slow_kernels(kGpu);
  torch::cuda::synchronize();
  const auto kernels = Clock::now() - began;
  Tensor t = torch::ones({1 << 20}, torch::TensorOptions().device(kGpu));
  lockstep::testing::queue_slow_kernels(kGpu);
  const auto called = Clock::now();
  lockstep::Work work = lockstep::all_reduce_async(t);
  const auto returned = Clock::now() - called;
  work.wait();
  if (returned > kernels / 4) {
    wrong += "all_reduce_async took " + std::to_string(std::chrono::duration<double>(returned).count()) +
             " s to return; the kernels before it take " +
             std::to_string(std::chrono::duration<double>(kernels).count()) + " s";
  }
  if (t.cpu()[0].item<float>() != lockstep::world_size()) wrong += "; the async all_reduce's result is wrong";
  return report(wrong);
}

// Counts the loaded objects whose file name contains "libnccl".
int count_nccl(dl_phdr_info* info, size_t, void* count) {
  if (info->dlpi_name && std::string(info->dlpi_name).find("libnccl") != std::string::npos) ++*static_cast<int*>(count);
  return 0;
}

// One NCCL in the process, libtorch's, once a collective has used it.
int one_nccl() {
  Tensor t = torch::ones({4}, torch::TensorOptions().device(kGpu));
  lockstep::all_reduce(t);
  int loaded = 0;
  dl_iterate_phdr(count_nccl, &loaded);
  std::cout << "rank " << lockstep::rank() << ": " << loaded << " NCCL library loaded" << std::endl;
  return report(loaded <= 1 ? "" : std::to_string(loaded) + " NCCL libraries are loaded");
}

// Rank 1 dies while rank 0's NCCL kernel waits for it: rank 1's own all_reduce is queued
// behind seconds of matrix products, so that it has not started when rank 1 is killed. The
// watchdog must end rank 0, whose host is waiting for the device.
int a_rank_dies() {
  Tensor t = torch::ones({1 << 20}, torch::TensorOptions().device(kGpu));
  lockstep::all_reduce(t);  // connected and working
  if (lockstep::rank() == 1) {
    const Tensor a = torch::rand({16384, 16384}, torch::TensorOptions().device(kGpu));
    for (int i = 0; i < 20; ++i) torch::mm(a, a);
    lockstep::all_reduce_async(t);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    kill(getpid(), SIGKILL);
  }
  lockstep::all_reduce(t);
  torch::cuda::synchronize();
  std::cerr << "rank " << lockstep::rank() << ": the all_reduce whose peer died completed" << std::endl;
  return 1;
}

// CPU on rank 0, CUDA on the others: a MismatchError naming both on every rank.
int cpu_and_cuda() {
  Tensor t = lockstep::rank() == 0 ? torch::ones({4}) : torch::ones({4}, torch::TensorOptions().device(kGpu));
  try {
    lockstep::all_reduce(t);
  } catch (const lockstep::MismatchError& e) {
    std::cout << "rank " << lockstep::rank() << " MismatchError: " << e.what() << std::endl;
    return 0;
  }
  return report("no MismatchError");
}

// DDP on two replicas of this process sharing the GPU: refused on both, before any work
// (their backward passes would wait for each other).
int replicas_sharing_a_gpu() {
  try {
    lockstep::run_replicas(2, [&](lockstep::ProcessGroup) { run_ddp_scenario("equivalence", "", "cuda:0"); });
  } catch (const lockstep::ReplicaError& e) {  // the ConfigError of the replica that found it
    std::cout << "refused: " << e.what() << std::endl;
    return 0;
  }
  return report("two replicas on one GPU were not refused");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  // DDP is held to 1e-5 of one process in float32: no TF32 convolutions, and the same
  // convolution algorithms in every process.
  at::globalContext().setAllowTF32CuDNN(false);
  at::globalContext().setDeterministicCuDNN(true);
  at::globalContext().setBenchmarkCuDNN(false);
  if (scenario == "replicas-sharing-a-gpu") return replicas_sharing_a_gpu();
  lockstep::init();
  int code = 2;
  if (scenario == "collectives") code = collectives();
  if (scenario == "ordering") code = ordering();
  if (scenario == "one-nccl") code = one_nccl();
  if (scenario == "a-rank-dies") code = a_rank_dies();
  if (scenario == "cpu-and-cuda") code = cpu_and_cuda();
  if (scenario == "ddp") {
    code = 0;
    for (const std::string ddp : {"equivalence", "compression", "scaling"}) code |= run_ddp_scenario(ddp, "", "cuda:0");
  }
  if (code == 2) std::cerr << "unknown scenario '" << scenario << "'\n";
  if (code == 0) std::cout << "rank " << lockstep::rank() << ": " << scenario << " ok" << std::endl;
  lockstep::shutdown();
  return code;
}
