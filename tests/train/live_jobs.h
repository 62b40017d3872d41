#pragma once

// The `lockstep train --recovery live` runs the live recovery tests make, and what every one
// of them must show.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <regex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "support/run_output.h"
#include "support/tool_process.h"
#include "support/world.h"
#include "weight_lines.h"

namespace lockstep::train {

// 512 examples in steps of 48 over every worker: the same steps on 3 workers or 2.
inline std::vector<std::string> live_job(const std::string& out, std::vector<std::string> extra) {
  std::vector<std::string> command = {LOCKSTEP_TOOL,         "train", "--limit",     "512", "--val-limit", "256",
                                      "--global-batch-size", "48",    "--log-every", "1",   "--out",       out,
                                      "--warmup-steps",      "4",     "--sample-log"};
  if (std::find(extra.begin(), extra.end(), "--epochs") == extra.end()) extra.insert(extra.end(), {"--epochs", "2"});
  command.insert(command.end(), extra.begin(), extra.end());
  return command;
}

// Steps of 50 ms or more (worker 0 is slow), so that a fault lands while the job trains.
inline constexpr const char* kSlowSteps = "LOCKSTEP_TEST_SLOW_RANK=0:compute:50";

// The step the first regroup went on after: "... goes on after step 7 (...".
inline int64_t went_on_after(const std::string& output) {
  const std::string marker = "goes on after step ";
  const auto at = output.find(marker);
  return at == std::string::npos ? -1 : std::stoll(output.substr(at + marker.size()));
}

// One phase of a replay: `part` trained by `workers` processes on one node, or, with
// `per_node` > 0 and workers that fill nodes of `per_node`, by those nodes, each under a
// `lockstep run` of its own on loopback, as a live run's hosts: their transport adds the
// nodes' sums, (r0 + r1) + (r2 + r3), another order than one node's ((r0 + r1) + r2) + r3,
// and the replay then has the live run's bits. Workers that do not fill their nodes (a host's
// joiners admitted one at a time: two of host 0 and one of host 1) sum as on one node.
inline void train_replay_phase(const std::string& out, int workers, int per_node,
                               const std::vector<std::string>& part) {
  if (per_node <= 0 || workers <= per_node || workers % per_node != 0) {
    std::vector<std::string> one_node = {"-n", std::to_string(workers), "--mode", "processes"};
    one_node.insert(one_node.end(), part.begin(), part.end());
    const auto result = testing::run_process(live_job(out, one_node));
    ASSERT_EQ(result.exit_code, 0) << result.output;
    return;
  }
  const std::string nodes = std::to_string(workers / per_node), port = std::to_string(testing::free_port());
  std::vector<std::unique_ptr<testing::ToolProcess>> launchers;
  for (int node = 0; node < workers / per_node; ++node) {
    std::vector<std::string> command = {
        LOCKSTEP_TOOL,        "run",           "-n",        std::to_string(per_node), "--nnodes", nodes, "--node-rank",
        std::to_string(node), "--master-addr", "127.0.0.1", "--master-port",          port,       "--"};
    for (const auto& arg : live_job(out, part)) command.push_back(arg);
    launchers.push_back(
        std::make_unique<testing::ToolProcess>(command, std::vector<std::string>{"LOCKSTEP_TIMEOUT=60"}));
  }
  for (auto& launcher : launchers) {
    ASSERT_TRUE(launcher->wait_for_exit(std::chrono::seconds(120))) << launcher->stderr_text();
    ASSERT_EQ(launcher->exit_code(), 0) << launcher->stdout_text() << launcher->stderr_text();
  }
}

// The same sequence of memberships without a fault: `before` workers up to `step` (nodes of
// `per_node`, if set), then 2.
inline std::string replay(const std::string& out, int64_t step, int before = 3, int per_node = 0) {
  train_replay_phase(out, before, per_node, {"--stop-after-step", std::to_string(step)});
  train_replay_phase(out, 2, per_node, {"--resume"});
  return newest_checkpoint(out);
}

// What every live run must show at its end: each epoch's samples once, the members alike.
inline void expect_every_sample_once_and_members_alike(const testing::ToolProcess& run, const std::string& out,
                                                       int epochs = 2) {
  const auto audit = testing::run_process({LOCKSTEP_TOOL, "data", "audit", out});
  EXPECT_EQ(audit.exit_code, 0) << audit.output;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    EXPECT_TRUE(testing::contains(audit.output, "epoch " + std::to_string(epoch) + ": every sample once"))
        << audit.output;
  }
  EXPECT_TRUE(testing::contains(run.stdout_text(), "the parameters are identical on all")) << run.stdout_text();
}

// Each generation's size and the step it went on after, from rank 0's lines
// "generation G of N workers goes on after step S".
inline std::vector<std::pair<int, int64_t>> generations(const std::string& output) {
  std::vector<std::pair<int, int64_t>> found;
  const std::regex line("generation [0-9]+ of ([0-9]+) workers goes on after step ([0-9]+)");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line); it != std::sregex_iterator(); ++it) {
    found.emplace_back(std::stoi((*it)[1]), std::stoll((*it)[2]));
  }
  return found;
}

// The same sizes from the same steps (`changes`, after `first` workers) without a fault, a
// run per membership (nodes of `per_node` workers, if set), into `out`.
inline void replay_memberships(const std::string& out, int first, const std::vector<std::pair<int, int64_t>>& changes,
                               const std::vector<std::string>& extra, int per_node = 0) {
  int workers_before = first;
  int64_t from = 0;
  for (size_t g = 0; g <= changes.size(); ++g) {
    std::vector<std::string> part = extra;
    if (g < changes.size()) part.insert(part.end(), {"--stop-after-step", std::to_string(changes[g].second)});
    if (from > 0) part.push_back("--resume");
    if (g == changes.size() || changes[g].second > from) train_replay_phase(out, workers_before, per_node, part);
    if (g < changes.size()) std::tie(workers_before, from) = changes[g];
  }
}

}  // namespace lockstep::train
