// Ranks as real processes read their shares of Fashion-MNIST's test split (10000 examples,
// not divisible by ranks × batch): together they cover it, with the same number of batches
// on every rank, padding only as documented.
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "support/tool_process.h"
#include "support/world.h"

namespace lockstep::testing {
namespace {

TEST(Sharding, RanksTogetherReadTheWholeSplitInEqualBatchCounts) {
  struct Case {
    int ranks;
    const char* expected;
  };
  // 10000 = 3 * 3334 - 2 and 3334 = 52 * 64 + 6: 2 samples padded, 53 batches each.
  const Case cases[] = {
      {2, "ranks 2 batches 79 79 samples 10000 distinct 10000"},
      {3, "ranks 3 batches 53 53 53 samples 10002 distinct 10000"},
  };
  for (const auto& c : cases) {
    const auto ranks = run_processes(c.ranks, {SHARDING_WORKER}, tcp_world(c.ranks, {{"LOCKSTEP_TIMEOUT", "30"}}),
                                     std::chrono::seconds(90));
    for (const auto& rank : ranks) ASSERT_EQ(rank.exit_code, 0) << rank.output;
    EXPECT_TRUE(contains(ranks[0].output, c.expected)) << ranks[0].output;
    // The labels the loaders returned are exactly those of the indices the samplers gave.
    const auto at = ranks[0].output.find("labels read ");
    ASSERT_NE(at, std::string::npos) << ranks[0].output;
    long long got = 0, expected = 0;
    ASSERT_EQ(
        std::sscanf(ranks[0].output.c_str() + at, "labels read %lld of the sampled indices %lld", &got, &expected), 2);
    EXPECT_EQ(got, expected);
  }
}

}  // namespace
}  // namespace lockstep::testing
