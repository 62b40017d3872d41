// Every collective x every dtype x world sizes 1-3, as real processes, over each backend
// and rendezvous method (the worker checks exact values; see collectives_worker.cpp).
#include <gtest/gtest.h>

#include "support/world.h"

namespace lockstep::testing {
namespace {

struct Setup {
  std::string rendezvous;  // tcp, file or mpi
  int world_size;
};

void PrintTo(const Setup& setup, std::ostream* out) {
  *out << setup.rendezvous << " rendezvous, world size " << setup.world_size;
}

std::string name_of(const ::testing::TestParamInfo<Setup>& info) {
  return info.param.rendezvous + "_" + std::to_string(info.param.world_size);
}

class EveryCollective : public ::testing::TestWithParam<Setup> {};

void expect_all_correct(const std::vector<Finished>& ranks, const std::string& backend) {
  for (size_t r = 0; r < ranks.size(); ++r) {
    EXPECT_EQ(ranks[r].exit_code, 0) << "rank " << r << ":\n" << ranks[r].output;
  }
  std::string all;
  for (const auto& f : ranks) all += f.output;
  for (size_t r = 0; r < ranks.size(); ++r) {
    EXPECT_NE(all.find("rank " + std::to_string(r) + " of " + std::to_string(ranks.size())), std::string::npos) << all;
  }
  EXPECT_NE(all.find(backend + "): all collectives correct"), std::string::npos) << all;
}

TEST_P(EveryCollective, ExactValuesForEveryDtype) {
  const auto [rendezvous, n] = GetParam();
  const Env timeout{{"LOCKSTEP_TIMEOUT", "60"}};
  if (rendezvous == "tcp") {
    expect_all_correct(run_processes(n, {COLLECTIVES_WORKER, "all"}, tcp_world(n, timeout)), "gloo");
  } else if (rendezvous == "file") {
    expect_all_correct(run_processes(n, {COLLECTIVES_WORKER, "all"}, file_world(n, timeout)), "gloo");
  } else {
    auto argv = mpirun(n);
    argv.insert(argv.end(), {COLLECTIVES_WORKER, "all"});
    const auto run = run_process(argv, mpirun_env(timeout));
    EXPECT_EQ(run.exit_code, 0) << run.output;
    for (int r = 0; r < n; ++r) {
      EXPECT_NE(run.output.find("rank " + std::to_string(r) + " of " + std::to_string(n) +
                                " (local " + std::to_string(r) + " of " + std::to_string(n) +
                                ", mpi): all collectives correct"),
                std::string::npos) << run.output;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, EveryCollective,
                         ::testing::Values(Setup{"tcp", 1}, Setup{"tcp", 2}, Setup{"tcp", 3},
                                           Setup{"file", 1}, Setup{"file", 2}, Setup{"file", 3},
                                           Setup{"mpi", 1}, Setup{"mpi", 2}, Setup{"mpi", 3}),
                         name_of);

TEST(EveryCollective, WorldOfOneWithoutAnyEnvironment) {
  const auto run = run_process({COLLECTIVES_WORKER, "all"});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("rank 0 of 1 (local 0 of 1, gloo): all collectives correct"),
            std::string::npos) << run.output;
}

TEST(EveryCollective, LocalRanksFoundFromHostNamesWhenNotGiven) {
  const auto ranks = run_processes(3, {COLLECTIVES_WORKER, "init-only"}, tcp_world(3));
  for (const auto& f : ranks) EXPECT_EQ(f.exit_code, 0) << f.output;
  const auto all = run_processes(2, {COLLECTIVES_WORKER, "all"}, tcp_world(2));
  EXPECT_NE(all[1].output.find("rank 1 of 2 (local 1 of 2, gloo)"), std::string::npos) << all[1].output;
}

}  // namespace
}  // namespace lockstep::testing
