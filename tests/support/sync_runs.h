#pragma once

// Runs a synchronize worker (support/rank_bytes.h's run_scenario) as real processes over the
// TCP store, and checks that every rank said its scenario was correct.
#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/tool_process.h"
#include "support/world.h"

namespace lockstep::testing {

inline std::vector<Finished> run_sync_worker(const std::string& worker, int n, std::vector<std::string> args) {
  args.insert(args.begin(), worker);
  return run_processes(n, args, tcp_world(n, {{"LOCKSTEP_TIMEOUT", "20"}}), std::chrono::seconds(60));
}

inline void expect_all_correct(const std::vector<Finished>& ranks) {
  for (size_t r = 0; r < ranks.size(); ++r) {
    EXPECT_EQ(ranks[r].exit_code, 0) << "rank " << r << ":\n" << ranks[r].output;
    EXPECT_TRUE(contains(ranks[r].output, "rank " + std::to_string(r) + " of ")) << ranks[r].output;
  }
}

}  // namespace lockstep::testing
