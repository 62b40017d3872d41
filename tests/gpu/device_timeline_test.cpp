// The timeline on CUDA (review #17): collectives, DDP's buckets and its gradient wait as the
// device ran them, not as the host queued them. Labelled gpu; skipped, with the reason,
// where no GPU is visible.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "cuda_checks.h"
#include "lockstep/lockstep.h"
#include "lockstep/timeline.h"
#include "support/world.h"

namespace lockstep {
namespace {

using Json = nlohmann::json;
using testing::kGpu;

double steady_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The host queues a collective behind about 50 ms of kernels and goes on: its span starts
// when the kernels end, which is about when the host's synchronize returns.
TEST(DeviceTimeline, ACollectiveBehindSlowKernelsSpansWhenTheDeviceRanIt) {
  SKIP_WITHOUT_A_GPU();
  testing::TemporaryDirectory dir;
  const std::string prefix = dir.path() + "/trace";
  double queued = 0, synchronized = 0;
  run_replicas(1, [&](ProcessGroup group) {
    timeline::start(prefix, group);
    torch::Tensor t = torch::ones({1 << 20}, torch::TensorOptions().device(kGpu));
    all_reduce(t, ReduceOp::Sum, group);  // its first: the device's setup
    torch::cuda::synchronize();
    testing::queue_slow_kernels(kGpu);
    all_reduce(t, ReduceOp::Sum, group);
    queued = steady_us();
    torch::cuda::synchronize();
    synchronized = steady_us();
    timeline::stop();
  });
  const Json events = Json::parse(testing::read_file(prefix + ".rank-0.json"));
  std::vector<const Json*> on_device;  // CPU collectives, if any, carry no device
  for (const auto& e : events) {
    if (e.value("ph", "") == "X" && e.value("name", "") == "all_reduce" && e["args"].contains("device")) {
      on_device.push_back(&e);
    }
  }
  ASSERT_EQ(on_device.size(), 2u) << events.dump();
  const Json* second = (*on_device[0])["ts"] > (*on_device[1])["ts"] ? on_device[0] : on_device[1];
  const double ts = (*second)["ts"], dur = (*second)["dur"];
  EXPECT_EQ((*second)["args"].value("device", ""), "cuda:0");
  // Clocks: rank 0 writes on its own steady clock. The slow kernels take most of
  // [queued, synchronized]; a span of host times would lie before `queued`.
  EXPECT_GT(ts, queued + 0.5 * (synchronized - queued)) << "queued " << queued << ", synchronized " << synchronized;
  EXPECT_LE(ts + dur, synchronized + 200);
  EXPECT_GT((*second)["args"].value("queued_us", 0.0), 0.5 * (synchronized - queued));
}

// Two workers sharing the GPU (staged through host memory): every step's gradient wait and
// every bucket are spans of the device's, and the summary reads them.
TEST(DeviceTimeline, TrainingOnAGpuRecordsEachStepsGradientWaitAndBucketsAsTheDeviceRanThem) {
  SKIP_WITHOUT_A_GPU();
  testing::TemporaryDirectory dir;
  const std::string out = dir.path() + "/run";
  const auto trained = testing::run_process({LOCKSTEP_TOOL, "train", "--device", "cuda", "-n", "2", "--mode",
                                             "processes", "--limit", "1024", "--val-limit", "128", "--batch-size", "32",
                                             "--epochs", "1", "--timeline", "--out", out});
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const Json events = Json::parse(testing::read_file(out + "/timeline.json"));
  std::map<int, int> waits, host_buckets, device_buckets;
  for (const auto& e : events) {
    if (e.value("ph", "") != "X" || e.value("tid", 0) != 2) continue;
    const bool on_device = e["args"].value("device", "") == "cuda:0";
    if (e["name"] == "gradient wait") {
      EXPECT_TRUE(on_device) << e.dump();
      ++waits[e["pid"]];
    } else {
      ++(on_device ? device_buckets : host_buckets)[e["pid"]];
    }
  }
  for (int rank : {0, 1}) {
    EXPECT_EQ(waits[rank], 16) << "rank " << rank << ": a gradient wait per step";
    EXPECT_GT(device_buckets[rank], 0) << "rank " << rank;
    EXPECT_EQ(host_buckets[rank], 0) << "rank " << rank;
  }
  const auto summary = testing::run_process({LOCKSTEP_TOOL, "timeline", "summary", out + "/timeline.json"});
  EXPECT_EQ(summary.exit_code, 0) << summary.output;
  EXPECT_NE(summary.output.find("| rank 1 on "), std::string::npos) << summary.output;
}

}  // namespace
}  // namespace lockstep
