// A worker the DDP tests start as real processes: ddp_worker SCENARIO [OUT_DIR].
#include <ATen/Parallel.h>

#include "ddp_scenarios.h"
#include "lockstep/comm/init.h"

int main(int argc, char** argv) {
  at::set_num_threads(1);
  lockstep::init();
  const std::string scenario = argc > 1 ? argv[1] : "";
  const int code = run_ddp_scenario(scenario, argc > 2 ? argv[2] : "");
  lockstep::shutdown();
  return code;
}
