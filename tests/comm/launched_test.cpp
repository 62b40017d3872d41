// lockstep programs under the launcher (`lockstep run`), including the perceptron example
// that `make run` starts.
#include <gtest/gtest.h>

#include "support/examples.h"
#include "support/world.h"

namespace lockstep::testing {
namespace {

TEST(Launched, EveryCollectiveUnderTheLauncherOverGloo) {
  const auto run = run_process({LOCKSTEP_TOOL, "run", "-n", "3", "--", COLLECTIVES_WORKER, "all"});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  for (int r = 0; r < 3; ++r) {
    const std::string line = "[rank " + std::to_string(r) + "] rank " + std::to_string(r) + " of 3 (local " +
                             std::to_string(r) + " of 3, gloo, shm): all collectives correct";
    EXPECT_NE(run.output.find(line), std::string::npos) << run.output;
  }
}

TEST(Launched, EveryCollectiveUnderTheLauncherOverMpi) {
  const auto run =
      run_process({LOCKSTEP_TOOL, "run", "-n", "2", "--backend", "mpi", "--", COLLECTIVES_WORKER, "all"}, mpirun_env());
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("rank 1 of 2 (local 1 of 2, mpi, shm): all collectives correct"), std::string::npos)
      << run.output;
}

TEST(Launched, PerceptronOnTwoWorkersPrintsADecreasingMse) {
  LOCKSTEP_SKIP_WITHOUT_EXAMPLE(PERCEPTRON);
  const auto run = run_process({LOCKSTEP_TOOL, "run", "-n", "2", "--", PERCEPTRON, "--epochs", "4"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto mse = numbers_on_lines(run.output, R"(\[rank 0\] epoch (\d+)/4  mse ([0-9.]+))");
  ASSERT_EQ(mse.size(), 4u) << run.output;
  for (size_t e = 1; e < mse.size(); ++e) EXPECT_LT(mse[e], mse[e - 1]) << run.output;
  EXPECT_EQ(run.output.find("[rank 1] epoch"), std::string::npos) << "only rank 0 prints";
}

TEST(Launched, QuickstartOnTwoWorkersLowersTheLoss) {
  LOCKSTEP_SKIP_WITHOUT_EXAMPLE(QUICKSTART);
  const auto run = run_process({LOCKSTEP_TOOL, "run", "-n", "2", "--", QUICKSTART});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto losses = numbers_on_lines(run.output, R"(\[rank 0\] epoch +(\d+)  loss ([0-9.]+))");
  ASSERT_EQ(losses.size(), 10u) << run.output;
  EXPECT_LT(losses.back(), losses.front()) << run.output;
  EXPECT_EQ(run.output.find("[rank 1] epoch"), std::string::npos) << "only rank 0 logs";
}

}  // namespace
}  // namespace lockstep::testing
