// How a node's launcher reads a cluster's variables: Slurm's srun step and the Kubernetes
// training operator's PyTorchJob contract (variables only; tests/cluster runs real ones).
#include "launch/cluster_node.h"

#include <gtest/gtest.h>

#include <map>

#include "lockstep/error.h"
#include "support/env_lookup.h"

namespace lockstep::launch {
namespace {

using Variables = std::map<std::string, std::string>;

using testing::env_of;

// The second pod of a PyTorchJob with two workers, as the operator sets it: RANK is the pod's index.
Variables second_pod() {
  return {{"MASTER_ADDR", "job-master-0"},
          {"MASTER_PORT", "23456"},
          {"PET_NNODES", "2"},
          {"PET_NPROC_PER_NODE", "2"},
          {"PET_NODE_RANK", "1"},
          {"RANK", "1"},
          {"WORLD_SIZE", "2"}};
}

std::string error_of(LaunchOptions& options, bool nproc_given, const Variables& variables) {
  try {
    take_node_from_cluster(options, nproc_given, env_of(variables));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ClusterNode, APyTorchJobPodStartsItsProcessesWithGlobalRanks) {
  LaunchOptions options;
  EXPECT_TRUE(launches_a_cluster_node(env_of(second_pod()), false));
  EXPECT_EQ(take_node_from_cluster(options, false, env_of(second_pod())), "");
  EXPECT_EQ(options.nproc_per_node, 2);
  EXPECT_EQ(options.nnodes, 2);
  EXPECT_EQ(options.node_rank, 1);
  EXPECT_EQ(options.master_addr, "job-master-0");
  EXPECT_EQ(options.master_port, 23456);

  // Without PET_NODE_RANK the pod's RANK is its node.
  Variables older = second_pod();
  older.erase("PET_NODE_RANK");
  options = LaunchOptions();
  take_node_from_cluster(options, false, env_of(older));
  EXPECT_EQ(options.node_rank, 1);
  // -n given wins over PET_NPROC_PER_NODE.
  options = LaunchOptions();
  options.nproc_per_node = 3;
  take_node_from_cluster(options, true, env_of(second_pod()));
  EXPECT_EQ(options.nproc_per_node, 3);
}

TEST(ClusterNode, WorldSizeCountingPodsOrProcessesIsBothFineAndAnythingElseIsSaid) {
  for (const std::string agreeing : {"2", "4"}) {
    Variables variables = second_pod();
    variables["WORLD_SIZE"] = agreeing;
    LaunchOptions options;
    EXPECT_EQ(take_node_from_cluster(options, false, env_of(variables)), "") << agreeing;
  }
  Variables variables = second_pod();
  variables["WORLD_SIZE"] = "3";
  LaunchOptions options;
  EXPECT_EQ(take_node_from_cluster(options, false, env_of(variables)),
            "WORLD_SIZE=3 counts neither the pods (PET_NNODES=2) nor the processes; trusting PET_NNODES x "
            "PET_NPROC_PER_NODE = 4");
}

TEST(ClusterNode, AnElasticPodRangeIsANodeRange) {
  Variables variables = second_pod();
  variables["PET_NNODES"] = "1:4";
  LaunchOptions options;
  EXPECT_EQ(error_of(options, false, variables), "no error");
  EXPECT_EQ(options.nnodes, 4);
  EXPECT_EQ(options.min_nnodes, 1);
  variables["PET_NNODES"] = "2:2";
  options = LaunchOptions();
  EXPECT_EQ(error_of(options, false, variables), "no error");
  EXPECT_EQ(options.nnodes, 2);
  EXPECT_EQ(options.min_nnodes, 0);  // a job of fixed size
  variables["PET_NNODES"] = "3:2";
  options = LaunchOptions();
  EXPECT_EQ(error_of(options, false, variables), "PET_NNODES='3:2': MIN must not exceed MAX");
}

TEST(ClusterNode, BadPodVariablesAreNamed) {
  Variables variables = second_pod();
  LaunchOptions options;

  variables = second_pod();
  variables["PET_NODE_RANK"] = "2";
  options = LaunchOptions();
  EXPECT_EQ(error_of(options, false, variables), "PET_NODE_RANK=2 is not a node of PET_NNODES=2");
  variables = second_pod();
  variables.erase("MASTER_ADDR");
  options = LaunchOptions();
  EXPECT_EQ(error_of(options, false, variables),
            "PET_NNODES=2 but MASTER_ADDR or MASTER_PORT is not set; the training operator sets both in every pod");
  variables = second_pod();
  variables["PET_NPROC_PER_NODE"] = "two";
  options = LaunchOptions();
  EXPECT_EQ(error_of(options, false, variables), "PET_NPROC_PER_NODE='two' is not a number");
}

// `srun --ntasks-per-node=1 lockstep run -n 2` on the second of two nodes of job 1234.
Variables srun_launcher_on_second_node() {
  return {{"SLURM_JOB_ID", "1234"},
          {"SLURM_STEP_ID", "1"},
          {"SLURM_STEP_NODELIST", "n[1-2]"},
          {"SLURM_STEP_TASKS_PER_NODE", "1(x2)"},
          {"SLURM_NODEID", "1"},
          {"SLURM_LOCALID", "0"},
          {"SLURM_PROCID", "1"},
          {"SLURM_NTASKS", "2"}};
}

TEST(ClusterNode, AnSrunTaskPerNodeTakesTheNodesFromSlurm) {
  LaunchOptions options;
  EXPECT_TRUE(launches_a_cluster_node(env_of(srun_launcher_on_second_node()), true));
  EXPECT_FALSE(launches_a_cluster_node(env_of(srun_launcher_on_second_node()), false));  // srun started a rank
  take_node_from_cluster(options, true, env_of(srun_launcher_on_second_node()));
  EXPECT_EQ(options.nnodes, 2);
  EXPECT_EQ(options.node_rank, 1);
  EXPECT_EQ(options.master_addr, "n1");
  EXPECT_EQ(options.master_port, 15000 + 234 * 16 + 1);

  Variables two_per_node = srun_launcher_on_second_node();
  two_per_node["SLURM_STEP_TASKS_PER_NODE"] = "2(x2)";
  two_per_node["SLURM_NTASKS"] = "4";
  EXPECT_FALSE(launches_a_cluster_node(env_of(two_per_node), true));
  options = LaunchOptions();
  EXPECT_EQ(error_of(options, true, two_per_node),
            "inside srun the launcher starts -n workers on each node, so the step needs one task per node (srun "
            "--ntasks-per-node=1), but SLURM_STEP_TASKS_PER_NODE='2(x2)'");

  options = LaunchOptions();
  options.nnodes = 3;
  EXPECT_EQ(error_of(options, true, srun_launcher_on_second_node()),
            "--nnodes 3, but this srun step runs on 2 nodes (SLURM_STEP_NODELIST); leave out --nnodes inside srun");
}

TEST(ClusterNode, AWorkerALauncherStartedIsNeverANodeLauncher) {
  Variables worker = second_pod();
  worker["LOCAL_RANK"] = "0";
  EXPECT_FALSE(launches_a_cluster_node(env_of(worker), true));
  LaunchOptions options;
  EXPECT_EQ(take_node_from_cluster(options, false, env_of(worker)), "");
  EXPECT_EQ(options.nnodes, 1);
  EXPECT_FALSE(launches_a_cluster_node(env_of({}), true));
}

}  // namespace
}  // namespace lockstep::launch
