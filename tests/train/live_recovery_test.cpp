// `lockstep train --recovery live`: a worker that fails does not stop the others. They
// regroup without it, heal from the member furthest on and train on from the step they
// reached; a replacement rejoins them. Real worker processes, killed and stopped.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "lockstep/train/checkpoint.h"
#include "lockstep/train/models.h"
#include "support/run_output.h"
#include "support/tool_process.h"
#include "support/wait_for.h"
#include "support/world.h"
#include "trained_steps.h"
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

std::string newest_checkpoint(const std::string& run) { return CheckpointFolder(run + "/checkpoints", 1).latest(); }

// The same sequence of memberships without a fault: 3 workers up to `step`, then 2.
std::string replay(const std::string& out, int64_t step) {
  const auto first =
      run_process(live_job(out, {"-n", "3", "--mode", "processes", "--stop-after-step", std::to_string(step)}));
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
