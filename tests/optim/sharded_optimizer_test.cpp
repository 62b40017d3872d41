// ShardedOptimizer (ZeRO stage 1) as real processes (optim_worker) and as replicas on threads:
// SGD with momentum, Adam and AdamW, plainly, with no_sync() every other step and with
// clipping, plus RMSprop and Adagrad, 20 steps each under a changing learning rate: every
// parameter has the bits that DDP with the unsharded optimizer gives, each rank holds the
// state of its partition only, and the state consolidated on rank 0 is the unsharded one's.
#include <set>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lockstep/lockstep.h"
#include "sharded_scenarios.h"
#include "support/world.h"

namespace lockstep::testing {
namespace {

// `hosts`: the ranks in that many "nodes" (GROUP_RANK), as even as they go.
std::vector<std::string> outputs_of_processes(int n, const std::string& scenario,
                                              const std::string& recovery = "restart", const std::string& shm = "1",
                                              int hosts = 1) {
  const auto world = tcp_world(n, {{"LOCKSTEP_TIMEOUT", "30"}, {"LOCKSTEP_RECOVERY", recovery}, {"LOCKSTEP_SHM", shm}});
  const auto ranks = run_processes(n, {OPTIM_WORKER, scenario}, [&](int rank) {
    Env env = world(rank);
    if (hosts > 1) env["GROUP_RANK"] = std::to_string(rank * hosts / n);
    return env;
  });
  std::vector<std::string> outputs;
  for (size_t r = 0; r < ranks.size(); ++r) {
    EXPECT_EQ(ranks[r].exit_code, 0) << "rank " << r << ":\n" << ranks[r].output;
    EXPECT_TRUE(contains(ranks[r].output, "rank " + std::to_string(r) + ": " + scenario + " ok")) << ranks[r].output;
    outputs.push_back(ranks[r].output);
  }
  return outputs;
}

void expect_every_replica_ok(int n, const std::string& scenario) {
  std::vector<int> codes(n, -1);
  run_replicas(
      n, [&](ProcessGroup group) { codes[group.rank()] = run_sharded_scenario(scenario); },
      ReplicaOptions().threads(1).timeout(std::chrono::seconds(60)));
  EXPECT_EQ(codes, std::vector<int>(n, 0)) << scenario << " on " << n << " replicas";
}

TEST(ShardedOptimizer, MatchesTheUnshardedOptimizerOnTwoAndThreeRanks) {
  outputs_of_processes(2, "sharded-equivalence");
  outputs_of_processes(3, "sharded-equivalence");
}

TEST(ShardedOptimizer, MatchesTheUnshardedOptimizerOnTwoAndThreeReplicas) {
  expect_every_replica_ok(2, "sharded-equivalence");
  expect_every_replica_ok(3, "sharded-equivalence");
}

// ZeRO-2 (DistributedDataParallel::shard_gradients): SGD with momentum, Adam and AdamW,
// plainly, with no_sync() every other step and clipped across the ranks
// (OptimizerSharding::clip_grad_norm), 20 steps: every parameter has the bits of DDP with the
// unsharded optimizer, and after each reducing backward a rank holds the gradients of the
// parameters it steps only (their bytes exactly) and DDP no bucket.
TEST(ShardedOptimizer, WithShardedGradientsMatchesTheUnshardedOptimizerOnTwoAndThreeRanks) {
  outputs_of_processes(2, "sharded-gradients-equivalence");
  outputs_of_processes(3, "sharded-gradients-equivalence");
}

// Over gloo alone two ranks exchange only what the other steps, and each sum is a + b
// whatever the buckets. Three ranks over gloo sum an element in an order that depends on
// where it lies in its bucket: there ZeRO-2 keeps DDP's buckets rather than halving them.
TEST(ShardedOptimizer, WithShardedGradientsOverGlooMatchesTheUnshardedOptimizerOnTwoAndThreeRanks) {
  outputs_of_processes(2, "sharded-gradients-equivalence", "restart", "0");
  outputs_of_processes(3, "sharded-gradients-equivalence", "restart", "0");
}

// Across hosts each host sums in rank order and the hosts' sums meet over gloo: on two
// hosts every such sum is a + b, on three it depends on where the element lies, and there
// ZeRO-2 keeps DDP's buckets too.
TEST(ShardedOptimizer, WithShardedGradientsAcrossTwoAndThreeHostsMatchesTheUnshardedOptimizer) {
  outputs_of_processes(4, "sharded-gradients-equivalence", "restart", "1", /*hosts=*/2);
  outputs_of_processes(3, "sharded-gradients-equivalence", "restart", "1", /*hosts=*/3);
}

TEST(ShardedOptimizer, WithShardedGradientsMatchesTheUnshardedOptimizerOnTwoAndThreeReplicas) {
  expect_every_replica_ok(2, "sharded-gradients-equivalence");
  expect_every_replica_ok(3, "sharded-gradients-equivalence");
}

// Under ZeRO-2 buckets close at half bucket_cap_mb, so that the two buffers they take turns
// in hold about what one of DDP's buckets does.
TEST(ShardedOptimizer, WithShardedGradientsBucketsCloseAtHalfTheCap) {
  constexpr int64_t kCap = 4096, kLayerBytes = 16 * 16 * 4;
  std::vector<std::vector<int64_t>> unsharded(2), sharded(2);  // per rank, each bucket's bytes
  int64_t bucket_bytes = 0;
  run_replicas(
      2,
      [&](ProcessGroup group) {
        torch::nn::Sequential model;
        for (int layer = 0; layer < 12; ++layer) {
          model->push_back(torch::nn::Linear(torch::nn::LinearOptions(16, 16).bias(false)));
        }
        DistributedDataParallel ddp(model.ptr(),
                                    DDPOptions().first_bucket_cap_mb(1e-6).bucket_cap_mb(kCap / 1048576.0));
        auto bytes_of_buckets = [&] {
          std::vector<int64_t> bytes;
          const auto params = model->parameters();
          for (const auto& members : ddp.buckets()) {
            bytes.push_back(0);
            for (size_t i : members) bytes.back() += static_cast<int64_t>(params[i].nbytes());
          }
          return bytes;
        };
        unsharded[group.rank()] = bytes_of_buckets();
        ShardedOptimizer<torch::optim::SGD> optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
        ddp.shard_gradients(optimizer);
        sharded[group.rank()] = bytes_of_buckets();
        model->forward(torch::ones({4, 16}) * (group.rank() + 1)).sum().backward();
        if (group.rank() == 0) bucket_bytes = ddp.bucket_bytes();
      },
      ReplicaOptions().threads(1).timeout(std::chrono::seconds(60)));
  EXPECT_EQ(unsharded[0], unsharded[1]);
  EXPECT_EQ(sharded[0], sharded[1]);
  // Between the first bucket and the last: closed as they reached the cap, or half of it.
  for (size_t b = 1; b + 1 < unsharded[0].size(); ++b) EXPECT_EQ(unsharded[0][b], 4 * kLayerBytes) << b;
  for (size_t b = 1; b + 1 < sharded[0].size(); ++b) EXPECT_EQ(sharded[0][b], 2 * kLayerBytes) << b;
  EXPECT_GT(sharded[0].size(), unsharded[0].size());
  EXPECT_LE(bucket_bytes, 2 * 2 * kLayerBytes);
}

// Under ZeRO-2 each bucket reaches its hook with the owners of its parameters' elements,
// in the order of its members, where every rank may otherwise all-reduce it; the default
// hook reduces it to them (reduce_to_owners, exact values in collectives_worker.cpp).
TEST(ShardedOptimizer, WithShardedGradientsEachBucketGoesToTheOwnersOfItsParameters) {
  std::vector<std::vector<std::vector<OwnedRange>>> seen(3);  // per rank, each bucket's owners
  std::vector<std::vector<std::vector<OwnedRange>>> expected(3);
  run_replicas(
      3,
      [&](ProcessGroup group) {
        const int r = group.rank();
        torch::nn::Sequential model;
        const std::vector<int64_t> widths{8, 24, 16, 4, 32, 8, 8};
        for (size_t k = 0; k + 1 < widths.size(); ++k) model->push_back(torch::nn::Linear(widths[k], widths[k + 1]));
        CommHook sum = allreduce_hook();
        DistributedDataParallel ddp(model.ptr(), DDPOptions().first_bucket_cap_mb(1e-6).bucket_cap_mb(2e-3).comm_hook(
                                                     [&, r](GradBucket& bucket) {
                                                       seen[r].push_back(bucket.owners);
                                                       return sum(bucket);
                                                     }));
        ShardedOptimizer<torch::optim::Adam> optimizer(model->parameters(), torch::optim::AdamOptions(0.1));
        ddp.shard_gradients(optimizer);
        model->forward(torch::ones({2, 8}) * (r + 1)).sum().backward();
        const auto params = model->parameters();
        for (const auto& members : ddp.buckets()) {
          std::vector<OwnedRange> ranges;
          int64_t end = 0;
          for (size_t i : members) {
            end += params[i].numel();
            const int owner = optimizer.owners()[i];
            if (!ranges.empty() && ranges.back().owner == owner) {
              ranges.back().end = end;
            } else {
              ranges.push_back({end, owner});
            }
          }
          expected[r].push_back(ranges);
        }
      },
      ReplicaOptions().threads(1).timeout(std::chrono::seconds(60)));
  auto text = [](const std::vector<std::vector<OwnedRange>>& buckets) {
    std::string out;
    for (const auto& ranges : buckets) {
      for (const auto& range : ranges) out += std::to_string(range.end) + ":" + std::to_string(range.owner) + " ";
      out += "| ";
    }
    return out;
  };
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(text(seen[r]), text(expected[r])) << "rank " << r;
    EXPECT_EQ(text(seen[r]), text(seen[0])) << "rank " << r;
  }
  EXPECT_GT(seen[0].size(), 2u);
  std::set<int> owners;
  for (const auto& ranges : seen[0]) {
    for (const auto& range : ranges) owners.insert(range.owner);
  }
  EXPECT_EQ(owners, (std::set<int>{0, 1, 2}));
}

TEST(ShardedOptimizer, ParametersThatDifferBetweenRanksAreNamedOnEveryRank) {
  for (const auto& output : outputs_of_processes(3, "sharded-different-parameters")) {
    EXPECT_TRUE(contains(output,
                         "MismatchError: lockstep::ShardedOptimizer: rank 1's optimizer differs from rank 0's "
                         "at param group 0, parameter 0: [33, 8] float32 on rank 1 vs [32, 8] float32 on rank 0"))
        << output;
  }
}

// Under live recovery each partition is kept twice: a lost rank's comes from its copy, one
// that applied a step before the loss from the others' catching up, and the state after
// the reshard and 3 more steps is the unsharded optimizer's bit for bit; two neighbours
// lost at once leave a partition nobody keeps, named on every rank left.
TEST(ShardedOptimizer, UnderLiveRecoveryALostRanksStateComesFromItsCopy) {
  const auto outputs = outputs_of_processes(4, "sharded-lost-rank", "live");
  for (const int r : {0, 3}) {
    EXPECT_TRUE(contains(outputs[r], "Error: lockstep::ShardedOptimizer: no member keeps the state of parameter "))
        << outputs[r];
    EXPECT_TRUE(contains(outputs[r], "both ranks that kept its partition were lost at once")) << outputs[r];
  }
}

TEST(ShardedOptimizer, RefusesLbfgsInOneLine) {
  for (const auto& output : outputs_of_processes(2, "sharded-lbfgs")) {
    EXPECT_TRUE(contains(output,
                         "ConfigError: lockstep::ShardedOptimizer cannot shard torch::optim::LBFGS, whose line "
                         "search needs dot products over every parameter; use DistributedOptimizer<LBFGS>; it "
                         "shards SGD, Adam, AdamW, RMSprop and Adagrad\n"))
        << output;
  }
}

}  // namespace
}  // namespace lockstep::testing
