// Collectives on CUDA tensors through host staging, the ranks (replicas on threads) sharing
// one GPU: exact values for every collective, and the stream rules of docs/GPU.md. Labelled
// gpu; skipped, with the reason, where no GPU is visible (scripts/gpu-check.sh runs them).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include <torch/cuda.h>
#include <torch/torch.h>

#include "lockstep/lockstep.h"
#include "lockstep/train/device.h"
#include "cuda_checks.h"

namespace lockstep {
namespace {

using torch::Tensor;

torch::TensorOptions on_gpu(torch::ScalarType dtype = torch::kFloat) {
  return torch::TensorOptions().dtype(dtype).device(torch::kCUDA, 0);
}

using testing::equal_on_host;

using testing::kGpu;

// What each of n replicas found wrong in every collective (cuda_checks.h).
std::vector<std::string> wrong_collectives(int n, int64_t length) {
  std::vector<std::string> wrong(n);
  run_replicas(n, [&](ProcessGroup group) { wrong[group.rank()] = testing::wrong_collectives(group, length, kGpu); });
  return wrong;
}

TEST(StagedCollectives, AreExactOnTwoAndThreeRanksSharingAGpu) {
  SKIP_WITHOUT_A_GPU();
  for (int n : {2, 3}) {
    for (int64_t length : {5, 100003}) {
      const auto wrong = wrong_collectives(n, length);
      for (int r = 0; r < n; ++r) EXPECT_EQ(wrong[r], "") << "rank " << r << " of " << n << ", length " << length;
    }
  }
}

void queue_slow_kernels() { testing::queue_slow_kernels(kGpu); }

TEST(StagedCollectives, FollowTheCurrentStreamAndAreFollowedByItAfterWait) {
  SKIP_WITHOUT_A_GPU();
  std::vector<std::string> wrong(2);
  run_replicas(2, [&](ProcessGroup group) { wrong[group.rank()] = testing::wrong_stream_order(group, kGpu); });
  EXPECT_EQ(wrong[0], "");
  EXPECT_EQ(wrong[1], "");
}

TEST(StagedCollectives, AsyncCallsReturnBeforeTheKernelsBeforeThemEnd) {
  SKIP_WITHOUT_A_GPU();
  using Clock = std::chrono::steady_clock;
  queue_slow_kernels();  // warm-up: cuBLAS handles, allocations
  torch::cuda::synchronize();
  const auto began = Clock::now();
  queue_slow_kernels();
  torch::cuda::synchronize();
  const auto kernels = Clock::now() - began;

  std::vector<Clock::duration> returned(2);
  run_replicas(2, [&](ProcessGroup group) {
    Tensor t = torch::ones({1 << 20}, on_gpu());
    queue_slow_kernels();  // this thread's warm-up, and the group's first collective
    all_reduce(t);
    torch::cuda::synchronize();
    queue_slow_kernels();
    const auto called = Clock::now();
    Work work = all_reduce_async(t);
    returned[group.rank()] = Clock::now() - called;
    work.wait();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_LT(returned[r], kernels / 4) << "rank " << r << ": all_reduce_async took "
                                        << std::chrono::duration<double>(returned[r]).count() << " s to return; "
                                        << "the kernels before it take "
                                        << std::chrono::duration<double>(kernels).count() << " s";
  }
}

TEST(StagedCollectives, KeepTheirTensorsUntilDoneThoughTheCallerDropsThem) {
  SKIP_WITHOUT_A_GPU();
  std::vector<std::string> wrong(2);
  run_replicas(2, [&](ProcessGroup group) {
    const int r = group.rank();
    queue_slow_kernels();
    Work work = all_reduce_async(torch::full({1 << 20}, r + 1.0, on_gpu()));  // the caller keeps no handle
    std::vector<Tensor> reused;
    for (int i = 0; i < 8; ++i) reused.push_back(torch::full({1 << 20}, 99.0, on_gpu()));
    const Tensor result = work.result().at(0);
    if (!equal_on_host(result, torch::full({1 << 20}, 3.0, torch::kDouble))) wrong[r] = "the result was overwritten";
  });
  EXPECT_EQ(wrong[0], "");
  EXPECT_EQ(wrong[1], "");
}

TEST(StagedCollectives, CpuOnOneRankAndCudaOnAnotherIsAMismatchNamingBoth) {
  SKIP_WITHOUT_A_GPU();
  std::vector<std::string> messages(2);
  run_replicas(2, [&](ProcessGroup group) {
    const int r = group.rank();
    Tensor t = r == 0 ? torch::ones({4}) : torch::ones({4}, on_gpu());
    try {
      all_reduce(t);
      messages[r] = "no error";
    } catch (const MismatchError& e) {
      messages[r] = e.what();
    }
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(messages[r].find("rank 0: all_reduce #0 (float32[4], Sum)"), std::string::npos) << messages[r];
    EXPECT_NE(messages[r].find("rank 1: all_reduce #0 (float32[4] on cuda, Sum)"), std::string::npos) << messages[r];
  }
}

TEST(StagedCollectives, CpuAndCudaInOneCallAreRefusedNamingBoth) {
  SKIP_WITHOUT_A_GPU();
  std::string message = "no error";
  run_replicas(1, [&](ProcessGroup) {
    std::vector<Tensor> mixed{torch::ones({2}), torch::ones({2}, on_gpu())};
    try {
      all_reduce(mixed);
    } catch (const Error& e) {
      message = e.what();
    }
  });
  EXPECT_EQ(message, "lockstep::all_reduce: one call has tensors on cpu and on cuda:0; pass tensors of one device");
}

}  // namespace
}  // namespace lockstep
