#pragma once

// Checks that the GPU tests run on replicas (CUDA tensors staged through host memory) and
// in the GPU worker's processes (NCCL): exact values and stream order on CUDA tensors.
#include <cstdint>
#include <string>

#include <torch/torch.h>

#include "lockstep/lockstep.h"
#include "lockstep/train/device.h"

// Skips a test where it cannot run, saying why (scripts/gpu-check.sh runs them on a GPU).
#define SKIP_WITHOUT_A_GPU()                                                                        \
  if (lockstep::train::visible_gpus() == 0) {                                                       \
    GTEST_SKIP() << "no CUDA device is visible, or this lockstep was built against a CPU libtorch"; \
  }

namespace lockstep::testing {

/// The first GPU, where the tests run.
inline const torch::Device kGpu(torch::kCUDA, 0);

/// Every collective, sync and async, in 7 dtypes and coalesced, on rank-dependent tensors
/// of `length` elements on `device`, against values worked out by hand: what this rank
/// found wrong, "" when nothing.
std::string wrong_collectives(const ProcessGroup& group, int64_t length, torch::Device device);

/// A collective called after slow kernels on the current stream must see their result, and
/// kernels queued after wait() must see the collective's: what was wrong, or "".
std::string wrong_stream_order(const ProcessGroup& group, torch::Device device);

/// Whether a device tensor's values, read on the host, equal `expected` (a float64 tensor).
bool equal_on_host(const torch::Tensor& gpu, const torch::Tensor& expected);

/// Keeps the current stream busy for a while (about 50 ms on an H100).
void queue_slow_kernels(torch::Device device);

}  // namespace lockstep::testing
