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

namespace lockstep {
namespace {

using torch::Tensor;

#define SKIP_WITHOUT_A_GPU()                                                                            \
  if (train::visible_gpus() == 0) {                                                                     \
    GTEST_SKIP() << "no CUDA device is visible, or this lockstep was built against a CPU libtorch"; \
  }

torch::TensorOptions on_gpu(torch::ScalarType dtype = torch::kFloat) {
  return torch::TensorOptions().dtype(dtype).device(torch::kCUDA, 0);
}

bool equal_on_host(const Tensor& gpu, const Tensor& expected) { return gpu.cpu().to(torch::kDouble).equal(expected); }

// Every collective, sync and async, on rank-dependent CUDA tensors, against values worked
// out by hand; what each replica found wrong.
std::vector<std::string> wrong_collectives(int n, int64_t length) {
  std::vector<std::string> wrong(n);
  run_replicas(n, [&](ProcessGroup group) {
    const int r = group.rank();
    auto check = [&](bool ok, const std::string& what) {
      if (!ok) wrong[r] += what + "; ";
    };
    const double sum_ranks = n * (n - 1) / 2.0;
    const Tensor base = torch::arange(length, torch::kDouble).fmod(7);
    for (auto dtype : {torch::kFloat, torch::kDouble, torch::kInt, torch::kLong, torch::kHalf, torch::kBFloat16,
                       torch::kByte}) {
      const std::string name = c10::toString(dtype);
      Tensor t = base.add(r).to(on_gpu(dtype));
      all_reduce(t);
      check(equal_on_host(t, base * n + sum_ranks), "all_reduce " + name);
      Tensor a = base.add(r).to(on_gpu(dtype));
      all_reduce_async(a).wait();
      check(equal_on_host(a, base * n + sum_ranks), "all_reduce_async " + name);
      Tensor b = torch::full({length}, r == n - 1 ? 42.0 : 1.0, on_gpu(dtype));
      broadcast_async(b, n - 1).wait();
      check(equal_on_host(b, torch::full({length}, 42.0, torch::kDouble)), "broadcast_async " + name);
    }
    Tensor avg = torch::full({length}, 2.0 * r, on_gpu());
    all_reduce(avg, ReduceOp::Avg);
    check(equal_on_host(avg, torch::full({length}, n - 1.0, torch::kDouble)), "all_reduce Avg");

    Tensor b = torch::full({length}, r == 0 ? 7.0 : -1.0, on_gpu());
    broadcast(b, 0);
    check(equal_on_host(b, torch::full({length}, 7.0, torch::kDouble)), "broadcast");

    Tensor red = torch::full({length}, r + 1.0, on_gpu());
    reduce(red, 0, ReduceOp::Product);
    double factorial = 1;
    for (int q = 1; q <= n; ++q) factorial *= q;
    check(equal_on_host(red, torch::full({length}, r == 0 ? factorial : r + 1.0, torch::kDouble)), "reduce Product");

    const auto gathered = all_gather(torch::full({length}, r * 10.0, on_gpu()));
    check(static_cast<int>(gathered.size()) == n, "all_gather size");
    for (int q = 0; q < n && q < static_cast<int>(gathered.size()); ++q) {
      check(gathered[q].is_cuda() && equal_on_host(gathered[q], torch::full({length}, q * 10.0, torch::kDouble)),
            "all_gather part " + std::to_string(q));
    }
    const Tensor input = torch::arange(n * length, torch::kDouble).add(r);
    const Tensor scattered = reduce_scatter_async(input.to(on_gpu(torch::kDouble))).result().at(0);
    check(scattered.is_cuda() && equal_on_host(scattered, input.slice(0, r * length, (r + 1) * length).sub(r) * n + sum_ranks),
          "reduce_scatter_async");

    std::vector<Tensor> many{torch::full({3}, r + 0.0, on_gpu()), torch::full({length}, r, on_gpu(torch::kLong))};
    all_reduce(many);
    check(equal_on_host(many[0], torch::full({3}, sum_ranks, torch::kDouble)) &&
              equal_on_host(many[1], torch::full({length}, sum_ranks, torch::kDouble)),
          "coalesced all_reduce");
  });
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

// Kernels that keep the current stream busy for a while (about 50 ms on an H100).
void queue_slow_kernels() {
  Tensor x = torch::rand({4096, 4096}, on_gpu());
  for (int i = 0; i < 24; ++i) x = torch::mm(x, x).div_(4096);
}

TEST(StagedCollectives, FollowTheCurrentStreamAndAreFollowedByItAfterWait) {
  SKIP_WITHOUT_A_GPU();
  std::vector<std::string> wrong(2);
  run_replicas(2, [&](ProcessGroup group) {
    const int r = group.rank();
    Tensor t = torch::zeros({1000}, on_gpu());
    queue_slow_kernels();
    t.fill_(r + 1);  // queued behind the slow kernels: the collective must see it
    Work work = all_reduce_async(t);
    work.wait();
    t.mul_(2);  // queued after wait(): must see the reduced values
    if (!equal_on_host(t, torch::full({1000}, 6.0, torch::kDouble))) wrong[r] = "got " + c10::str(t.cpu()[0].item<float>());
  });
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
    queue_slow_kernels();
    const auto called = Clock::now();
    Work work = all_reduce_async(t);
    returned[group.rank()] = Clock::now() - called;
    work.wait();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_LT(returned[r], kernels / 4) << "rank " << r << ": all_reduce_async took "
                                        << std::chrono::duration<double>(returned[r]).count() << " s to return; "
                                        << "the kernels before it take " << std::chrono::duration<double>(kernels).count()
                                        << " s";
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
