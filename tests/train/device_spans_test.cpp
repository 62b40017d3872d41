// Device work in the timeline (review #17): spans between stream marks are written once the
// device passed them, and the summary counts them in the step whose loop called them. On
// CUDA the marks are timing events (tests/gpu checks them on a GPU); here a mark the test
// passes by hand stands for the device, so the recorder's and the summary's side is proven
// on every machine.
#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "comm/transports/stream_marks.h"
#include "lockstep/comm/init.h"
#include "lockstep/comm/replicas.h"
#include "lockstep/timeline.h"
#include "support/world.h"
#include "timeline/recorder.h"
#include "timeline/summary.h"

namespace lockstep::timeline {
namespace {

using Json = nlohmann::json;
namespace tl = detail;

// A point the device passes when the test says so, or when it is waited for.
class MarkPassedByHand : public StreamMark {
 public:
  explicit MarkPassedByHand(double at_us) : at_us_(at_us) {}
  void pass() { passed_ = true; }
  bool waited() const { return waited_; }
  std::optional<double> steady_us() override { return passed_ ? std::optional<double>(at_us_) : std::nullopt; }
  std::optional<double> wait_steady_us() override {
    waited_ = true;
    passed_ = true;
    return at_us_;
  }

 private:
  double at_us_;
  std::atomic<bool> passed_{false}, waited_{false};
};

// A point the device cannot time (an error, or CUDA gone).
class MarkNeverTimed : public StreamMark {
 public:
  std::optional<double> steady_us() override { return std::nullopt; }
  std::optional<double> wait_steady_us() override { return std::nullopt; }
};

// Polls the open file, which the writer flushes every 100 ms, for up to 5 s.
bool appears_in(const std::string& path, const std::string& text) {
  for (int i = 0; i < 50; ++i) {
    if (testing::read_file(path).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

TEST(DeviceSpans, AreWrittenOnceTheDevicePassedBothMarksAndStopWaitsForThemOrDropsThem) {
  testing::TemporaryDirectory dir;
  const std::string prefix = dir.path() + "/trace";
  std::string file;
  run_replicas(1, [&](ProcessGroup group) {
    start(prefix, group);
    file = prefix + ".rank-0.json";
    auto began = std::make_shared<MarkPassedByHand>(5000.0), ended = std::make_shared<MarkPassedByHand>(5750.5);
    tl::record_device_span(0, tl::Track::collectives, "all_reduce", "cuda:0", began, ended, 4200.0,
                           tl::Args().add(tl::key::kSeq, int64_t{7}));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // three of the writer's rounds
    EXPECT_EQ(testing::read_file(file).find("all_reduce"), std::string::npos) << "written before the device got there";
    began->pass();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_EQ(testing::read_file(file).find("all_reduce"), std::string::npos) << "written before the device ended it";
    ended->pass();
    EXPECT_TRUE(appears_in(file, "all_reduce"));

    auto late_began = std::make_shared<MarkPassedByHand>(9000.0),
         late_ended = std::make_shared<MarkPassedByHand>(9100.0);
    tl::record_device_span(0, tl::Track::buckets, "gradient wait", "cuda:0", late_began, late_ended, 8000.0,
                           tl::Args());
    late_began->pass();
    tl::record_device_span(0, tl::Track::collectives, "broadcast", "cuda:0", std::make_shared<MarkNeverTimed>(),
                           std::make_shared<MarkNeverTimed>(), 8500.0, tl::Args());
    EXPECT_EQ(stop(), file);  // and returns: a span the device cannot time is dropped
    EXPECT_TRUE(late_ended->waited()) << "stop() did not wait for the device";
    EXPECT_FALSE(ended->waited());
  });
  const Json events = Json::parse(testing::read_file(file));
  int found = 0;
  for (const auto& e : events) {
    if (e["ph"] != "X") continue;
    ++found;
    EXPECT_EQ(e["args"]["device"], "cuda:0") << e.dump();
    if (e["name"] == "all_reduce") {
      EXPECT_EQ(e["tid"], 3);
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 5000.0);
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 750.5);
      EXPECT_DOUBLE_EQ(e["args"]["queued_us"].get<double>(), 800.0) << "from the call to the device's start";
      EXPECT_EQ(e["args"]["seq"], 7);
    } else {
      EXPECT_EQ(e["name"], "gradient wait");
      EXPECT_EQ(e["tid"], 2);
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 9000.0);
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 100.0);
    }
  }
  EXPECT_EQ(found, 2);
}

// One rank, two steps of 1000 us on the host. The device runs each step's reduction and
// gradient wait after the host has moved on: they count in the step that called them.
TEST(DeviceSpans, CountInTheStepWhoseLoopCalledThemThoughTheDeviceRanThemLater) {
  Json events = Json::array();
  const auto span = [&](int track, const std::string& name, double ts, double dur, Json args) {
    events.push_back(
        {{"ph", "X"}, {"pid", 0}, {"tid", track}, {"name", name}, {"ts", ts}, {"dur", dur}, {"args", std::move(args)}});
  };
  const auto begin_end = [&](const std::string& name, double from, double to, Json args = Json::object()) {
    events.push_back({{"ph", "B"}, {"pid", 0}, {"tid", 1}, {"name", name}, {"ts", from}, {"args", std::move(args)}});
    events.push_back({{"ph", "E"}, {"pid", 0}, {"tid", 1}, {"name", name}, {"ts", to}});
  };
  for (int step = 0; step < 2; ++step) {
    const double at = 1000.0 * step;
    begin_end("step", at, at + 1000, {{"step", step + 1}});
    span(1, "data wait", at, 100, Json::object());
    begin_end("forward", at + 100, at + 400);
    begin_end("backward", at + 400, at + 900);
    begin_end("gradient wait", at + 890, at + 891);         // the host only queued it
    span(3, "broadcast", at + 50, 20, {{"queued_us", 0}});  // a CPU collective, on the host's clock
    // Called at at+600 and at+890; the device ran them from at+1400 and at+1500.
    span(3, "all_reduce", at + 1400, 400 + 100 * step, {{"device", "cuda:0"}, {"queued_us", 800}});
    span(2, "gradient wait", at + 1500, 300 + 100 * step, {{"device", "cuda:0"}, {"queued_us", 610}});
  }
  const tl::Summary summary = tl::summarize(events, "test");
  ASSERT_EQ(summary.ranks.size(), 1u);
  const auto& steps = summary.ranks[0].steps;
  ASSERT_EQ(steps.size(), 2u);
  for (int step = 0; step < 2; ++step) {
    EXPECT_DOUBLE_EQ(steps[step].data, 0.1);
    EXPECT_DOUBLE_EQ(steps[step].exposed, 0.3 + 0.1 * step) << "the device's wait, not the host's";
    EXPECT_DOUBLE_EQ(steps[step].comm, 0.02 + 0.4 + 0.1 * step);
    EXPECT_DOUBLE_EQ(steps[step].compute, 0.8 - (0.3 + 0.1 * step));
  }
}

}  // namespace
}  // namespace lockstep::timeline
