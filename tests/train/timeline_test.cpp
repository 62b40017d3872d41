// The timeline (include/lockstep/timeline.h) as users record it: `lockstep train --timeline`
// in both modes, LOCKSTEP_TIMELINE under `lockstep run`, the summary, the live notice and
// the SVG, and clocks that disagree by a quarter of a second.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/examples.h"
#include "support/world.h"

namespace lockstep::train {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using testing::contains;
using testing::Env;
using testing::run_process;
using testing::TemporaryDirectory;

constexpr int kCollectivesTrack = 3, kBucketsTrack = 2, kTrainingTrack = 1;

// 16 steps on 2 workers: 1024 examples in batches of 32 a worker, one epoch.
testing::Finished train_with_timeline(const std::string& out, const std::vector<std::string>& extra = {},
                                      const Env& env = {}) {
  std::vector<std::string> command = {
      LOCKSTEP_TOOL, "train",       "--limit", "1024", "--val-limit", "128",        "--batch-size", "32", "--epochs",
      "1",           "--log-every", "4",       "-n",   "2",           "--timeline", "--out",        out};
  command.insert(command.end(), extra.begin(), extra.end());
  return run_process(command, env);
}

Json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return Json::parse(text.str());
}

// The trace-event format as Perfetto and chrome://tracing read it: every event names its
// phase and process; every non-metadata event its track and time; times never go back on a
// track; every B has its E, with the same name, on the same track.
void expect_trace_event_format(const Json& events) {
  ASSERT_TRUE(events.is_array());
  std::map<std::pair<int, int>, double> last_ts;
  std::map<std::pair<int, int>, std::vector<std::string>> open;
  for (const auto& e : events) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid")) << e.dump();
    if (e["ph"] == "M") continue;
    ASSERT_TRUE(e.contains("tid") && e.contains("ts") && e.contains("name")) << e.dump();
    const auto track = std::make_pair(e["pid"].get<int>(), e["tid"].get<int>());
    const double ts = e["ts"].get<double>();
    if (last_ts.count(track) != 0) EXPECT_GE(ts, last_ts[track]) << e.dump();
    last_ts[track] = ts;
    if (e["ph"] == "X") EXPECT_GE(e["dur"].get<double>(), 0) << e.dump();
    if (e["ph"] == "B") open[track].push_back(e["name"]);
    if (e["ph"] == "E") {
      ASSERT_FALSE(open[track].empty()) << "an E without its B: " << e.dump();
      EXPECT_EQ(open[track].back(), e["name"].get<std::string>()) << e.dump();
      open[track].pop_back();
    }
  }
  for (const auto& [track, names] : open) EXPECT_TRUE(names.empty()) << "unended spans on rank " << track.first;
}

// For every step of every rank: the collectives the comm layer counted in it (by sequence
// number) are each in the trace once, and so are the DDP buckets.
void expect_every_collective_and_bucket_of_each_step(const Json& events) {
  std::map<int, std::set<int64_t>> collectives;  // rank -> sequence numbers on the default group
  std::map<int, std::vector<double>> buckets;    // rank -> when each bucket was reduced
  std::map<int, std::string> names;
  for (const auto& e : events) {
    if (e["ph"] == "M" && e["name"] == "process_name") names[e["pid"]] = e["args"]["name"];
    if (e["ph"] != "X") continue;
    if (e["tid"] == kCollectivesTrack && e["args"]["group"] == "world") {
      EXPECT_TRUE(collectives[e["pid"]].insert(e["args"]["seq"].get<int64_t>()).second) << "twice: " << e.dump();
      for (const char* key : {"dtype", "bytes", "transport", "queued_us"})
        EXPECT_TRUE(e["args"].contains(key)) << e.dump();
    }
    if (e["tid"] == kBucketsTrack) buckets[e["pid"]].push_back(e["ts"].get<double>() + e["dur"].get<double>());
  }
  EXPECT_EQ(names.size(), 2u);
  for (const auto& [rank, name] : names) EXPECT_EQ(name.rfind("rank " + std::to_string(rank) + " on ", 0), 0u) << name;
  std::map<int, double> step_started;
  int steps = 0;
  for (const auto& e : events) {
    if (e["ph"] == "M" || e["tid"] != kTrainingTrack || e["name"] != "step") continue;
    const int rank = e["pid"];
    if (e["ph"] == "B") {
      step_started[rank] = e["ts"];
      continue;
    }
    if (e["ph"] != "E") continue;
    ++steps;
    const int64_t first = e["args"]["first_collective"], count = e["args"]["collectives"];
    EXPECT_GT(count, 0);
    for (int64_t seq = first; seq < first + count; ++seq) {
      EXPECT_EQ(collectives[rank].count(seq), 1u)
          << "rank " << rank << ": collective #" << seq << " is not in the trace";
    }
    const double started = step_started[rank], ended = e["ts"];
    const auto in_step = std::count_if(buckets[rank].begin(), buckets[rank].end(),
                                       [&](double reduced) { return reduced >= started && reduced <= ended; });
    EXPECT_EQ(in_step, e["args"]["buckets"].get<int64_t>()) << "rank " << rank << ", step ending at " << ended;
  }
  EXPECT_EQ(steps, 2 * 16);
}

TEST(Timeline, TwoProcessesAndTwoThreadsWriteTracesHoldingEveryBucketAndCollectiveOfEachStep) {
  TemporaryDirectory dir;
  for (const std::string mode : {"processes", "threads"}) {
    const std::string out = dir.path() + "/" + mode;
    const auto ran = train_with_timeline(out, {"--mode", mode});
    ASSERT_EQ(ran.exit_code, 0) << ran.output;
    SCOPED_TRACE(mode);
    const Json events = read_json(out + "/timeline.json");
    expect_trace_event_format(events);
    expect_every_collective_and_bucket_of_each_step(events);
    // Each train record carries the per-step split.
    std::ifstream metrics(out + "/metrics.jsonl");
    std::string first;
    std::getline(metrics, first);
    for (const char* key : {"step_data_ms", "step_compute_ms", "step_comm_ms"})
      EXPECT_TRUE(contains(first, key)) << first;
  }
}

// Rank 1 sleeps in every step's data loading, or in its forward pass: the live notice and
// the summary both name it, with the reason.
TEST(Timeline, ARankSlowedOnPurposeIsNamedWithTheReasonLiveAndInTheSummary) {
  TemporaryDirectory dir;
  for (const auto& [part, reason, notice] :
       {std::tuple<std::string, std::string, std::string>{"data", "data", "waiting for data"},
        {"compute", "compute", "compute"}}) {
    SCOPED_TRACE(part);
    const std::string out = dir.path() + "/" + part;
    // 400 ms a step: several times what a step takes on a loaded 2-core machine, so rank 1
    // is behind by far more than the notice's threshold in every step, and by more than
    // 50 ms in the median call though the load slows either rank's compute by 100 ms or
    // more (150 ms once left rank 1 late by a median of 49.98 ms under a parallel build).
    const auto ran = train_with_timeline(out, {}, {{"LOCKSTEP_TEST_SLOW_RANK", "1:" + part + ":400"}});
    ASSERT_EQ(ran.exit_code, 0) << ran.output;
    const size_t at = ran.output.find("notice: rank 1 on ");
    ASSERT_NE(at, std::string::npos) << ran.output;
    const std::string line = ran.output.substr(at, ran.output.find('\n', at) - at);
    EXPECT_TRUE(contains(line, "% behind: " + notice)) << line;
    EXPECT_EQ(ran.output.find("notice:", at + 1), std::string::npos) << "said more than once:\n" << ran.output;

    const auto summary = run_process({LOCKSTEP_TOOL, "timeline", "summary", out + "/timeline.json", "--json"});
    ASSERT_EQ(summary.exit_code, 0) << summary.output;
    const Json parsed = Json::parse(summary.output);
    bool found = false;
    for (const auto& s : parsed["stragglers"]) {
      if (s["collective"] != "all_reduce") continue;
      found = true;
      EXPECT_EQ(s["rank"], 1) << s.dump();
      EXPECT_EQ(s["reason"], reason) << s.dump();
      EXPECT_GT(s["share"].get<double>(), 0.5) << s.dump();
      EXPECT_GT(s["late_ms"].get<double>(), 50) << s.dump();
    }
    EXPECT_TRUE(found) << summary.output;
    // The same straggler as the live notice, over every step.
    EXPECT_EQ(parsed["straggler"]["rank"], 1) << summary.output;
    EXPECT_EQ(parsed["straggler"]["reason"], reason) << summary.output;
    EXPECT_GT(parsed["straggler"]["share"].get<double>(), 0.5) << summary.output;
    const auto table = run_process({LOCKSTEP_TOOL, "timeline", "summary", out + "/timeline.json"});
    EXPECT_TRUE(contains(table.output, "straggler: rank 1 on ")) << table.output;
    EXPECT_TRUE(contains(table.output, " of the steps: " + notice + "\n")) << table.output;
    EXPECT_TRUE(contains(table.output, "| all_reduce |")) << table.output;
    EXPECT_TRUE(contains(table.output, "exposed communication")) << table.output;
  }
}

// Hosts in network namespaces share one kernel clock, so rank 1's is moved a quarter of a
// second ahead. Every event of rank 1 moves by the offset measured at start, so that
// offset's error is how far from where they belong its events land: under a millisecond.
// And the collectives, which end on every rank once the last arrives, end together again
// on the merged timeline (a loaded machine may deschedule a rank before it records the end,
// so the quickest tenth must be within a millisecond, and the median far below the shift).
TEST(Timeline, ClocksAQuarterSecondApartLineUpWithinAMillisecond) {
  TemporaryDirectory dir;
  const auto ran = train_with_timeline(dir.path() + "/run", {"--mode", "processes"},
                                       {{"LOCKSTEP_TEST_CLOCK_OFFSET_US", "1:250000"}});
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  const Json events = read_json(dir.path() + "/run/timeline.json");
  std::map<int64_t, std::map<int, double>> ends;  // seq -> rank -> end
  bool offset_seen = false;
  for (const auto& e : events) {
    if (e["ph"] == "M" && e["name"] == "process_name" && e["pid"] == 1) {
      EXPECT_NEAR(e["args"]["clock_offset_us"].get<double>(), -250000, 1000) << e.dump();
      offset_seen = true;
    }
    if (e["ph"] != "X" || e["tid"] != kCollectivesTrack || e["args"]["group"] != "world") continue;
    ends[e["args"]["seq"]][e["pid"]] = e["ts"].get<double>() + e["dur"].get<double>();
  }
  EXPECT_TRUE(offset_seen) << "rank 1's process row is missing";
  std::vector<double> gaps;
  for (const auto& [seq, by_rank] : ends) {
    if (by_rank.size() == 2) gaps.push_back(std::abs(by_rank.at(0) - by_rank.at(1)));
  }
  ASSERT_GT(gaps.size(), 50u);
  std::sort(gaps.begin(), gaps.end());
  EXPECT_LT(gaps[gaps.size() / 10], 1000) << "the tenth quickest gap, in microseconds";
  EXPECT_LT(gaps[gaps.size() / 2], 25000) << "median gap in microseconds";
}

// Every file says which format it is in; one of a newer format is refused naming it, and
// a file from before the format had a version reads as version 1.
TEST(Timeline, FilesRecordTheirFormatAndANewerOneIsRefusedNamingTheFile) {
  TemporaryDirectory dir;
  const std::string out = dir.path() + "/run";
  ASSERT_EQ(train_with_timeline(out).exit_code, 0);
  const Json events = read_json(out + "/timeline.json");  // merged: each rank's metadata kept
  const auto format =
      std::find_if(events.begin(), events.end(), [](const Json& e) { return e["name"] == "lockstep_timeline"; });
  ASSERT_NE(format, events.end());
  EXPECT_EQ((*format)["args"]["version"], 2);

  const std::string newer = dir.path() + "/newer.json", older = dir.path() + "/older.json";
  std::ofstream(newer) << R"([{"name": "lockstep_timeline", "ph": "M", "pid": 0, "args": {"version": 99}}])";
  std::ofstream(older) << R"([{"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "rank 0 on a"}}])";
  const std::string merged = dir.path() + "/merged.json";
  const auto refused = run_process({LOCKSTEP_TOOL, "timeline", "merge", merged, older, newer});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_TRUE(contains(refused.output, newer + ": a timeline of format 99, newer than this lockstep reads (2)"))
      << refused.output;
  const auto read = run_process({LOCKSTEP_TOOL, "timeline", "merge", merged, older});
  EXPECT_EQ(read.exit_code, 0) << read.output;
}

// `lockstep plot` draws the summary: one bar of three parts per step, in an SVG that parses.
TEST(Timeline, PlotDrawsAValidSvgOfThreePartsPerStep) {
  TemporaryDirectory dir;
  const std::string out = dir.path() + "/run";
  ASSERT_EQ(train_with_timeline(out).exit_code, 0);
  const auto plotted = run_process({LOCKSTEP_TOOL, "plot", out});
  ASSERT_EQ(plotted.exit_code, 0) << plotted.output;
  EXPECT_TRUE(contains(plotted.output, "timeline.svg (16 steps)")) << plotted.output;
  const auto parsed = run_process(
      {PYTHON, "-c", "import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])", out + "/timeline.svg"});
  EXPECT_EQ(parsed.exit_code, 0) << parsed.output;
  std::ifstream in(out + "/timeline.svg");
  std::stringstream svg;
  svg << in.rdbuf();
  for (const std::string color : {"#4e79a7", "#59a14f", "#e15759"}) {  // data wait, compute, exposed communication
    size_t bars = 0;
    for (size_t at = svg.str().find("fill=\"" + color); at != std::string::npos;
         at = svg.str().find("fill=\"" + color, at + 1))
      ++bars;
    EXPECT_EQ(bars, 16u + 1) << color << ": a bar per step and the legend's";
  }
}

// Any program: LOCKSTEP_TIMELINE under `lockstep run` gives one file per rank, which merge.
TEST(Timeline, AnyProgramUnderTheLauncherWritesAFilePerRankThatMerge) {
  LOCKSTEP_SKIP_WITHOUT_EXAMPLE(PERCEPTRON);
  TemporaryDirectory dir;
  const auto ran = run_process({LOCKSTEP_TOOL, "run", "-n", "2", "--", PERCEPTRON, "--epochs", "1"},
                               {{"LOCKSTEP_TIMELINE", dir.path() + "/perceptron"}});
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  const std::vector<std::string> files = {dir.path() + "/perceptron.rank-0.json",
                                          dir.path() + "/perceptron.rank-1.json"};
  for (const auto& file : files) ASSERT_TRUE(fs::exists(file)) << ran.output;
  const auto merged =
      run_process({LOCKSTEP_TOOL, "timeline", "merge", dir.path() + "/merged.json", files[0], files[1]});
  ASSERT_EQ(merged.exit_code, 0) << merged.output;
  const Json events = read_json(dir.path() + "/merged.json");
  expect_trace_event_format(events);
  std::set<int> ranks_with_buckets;
  for (const auto& e : events) {
    if (e["ph"] == "X" && e["tid"] == kBucketsTrack) ranks_with_buckets.insert(e["pid"].get<int>());
  }
  EXPECT_EQ(ranks_with_buckets, (std::set<int>{0, 1}));
}

}  // namespace
}  // namespace lockstep::train

namespace lockstep::train {
namespace {

// A job the launcher restarts marks where the new attempt began, and why the last one ended.
TEST(Timeline, ARestartIsMarkedWithWhyTheAttemptBeforeEnded) {
  LOCKSTEP_SKIP_WITHOUT_EXAMPLE(PERCEPTRON);
  TemporaryDirectory dir;
  const std::string worker =
      std::string("if [ \"$LOCKSTEP_RESTART_COUNT\" = 0 ] && [ \"$RANK\" = 1 ]; then exit 3; fi; exec ") + PERCEPTRON +
      " --epochs 1";
  const auto ran = run_process({LOCKSTEP_TOOL, "run", "-n", "2", "--max-restarts", "1", "--", "/bin/sh", "-c", worker},
                               {{"LOCKSTEP_TIMELINE", dir.path() + "/job"}});
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  for (int rank : {0, 1}) {
    const Json events = read_json(dir.path() + "/job.rank-" + std::to_string(rank) + ".json");
    int marks = 0;
    for (const auto& e : events) {
      if (e["ph"] != "i" || e["name"] != "restart") continue;
      ++marks;
      EXPECT_EQ(e["tid"], 4) << e.dump();
      EXPECT_EQ(e["args"]["attempt"], 1) << e.dump();
      EXPECT_TRUE(contains(e["args"]["why"].get<std::string>(), "rank 1")) << e.dump();
    }
    EXPECT_EQ(marks, 1) << "rank " << rank;
  }
}

}  // namespace
}  // namespace lockstep::train
