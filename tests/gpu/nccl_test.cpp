// The nccl backend, with real processes (gpu_worker) sharing one GPU: NCCL refuses two ranks
// on one device unless they claim different hosts, so each rank gets its own NCCL_HOSTID.
// That is a test-only arrangement (docs/GPU.md); NCCL then moves the bytes over loopback
// sockets. Also DDP on CUDA, on NCCL and on processes sharing the GPU. Labelled gpu; skipped,
// with the reason, where no GPU is visible.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "cuda_checks.h"
#include "support/world.h"

namespace lockstep::testing {
namespace {

// A TCP world of n ranks on the nccl backend, each rank claiming a host of its own to NCCL.
std::function<Env(int)> nccl_world(int n, Env extra = {}) {
  const auto world = tcp_world(n, std::move(extra));
  return [world](int rank) {
    Env env = world(rank);
    env["LOCKSTEP_DEVICE_BACKEND"] = "nccl";
    env["NCCL_HOSTID"] = "lockstep-test-rank-" + std::to_string(rank);
    env["NCCL_SOCKET_IFNAME"] = "lo";
    env["NCCL_IB_DISABLE"] = "1";
    env["NCCL_DEBUG"] = "WARN";  // a failure's output then says NCCL's reason
    return env;
  };
}

void expect_all_ok(const std::vector<Finished>& ranks, const std::string& scenario) {
  for (size_t r = 0; r < ranks.size(); ++r) {
    EXPECT_EQ(ranks[r].exit_code, 0) << "rank " << r << " of " << ranks.size() << ": " << ranks[r].output;
    EXPECT_TRUE(contains(ranks[r].output, scenario + " ok")) << ranks[r].output;
  }
}

std::vector<Finished> run_workers(int n, const std::string& scenario, Env extra = {},
                                  std::chrono::seconds deadline = std::chrono::seconds(240)) {
  return run_processes(n, {GPU_WORKER, scenario}, nccl_world(n, std::move(extra)), deadline);
}

TEST(NcclCollectives, AreExactOnTwoAndThreeRanks) {
  SKIP_WITHOUT_A_GPU();
  for (int n : {2, 3}) expect_all_ok(run_workers(n, "collectives"), "collectives");
}

TEST(NcclCollectives, FollowTheCurrentStreamAndAsyncCallsReturnAtOnce) {
  SKIP_WITHOUT_A_GPU();
  expect_all_ok(run_workers(2, "ordering"), "ordering");
}

TEST(NcclCollectives, UseTheOneNcclThatLibtorchLoads) {
  SKIP_WITHOUT_A_GPU();
  expect_all_ok(run_workers(2, "one-nccl"), "one-nccl");
}

TEST(NcclFailures, ARankKilledInACollectiveEndsTheJobWithinTheTimeoutNamingIt) {
  SKIP_WITHOUT_A_GPU();
  const auto started = std::chrono::steady_clock::now();
  const auto ranks = run_workers(2, "a-rank-dies", {{"LOCKSTEP_TIMEOUT", "10"}}, std::chrono::seconds(120));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_EQ(ranks[1].exit_code, 128 + 9) << ranks[1].output;
  EXPECT_EQ(ranks[0].exit_code, 1) << ranks[0].output;
  EXPECT_TRUE(contains(ranks[0].output, "lockstep: rank 0: all_reduce #1 (float32[1048576] on cuda, Sum)"))
      << ranks[0].output;
  EXPECT_TRUE(contains(ranks[0].output, "Ending the job.")) << ranks[0].output;
  EXPECT_LT(seconds, 60) << "connecting, one collective and a 10 s timeout; " << ranks[0].output;
}

// With LOCKSTEP_DEBUG=detail, compared before anything moves; without, no exchange per call,
// and the failure (here: each rank's host exchange timing out) names both calls.
TEST(NcclFailures, CpuOnOneRankAndCudaOnAnotherFailsOnEveryRankNamingBoth) {
  SKIP_WITHOUT_A_GPU();
  for (const std::string debug : {"detail", "off"}) {
    const auto ranks = run_workers(2, "cpu-and-cuda", {{"LOCKSTEP_TIMEOUT", "5"}, {"LOCKSTEP_DEBUG", debug}},
                                   std::chrono::seconds(120));
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(ranks[r].exit_code, 0) << debug << ": " << ranks[r].output;
      EXPECT_TRUE(contains(ranks[r].output, "MismatchError")) << debug << ": " << ranks[r].output;
      EXPECT_TRUE(contains(ranks[r].output, "all_reduce #0 (float32[4], Sum)")) << debug << ": " << ranks[r].output;
      EXPECT_TRUE(contains(ranks[r].output, "all_reduce #0 (float32[4] on cuda, Sum)"))
          << debug << ": " << ranks[r].output;
    }
  }
}

TEST(NcclDdp, TwoRanksEqualOneProcessOnTheCombinedBatch) {
  SKIP_WITHOUT_A_GPU();
  expect_all_ok(run_workers(2, "ddp", {}, std::chrono::seconds(400)), "ddp");
}

// Two processes sharing the GPU stage through the host transport: by choice, and under the
// device backend auto, which says so once.
TEST(StagedDdp, TwoProcessesSharingTheGpuEqualOneProcessOnTheCombinedBatch) {
  SKIP_WITHOUT_A_GPU();
  for (const std::string device_backend : {"staged", "auto"}) {
    const auto ranks = run_processes(
        2, {GPU_WORKER, "ddp"}, tcp_world(2, {{"LOCKSTEP_DEVICE_BACKEND", device_backend}}), std::chrono::seconds(400));
    expect_all_ok(ranks, "ddp");
    EXPECT_EQ(contains(ranks[0].output, "share GPU"), device_backend == "auto") << ranks[0].output;
  }
}

TEST(StagedDdp, ReplicasSharingTheGpuAreRefusedBeforeAnyWork) {
  SKIP_WITHOUT_A_GPU();
  const auto started = std::chrono::steady_clock::now();
  const auto finished = run_process({GPU_WORKER, "replicas-sharing-a-gpu"}, {}, std::chrono::seconds(120));
  EXPECT_EQ(finished.exit_code, 0) << finished.output;
  EXPECT_TRUE(contains(finished.output, "replicas 0 and 1 of run_replicas both train on cuda:0")) << finished.output;
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(60)) << "refused, not timed out";
}

}  // namespace
}  // namespace lockstep::testing
