// lockstep::LiveTraining, live recovery for a loop of one's own, through the example that
// shows it (examples/live_loop.cpp) under `lockstep run`: real worker processes, killed.
// The example's global batch is the same on any number of workers, so every run must end
// with the parameters of the run without a fault, up to the order of a few sums.
#include <signal.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/script.h>

#include "support/examples.h"
#include "support/run_output.h"
#include "support/tool_process.h"
#include "support/wait_for.h"
#include "support/world.h"
#include "worker_processes.h"

namespace lockstep::train {
namespace {

using testing::contains;
using testing::run_process;
using testing::TemporaryDirectory;
using testing::wait_for;

// 150 steps; `step_ms` slows them, so that a fault lands while the job trains.
std::vector<std::string> live_loop(std::vector<std::string> launch, const std::string& save, int step_ms = 0) {
  std::vector<std::string> command = {LOCKSTEP_TOOL, "run"};
  command.insert(command.end(), launch.begin(), launch.end());
  command.insert(command.end(),
                 {"--", LIVE_LOOP, "--steps", "150", "--step-ms", std::to_string(step_ms), "--save", save});
  return command;
}

std::vector<at::Tensor> saved_parameters(const std::string& path) {
  std::vector<at::Tensor> parameters;
  for (const auto& p : torch::jit::load(path).parameters()) parameters.push_back(p);
  return parameters;
}

// max |a - b| <= 1e-6 max |a|, tensor by tensor; `bits`: equal.
void expect_parameters_alike(const std::string& a, const std::string& b, bool bits) {
  const auto pa = saved_parameters(a), pb = saved_parameters(b);
  ASSERT_EQ(pa.size(), pb.size());
  ASSERT_FALSE(pa.empty());
  for (size_t i = 0; i < pa.size(); ++i) {
    if (bits) {
      EXPECT_TRUE(torch::equal(pa[i], pb[i])) << "parameter " << i;
    } else {
      EXPECT_LE((pa[i] - pb[i]).abs().max().item<double>(), 1e-6 * pa[i].abs().max().item<double>())
          << "parameter " << i;
    }
  }
}

// The args of the membership marks in a timeline file.
std::vector<nlohmann::json> membership_marks(const std::string& file) {
  std::vector<nlohmann::json> marks;
  for (const auto& event : nlohmann::json::parse(testing::read_file(file))) {
    if (event["name"] == "membership") marks.push_back(event["args"]);
  }
  return marks;
}

// The example without live recovery: the run every other must end as.
std::string fault_free(const std::string& dir) {
  const auto ran = run_process(live_loop({"-n", "3"}, dir + "/fault-free.pt"));
  EXPECT_EQ(ran.exit_code, 0) << ran.output;
  return dir + "/fault-free.pt";
}

TEST(LiveTraining, WithoutAFaultALoopTrainsTheSameBitsAsWithoutLiveRecovery) {
  LOCKSTEP_SKIP_WITHOUT_EXAMPLE(LIVE_LOOP);
  TemporaryDirectory dir;
  const auto live = run_process(live_loop({"-n", "3", "--recovery", "live"}, dir.path() + "/live.pt"));
  ASSERT_EQ(live.exit_code, 0) << live.output;
  EXPECT_TRUE(contains(live.output, "step 150/150")) << live.output;
  EXPECT_FALSE(contains(live.output, "goes on after step")) << live.output;
  expect_parameters_alike(fault_free(dir.path()), dir.path() + "/live.pt", /*bits=*/true);
}

TEST(LiveTraining, AKilledWorkersPeersTrainOnInTheSameProcessesAndHealItsReplacement) {
  LOCKSTEP_SKIP_WITHOUT_EXAMPLE(LIVE_LOOP);
  TemporaryDirectory dir;
  testing::ToolProcess run(
      live_loop({"-n", "3", "--recovery", "live", "--max-restarts", "1"}, dir.path() + "/live.pt", 30),
      {"LOCKSTEP_TIMELINE=" + dir.path() + "/trace"});
  const auto workers = signal_worker_at(run, "step 40/", 3, 1, SIGKILL);
  ASSERT_FALSE(workers.empty());
  ASSERT_TRUE(wait_for([&] { return contains(run.stderr_text(), "generation 1 of 2 workers goes on after step"); }))
      << run.stderr_text();
  const auto now = children_of(run.pid());  // the same two, and maybe the replacement
  ASSERT_GE(now.size(), 2u);
  EXPECT_EQ(std::vector<pid_t>(now.begin(), now.begin() + 2), (std::vector<pid_t>{workers[0], workers[2]}));
  ASSERT_TRUE(run.wait_for_exit(std::chrono::seconds(120)));
  ASSERT_EQ(run.exit_code(), 0) << run.stdout_text() << run.stderr_text();
  EXPECT_TRUE(contains(run.stderr_text(), "worker 1 missing")) << run.stderr_text();
  EXPECT_TRUE(contains(run.stderr_text(), "started rank 1 again")) << run.stderr_text();
  EXPECT_TRUE(contains(run.stderr_text(), "generation 2 of 3 workers goes on after step")) << run.stderr_text();
  EXPECT_TRUE(contains(run.stdout_text(), "the parameters are identical on all 3 members")) << run.stdout_text();
  expect_parameters_alike(fault_free(dir.path()), dir.path() + "/live.pt", /*bits=*/false);

  // Each generation's ranks record files of their own, which begin with the change's mark.
  const auto lost = membership_marks(dir.path() + "/trace.generation-1.rank-1.json");
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0]["generation"], 1);
  EXPECT_EQ(lost[0]["workers"], 2);
  // Whichever came first: shared memory's check on the dead peer, or the abort its
  // launcher's mark set off, during a collective ("was aborted: worker 1 ended, ...") or
  // between two ("the process group failed earlier ... The failure was: worker 1 ended, ...").
  const std::string why = lost[0]["why"].get<std::string>();
  EXPECT_TRUE(contains(why, "died while this rank waited") || contains(why, "worker 1 ended, or its node stopped"))
      << lost[0].dump();
  EXPECT_GT(lost[0]["regroup_s"].get<double>(), 0);
  EXPECT_GT(lost[0]["heal_s"].get<double>(), 0);
  const auto joined = membership_marks(dir.path() + "/trace.generation-2.rank-2.json");
  ASSERT_EQ(joined.size(), 1u);
  EXPECT_EQ(joined[0]["workers"], 3);
  EXPECT_EQ(joined[0]["why"], "a replacement was admitted");
  EXPECT_TRUE(membership_marks(dir.path() + "/trace.rank-0.json").empty());
}

// Worker 2 dies as it starts to heal the generation formed without worker 1 (a test hook):
// the others' heal fails, and they form another generation without it too.
TEST(LiveTraining, AWorkerLostWhileTheOthersHealIsLeftOutByAnotherRegroup) {
  LOCKSTEP_SKIP_WITHOUT_EXAMPLE(LIVE_LOOP);
  TemporaryDirectory dir;
  testing::ToolProcess run(live_loop({"-n", "4", "--recovery", "live"}, dir.path() + "/live.pt", 30),
                           {"LOCKSTEP_TEST_DIE_WHEN_HEALING=2:1"});
  const auto workers = signal_worker_at(run, "step 40/", 4, 1, SIGKILL);
  ASSERT_FALSE(workers.empty());
  ASSERT_TRUE(run.wait_for_exit(std::chrono::seconds(120)));
  ASSERT_EQ(run.exit_code(), 0) << run.stdout_text() << run.stderr_text();
  const std::string err = run.stderr_text();
  EXPECT_TRUE(contains(err, "rank 2 (pid " + std::to_string(workers[2]) + ") was killed by signal 9")) << err;
  EXPECT_FALSE(contains(err, "generation 1 of")) << err;  // generation 1 never trained
  EXPECT_TRUE(contains(err, "generation 2 of 2 workers goes on after step")) << err;
  EXPECT_TRUE(contains(err, "workers 1, 2 missing")) << err;
  EXPECT_TRUE(contains(run.stdout_text(), "step 150/150")) << run.stdout_text();
  EXPECT_TRUE(contains(run.stdout_text(), "the parameters are identical on all 2 members")) << run.stdout_text();
  expect_parameters_alike(fault_free(dir.path()), dir.path() + "/live.pt", /*bits=*/false);
}

// -n 3:3: below 3 workers the loop cannot go on; the 2 left end with one line naming the
// missing worker and the step they reached.
TEST(LiveTraining, BelowTheFewestWorkersEveryMemberEndsNamingTheOneMissing) {
  LOCKSTEP_SKIP_WITHOUT_EXAMPLE(LIVE_LOOP);
  TemporaryDirectory dir;
  testing::ToolProcess run(live_loop({"-n", "3:3"}, dir.path() + "/live.pt", 30));
  const auto workers = signal_worker_at(run, "step 40/", 3, 1, SIGKILL);
  ASSERT_FALSE(workers.empty());
  ASSERT_TRUE(run.wait_for_exit(std::chrono::seconds(60)));
  EXPECT_EQ(run.exit_code(), 1) << run.stderr_text();
  const std::string said = "lockstep: 2 of the workers are left, fewer than 3 (worker 1 missing), after step ";
  EXPECT_TRUE(contains(run.stderr_text(), "[rank 0] " + said)) << run.stderr_text();
  EXPECT_TRUE(contains(run.stderr_text(), "[rank 2] " + said)) << run.stderr_text();
  EXPECT_FALSE(contains(run.stdout_text(), "step 150/150")) << run.stdout_text();
}

}  // namespace
}  // namespace lockstep::train
