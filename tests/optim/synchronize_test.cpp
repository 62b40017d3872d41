// synchronize(optimizer) and DistributedOptimizer, as real processes over the TCP store (the
// worker compares ranks bit for bit; see sync_worker.cpp).
#include <gtest/gtest.h>

#include "support/world.h"

namespace lockstep::testing {
namespace {

const Env kShortTimeout{{"LOCKSTEP_TIMEOUT", "20"}};

std::vector<Finished> run_worker(int n, std::vector<std::string> args) {
  args.insert(args.begin(), SYNC_WORKER);
  return run_processes(n, args, tcp_world(n, kShortTimeout), std::chrono::seconds(60));
}

void expect_all_correct(const std::vector<Finished>& ranks) {
  for (size_t r = 0; r < ranks.size(); ++r) {
    EXPECT_EQ(ranks[r].exit_code, 0) << "rank " << r << ":\n" << ranks[r].output;
    EXPECT_TRUE(contains(ranks[r].output, "rank " + std::to_string(r) + " of ")) << ranks[r].output;
  }
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
