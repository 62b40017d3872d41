// One definition of a straggler (timeline/straggler.h), for the live notice and the summary.
#include <gtest/gtest.h>

#include "timeline/straggler.h"

namespace lockstep::timeline {
namespace {

TEST(Straggler, TheSlowestRankOfAStepIsBehindTheOthersMedianAndSaysWhere) {
  // Rank 2 takes 1 + 5 = 6 against the others' median 3 (of 3, 3 and 4): behind by 1 (100%).
  const SlowestRank slowest = slowest_of({{1, 2}, {0.5, 2.5}, {1, 5}, {2, 2}});
  EXPECT_EQ(slowest.rank, 2);
  EXPECT_DOUBLE_EQ(slowest.behind, 1.0);
  EXPECT_DOUBLE_EQ(slowest.data_excess, 0.0);     // 1 against the median of 0.5, 1, 2
  EXPECT_DOUBLE_EQ(slowest.compute_excess, 3.0);  // 5 against the median of 2, 2, 2.5
  EXPECT_EQ(slowest_of({{1, 1}}).rank, -1) << "one rank keeps no one waiting";
}

TEST(Straggler, IsBehindByMoreThanAFifthInMoreThanHalfTheSteps) {
  const SlowestRank data_bound{1, 0.5, 0.4, 0.1};
  const SlowestRank barely{1, 0.2, 0.2, 0};  // not more than a fifth
  const SlowestRank other{0, 0.3, 0, 0.3};
  // Six of ten steps: a straggler, by the median of its shares, held back by data.
  std::vector<SlowestRank> steps(6, data_bound);
  steps.insert(steps.end(), 4, other);
  const auto found = straggler_of(steps);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->rank, 1);
  EXPECT_DOUBLE_EQ(found->behind, 0.5);
  EXPECT_DOUBLE_EQ(found->share, 0.6);
  EXPECT_EQ(found->reason, "data");
  // Five of ten is not more than half; nor are steps it is only barely behind in.
  steps = std::vector<SlowestRank>(5, data_bound);
  steps.insert(steps.end(), 5, other);
  EXPECT_FALSE(straggler_of(steps).has_value());
  steps = std::vector<SlowestRank>(4, data_bound);
  steps.insert(steps.end(), 6, barely);
  EXPECT_FALSE(straggler_of(steps).has_value());
  EXPECT_STREQ(reason_of(0.1, 0.2), "compute");
}

}  // namespace
}  // namespace lockstep::timeline
