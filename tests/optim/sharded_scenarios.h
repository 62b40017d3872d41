#pragma once

#include <string>

// Runs one ShardedOptimizer scenario on this rank of the default group (a process of an
// init() world or a replica of run_replicas): "sharded-equivalence",
// "sharded-different-parameters" or "sharded-lbfgs". Prints "rank R: SCENARIO ok" and
// returns 0 when it holds; prints what went wrong and returns non-zero otherwise.
int run_sharded_scenario(const std::string& scenario);
