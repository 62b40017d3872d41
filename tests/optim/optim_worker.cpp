// A worker the ShardedOptimizer tests start as real processes: optim_worker SCENARIO.
#include <ATen/Parallel.h>

#include "lockstep/comm/init.h"
#include "sharded_scenarios.h"

int main(int argc, char** argv) {
  at::set_num_threads(1);
  lockstep::init();
  const int code = run_sharded_scenario(argc > 1 ? argv[1] : "");
  lockstep::shutdown();
  return code;
}
