#include "launch/worker_environment.h"

#include <algorithm>

#include <gtest/gtest.h>

namespace lockstep::launch {
namespace {

bool has(const std::vector<std::string>& environment, const std::string& entry) {
  return std::find(environment.begin(), environment.end(), entry) != environment.end();
}

bool names(const std::vector<std::string>& environment, const std::string& name) {
  return std::any_of(environment.begin(), environment.end(),
                     [&](const std::string& entry) { return entry.rfind(name + "=", 0) == 0; });
}

LaunchOptions two_nodes_of_four() {
  LaunchOptions options;
  options.nproc_per_node = 4;
  options.nnodes = 2;
  options.node_rank = 1;
  options.master_addr = "node0";
  options.master_port = 29500;
  options.command = {"train"};
  return options;
}

TEST(WorkerEnvironment, GivesEachWorkerItsPlaceTorchrunStyle) {
  std::vector<std::string> environment =
      worker_environment({"HOME=/root", "PATH=/bin"}, two_nodes_of_four(), WorkerRanks{6, 2}, 29500);
  for (const char* entry : {"HOME=/root", "PATH=/bin", "RANK=6", "WORLD_SIZE=8", "LOCAL_RANK=2", "LOCAL_WORLD_SIZE=4",
                            "GROUP_RANK=1", "MASTER_ADDR=node0", "MASTER_PORT=29500", "LOCKSTEP_USE_AGENT_STORE=1"}) {
    EXPECT_TRUE(has(environment, entry)) << entry;
  }
  EXPECT_FALSE(names(environment, "LOCKSTEP_BACKEND"));
}

TEST(WorkerEnvironment, ANodeRangesFirstGenerationAndJoinersGetTheirPlacesUnderLiveRecovery) {
  LaunchOptions options = two_nodes_of_four();  // --nnodes 1:2
  options.recovery = "live";
  options.min_nnodes = 1;
  options.node_rank = 0;
  WorkerRanks first{2, 2};
  first.first_generation = {2, 4};  // node 0 started the job alone
  std::vector<std::string> environment = worker_environment({}, options, first, 29500);
  for (const char* entry : {"RANK=2", "WORLD_SIZE=4", "LOCKSTEP_MEMBER_ID=2", "LOCKSTEP_JOINS=0",
                            "LOCKSTEP_MIN_WORKERS=4", "LOCKSTEP_MAX_WORKERS=8", "LOCKSTEP_RECOVERY=live"}) {
    EXPECT_TRUE(has(environment, entry)) << entry;
  }
  options.node_rank = 1;  // came later, or its launcher was started again
  WorkerRanks joiner{6, 2, /*incarnation=*/1};
  joiner.joins = true;
  options.min_nproc = 3;  // -n 3:4
  environment = worker_environment({}, options, joiner, 29500);
  for (const char* entry : {"RANK=6", "WORLD_SIZE=8", "LOCKSTEP_MEMBER_ID=6", "LOCKSTEP_JOINS=1",
                            "LOCKSTEP_INCARNATION=1", "LOCKSTEP_MIN_WORKERS=3"}) {
    EXPECT_TRUE(has(environment, entry)) << entry;
  }
}

TEST(WorkerEnvironment, ReplacesInheritedValuesThatWouldContradictThePlace) {
  LaunchOptions options = two_nodes_of_four();
  options.backend = "gloo";
  std::vector<std::string> environment =
      worker_environment({"RANK=99", "MASTER_PORT=1", "OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4", "PMIX_RANK=3",
                          "OMPI_MCA_btl=self", "LOCKSTEP_RANK=0", "LOCKSTEP_LOCAL_WORLD_SIZE=1", "LOCKSTEP_BACKEND=mpi",
                          "LOCKSTEP_TIMEOUT=60", "RANKING=kept"},
                         options, WorkerRanks{5, 1}, 4242);
  EXPECT_TRUE(has(environment, "RANK=5"));
  EXPECT_FALSE(has(environment, "RANK=99"));
  EXPECT_TRUE(has(environment, "MASTER_PORT=4242"));
  EXPECT_FALSE(has(environment, "MASTER_PORT=1"));
  EXPECT_FALSE(names(environment, "OMPI_COMM_WORLD_RANK"));
  EXPECT_FALSE(names(environment, "OMPI_COMM_WORLD_SIZE"));
  EXPECT_FALSE(names(environment, "PMIX_RANK"));
  EXPECT_FALSE(names(environment, "LOCKSTEP_RANK"));
  EXPECT_FALSE(names(environment, "LOCKSTEP_LOCAL_WORLD_SIZE"));
  EXPECT_TRUE(has(environment, "OMPI_MCA_btl=self"));
  EXPECT_TRUE(has(environment, "LOCKSTEP_TIMEOUT=60"));
  EXPECT_TRUE(has(environment, "LOCKSTEP_BACKEND=gloo"));
  EXPECT_FALSE(has(environment, "LOCKSTEP_BACKEND=mpi"));
  EXPECT_TRUE(has(environment, "RANKING=kept"));
}

// Each flag sets one variable; --backend nccl, from before the device backend, keeps working
// and means the device backend nccl, leaving the host backend to the workers.
TEST(WorkerEnvironment, TheHostAndDeviceBackendsEachSetTheirVariable) {
  LaunchOptions options = two_nodes_of_four();
  options.backend = "gloo";
  options.device_backend = "staged";
  const auto both = worker_environment({}, options, WorkerRanks{0, 0}, 29500);
  EXPECT_TRUE(has(both, "LOCKSTEP_BACKEND=gloo"));
  EXPECT_TRUE(has(both, "LOCKSTEP_DEVICE_BACKEND=staged"));
  options.backend = "nccl";
  options.device_backend = "";
  const auto nccl = worker_environment({"LOCKSTEP_DEVICE_BACKEND=staged"}, options, WorkerRanks{0, 0}, 29500);
  EXPECT_FALSE(names(nccl, "LOCKSTEP_BACKEND"));
  EXPECT_TRUE(has(nccl, "LOCKSTEP_DEVICE_BACKEND=nccl"));
  EXPECT_FALSE(has(nccl, "LOCKSTEP_DEVICE_BACKEND=staged"));
}

TEST(WorkerEnvironment, SingleNodeDefaultsToLoopback) {
  LaunchOptions options;
  options.nproc_per_node = 2;
  options.command = {"train"};
  std::vector<std::string> environment = worker_environment({}, options, WorkerRanks{1, 1}, 5000);
  EXPECT_TRUE(has(environment, "MASTER_ADDR=127.0.0.1"));
  EXPECT_TRUE(has(environment, "WORLD_SIZE=2"));
}

TEST(WorkerEnvironment, OneOpenMpThreadPerWorkerUnlessTheUserChose) {
  EXPECT_TRUE(has(worker_environment({}, two_nodes_of_four(), WorkerRanks{6, 2}, 29500), "OMP_NUM_THREADS=1"));
  const auto chosen = worker_environment({"OMP_NUM_THREADS=3"}, two_nodes_of_four(), WorkerRanks{6, 2}, 29500);
  EXPECT_TRUE(has(chosen, "OMP_NUM_THREADS=3"));
  EXPECT_FALSE(has(chosen, "OMP_NUM_THREADS=1"));
  LaunchOptions alone = two_nodes_of_four();
  alone.nproc_per_node = 1;
  EXPECT_FALSE(names(worker_environment({}, alone, WorkerRanks{1, 0}, 29500), "OMP_NUM_THREADS"));
}

TEST(WorkerEnvironment, TellsWorkersWhetherTheLaunchersStdoutIsATerminal) {
  // An inherited value (an outer launch's) never survives: this launcher's stdout decides.
  const auto piped = worker_environment({"LOCKSTEP_TERMINAL=1"}, two_nodes_of_four(), WorkerRanks{6, 2}, 29500);
  EXPECT_TRUE(has(piped, "LOCKSTEP_TERMINAL=0"));
  EXPECT_FALSE(has(piped, "LOCKSTEP_TERMINAL=1"));
  const auto terminal = worker_environment({"LOCKSTEP_TERMINAL=0"}, two_nodes_of_four(), WorkerRanks{6, 2}, 29500, 0,
                                           /*stdout_is_terminal=*/true);
  EXPECT_TRUE(has(terminal, "LOCKSTEP_TERMINAL=1"));
  EXPECT_FALSE(has(terminal, "LOCKSTEP_TERMINAL=0"));
}

}  // namespace
}  // namespace lockstep::launch
