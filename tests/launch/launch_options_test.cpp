#include "launch/launch_options.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "lockstep/error.h"
#include "launch/mpirun_command.h"

namespace lockstep::launch {
namespace {

LaunchOptions runnable() {
  LaunchOptions options;
  options.nproc_per_node = 2;
  options.command = {"train", "--epochs", "3"};
  return options;
}

std::string rejection_of(const LaunchOptions& options) {
  try {
    validate(options);
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "<accepted>";
}

TEST(LaunchOptions, DefaultsWithACommandAreRunnable) {
  EXPECT_EQ(rejection_of(runnable()), "<accepted>");
  EXPECT_EQ(master_addr_of(runnable()), "127.0.0.1");
}

TEST(LaunchOptions, AWorkerRangeGivesItsMaxToStartAndItsMinToLiveRecovery) {
  int min = 0;
  EXPECT_EQ(take_min("-n", "3", min), "3");
  EXPECT_EQ(min, 0);
  EXPECT_EQ(take_min("-n", "2:3", min), "3");
  EXPECT_EQ(min, 2);
  for (const std::string bad : {"0:3", "x:3", ":3", "2.5:3"}) {
    try {
      take_min("-n", bad, min);
      ADD_FAILURE() << bad << " was taken";
    } catch (const ConfigError& error) {
      EXPECT_EQ(std::string(error.what()), "-n " + bad + ": MIN in MIN:MAX must be a count of at least 1");
    }
  }
  LaunchOptions options = runnable();
  options.nproc_per_node = 3;
  options.min_nproc = 2;
  EXPECT_EQ(rejection_of(options),
            "-n MIN:MAX trains on with fewer workers than it started, as --recovery live does; leave out --recovery "
            "restart");
  options.recovery = "live";
  EXPECT_EQ(rejection_of(options), "<accepted>");
  options.min_nproc = 4;
  EXPECT_EQ(rejection_of(options), "-n 4:3: MIN must not exceed MAX");
}

TEST(LaunchOptions, ANodeRangeStartsWithMinNodesUnderLiveRecoveryOnly) {
  int min = 0;
  EXPECT_EQ(take_min("--nnodes", "1:2", min), "2");
  EXPECT_EQ(min, 1);
  try {
    take_min("--nnodes", "0:2", min);
    ADD_FAILURE() << "0:2 was taken";
  } catch (const ConfigError& error) {
    EXPECT_EQ(std::string(error.what()), "--nnodes 0:2: MIN in MIN:MAX must be a count of at least 1");
  }
  LaunchOptions options = runnable();
  options.nnodes = 2;
  options.min_nnodes = 1;
  options.master_addr = "10.0.0.1";
  options.master_port = 29500;
  EXPECT_EQ(rejection_of(options),
            "--nnodes MIN:MAX starts with the nodes that came and admits the others later, as --recovery live "
            "does; leave out --recovery restart");
  options.recovery = "live";
  EXPECT_EQ(rejection_of(options), "<accepted>");
  options.min_nnodes = 3;
  EXPECT_EQ(rejection_of(options), "--nnodes 3:2: MIN must not exceed MAX");
}

TEST(LaunchOptions, GpuJobsAreNotPinnedByDefaultAndAskedBindingIsKept) {
  EXPECT_EQ(binding_by_default("", /*gpu_job=*/true), "none");
  EXPECT_EQ(binding_by_default("", /*gpu_job=*/false), "");  // a core each, where there are enough
  EXPECT_EQ(binding_by_default("core", /*gpu_job=*/true), "core");
  EXPECT_EQ(binding_by_default("none", /*gpu_job=*/false), "none");
}

TEST(LaunchOptions, GpuJobsGetTheCoresSharedAmongTheirWorkersAsLoaderThreads) {
  EXPECT_EQ(loader_threads_by_default(/*gpu_job=*/true, /*cores=*/16, /*workers_on_this_node=*/1), 8);
  EXPECT_EQ(loader_threads_by_default(true, 16, 8), 2);
  EXPECT_EQ(loader_threads_by_default(true, 16, 3), 5);
  EXPECT_EQ(loader_threads_by_default(true, 4, 8), 1);
  EXPECT_EQ(loader_threads_by_default(false, 16, 1), 1);
}

TEST(LaunchOptions, RejectionsNameTheOptionToFix) {
  LaunchOptions options = runnable();
  options.master_port = 70000;
  EXPECT_EQ(rejection_of(options), "--master-port must be in [1, 65535] (got 70000)");

  options = runnable();
  options.nnodes = 0;
  EXPECT_EQ(rejection_of(options), "--nnodes must be at least 1 (got 0)");

  options = runnable();
  options.command = {};
  EXPECT_NE(rejection_of(options).find("no PROGRAM"), std::string::npos);

  options = runnable();
  options.nnodes = 2;
  options.node_rank = 1;
  options.master_addr = "node0";
  EXPECT_NE(rejection_of(options).find("--master-port"), std::string::npos);
}

TEST(MpirunCommand, HandsProgramAndArgumentsToMpirun) {
  EXPECT_EQ(mpirun_command(runnable(), false),
            (std::vector<std::string>{"mpirun", "-n", "2", "--oversubscribe", "-x", "LOCKSTEP_BACKEND=mpi", "train",
                                      "--epochs", "3"}));
}

TEST(MpirunCommand, AllowsRootOnlyWhenRunningAsRoot) {
  std::vector<std::string> command = mpirun_command(runnable(), true);
  EXPECT_NE(std::find(command.begin(), command.end(), "--allow-run-as-root"), command.end());
  EXPECT_EQ(command.back(), "3");
}

}  // namespace
}  // namespace lockstep::launch
