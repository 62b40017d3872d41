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
#include "support/run_output.h"
#include "support/tool_process.h"
#include "support/wait_for.h"
#include "support/world.h"
#include "trained_steps.h"
#include "weight_lines.h"
#include "live_jobs.h"
#include "worker_processes.h"

namespace lockstep::train {
namespace {

using testing::contains;
using testing::run_process;
using testing::TemporaryDirectory;
using testing::wait_for;

// Without a fault, live recovery trains the very bits today's training does: the step's
// agreement is the signal all_reduce every step made already.
TEST(LiveRecovery, WithoutAFaultTheRunIsBitExactWithRecoveryRestart) {
  TemporaryDirectory dir;
  const auto live = run_process(live_job(dir.path() + "/live", {"-n", "3", "--recovery", "live"}));
  ASSERT_EQ(live.exit_code, 0) << live.output;
  const auto restart = run_process(live_job(dir.path() + "/restart", {"-n", "3", "--mode", "processes"}));
  ASSERT_EQ(restart.exit_code, 0) << restart.output;
  EXPECT_EQ(trained_steps(dir.path() + "/live"), trained_steps(dir.path() + "/restart"));
  expect_same_weights(checkpoint_weights(newest_checkpoint(dir.path() + "/restart")),
                      checkpoint_weights(newest_checkpoint(dir.path() + "/live")));
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

  // The replay: the same sizes from the same steps, unsharded.
  const std::string replayed = dir.path() + "/replay";
  replay_memberships(replayed, 3, changes, adam);
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
