#include "timeline/summary.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <tuple>

#include "lockstep/error.h"
#include "timeline/events.h"

namespace lockstep::timeline::detail {
namespace {

namespace event = format::event;
namespace key = format::key;

constexpr int kTrainingTrack = static_cast<int>(format::Track::training);
constexpr int kCollectivesTrack = static_cast<int>(format::Track::collectives);
constexpr int kBucketsTrack = static_cast<int>(format::Track::buckets);

double median_of(std::vector<double> values) {
  if (values.empty()) return 0;
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

struct Interval {
  double start, end;
};

// The length of the union of `intervals` clipped to [from, to].
double covered(std::vector<Interval> intervals, double from, double to) {
  std::sort(intervals.begin(), intervals.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
  double total = 0, reached = from;
  for (const auto& i : intervals) {
    const double start = std::max(i.start, reached), end = std::min(i.end, to);
    if (end > start) {
      total += end - start;
      reached = end;
    }
  }
  return total;
}

struct Span {
  std::string name;
  double start, end;
  nlohmann::json args;
};

// Work a device ran (CUDA): it belongs to the step whose loop called it, which the host,
// running ahead, may have ended before the device began.
struct DeviceWork {
  double called;
  Interval ran;
};

// The device work of `work` that the loop called between `from` and `to`.
std::vector<Interval> called_between(const std::vector<DeviceWork>& work, double from, double to) {
  std::vector<Interval> ran;
  for (const auto& w : work) {
    if (w.called >= from && w.called <= to) ran.push_back(w.ran);
  }
  return ran;
}

// One rank's training-loop spans (B/E pairs and X events) and its collectives; on CUDA its
// collectives and gradient waits as the device ran them.
struct RankEvents {
  std::string name;
  std::vector<Span> spans;
  std::vector<Interval> collectives;
  std::vector<DeviceWork> device_collectives, device_waits;
};

DeviceWork device_work_of(const nlohmann::json& e) {
  const double ts = e.value("ts", 0.0);
  return {ts - e["args"].value(key::kQueuedUs, 0.0), {ts, ts + e.value("dur", 0.0)}};
}

bool on_device(const nlohmann::json& e) { return e.contains("args") && e["args"].contains(key::kDevice); }

std::map<int, RankEvents> by_rank(const nlohmann::json& events) {
  std::map<int, RankEvents> ranks;
  std::map<int, std::vector<Span>> open;  // per rank, B events not yet ended
  for (const auto& e : events) {
    const std::string phase = e.value("ph", "");
    const int pid = e.value("pid", 0);
    if (phase == "M" && e.value("name", "") == "process_name") {
      ranks[pid].name = e["args"].value("name", "rank " + std::to_string(pid));
      continue;
    }
    const int tid = e.value("tid", 0);
    const double ts = e.value("ts", 0.0);
    auto& rank = ranks[pid];
    if (tid == kCollectivesTrack && phase == "X" && on_device(e)) {
      rank.device_collectives.push_back(device_work_of(e));
    } else if (tid == kCollectivesTrack && phase == "X") {
      rank.collectives.push_back({ts, ts + e.value("dur", 0.0)});
    } else if (tid == kBucketsTrack && phase == "X" && on_device(e) && e.value("name", "") == event::kGradientWait) {
      rank.device_waits.push_back(device_work_of(e));
    } else if (tid == kTrainingTrack && phase == "X") {
      rank.spans.push_back(
          {e.value("name", ""), ts, ts + e.value("dur", 0.0), e.value("args", nlohmann::json::object())});
    } else if (tid == kTrainingTrack && phase == "B") {
      open[pid].push_back({e.value("name", ""), ts, ts, e.value("args", nlohmann::json::object())});
    } else if (tid == kTrainingTrack && phase == "E" && !open[pid].empty()) {
      Span span = open[pid].back();
      open[pid].pop_back();
      span.end = ts;
      rank.spans.push_back(span);
    }
  }
  for (auto& [pid, rank] : ranks) {
    if (rank.name.empty()) rank.name = "rank " + std::to_string(pid);
  }
  return ranks;
}

std::vector<StepSplit> steps_of(const RankEvents& rank) {
  std::vector<StepSplit> steps;
  for (const auto& step : rank.spans) {
    if (step.name != event::kStep) continue;
    StepSplit s;
    s.step = step.args.value(key::kStep, static_cast<int64_t>(steps.size() + 1));
    double forward = 0, backward = 0, wait = 0, optimizer = 0;
    for (const auto& span : rank.spans) {
      if (span.start < step.start || span.end > step.end || &span == &step) continue;
      const double ms = (span.end - span.start) / 1000;
      if (span.name == event::kDataWait) s.data += ms;
      if (span.name == event::kForward) forward += ms;
      if (span.name == event::kBackward) backward += ms;
      if (span.name == event::kGradientWait && rank.device_waits.empty()) wait += ms;
      if (span.name == event::kOptimizerStep) optimizer += ms;
    }
    constexpr double kAll = std::numeric_limits<double>::infinity();
    for (const auto& w : called_between(rank.device_waits, step.start, step.end)) wait += (w.end - w.start) / 1000;
    s.compute = std::max(0.0, forward + backward - wait + optimizer);
    s.exposed = wait;
    s.comm = covered(rank.collectives, step.start, step.end) / 1000 +
             covered(called_between(rank.device_collectives, step.start, step.end), -kAll, kAll) / 1000;
    steps.push_back(s);
  }
  return steps;
}

// Collectives matched across ranks by group and sequence number; who called each last.
std::vector<LateCaller> late_callers_of(const nlohmann::json& events, const Summary& summary) {
  // (kind, group, seq) -> (rank, when it called)
  std::map<std::tuple<std::string, std::string, int64_t>, std::vector<std::pair<int, double>>> calls;
  for (const auto& e : events) {
    if (e.value("ph", "") != "X" || e.value("tid", 0) != kCollectivesTrack || !e.contains("args")) continue;
    const auto& args = e["args"];
    const double called = e.value("ts", 0.0) - args.value(key::kQueuedUs, 0.0);
    calls[{e.value("name", ""), args.value(key::kGroup, ""), args.value(key::kSeq, int64_t{-1})}].emplace_back(
        e.value("pid", 0), called);
  }
  struct Tally {
    int64_t calls = 0;
    std::map<int, std::vector<double>> late;  // rank -> by how much, each time it was last
  };
  std::map<std::string, Tally> kinds;
  for (auto& [key, arrivals] : calls) {
    if (arrivals.size() < 2) continue;
    std::sort(arrivals.begin(), arrivals.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    std::vector<double> others;
    for (size_t i = 0; i + 1 < arrivals.size(); ++i) others.push_back(arrivals[i].second);
    Tally& tally = kinds[std::get<0>(key)];
    ++tally.calls;
    tally.late[arrivals.back().first].push_back((arrivals.back().second - median_of(others)) / 1000);
  }
  std::map<int, const RankSteps*> steps;
  for (const auto& r : summary.ranks) steps[r.rank] = &r;
  std::vector<LateCaller> found;
  for (const auto& [kind, tally] : kinds) {
    LateCaller s;
    s.kind = kind;
    s.calls = tally.calls;
    for (const auto& [rank, late] : tally.late) {
      if (s.rank < 0 || late.size() > tally.late.at(s.rank).size()) s.rank = rank;
    }
    s.share = static_cast<double>(tally.late.at(s.rank).size()) / static_cast<double>(tally.calls);
    s.late_ms = median_of(tally.late.at(s.rank));
    // Where the late rank spent more than the others do.
    std::vector<double> data, compute;
    for (const auto& r : summary.ranks) {
      if (r.rank == s.rank) continue;
      data.push_back(r.median().data);
      compute.push_back(r.median().compute);
    }
    if (steps.count(s.rank) != 0) {
      s.name = steps[s.rank]->name;
      const StepSplit mine = steps[s.rank]->median();
      s.reason = reason_of(mine.data - median_of(data), mine.compute - median_of(compute));
    } else {
      s.name = "rank " + std::to_string(s.rank);
    }
    found.push_back(s);
  }
  return found;
}

// Step by step over the steps every rank recorded, each step's slowest rank: the straggler
// as the live notice finds it (straggler.h), its rank an index into `ranks`.
std::optional<Straggler> straggler_of(const std::vector<RankSteps>& ranks) {
  size_t steps = ranks.empty() ? 0 : ranks.front().steps.size();
  for (const auto& r : ranks) steps = std::min(steps, r.steps.size());
  std::vector<SlowestRank> slowest;
  for (size_t k = 0; k < steps; ++k) {
    std::vector<StepTimes> step;
    for (const auto& r : ranks) step.push_back({r.steps[k].data, r.steps[k].compute});
    slowest.push_back(slowest_of(step));
  }
  return lockstep::timeline::straggler_of(slowest);
}

std::string format(const char* pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

}  // namespace

double StepSplit::overlap() const { return comm > 0 ? 100 * std::max(0.0, comm - exposed) / comm : 100; }

StepSplit RankSteps::median() const {
  StepSplit m;
  std::vector<double> data, compute, exposed, comm;
  for (const auto& s : steps) {
    data.push_back(s.data);
    compute.push_back(s.compute);
    exposed.push_back(s.exposed);
    comm.push_back(s.comm);
  }
  m.data = median_of(data);
  m.compute = median_of(compute);
  m.exposed = median_of(exposed);
  m.comm = median_of(comm);
  return m;
}

Summary summarize(const nlohmann::json& events, const std::string& source) {
  Summary summary;
  for (const auto& [pid, rank] : by_rank(events)) {
    RankSteps r{pid, rank.name, steps_of(rank)};
    if (!r.steps.empty()) summary.ranks.push_back(r);
  }
  if (summary.ranks.empty()) {
    throw DataError(source +
                    ": the timeline holds no training steps (was it written by lockstep train --timeline, or "
                    "a program using lockstep::train::Trainer?)");
  }
  summary.late_callers = late_callers_of(events, summary);
  summary.straggler = straggler_of(summary.ranks);
  if (summary.straggler) summary.straggler_name = summary.ranks[summary.straggler->rank].name;
  return summary;
}

std::string summary_table(const Summary& summary) {
  std::string out =
      "per step (median over steps), milliseconds:\n\n"
      "| rank | steps | data wait | compute | exposed communication | communication | overlap |\n"
      "|---|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& r : summary.ranks) {
    const StepSplit m = r.median();
    out += "| " + r.name + " | " + std::to_string(r.steps.size()) + " | " + format("%.2f", m.data) + " | " +
           format("%.2f", m.compute) + " | " + format("%.2f", m.exposed) + " | " + format("%.2f", m.comm) + " | " +
           format("%.0f%%", m.overlap()) + " |\n";
  }
  if (summary.straggler) {
    const Straggler& s = *summary.straggler;
    out += "\nstraggler: " + summary.straggler_name + ", " + format("%.0f%%", 100 * s.behind) + " behind in " +
           format("%.0f%%", 100 * s.share) + " of the steps: " + (s.reason == "data" ? "waiting for data" : "compute") +
           "\n";
  } else {
    out += "\nstraggler: none (no rank was the slowest by more than a fifth in most steps)\n";
  }
  out +=
      "\nstragglers (the rank that called each kind of collective last most often):\n\n"
      "| collective | calls | last most often | share | late by (median) | reason |\n"
      "|---|---:|---|---:|---:|---|\n";
  for (const auto& s : summary.late_callers) {
    out += "| " + s.kind + " | " + std::to_string(s.calls) + " | " + s.name + " | " + format("%.0f%%", 100 * s.share) +
           " | " + format("%.2f ms", s.late_ms) + " | " + s.reason + " |\n";
  }
  return out;
}

nlohmann::json summary_json(const Summary& summary) {
  nlohmann::json out;
  out["ranks"] = nlohmann::json::array();
  for (const auto& r : summary.ranks) {
    const StepSplit m = r.median();
    nlohmann::json steps = nlohmann::json::array();
    for (const auto& s : r.steps) {
      steps.push_back({{"step", s.step},
                       {"data_ms", s.data},
                       {"compute_ms", s.compute},
                       {"exposed_ms", s.exposed},
                       {"comm_ms", s.comm},
                       {"overlap_percent", s.overlap()}});
    }
    out["ranks"].push_back({{"rank", r.rank},
                            {"name", r.name},
                            {"median",
                             {{"data_ms", m.data},
                              {"compute_ms", m.compute},
                              {"exposed_ms", m.exposed},
                              {"comm_ms", m.comm},
                              {"overlap_percent", m.overlap()}}},
                            {"steps", steps}});
  }
  out["straggler"] = nullptr;
  if (summary.straggler) {
    const Straggler& s = *summary.straggler;
    out["straggler"] = {{"rank", summary.ranks[s.rank].rank},
                        {"name", summary.straggler_name},
                        {"behind", s.behind},
                        {"share", s.share},
                        {"reason", s.reason}};
  }
  out["stragglers"] = nlohmann::json::array();
  for (const auto& s : summary.late_callers) {
    out["stragglers"].push_back({{"collective", s.kind},
                                 {"calls", s.calls},
                                 {"rank", s.rank},
                                 {"name", s.name},
                                 {"share", s.share},
                                 {"late_ms", s.late_ms},
                                 {"reason", s.reason}});
  }
  return out;
}

}  // namespace lockstep::timeline::detail
