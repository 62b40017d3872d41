// Slurm's node lists and task counts, with the cases of Slurm's own documentation, and how
// init() meets inside an srun step without MASTER_ADDR (no Slurm needed: variables only).
#include <gtest/gtest.h>

#include <map>

#include "comm/world/environment.h"
#include "support/env_lookup.h"
#include "job/slurm_step.h"
#include "lockstep/error.h"

namespace lockstep {
namespace {

using Names = std::vector<std::string>;

using testing::env_of;

template <typename Call>
std::string error_of(Call call) {
  try {
    call();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

// Rank 3 of `srun -N 2 --ntasks-per-node 2` in job 1234, as srun sets it.
std::map<std::string, std::string> second_task_of_second_node() {
  return {{"SLURM_JOB_ID", "1234"},
          {"SLURM_STEP_ID", "0"},
          {"SLURM_STEP_NODELIST", "n[1-2]"},
          {"SLURM_JOB_NODELIST", "n[1-2]"},
          {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
          {"SLURM_TASKS_PER_NODE", "2(x2)"},
          {"SLURM_NODEID", "1"},
          {"SLURM_LOCALID", "1"},
          {"SLURM_PROCID", "3"},
          {"SLURM_NTASKS", "4"},
          {"SLURM_STEP_NUM_TASKS", "4"}};
}

TEST(SlurmNodeList, ExpandsAsSlurmWritesIt) {
  EXPECT_EQ(expand_node_list("tux[1-3]", "V"), (Names{"tux1", "tux2", "tux3"}));
  EXPECT_EQ(expand_node_list("n[01-03,07]", "V"), (Names{"n01", "n02", "n03", "n07"}));
  EXPECT_EQ(expand_node_list("gpu-a[1-2],cpu7", "V"), (Names{"gpu-a1", "gpu-a2", "cpu7"}));
  EXPECT_EQ(expand_node_list("n[8-10]", "V"), (Names{"n8", "n9", "n10"}));
  EXPECT_EQ(expand_node_list("n[098-101]", "V"), (Names{"n098", "n099", "n100", "n101"}));
  EXPECT_EQ(expand_node_list("node1", "V"), (Names{"node1"}));
  EXPECT_EQ(expand_node_list("lx[15,18],lx[20-21]", "V"), (Names{"lx15", "lx18", "lx20", "lx21"}));
  EXPECT_EQ(expand_node_list("rack[1-2]-n[1-2]", "V"), (Names{"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"}));
  EXPECT_EQ(expand_node_list("n[1-2].cluster,login", "V"), (Names{"n1.cluster", "n2.cluster", "login"}));
}

TEST(SlurmNodeList, AnUnreadableListNamesTheVariable) {
  EXPECT_EQ(error_of([] { expand_node_list("n[1-", "SLURM_JOB_NODELIST"); }),
            "lockstep: SLURM_JOB_NODELIST='n[1-' is not a Slurm node list: a '[' without its ']'");
  EXPECT_EQ(error_of([] { expand_node_list("n[3-1]", "SLURM_JOB_NODELIST"); }),
            "lockstep: SLURM_JOB_NODELIST='n[3-1]' is not a Slurm node list: the range 3-1 runs backwards");
  EXPECT_EQ(error_of([] { expand_node_list("n[a-b]", "SLURM_STEP_NODELIST"); }),
            "lockstep: SLURM_STEP_NODELIST='n[a-b]' is not a Slurm node list: 'a-b' is not a number or a range of "
            "numbers like 01-03");
  EXPECT_EQ(error_of([] { expand_node_list("n1,,n2", "SLURM_STEP_NODELIST"); }),
            "lockstep: SLURM_STEP_NODELIST='n1,,n2' is not a Slurm node list: an empty node name");
  EXPECT_EQ(error_of([] { expand_node_list("n1]", "SLURM_STEP_NODELIST"); }),
            "lockstep: SLURM_STEP_NODELIST='n1]' is not a Slurm node list: a ']' without its '['");
}

TEST(SlurmTasksPerNode, ExpandsAsSlurmWritesIt) {
  EXPECT_EQ(expand_tasks_per_node("2(x3),1", "V"), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(expand_tasks_per_node("4", "V"), (std::vector<int>{4}));
  EXPECT_EQ(expand_tasks_per_node("1(x2)", "V"), (std::vector<int>{1, 1}));
  EXPECT_EQ(expand_tasks_per_node("3,2(x2),1", "V"), (std::vector<int>{3, 2, 2, 1}));
  EXPECT_EQ(error_of([] { expand_tasks_per_node("2(x3", "SLURM_TASKS_PER_NODE"); }),
            "lockstep: SLURM_TASKS_PER_NODE='2(x3' is not a Slurm task count like 2(x3),1");
  EXPECT_EQ(error_of([] { expand_tasks_per_node("two", "SLURM_TASKS_PER_NODE"); }),
            "lockstep: SLURM_TASKS_PER_NODE='two' is not a Slurm task count like 2(x3),1");
}

TEST(SlurmStep, ATaskKnowsItsNodeAndTheFirstNode) {
  const auto step = slurm_step(env_of(second_task_of_second_node()));
  ASSERT_TRUE(step.has_value());
  EXPECT_EQ(step->nodes, (Names{"n1", "n2"}));
  EXPECT_EQ(step->first_node(), "n1");
  EXPECT_EQ(step->node_rank, 1);
  EXPECT_EQ(step->local_rank, 1);
  EXPECT_EQ(step->local_world_size(), 2);
  EXPECT_EQ(step->rank, 3);
  EXPECT_EQ(step->world_size, 4);
  EXPECT_EQ(step->port(), 15000 + 234 * 16);
  // Two steps of one job at once, and the next job, meet on other ports.
  EXPECT_NE(slurm_step_port(1234, 0), slurm_step_port(1234, 1));
  EXPECT_NE(slurm_step_port(1234, 0), slurm_step_port(1235, 0));
  EXPECT_LT(slurm_step_port(999999, 15), 32768);
}

TEST(SlurmStep, OutsideSrunThereIsNoStep) {
  auto batch_shell = second_task_of_second_node();
  batch_shell.erase("SLURM_STEP_ID");
  EXPECT_FALSE(slurm_step(env_of(batch_shell)).has_value());
}

TEST(SlurmStep, OnlyTheCountPerNodeIsEnough) {
  auto env = second_task_of_second_node();
  env.erase("SLURM_STEP_TASKS_PER_NODE");
  env.erase("SLURM_TASKS_PER_NODE");
  env["SLURM_NTASKS_PER_NODE"] = "2";
  EXPECT_EQ(slurm_step(env_of(env))->local_world_size(), 2);
}

TEST(SlurmStep, VariablesThatDoNotFitEachOtherAreNamed) {
  auto env = second_task_of_second_node();
  env["SLURM_NTASKS"] = "3";
  EXPECT_EQ(error_of([&] { slurm_step(env_of(env)); }),
            "lockstep: SLURM_NTASKS=3, but SLURM_STEP_TASKS_PER_NODE='2(x2)' starts 4 tasks; srun sets both, so unset "
            "the one set by hand");
  env = second_task_of_second_node();
  env["SLURM_STEP_TASKS_PER_NODE"] = "2(x3)";
  EXPECT_EQ(error_of([&] { slurm_step(env_of(env)); }),
            "lockstep: SLURM_STEP_TASKS_PER_NODE='2(x3)' counts tasks on 3 nodes, but SLURM_STEP_NODELIST='n[1-2]' "
            "names 2");
  env = second_task_of_second_node();
  env["SLURM_NODEID"] = "2";
  EXPECT_EQ(error_of([&] { slurm_step(env_of(env)); }),
            "lockstep: SLURM_NODEID=2 is not a node of SLURM_STEP_NODELIST='n[1-2]' (2 nodes)");
  env = second_task_of_second_node();
  env["SLURM_LOCALID"] = "x";
  EXPECT_EQ(error_of([&] { slurm_step(env_of(env)); }), "lockstep: SLURM_LOCALID='x' is not a number");
}

TEST(SlurmStep, InitMeetsOnTheFirstNodeWithoutMasterAddr) {
  auto env = second_task_of_second_node();
  env["SLURM_STEP_NODELIST"] = env["SLURM_JOB_NODELIST"] = "localhost,n2";
  const auto spec = discover_world(InitOptions(), env_of(env));
  EXPECT_EQ(spec.rank, 3);
  EXPECT_EQ(spec.world_size, 4);
  EXPECT_EQ(spec.method, InitMethod::Tcp);
  EXPECT_EQ(spec.master_addr, "localhost");
  EXPECT_EQ(spec.master_port, 15000 + 234 * 16);
  EXPECT_EQ(spec.local_rank, 1);
  EXPECT_EQ(spec.local_world_size, 2);
  EXPECT_EQ(spec.node_rank, 1);

  env["MASTER_PORT"] = "29999";  // the user's choice wins
  EXPECT_EQ(discover_world(InitOptions(), env_of(env)).master_port, 29999);
  env["MASTER_ADDR"] = "10.0.0.9";
  EXPECT_EQ(discover_world(InitOptions(), env_of(env)).master_addr, "10.0.0.9");
}

TEST(SlurmStep, AFirstNodeThatDoesNotResolveIsNamed) {
  auto env = second_task_of_second_node();
  env["SLURM_STEP_NODELIST"] = "lockstep-no-such-node[1-2]";
  const std::string message = error_of([&] { discover_world(InitOptions(), env_of(env)); });
  EXPECT_EQ(message.rfind("lockstep: SLURM_STEP_NODELIST='lockstep-no-such-node[1-2]': its first node "
                          "'lockstep-no-such-node1', where rank 0 hosts the store, does not resolve (",
                          0),
            0u)
      << message;
  EXPECT_NE(message.find("); set MASTER_ADDR to its address"), std::string::npos) << message;
}

TEST(SlurmStep, MpirunInsideTheStepKeepsItsOwnRanks) {
  auto env = second_task_of_second_node();
  env["OMPI_COMM_WORLD_RANK"] = "0";
  env["OMPI_COMM_WORLD_SIZE"] = "1";
  env["SLURM_STEP_NODELIST"] = "lockstep-no-such-node[1-2]";  // not looked at
  const auto spec = discover_world(InitOptions(), env_of(env));
  EXPECT_EQ(spec.world_size, 1);
  EXPECT_EQ(spec.backend, Backend::Mpi);
}

}  // namespace
}  // namespace lockstep
