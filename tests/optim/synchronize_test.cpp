// synchronize(optimizer) and DistributedOptimizer, as real processes over the TCP store (the
// worker compares ranks bit for bit; see sync_worker.cpp).
#include <gtest/gtest.h>

#include "support/sync_runs.h"
#include "support/world.h"

namespace lockstep::testing {
namespace {

std::vector<Finished> run_worker(int n, std::vector<std::string> args) {
  return run_sync_worker(SYNC_WORKER, n, std::move(args));
}

TEST(SynchronizeOptimizer, RootsStateReachesFreshAndDivergedRanksForEveryKind) {
  expect_all_correct(run_worker(3, {"optimizers"}));
}

TEST(SynchronizeOptimizer, DifferentParametersUnsupportedKindsAndMisshapenStateRaiseOnEveryRank) {
  const auto ranks = run_worker(2, {"refused-optimizers"});
  expect_all_correct(ranks);
  for (const auto& f : ranks) {
    EXPECT_TRUE(contains(f.output,
                         "rank 1's optimizer differs from rank 0's at param group 0, "
                         "parameter 4: [5, 8] float32 on rank 1 vs [4, 8] float32 on "
                         "rank 0"))
        << f.output;
    EXPECT_TRUE(contains(f.output,
                         "cannot synchronize the state of torch::optim::LBFGS; supported "
                         "optimizers are SGD, Adam, AdamW, RMSprop and Adagrad"))
        << f.output;
    EXPECT_TRUE(contains(f.output,
                         "rank 0's Adam state for param group 0, parameter 0: its "
                         "exp_avg does not have the parameter's shape and dtype "
                         "([8, 6] float32)"))
        << f.output;
  }
}

TEST(DistributedOptimizer, StepsLikeOneProcessOnAllRanksBatches) {
  expect_all_correct(run_worker(3, {"distributed-optimizer"}));
}

}  // namespace
}  // namespace lockstep::testing
