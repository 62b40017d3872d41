// DistributedDataParallel as real processes (see ddp_worker.cpp), and its bucketing.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "ddp/bucket_assigner.h"
#include "support/world.h"

namespace lockstep::testing {
namespace {

void expect_every_rank_ok(int n, const std::string& scenario, Env extra = {}) {
  extra["LOCKSTEP_TIMEOUT"] = "30";
  const auto ranks = run_processes(n, {DDP_WORKER, scenario}, tcp_world(n, extra));
  for (size_t r = 0; r < ranks.size(); ++r) {
    EXPECT_EQ(ranks[r].exit_code, 0) << "rank " << r << ":\n" << ranks[r].output;
    EXPECT_TRUE(contains(ranks[r].output, "rank " + std::to_string(r) + ": " + scenario + " ok")) << ranks[r].output;
  }
}

// MLP, CNN with BatchNorm and a model with a branch some ranks skip in some steps; SGD with
// momentum and Adam; with and without no_sync() accumulation over 2 micro-batches: 20 steps
// match one process on the concatenated batch within 1e-5 relative, and after every step
// all ranks' parameters and BatchNorm statistics are bitwise identical. Ranks on one
// machine reduce through shared memory unless LOCKSTEP_SHM=0.
TEST(DistributedDataParallel, MatchesOneProcessOnTwoRanks) { expect_every_rank_ok(2, "equivalence"); }
TEST(DistributedDataParallel, MatchesOneProcessOnThreeRanks) { expect_every_rank_ok(3, "equivalence"); }

TEST(DistributedDataParallel, MatchesOneProcessOverGlooToo) {
  expect_every_rank_ok(2, "equivalence", {{"LOCKSTEP_SHM", "0"}});
}

// Ranks 0 and 2, and 1 and 3, train as two pairs on sub-groups.
TEST(DistributedDataParallel, MatchesOneProcessOnSubGroups) { expect_every_rank_ok(4, "sub-group-equivalence"); }

// gradient_as_bucket_view: the 12 trainings of MatchesOneProcess…, with clipping, replaced
// grad() tensors and fp16 compression, have the bits of copying out; grad() lies in the
// buffer its bucket was reduced in, also after the rebuild and after it was set undefined or
// replaced; a grad() of another shape is refused on every rank, naming the parameter.
TEST(DistributedDataParallel, GradientsAsBucketViewsLiveInTheirBucketsWithTheSameBits) {
  for (int n : {2, 3}) {
    const auto ranks = run_processes(n, {DDP_WORKER, "bucket-views"}, tcp_world(n, {{"LOCKSTEP_TIMEOUT", "30"}}));
    for (size_t r = 0; r < ranks.size(); ++r) {
      EXPECT_EQ(ranks[r].exit_code, 0) << "rank " << r << " of " << n << ":\n" << ranks[r].output;
      EXPECT_TRUE(contains(ranks[r].output,
                           "grad() of parameter '4.bias' was set to a tensor of shape [3], not the "
                           "parameter's [4]; assign gradients of the parameter's shape"))
          << ranks[r].output;
    }
  }
}

TEST(DistributedDataParallel, GradientsAveragedSummedOrScaled) { expect_every_rank_ok(3, "scaling"); }

TEST(DistributedDataParallel, BucketsHoldTheBitsOfLibtorchsOwnOps) { expect_every_rank_ok(3, "bucket-contents"); }

TEST(DistributedDataParallel, CompressedBucketsTrainWithinTolerance) { expect_every_rank_ok(2, "compression"); }

TEST(DistributedDataParallel, BucketsLaunchBeforeBackwardEnds) { expect_every_rank_ok(2, "overlap"); }

// float16 and bfloat16 gradients whose sum overflows average to their mean, on 2 and 3 ranks.
TEST(DistributedDataParallel, SixteenBitGradientsAverageWhereTheirSumOverflows) {
  expect_every_rank_ok(2, "16-bit-means");
  expect_every_rank_ok(3, "16-bit-means", {{"LOCKSTEP_SHM", "0"}});
}

TEST(DistributedDataParallel, DifferentModelsFailAtConstructionOnEveryRank) {
  const auto ranks = run_processes(3, {DDP_WORKER, "different-models"}, tcp_world(3, {{"LOCKSTEP_TIMEOUT", "10"}}));
  for (const auto& f : ranks) {
    EXPECT_EQ(f.exit_code, 0) << f.output;
    EXPECT_TRUE(contains(f.output, "MismatchError")) << f.output;
    EXPECT_TRUE(contains(f.output, "'0.weight': [32, 8] float32 on rank 1 vs [16, 8] float32 on rank 0")) << f.output;
  }
}

TEST(DistributedDataParallel, UnusedParametersWithoutTheOptionAreNamed) {
  const auto ranks = run_processes(2, {DDP_WORKER, "unused-without-flag"}, tcp_world(2, {{"LOCKSTEP_TIMEOUT", "10"}}));
  for (const auto& f : ranks) {
    EXPECT_EQ(f.exit_code, 0) << f.output;
    EXPECT_TRUE(contains(f.output, "got no gradient in this backward pass ('branch.bias', 'branch.weight')"))
        << f.output;
    EXPECT_TRUE(contains(f.output, "find_unused_parameters(true)")) << f.output;
  }
}

// The reducer fills a bucket from a gradient with one mul_out where libtorch would copy_ and
// then mul_ (gradient_reducer.cpp): the same bits, for the scales of 2 to 9 ranks, whatever
// the gradient's strides.
TEST(GradientReducer, OneKernelCopyInHasTheBitsOfCopyThenMul) {
  torch::manual_seed(3);
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    const auto grad = torch::randn({64, 48}, torch::TensorOptions().dtype(dtype)).t();  // not contiguous
    for (int world = 2; world <= 9; ++world) {
      const double scale = 1.0 / world;
      auto two_kernels = torch::empty({48, 64}, dtype);
      two_kernels.copy_(grad).mul_(scale);
      auto one_kernel = torch::empty({48, 64}, dtype);
      at::mul_out(one_kernel, grad, at::scalar_tensor(scale, at::TensorOptions().dtype(dtype)));
      EXPECT_TRUE(torch::equal(one_kernel, two_kernels)) << dtype << " at world " << world;
    }
  }
}

TEST(BucketAssigner, FirstBucketSmallThenCapsPerDtype) {
  const auto f = c10::kFloat, d = c10::kDouble;
  // Sizes in bytes, in gradient order: a small first bucket, then larger ones, dtypes apart.
  const std::vector<ParameterSize> params = {{5, 40, f}, {4, 80, f}, {3, 100, d}, {2, 150, f}, {1, 60, f}, {0, 10, d}};
  const auto buckets = assign_buckets(params, /*first_cap_bytes=*/100, /*cap_bytes=*/200);
  const std::vector<std::vector<size_t>> expected = {{5, 4}, {3}, {2, 1}, {0}};
  EXPECT_EQ(buckets, expected);
}

TEST(BucketAssigner, LeftoversCloseInGradientOrder) {
  const auto f = c10::kFloat, h = c10::kHalf;
  const auto buckets = assign_buckets({{2, 10, h}, {1, 10, f}, {0, 10, h}}, 1000, 1000);
  const std::vector<std::vector<size_t>> expected = {{2, 0}, {1}};
  EXPECT_EQ(buckets, expected);
}

}  // namespace
}  // namespace lockstep::testing
