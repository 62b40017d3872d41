// Collectives of a group of one on CUDA tensors: nothing to send, so they never leave the
// device (staging them through host memory and back cost 12% of a ResNet-50 step at world 1
// on an H100). Labelled gpu; skipped, with the reason, where no GPU is visible.
#include <gtest/gtest.h>

#include <string>

#include <torch/cuda.h>
#include <torch/torch.h>
#ifdef LOCKSTEP_TEST_CUDA_GRAPHS
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "lockstep/lockstep.h"
#include "lockstep/train/device.h"
#include "cuda_checks.h"

namespace lockstep {
namespace {

using torch::Tensor;

using testing::kGpu;

TEST(GroupOfOne, MovesCudaTensorsOnTheDeviceExactlyAndInStreamOrder) {
  SKIP_WITHOUT_A_GPU();
  std::string transport, wrong, wrong_order;
  run_replicas(1, [&](ProcessGroup group) {
    transport = group.transport();
    wrong = testing::wrong_collectives(group, 100003, kGpu);
    wrong_order = testing::wrong_stream_order(group, kGpu);
  });
  EXPECT_EQ(transport, "self, self for cuda");
  EXPECT_EQ(wrong, "");
  EXPECT_EQ(wrong_order, "");
}

// A staged collective is refused under capture (its host copies and waits cannot be
// captured): one that is captured, and replayed, never went through the host.
TEST(GroupOfOne, ItsCollectivesAreCapturedInACudaGraphAndRunAtEachReplay) {
  SKIP_WITHOUT_A_GPU();
#ifndef LOCKSTEP_TEST_CUDA_GRAPHS
  GTEST_SKIP() << "this lockstep was built without CUDA support";
#else
  Tensor t = torch::full({4096}, 2.0, torch::TensorOptions().device(kGpu));
  std::string refused;
  run_replicas(1, [&](ProcessGroup group) {
    all_reduce(t, ReduceOp::Sum, group);
    at::cuda::CUDAGraph graph;
    {
      c10::cuda::CUDAStreamGuard capturing(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, kGpu.index()));
      graph.capture_begin();
      t.mul_(3);
      try {
        all_reduce(t, ReduceOp::Avg, group);
      } catch (const Error& e) {
        refused = e.what();
      }
      graph.capture_end();
    }
    graph.replay();
    graph.replay();
    torch::cuda::synchronize();
  });
  EXPECT_EQ(refused, "");
  EXPECT_TRUE(testing::equal_on_host(t, torch::full({4096}, 18.0, torch::kDouble)));
#endif
}

}  // namespace
}  // namespace lockstep
