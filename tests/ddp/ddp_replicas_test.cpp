// DistributedDataParallel on replicas as threads (run_replicas): the scenarios the process
// tests run (ddp_scenarios.cpp), and parameters bitwise equal to those of processes. Also
// built and run under ThreadSanitizer (make test-tsan).
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>

#include <torch/serialize.h>
#include <torch/torch.h>

#include "ddp_scenarios.h"
#include "lockstep/lockstep.h"
#include "support/world.h"

namespace lockstep::testing {
namespace {

// Like the process workers: one intra-op thread each.
void expect_every_replica_ok(int n, const std::string& scenario, const std::string& out_dir = "") {
  std::vector<int> codes(n, -1);
  run_replicas(
      n, [&](ProcessGroup group) { codes[group.rank()] = run_ddp_scenario(scenario, out_dir); },
      ReplicaOptions().threads(1).timeout(std::chrono::seconds(60)));
  EXPECT_EQ(codes, std::vector<int>(n, 0)) << scenario << " on " << n << " replicas";
}

TEST(DistributedDataParallelOnReplicas, MatchesOneProcessOnTwoReplicas) { expect_every_replica_ok(2, "equivalence"); }
TEST(DistributedDataParallelOnReplicas, MatchesOneProcessOnThreeReplicas) { expect_every_replica_ok(3, "equivalence"); }
TEST(DistributedDataParallelOnReplicas, MatchesOneProcessOnSubGroups) {
  expect_every_replica_ok(4, "sub-group-equivalence");
}
TEST(DistributedDataParallelOnReplicas, GradientsAsBucketViewsLiveInTheirBucketsWithTheSameBits) {
  expect_every_replica_ok(2, "bucket-views");
  expect_every_replica_ok(3, "bucket-views");
}
TEST(DistributedDataParallelOnReplicas, GradientsAveragedSummedOrScaled) { expect_every_replica_ok(3, "scaling"); }
TEST(DistributedDataParallelOnReplicas, CompressedBucketsTrainWithinTolerance) {
  expect_every_replica_ok(2, "compression");
}
TEST(DistributedDataParallelOnReplicas, BucketsLaunchBeforeBackwardEnds) { expect_every_replica_ok(2, "overlap"); }
TEST(DistributedDataParallelOnReplicas, SixteenBitGradientsAverageWhereTheirSumOverflows) {
  expect_every_replica_ok(2, "16-bit-means");
  expect_every_replica_ok(3, "16-bit-means");
}
TEST(DistributedDataParallelOnReplicas, DifferentModelsFailAtConstructionOnEveryReplica) {
  expect_every_replica_ok(2, "different-models");
}

// The same 12 trainings (3 models × SGD/Adam × 1 or 2 micro-batches, 20 steps) as 2 processes
// and as 2 replicas: every parameter has the same bits.
TEST(DistributedDataParallelOnReplicas, GivesTheParametersOfProcessesBitForBit) {
  const std::string from_processes = fresh_directory(), from_replicas = fresh_directory();
  const auto ranks =
      run_processes(2, {DDP_WORKER, "equivalence", from_processes}, tcp_world(2, {{"LOCKSTEP_TIMEOUT", "30"}}));
  for (const auto& rank : ranks) ASSERT_EQ(rank.exit_code, 0) << rank.output;
  expect_every_replica_ok(2, "equivalence", from_replicas);
  int compared = 0;
  for (const auto& file : std::filesystem::directory_iterator(from_processes)) {
    torch::Tensor processes, replicas;
    torch::load(processes, file.path().string());
    torch::load(replicas, (std::filesystem::path(from_replicas) / file.path().filename()).string());
    EXPECT_TRUE(torch::equal(processes, replicas))
        << file.path().filename() << " differs by " << (processes - replicas).abs().max().item<double>();
    ++compared;
  }
  EXPECT_EQ(compared, 12);
}

// Layers registered in the reverse of their use: the buckets rebuilt after the first
// backward differ from the first ones. A second DDP given the learned order starts in the
// rebuilt buckets; an order of another model is refused, naming the counts.
TEST(DistributedDataParallelOnReplicas, LoadsTheBucketOrderLearnedInTheFirstBackward) {
  std::vector<std::string> wrong(2);
  run_replicas(2, [&](ProcessGroup group) {
    auto make_model = [] {
      torch::nn::Sequential layers;
      lockstep::with_replica_generator([&] {
        torch::manual_seed(3);
        layers = torch::nn::Sequential(torch::nn::Linear(16, 4), torch::nn::Linear(16, 16), torch::nn::Linear(8, 16));
      });
      return layers;
    };
    auto forward = [](torch::nn::Sequential& layers) {
      torch::Tensor x = torch::ones({2, 8});
      for (size_t i = layers->size(); i-- > 0;) x = layers[i]->as<torch::nn::Linear>()->forward(x);
      return x.sum();
    };
    const auto options = DDPOptions().bucket_cap_mb(0.001).first_bucket_cap_mb(0.001).group(group);
    torch::nn::Sequential learner = make_model();
    DistributedDataParallel first(learner.ptr(), options);
    const auto initial = first.buckets();
    if (!first.bucket_order().empty()) wrong[group.rank()] += "an order before any backward; ";
    forward(learner).backward();
    const std::vector<int64_t> learned = first.bucket_order();
    if (learned.size() != 6 || first.buckets() == initial) wrong[group.rank()] += "no new buckets learned; ";

    torch::nn::Sequential resumed = make_model();
    DistributedDataParallel second(resumed.ptr(), options);
    second.load_bucket_order(learned);
    if (second.buckets() != first.buckets()) wrong[group.rank()] += "the loaded order gave other buckets; ";
    if (second.bucket_order() != learned) wrong[group.rank()] += "bucket_order() is not the loaded one; ";
    try {
      second.load_bucket_order({0, 1, 2});
      wrong[group.rank()] += "an order of 3 parameters was taken; ";
    } catch (const ConfigError& e) {
      if (std::string(e.what()).find("the order of 3 parameters is not one of this model's 6 parameters") ==
          std::string::npos) {
        wrong[group.rank()] += std::string("unexpected message: ") + e.what();
      }
    }
  });
  EXPECT_EQ(wrong, std::vector<std::string>(2)) << wrong[0] << wrong[1];
}

// At world 1 a comm hook the user set still runs, once per bucket, and leaves the local
// gradients; without one nothing is bucketed.
TEST(DistributedDataParallelOnReplicas, AHookOfTheUsersRunsAtWorldOne) {
  run_replicas(
      1,
      [&](ProcessGroup group) {
        for (const bool with_hook : {true, false}) {
          torch::manual_seed(0);
          torch::nn::Linear model(4, 3);
          int buckets = 0;
          auto options = DDPOptions().group(group);
          if (with_hook) {
            options.comm_hook([&buckets, sum = allreduce_hook()](GradBucket& bucket) {
              ++buckets;
              return sum(bucket);
            });
          }
          DistributedDataParallel ddp(model, options);
          const auto input = torch::arange(8, torch::kFloat).reshape({2, 4});
          model->forward(input).sum().backward();
          EXPECT_EQ(buckets, with_hook ? 1 : 0);
          EXPECT_TRUE(torch::equal(model->weight.grad(), input.sum(0).expand({3, 4}))) << model->weight.grad();
        }
      },
      ReplicaOptions().timeout(std::chrono::seconds(20)));
}

// A CPU machine has one device, but libtorch's meta device stands in for a second: a model
// split over two is refused on every replica before any collective, naming both.
TEST(DistributedDataParallelOnReplicas, AModelOnTwoDevicesIsRefusedNamingBoth) {
  std::vector<std::string> messages(2);
  run_replicas(
      2,
      [&](ProcessGroup group) {
        auto model = std::make_shared<torch::nn::Module>();
        model->register_parameter("weight", torch::ones({3, 4}));
        model->register_parameter("bias", torch::ones({3}, torch::TensorOptions().device(torch::kMeta)));
        try {
          DistributedDataParallel ddp(model, DDPOptions().group(group));
          messages[group.rank()] = "no error";
        } catch (const ConfigError& e) {
          messages[group.rank()] = e.what();
        }
      },
      ReplicaOptions().timeout(std::chrono::seconds(20)));
  for (const auto& m : messages) {
    EXPECT_EQ(m,
              "lockstep::DistributedDataParallel needs every trained parameter on one device, but 'weight' is on "
              "cpu and 'bias' on meta; move the model with model->to(device)");
  }
}

}  // namespace
}  // namespace lockstep::testing
