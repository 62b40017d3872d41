// Every collective x every dtype x world sizes 1-4, as real processes, over shared memory,
// gloo, MPI and the hierarchical path (the worker checks exact values; see
// collectives_worker.cpp).
#include <gtest/gtest.h>

#include "comm/transports/device_call.h"
#include "support/tool_process.h"
#include "support/world.h"

namespace lockstep::testing {
namespace {

struct Setup {
  std::string path;  // shm, gloo, mpi, mpi-shm or hierarchical
  int world_size;
};

void PrintTo(const Setup& setup, std::ostream* out) { *out << setup.path << ", world size " << setup.world_size; }

std::string name_of(const ::testing::TestParamInfo<Setup>& info) {
  std::string path = info.param.path;
  for (auto& c : path) c = c == '-' ? '_' : c;
  return path + "_" + std::to_string(info.param.world_size);
}

// A group of one also names the transport that keeps its CUDA tensors where they are, in a
// CUDA build (connect_group.cpp), GPU or none.
std::string group_of_one_transport() { return built_with_cuda() ? "gloo, self, self for cuda" : "gloo, self"; }

// What a worker says after "rank R of N (local L of M, " on `setup`'s path.
std::string backend_and_transport(const Setup& setup) {
  const auto& [path, n] = setup;
  if (path == "gloo") return "gloo, gloo";
  if (path == "hierarchical") return "gloo, shm+gloo";
  if (path == "mpi") return "mpi, mpi";
  if (path == "mpi-shm") return "mpi, shm";
  return n == 1 ? group_of_one_transport() : "gloo, shm";
}

// Runs COLLECTIVES_WORKER `scenario` on `setup`'s path, and expects every rank to succeed
// and to print its line ending in `said`.
void expect_every_rank_says(const Setup& setup, const std::string& scenario, const std::string& said) {
  const auto& [path, n] = setup;
  const Env timeout{{"LOCKSTEP_TIMEOUT", "60"}};
  const Env host_backend_only{{"LOCKSTEP_TIMEOUT", "60"}, {"LOCKSTEP_SHM", "0"}};
  std::vector<Finished> ranks;
  if (path == "shm") {
    ranks = run_processes(n, {COLLECTIVES_WORKER, scenario}, file_world(n, timeout));
  } else if (path == "gloo") {
    ranks = run_processes(n, {COLLECTIVES_WORKER, scenario}, tcp_world(n, host_backend_only));
  } else if (path == "hierarchical") {
    // The first (n + 1) / 2 ranks on "node" 0, the rest on node 1: uneven for odd n.
    const auto world = file_world(n, timeout);
    ranks = run_processes(n, {COLLECTIVES_WORKER, scenario}, [&](int rank) {
      Env env = world(rank);
      env["GROUP_RANK"] = std::to_string(rank < (n + 1) / 2 ? 0 : 1);
      return env;
    });
  } else {
    auto argv = mpirun(n);
    argv.insert(argv.end(), {COLLECTIVES_WORKER, scenario});
    ranks = {run_process(argv, mpirun_env(path == "mpi-shm" ? timeout : host_backend_only))};
  }
  std::string all;
  for (size_t r = 0; r < ranks.size(); ++r) {
    EXPECT_EQ(ranks[r].exit_code, 0) << "rank " << r << ":\n" << ranks[r].output;
    all += ranks[r].output;
  }
  const bool mpi = path.rfind("mpi", 0) == 0;
  for (int r = 0; r < n; ++r) {
    // Under mpirun every rank is local; elsewhere the test's environment says.
    const std::string local = mpi ? std::to_string(r) + " of " + std::to_string(n) : "";
    const std::string head = "rank " + std::to_string(r) + " of " + std::to_string(n) + " (local " + local;
    EXPECT_TRUE(contains(all, head)) << all;
    EXPECT_TRUE(contains(all, backend_and_transport(setup) + "): " + said)) << all;
  }
}

class EveryCollective : public ::testing::TestWithParam<Setup> {};

TEST_P(EveryCollective, ExactValuesForEveryDtype) {
  expect_every_rank_says(GetParam(), "all", "all collectives correct");
}

INSTANTIATE_TEST_SUITE_P(Worlds, EveryCollective,
                         ::testing::Values(Setup{"shm", 1}, Setup{"shm", 2}, Setup{"shm", 3}, Setup{"shm", 4},
                                           Setup{"gloo", 2}, Setup{"gloo", 3}, Setup{"hierarchical", 3},
                                           Setup{"mpi", 2}, Setup{"mpi", 3}, Setup{"mpi-shm", 2}),
                         name_of);

// Avg of float16 and bfloat16 whose sums overflow and means do not, on every transport
// (sixteen_bit_means.h; thread replicas in replicas_test.cpp).
class SixteenBitMeans : public ::testing::TestWithParam<Setup> {};

TEST_P(SixteenBitMeans, AreCorrectlyRoundedWhereTheSumOverflows) {
  expect_every_rank_says(GetParam(), "16-bit-means", "16-bit means correct");
}

INSTANTIATE_TEST_SUITE_P(Worlds, SixteenBitMeans,
                         ::testing::Values(Setup{"shm", 2}, Setup{"shm", 3}, Setup{"gloo", 2}, Setup{"gloo", 3},
                                           Setup{"hierarchical", 3}, Setup{"hierarchical", 4}, Setup{"mpi", 2},
                                           Setup{"mpi", 3}, Setup{"mpi-shm", 2}, Setup{"mpi-shm", 3}),
                         name_of);

// Two launches of `lockstep run --nnodes 2` on one machine: shared memory inside each
// launch's pair, gloo between the pairs' leaders.
TEST(EveryCollective, HierarchicalAcrossTwoLaunchesOfTwoRanks) {
  const std::string port = std::to_string(free_port());
  std::vector<std::unique_ptr<ToolProcess>> nodes;
  for (int node = 0; node < 2; ++node) {
    nodes.push_back(std::make_unique<ToolProcess>(
        std::vector<std::string>{LOCKSTEP_TOOL, "run", "-n", "2", "--nnodes", "2", "--node-rank", std::to_string(node),
                                 "--master-addr", "127.0.0.1", "--master-port", port, "--", COLLECTIVES_WORKER, "all"},
        std::vector<std::string>{"LOCKSTEP_TIMEOUT=60"}));
  }
  std::string all;
  for (auto& node : nodes) {
    ASSERT_TRUE(node->wait_for_exit(std::chrono::seconds(170)));
    EXPECT_EQ(node->exit_code(), 0) << node->stdout_text() << node->stderr_text();
    all += node->stdout_text();
  }
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(contains(all, "rank " + std::to_string(r) + " of 4 (local " + std::to_string(r % 2) +
                                  " of 2, gloo, shm+gloo): all collectives correct"))
        << all;
  }
}

// Under mpirun, ranks 0-1 and 2-3 as two "nodes" (GROUP_RANK): shared memory inside each,
// MPI between their leaders; then sub-groups, which MPI connects with MPI_Comm_create_group.
TEST(EveryCollective, HierarchicalOverMpiAndItsSubGroups) {
  for (const std::string scenario : {"all", "sub-groups"}) {
    auto argv = mpirun(4);
    argv.insert(argv.end(), {"sh", "-c", "GROUP_RANK=$((OMPI_COMM_WORLD_RANK / 2)) exec \"$0\" \"$1\"",
                             COLLECTIVES_WORKER, scenario});
    const auto run = run_process(argv, mpirun_env({{"LOCKSTEP_TIMEOUT", "60"}}));
    EXPECT_EQ(run.exit_code, 0) << run.output;
    for (int r = 0; r < 4; ++r) {
      const std::string said = scenario == "all" ? "rank " + std::to_string(r) + " of 4 (local " + std::to_string(r) +
                                                       " of 4, mpi, shm+mpi): all collectives correct"
                                                 : "rank " + std::to_string(r) + ": sub-groups correct";
      EXPECT_TRUE(contains(run.output, said)) << run.output;
    }
  }
}

TEST(EveryCollective, SubGroupsBesideTheDefaultGroup) {
  for (const bool shm : {true, false}) {
    const auto ranks = run_processes(4, {COLLECTIVES_WORKER, "sub-groups"},
                                     file_world(4, {{"LOCKSTEP_TIMEOUT", "60"}, {"LOCKSTEP_SHM", shm ? "1" : "0"}}));
    for (int r = 0; r < 4; ++r) {
      const std::string& out = ranks[r].output;
      EXPECT_EQ(ranks[r].exit_code, 0) << out;
      EXPECT_TRUE(contains(out, "rank " + std::to_string(r) + ": sub-groups correct")) << out;
      EXPECT_TRUE(contains(out, "rank " + std::to_string(r) + " sub-group transport " + (shm ? "shm" : "gloo"))) << out;
      const std::string others = r % 2 == 0 ? "[1, 3]" : "[0, 2]";
      EXPECT_TRUE(contains(
          out, "lockstep::all_reduce: rank " + std::to_string(r) + " is not a member of the group of ranks " + others))
          << out;
    }
  }
}

TEST(EveryCollective, WorldOfOneWithoutAnyEnvironment) {
  const auto run = run_process({COLLECTIVES_WORKER, "all"});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("rank 0 of 1 (local 0 of 1, " + group_of_one_transport() + "): all collectives correct"),
            std::string::npos)
      << run.output;
}

TEST(EveryCollective, LocalRanksFoundFromHostNamesWhenNotGiven) {
  const auto ranks = run_processes(3, {COLLECTIVES_WORKER, "init-only"}, tcp_world(3));
  for (const auto& f : ranks) EXPECT_EQ(f.exit_code, 0) << f.output;
  const auto all = run_processes(2, {COLLECTIVES_WORKER, "all"}, tcp_world(2));
  EXPECT_NE(all[1].output.find("rank 1 of 2 (local 1 of 2, gloo, shm)"), std::string::npos) << all[1].output;
}

}  // namespace
}  // namespace lockstep::testing
