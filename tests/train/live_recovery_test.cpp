// `lockstep train --recovery live`: a worker that fails does not stop the others. They
// regroup without it, heal from the member furthest on and train on from the step they
// reached; a replacement rejoins them. Real worker processes, killed and stopped.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>
#include <tuple>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "lockstep/train/checkpoint.h"
#include "optim/optimizer_state_table.h"
#include "lockstep/train/models.h"
#include "support/network_hosts.h"
#include "support/run_output.h"
#include "support/tool_process.h"
#include "support/wait_for.h"
#include "support/world.h"
#include "trained_steps.h"
#include "weight_lines.h"
#include "worker_processes.h"

namespace lockstep::train {
namespace {

using testing::contains;
using testing::run_process;
using testing::TemporaryDirectory;
using testing::wait_for;

// 512 examples in steps of 48 over every worker: the same steps on 3 workers or 2.
std::vector<std::string> live_job(const std::string& out, std::vector<std::string> extra) {
  std::vector<std::string> command = {LOCKSTEP_TOOL,         "train", "--limit",     "512", "--val-limit", "256",
                                      "--global-batch-size", "48",    "--log-every", "1",   "--out",       out,
                                      "--warmup-steps",      "4",     "--sample-log"};
  if (std::find(extra.begin(), extra.end(), "--epochs") == extra.end()) extra.insert(extra.end(), {"--epochs", "2"});
  command.insert(command.end(), extra.begin(), extra.end());
  return command;
}

// Steps of 50 ms or more (worker 0 is slow), so that a fault lands while the job trains.
constexpr const char* kSlowSteps = "LOCKSTEP_TEST_SLOW_RANK=0:compute:50";

// The step the first regroup went on after: "... goes on after step 7 (...".
int64_t went_on_after(const std::string& output) {
  const std::string marker = "goes on after step ";
  const auto at = output.find(marker);
  return at == std::string::npos ? -1 : std::stoll(output.substr(at + marker.size()));
}

// The same sequence of memberships without a fault: `before` workers up to `step`, then 2.
std::string replay(const std::string& out, int64_t step, int before = 3) {
  const auto first = run_process(
      live_job(out, {"-n", std::to_string(before), "--mode", "processes", "--stop-after-step", std::to_string(step)}));
  EXPECT_EQ(first.exit_code, 0) << first.output;
  const auto second = run_process(live_job(out, {"-n", "2", "--mode", "processes", "--resume"}));
  EXPECT_EQ(second.exit_code, 0) << second.output;
  return newest_checkpoint(out);
}

// What every live run must show at its end: each epoch's samples once, the members alike.
void expect_every_sample_once_and_members_alike(const testing::ToolProcess& run, const std::string& out) {
  const auto audit = run_process({LOCKSTEP_TOOL, "data", "audit", out});
  EXPECT_EQ(audit.exit_code, 0) << audit.output;
  EXPECT_TRUE(contains(audit.output, "epoch 1: every sample once")) << audit.output;
  EXPECT_TRUE(contains(audit.output, "epoch 2: every sample once")) << audit.output;
  EXPECT_TRUE(contains(run.stdout_text(), "the parameters are identical on all")) << run.stdout_text();
}

TEST(LiveRecovery, AWorkerKilledMidStepLeavesTheOthersTrainingOnInTheSameProcesses) {
  TemporaryDirectory dir;
  const std::string out = dir.path() + "/live";
  testing::ToolProcess run(live_job(out, {"-n", "3", "--recovery", "live", "--timeline"}), {kSlowSteps});
  const auto workers = signal_worker_at(run, "step 4/", 3, 1, SIGKILL);
  ASSERT_FALSE(workers.empty());
  ASSERT_TRUE(wait_for([&] { return went_on_after(run.stdout_text()) > 0; })) << run.stdout_text() << run.stderr_text();
  EXPECT_EQ(children_of(run.pid()), (std::vector<pid_t>{workers[0], workers[2]}));  // the same processes
  ASSERT_TRUE(run.wait_for_exit(std::chrono::seconds(120)));
  ASSERT_EQ(run.exit_code(), 0) << run.stdout_text() << run.stderr_text();
  EXPECT_TRUE(contains(run.stderr_text(), "rank 1 (pid " + std::to_string(workers[1]) +
                                              ") was killed by signal 9 (Killed); the others go on without it"))
      << run.stderr_text();
  EXPECT_TRUE(contains(run.stdout_text(), "generation 1 of 2 workers goes on after step")) << run.stdout_text();
  expect_every_sample_once_and_members_alike(run, out);
  // The generation after the fault records files of its own, and the merged timeline (the
  // last generation's) begins with the change: how many go on, and why.
  const auto merged = nlohmann::json::parse(testing::read_file(out + "/timeline.json"));
  const auto mark = std::find_if(merged.begin(), merged.end(), [](const auto& e) { return e["name"] == "membership"; });
  ASSERT_NE(mark, merged.end());
  EXPECT_EQ((*mark)["args"]["generation"], 1) << mark->dump();
  EXPECT_EQ((*mark)["args"]["workers"], 2) << mark->dump();
  EXPECT_TRUE(contains((*mark)["args"]["why"].get<std::string>(), "worker 1 left")) << mark->dump();
  EXPECT_TRUE(std::filesystem::exists(out + "/timeline/trace.rank-1.json"));
  EXPECT_TRUE(std::filesystem::exists(out + "/timeline/trace.generation-1.rank-1.json"));

  const std::string replayed = replay(dir.path() + "/replay", went_on_after(run.stdout_text()));
  EXPECT_EQ(trained_steps(out), trained_steps(dir.path() + "/replay"));
  expect_close_parameters(replayed, newest_checkpoint(out));
}

TEST(LiveRecovery, AStoppedWorkerIsEndedAfterTheHeartbeatTimeoutAndAReplacementRejoins) {
  TemporaryDirectory dir;
  const std::string out = dir.path() + "/live";
  // A checkpoint every 2 steps: the replacement joins a run folder that holds some.
  // Four epochs of steps of 100 ms: time for the replacement to start and join.
  testing::ToolProcess run(live_job(out, {"-n", "3", "--recovery", "live", "--max-restarts", "1", "--heartbeat-timeout",
                                          "2", "--checkpoint-every", "2", "--epochs", "4"}),
                           {"LOCKSTEP_TEST_SLOW_RANK=0:compute:100"});
  const auto workers = signal_worker_at(run, "step 4/", 3, 2, SIGSTOP);
  ASSERT_FALSE(workers.empty());
  ASSERT_TRUE(run.wait_for_exit(std::chrono::seconds(180)));
  ASSERT_EQ(run.exit_code(), 0) << run.stdout_text() << run.stderr_text();
  const std::string err = run.stderr_text();
  EXPECT_TRUE(
      contains(err, "rank 2 (pid " + std::to_string(workers[2]) +
                        ") missed its heartbeats for 2 s: it hangs or was stopped; ending it, the others go on"))
      << err;
  EXPECT_TRUE(contains(err, "started rank 2 again")) << err;
  // The replacement may come before the others have regrouped without it, or after.
  EXPECT_TRUE(contains(run.stdout_text(), "worker 2 left")) << run.stdout_text();
  EXPECT_TRUE(contains(run.stdout_text(), "of 3 workers goes on after step")) << run.stdout_text();
  expect_every_sample_once_and_members_alike(run, out);
  EXPECT_TRUE(contains(run.stdout_text(), "the parameters are identical on all 3 members")) << run.stdout_text();
}

// Two hosts (network namespaces) of two workers, each host with its own launcher; host 1's
// link is cut mid-training. Its workers' connections never close: host 0's launcher finds
// host 1's launcher silent for the heartbeat timeout and marks its workers ended, which
// aborts the collective host 0's workers wait in (not its 60 s timeout); they regroup
// without host 1 and train the job to its end in the same processes.
TEST(LiveRecovery, AHostCutOffLeavesTheOtherHostsWorkersTrainingOnInTheSameProcesses) {
  testing::NetworkHosts hosts;
  if (!hosts.available()) GTEST_SKIP() << hosts.why_not();
  TemporaryDirectory dir;
  const std::string out = dir.path() + "/live";
  const std::string port = std::to_string(testing::free_port());
  std::vector<std::unique_ptr<testing::ToolProcess>> nodes;
  for (int host = 0; host < 2; ++host) {
    std::vector<std::string> command = {LOCKSTEP_TOOL, "run", "-n", "2", "--nnodes", "2", "--recovery", "live"};
    command.insert(command.end(), {"--node-rank", std::to_string(host), "--master-addr", hosts.address(0),
                                   "--master-port", port, "--heartbeat-timeout", "3", "--"});
    for (const auto& part : live_job(out, {})) command.push_back(part);
    nodes.push_back(std::make_unique<testing::ToolProcess>(
        hosts.on(host, command), std::vector<std::string>{kSlowSteps, "LOCKSTEP_TIMEOUT=60"}));
  }
  testing::ToolProcess& first = *nodes[0];
  ASSERT_TRUE(wait_for([&] { return contains(first.stdout_text(), "step 4/"); }))
      << first.stdout_text() << first.stderr_text() << nodes[1]->stderr_text();
  const std::vector<pid_t> workers = children_of(first.pid());
  ASSERT_EQ(workers.size(), 2u);
  const auto cut = std::chrono::steady_clock::now();
  hosts.cut_off(1);
  ASSERT_TRUE(wait_for([&] { return went_on_after(first.stdout_text()) > 0; }))
      << first.stdout_text() << first.stderr_text();
  EXPECT_LT(std::chrono::steady_clock::now() - cut, std::chrono::seconds(3 + 5)) << first.stderr_text();
  EXPECT_EQ(children_of(first.pid()), workers);  // the same processes
  ASSERT_TRUE(first.wait_for_exit(std::chrono::seconds(120)));
  ASSERT_EQ(first.exit_code(), 0) << first.stdout_text() << first.stderr_text();
  const std::string going_on = "stopped answering for 3 s: the other nodes' workers go on without its workers";
  EXPECT_TRUE(contains(first.stderr_text(), going_on)) << first.stderr_text();
  EXPECT_TRUE(contains(first.stdout_text(), "generation 1 of 2 workers goes on after step")) << first.stdout_text();
  expect_every_sample_once_and_members_alike(first, out);
  // Host 1's workers, cut off from the store as well, end once its calls fail, and so does
  // their launcher, saying why.
  testing::ToolProcess& second = *nodes[1];
  ASSERT_TRUE(second.wait_for_exit(std::chrono::seconds(60))) << second.stderr_text();
  EXPECT_EQ(second.exit_code(), 1) << second.stderr_text();
  EXPECT_TRUE(contains(second.stderr_text(), "worker 2 lost the job's store")) << second.stderr_text();
  EXPECT_TRUE(contains(second.stderr_text(), "lost the job's store on node 0 (" + hosts.address(0) +
                                                 "): this node is cut off from it, or node 0 is gone"))
      << second.stderr_text();

  const std::string replayed = replay(dir.path() + "/replay", went_on_after(first.stdout_text()), 4);
  EXPECT_EQ(trained_steps(out), trained_steps(dir.path() + "/replay"));
  expect_close_parameters(replayed, newest_checkpoint(out));
}

// Worker 2 dies as it starts to heal the generation formed without worker 1 (a test hook):
// the other two regroup again and train every sample once.
TEST(LiveRecovery, AWorkerLostWhileTheOthersHealIsLeftOutByAnotherRegroup) {
  TemporaryDirectory dir;
  const std::string out = dir.path() + "/live";
  testing::ToolProcess run(live_job(out, {"-n", "4", "--recovery", "live"}),
                           {kSlowSteps, "LOCKSTEP_TEST_DIE_WHEN_HEALING=2:1"});
  const auto workers = signal_worker_at(run, "step 4/", 4, 1, SIGKILL);
  ASSERT_FALSE(workers.empty());
  ASSERT_TRUE(run.wait_for_exit(std::chrono::seconds(120)));
  ASSERT_EQ(run.exit_code(), 0) << run.stdout_text() << run.stderr_text();
  EXPECT_TRUE(contains(run.stderr_text(), "rank 2 (pid " + std::to_string(workers[2]) + ") was killed by signal 9"))
      << run.stderr_text();
  EXPECT_FALSE(contains(run.stdout_text(), "generation 1 of")) << run.stdout_text();  // it never trained
  EXPECT_TRUE(contains(run.stdout_text(), "generation 2 of 2 workers goes on after step")) << run.stdout_text();
  expect_every_sample_once_and_members_alike(run, out);
}

// Each generation's size and the step it went on after, from rank 0's lines
// "generation G of N workers goes on after step S".
std::vector<std::pair<int, int64_t>> generations(const std::string& output) {
  std::vector<std::pair<int, int64_t>> found;
  const std::regex line("generation [0-9]+ of ([0-9]+) workers goes on after step ([0-9]+)");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line); it != std::sregex_iterator(); ++it) {
    found.emplace_back(std::stoi((*it)[1]), std::stoll((*it)[2]));
  }
  return found;
}

// The Adam state of two checkpoints of the CNN (a sharded one's read from its shards) equal
// to float rounding, as expect_close_parameters compares parameters.
void expect_close_adam_state(const std::string& a, const std::string& b) {
  std::vector<torch::nn::Sequential> models;
  std::vector<std::unique_ptr<torch::optim::Adam>> adams;
  for (const auto& path : {a, b}) {
    models.push_back(make_model("cnn", ModelOptions().in_channels(1).num_classes(10).image_size(28)));
    adams.push_back(std::make_unique<torch::optim::Adam>(models.back()->parameters()));
    load_checkpoint(path, *models.back(), *adams.back());
  }
  const auto pa = models[0]->parameters(), pb = models[1]->parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    auto &state_a = adams[0]->state(), &state_b = adams[1]->state();
    using StateMap = std::decay_t<decltype(state_a)>;
    const auto sa = state_a.find(detail::state_key<StateMap>(pa[i])),
               sb = state_b.find(detail::state_key<StateMap>(pb[i]));
    ASSERT_TRUE(sa != state_a.end() && sb != state_b.end()) << "parameter " << i << " has no Adam state";
    const auto& adam_a = static_cast<torch::optim::AdamParamState&>(*sa->second);
    const auto& adam_b = static_cast<torch::optim::AdamParamState&>(*sb->second);
    EXPECT_EQ(adam_a.step(), adam_b.step()) << "parameter " << i;
    for (const auto& [name, x, y] : {std::tuple{"exp_avg", adam_a.exp_avg(), adam_b.exp_avg()},
                                     std::tuple{"exp_avg_sq", adam_a.exp_avg_sq(), adam_b.exp_avg_sq()}}) {
      const double largest = x.abs().max().item<double>(), apart = (x - y).abs().max().item<double>();
      EXPECT_LE(apart, 1e-6 * largest) << name << " of parameter " << i << " differs between " << a << " and " << b;
    }
  }
}

// ZeRO-1 under live recovery keeps each partition of the optimizer state on two workers.
// The run stops after step 2 and resumes (each worker reads its partition and its copy of
// the next); then worker 1 is killed and started again: its partition is healed from the
// worker that kept its copy, the state repartitioned over 2, then over 3 with the
// replacement. Adam, whose every update depends on that state: the parameters and the
// state end as those of the unsharded replay of the same memberships.
TEST(LiveRecovery, ZeroOneStateOfALostWorkerIsHealedFromItsCopyAndRepartitioned) {
  TemporaryDirectory dir;
  const std::string out = dir.path() + "/live";
  const std::vector<std::string> adam = {"--optimizer", "adam", "--epochs", "4"};
  std::vector<std::string> live = {"-n", "3", "--zero", "1", "--recovery", "live"};
  live.insert(live.end(), adam.begin(), adam.end());
  std::vector<std::string> stopped = live;
  stopped.insert(stopped.end(), {"--stop-after-step", "2"});
  const auto first = run_process(live_job(out, stopped));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  live.insert(live.end(), {"--max-restarts", "1", "--resume"});
  testing::ToolProcess run(live_job(out, live), {"LOCKSTEP_TEST_SLOW_RANK=0:compute:100"});
  const auto workers = signal_worker_at(run, "step 4/", 3, 1, SIGKILL);
  ASSERT_FALSE(workers.empty());
  ASSERT_TRUE(run.wait_for_exit(std::chrono::seconds(180)));
  ASSERT_EQ(run.exit_code(), 0) << run.stdout_text() << run.stderr_text();
  EXPECT_TRUE(contains(run.stderr_text(), "started rank 1 again")) << run.stderr_text();
  const auto changes = generations(run.stdout_text());
  ASSERT_FALSE(changes.empty()) << run.stdout_text();
  EXPECT_EQ(changes.back().first, 3) << run.stdout_text();  // the replacement joined
  expect_every_sample_once_and_members_alike(run, out);

  // The replay: the same sizes from the same steps, unsharded, a worker count per run.
  const std::string replayed = dir.path() + "/replay";
  int workers_before = 3;
  int64_t from = 0;
  for (size_t g = 0; g <= changes.size(); ++g) {
    std::vector<std::string> part = {"-n", std::to_string(workers_before), "--mode", "processes"};
    part.insert(part.end(), adam.begin(), adam.end());
    if (g < changes.size()) part.insert(part.end(), {"--stop-after-step", std::to_string(changes[g].second)});
    if (from > 0) part.push_back("--resume");
    if (g == changes.size() || changes[g].second > from) {
      const auto result = run_process(live_job(replayed, part));
      ASSERT_EQ(result.exit_code, 0) << result.output;
    }
    if (g < changes.size()) std::tie(workers_before, from) = changes[g];
  }
  EXPECT_EQ(trained_steps(out), trained_steps(replayed));
  expect_close_parameters(newest_checkpoint(replayed), newest_checkpoint(out));
  expect_close_adam_state(newest_checkpoint(replayed), newest_checkpoint(out));
}

// -n 3:3: below 3 workers the job cannot go on; the 2 left save their state and end as a
// preempted job does, naming the one missing, and --resume on 2 finishes every sample once.
TEST(LiveRecovery, BelowTheFewestWorkersTheOthersSaveACheckpointAndExitSeventyFive) {
  TemporaryDirectory dir;
  const std::string out = dir.path() + "/live";
  testing::ToolProcess run(live_job(out, {"-n", "3:3"}), {kSlowSteps});
  const auto workers = signal_worker_at(run, "step 4/", 3, 2, SIGKILL);
  ASSERT_FALSE(workers.empty());
  ASSERT_TRUE(run.wait_for_exit(std::chrono::seconds(120)));
  EXPECT_EQ(run.exit_code(), 75) << run.stdout_text() << run.stderr_text();
  const std::string text = run.stdout_text();
  const std::string said =
      "lockstep: 2 of the workers are left, fewer than 3 (worker 2 missing): saved the checkpoint of step ";
  const auto at = text.find(said);
  ASSERT_NE(at, std::string::npos) << text;
  const int step = std::stoi(text.substr(at + said.size()));
  char name[32];
  std::snprintf(name, sizeof name, "step-%010d.pt", step);
  EXPECT_TRUE(std::filesystem::exists(out + "/checkpoints/" + name)) << text;

  const auto resumed = run_process(live_job(out, {"-n", "2", "--mode", "processes", "--resume"}));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const auto audit = run_process({LOCKSTEP_TOOL, "data", "audit", out});
  EXPECT_EQ(audit.exit_code, 0) << audit.output;
  EXPECT_TRUE(contains(audit.output, "epoch 2: every sample once")) << audit.output;
}

}  // namespace
}  // namespace lockstep::train
