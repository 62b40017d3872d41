// How `lockstep run` ends a job early: a worker fails, a worker is killed, or the launcher
// itself is told to stop. The built tool runs real probe workers (launch_probe.cpp) that
// record their pids, so the tests can see that no worker outlives the launcher.
#include <signal.h>

#include <gtest/gtest.h>

#include "support/tool_process.h"

namespace lockstep::testing {
namespace {

constexpr std::chrono::seconds kStartBound{20};

// A job of `workers` probes that run `setup` (e.g. signal dispositions), record their pids
// in `pid_directory`, wait until every worker has, then run `steps`.
ToolProcess start_job(int workers, const std::string& pid_directory, const std::vector<std::string>& options,
                      const std::vector<std::string>& setup, const std::vector<std::string>& steps) {
  std::vector<std::string> command = {LOCKSTEP_TOOL, "run", "-n", std::to_string(workers)};
  command.insert(command.end(), options.begin(), options.end());
  command.insert(command.end(), {"--", LAUNCH_PROBE});
  command.insert(command.end(), setup.begin(), setup.end());
  command.insert(command.end(), {"pidfile", pid_directory, "await-pidfiles", pid_directory, std::to_string(workers)});
  command.insert(command.end(), steps.begin(), steps.end());
  return ToolProcess(command);
}

void expect_all_gone(const std::vector<pid_t>& pids) {
  for (std::size_t rank = 0; rank < pids.size(); ++rank) {
    EXPECT_FALSE(process_alive(pids[rank])) << "rank " << rank << " (pid " << pids[rank] << ") outlived the launcher";
  }
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(LockstepRunStops, AllWorkersWhenOneExitsNonZero) {
  TemporaryDirectory pids_at;
  auto start = std::chrono::steady_clock::now();
  ToolProcess launcher = start_job(3, pids_at.path(), {}, {}, {"exit-on-rank", "1", "3", "sleep", "60"});
  std::vector<pid_t> pids = wait_for_pid_files(pids_at.path(), 3, kStartBound);
  ASSERT_EQ(pids.size(), 3u) << launcher.stderr_text();

  ASSERT_TRUE(launcher.wait_for_exit(kExitBound));
  EXPECT_LT(seconds_since(start), 10.0);
  EXPECT_EQ(launcher.exit_code(), 3);
  EXPECT_EQ(launcher.stderr_text(), "lockstep run: rank 1 (pid " + std::to_string(pids[1]) +
                                        ") exited with status 3; stopping the other 2 workers\n");
  expect_all_gone(pids);
}

TEST(LockstepRunStops, AllWorkersWhenOneIsKilled) {
  TemporaryDirectory pids_at;
  ToolProcess launcher = start_job(3, pids_at.path(), {}, {}, {"sleep", "60"});
  std::vector<pid_t> pids = wait_for_pid_files(pids_at.path(), 3, kStartBound);
  ASSERT_EQ(pids.size(), 3u) << launcher.stderr_text();

  kill(pids[1], SIGKILL);
  ASSERT_TRUE(launcher.wait_for_exit(kExitBound));
  EXPECT_EQ(launcher.exit_code(), 128 + SIGKILL);
  EXPECT_EQ(launcher.stderr_text(), "lockstep run: rank 1 (pid " + std::to_string(pids[1]) +
                                        ") was killed by signal 9 (Killed); stopping the other 2 workers\n");
  expect_all_gone(pids);
}

TEST(LockstepRunStops, WorkersThatIgnoreSigtermWithSigkillAfterTheStopTimeout) {
  TemporaryDirectory pids_at;
  auto start = std::chrono::steady_clock::now();
  ToolProcess launcher =
      start_job(3, pids_at.path(), {"--stop-timeout", "1"}, {"ignore-term"}, {"exit-on-rank", "0", "5", "sleep", "60"});
  std::vector<pid_t> pids = wait_for_pid_files(pids_at.path(), 3, kStartBound);
  ASSERT_EQ(pids.size(), 3u) << launcher.stderr_text();

  ASSERT_TRUE(launcher.wait_for_exit(kExitBound));
  EXPECT_LT(seconds_since(start), 10.0);
  EXPECT_EQ(launcher.exit_code(), 5);
  EXPECT_TRUE(contains(launcher.stderr_text(), "rank 0 (pid " + std::to_string(pids[0]) + ") exited with status 5"))
      << launcher.stderr_text();
  EXPECT_TRUE(contains(launcher.stderr_text(), "ranks 1, 2 did not stop within 1 s; sending SIGKILL"))
      << launcher.stderr_text();
  expect_all_gone(pids);
}

TEST(LockstepRunStops, ForwardsSigtermToEveryWorker) {
  TemporaryDirectory pids_at;
  ToolProcess launcher = start_job(2, pids_at.path(), {}, {"trap-term"}, {"sleep", "60"});
  std::vector<pid_t> pids = wait_for_pid_files(pids_at.path(), 2, kStartBound);
  ASSERT_EQ(pids.size(), 2u) << launcher.stderr_text();

  kill(launcher.pid(), SIGTERM);
  ASSERT_TRUE(launcher.wait_for_exit(kExitBound));
  EXPECT_EQ(launcher.exit_code(), 128 + SIGTERM);
  EXPECT_TRUE(contains(launcher.stdout_text(), "[rank 0] rank 0 got SIGTERM\n")) << launcher.stdout_text();
  EXPECT_TRUE(contains(launcher.stdout_text(), "[rank 1] rank 1 got SIGTERM\n")) << launcher.stdout_text();
  EXPECT_EQ(launcher.stderr_text(), "lockstep run: got signal 15 (Terminated); stopping 2 workers\n");
  expect_all_gone(pids);
}

TEST(LockstepRunStops, ForwardsSigintAndExitsWith130) {
  TemporaryDirectory pids_at;
  ToolProcess launcher = start_job(2, pids_at.path(), {}, {}, {"sleep", "60"});
  std::vector<pid_t> pids = wait_for_pid_files(pids_at.path(), 2, kStartBound);
  ASSERT_EQ(pids.size(), 2u) << launcher.stderr_text();

  kill(launcher.pid(), SIGINT);
  ASSERT_TRUE(launcher.wait_for_exit(kExitBound));
  EXPECT_EQ(launcher.exit_code(), 128 + SIGINT);
  EXPECT_EQ(launcher.stderr_text(), "lockstep run: got signal 2 (Interrupt); stopping 2 workers\n");
  expect_all_gone(pids);
}

}  // namespace
}  // namespace lockstep::testing
