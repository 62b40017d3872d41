// synchronize(module), as real processes over the TCP store (the worker compares ranks bit
// for bit; see sync_worker.cpp). The optimizer's are in tests/optim.
#include <gtest/gtest.h>

#include "support/sync_runs.h"
#include "support/world.h"

namespace lockstep::testing {
namespace {

using std::chrono::steady_clock;

std::vector<Finished> run_worker(int n, std::vector<std::string> args) {
  return run_sync_worker(SYNC_WORKER, n, std::move(args));
}

TEST(SynchronizeModule, EveryRankGetsRootsParametersAndBuffers) { expect_all_correct(run_worker(2, {"module", "0"})); }

TEST(SynchronizeModule, FromANonZeroRootOnThreeRanks) { expect_all_correct(run_worker(3, {"module", "1"})); }

TEST(SynchronizeModule, AWorldOfOneIsLeftAsItIs) {
  const auto run = run_process({SYNC_WORKER, "module", "0"});
  EXPECT_EQ(run.exit_code, 0) << run.output;
}

TEST(SynchronizeModule, DifferentModelsRaiseOnEveryRankNamingTheParameter) {
  const auto start = steady_clock::now();
  const auto ranks = run_worker(3, {"mismatched-modules"});
  EXPECT_LT(std::chrono::duration<double>(steady_clock::now() - start).count(), 15);
  expect_all_correct(ranks);
  for (const auto& f : ranks) {
    EXPECT_TRUE(contains(f.output,
                         "MismatchError: lockstep::synchronize: rank 1's module differs "
                         "from rank 0's at parameter 'fc2.weight': [5, 8] float32 on "
                         "rank 1 vs [4, 8] float32 on rank 0"))
        << f.output;
  }
}

TEST(SynchronizeModule, DifferentRootsRaiseOnEveryRank) {
  const auto ranks = run_worker(2, {"mismatched-roots"});
  expect_all_correct(ranks);
  for (const auto& f : ranks) {
    EXPECT_TRUE(contains(f.output,
                         "ranks passed different roots: rank 1 passed root 1 but rank 0 "
                         "passed root 0"))
        << f.output;
    EXPECT_TRUE(contains(f.output, "root 7 is not a rank; ranks are 0..1")) << f.output;
  }
}

}  // namespace
}  // namespace lockstep::testing
