// Two hosts as network namespaces (support/network_hosts.h), each with its own address and
// its own `lockstep run`, two workers each: what a job of two machines meets.
#include <signal.h>

#include <chrono>
#include <memory>
#include <thread>

#include <gtest/gtest.h>

#include "support/network_hosts.h"
#include "support/tool_process.h"
#include "support/world.h"

namespace lockstep::testing {
namespace {

using Clock = std::chrono::steady_clock;

// `lockstep run` on `host` of `hosts`, as node `host` of 2, running COLLECTIVES_WORKER `scenario`.
std::unique_ptr<ToolProcess> launch_on(const NetworkHosts& hosts, int host, const std::string& port,
                                       const std::string& workers, const std::string& scenario,
                                       std::vector<std::string> extra = {}) {
  std::vector<std::string> command = {LOCKSTEP_TOOL,
                                      "run",
                                      "-n",
                                      workers,
                                      "--nnodes",
                                      "2",
                                      "--node-rank",
                                      std::to_string(host),
                                      "--master-addr",
                                      hosts.address(0),
                                      "--master-port",
                                      port};
  command.insert(command.end(), extra.begin(), extra.end());
  command.insert(command.end(), {"--", COLLECTIVES_WORKER, scenario});
  return std::make_unique<ToolProcess>(hosts.on(host, command), std::vector<std::string>{"LOCKSTEP_TIMEOUT=60"});
}

TEST(NamespacedHosts, TwoHostsOfTwoWorkersGetExactCollectives) {
  NetworkHosts hosts;
  if (!hosts.available()) GTEST_SKIP() << hosts.why_not();
  const std::string port = std::to_string(free_port());
  auto first = launch_on(hosts, 0, port, "2", "all");
  auto second = launch_on(hosts, 1, port, "2", "all");
  std::string all;
  for (auto* node : {first.get(), second.get()}) {
    ASSERT_TRUE(node->wait_for_exit(std::chrono::seconds(120)));
    EXPECT_EQ(node->exit_code(), 0) << node->stdout_text() << node->stderr_text();
    all += node->stdout_text();
  }
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(contains(all, "rank " + std::to_string(r) + " of 4 (local " + std::to_string(r % 2) +
                                  " of 2, gloo, shm+gloo): all collectives correct"))
        << all;
  }
}

// Returns once every rank of both launches reduces in its loop (it printed "rank R looping"),
// so that a host lost afterwards is lost mid-collective, not during the rendezvous (which a
// loaded machine may take seconds to reach); false after a minute.
bool all_looping(const std::vector<const ToolProcess*>& nodes, int ranks) {
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    std::string all;
    for (const auto* node : nodes) all += node->stdout_text();
    int looping = 0;
    for (int r = 0; r < ranks; ++r) looping += contains(all, "rank " + std::to_string(r) + " looping");
    if (looping == ranks) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// Every process on the machine with its state and where it waits in the kernel: what a test
// whose launcher did not end shows, to tell a worker blocked in a collective from one gone.
std::string process_list() {
  return "processes:\n" +
         run_process({"ps", "-eo", "pid,ppid,stat,wchan:24,etime,args", "--forest"}, {}, std::chrono::seconds(10))
             .output;
}

// Either host's launcher: its workers die with it, the other host's collectives fail, and
// that launcher ends the job through its workers' failure, naming the lost node. Losing
// host 0 loses the store, which the survivor says.
TEST(NamespacedHosts, KillingOneHostsLauncherEndsTheJobWithinTheHeartbeatTimeout) {
  NetworkHosts hosts;
  if (!hosts.available()) GTEST_SKIP() << hosts.why_not();
  for (const int lost : {1, 0}) {
    const std::string port = std::to_string(free_port());
    std::unique_ptr<ToolProcess> launchers[2] = {
        launch_on(hosts, 0, port, "2", "loop-and-fail", {"--heartbeat-timeout", "5"}),
        launch_on(hosts, 1, port, "2", "loop-and-fail", {"--heartbeat-timeout", "5"})};
    ASSERT_TRUE(all_looping({launchers[0].get(), launchers[1].get()}, 4))
        << launchers[0]->stderr_text() << launchers[1]->stderr_text();
    ToolProcess& survivor = *launchers[1 - lost];
    ASSERT_TRUE(process_alive(survivor.pid())) << survivor.stdout_text() << survivor.stderr_text();
    kill(launchers[lost]->pid(), SIGKILL);  // the whole host's launcher; its workers die with it
    ASSERT_TRUE(survivor.wait_for_exit(std::chrono::seconds(30))) << survivor.stderr_text() << process_list();
    // Ended by its workers' failure, before the heartbeat timeout fired (which says "stopped
    // answering"): what the path takes, not a wall-clock bound a loaded machine can break.
    EXPECT_FALSE(contains(survivor.stderr_text(), "stopped answering for")) << survivor.stderr_text();
    EXPECT_EQ(survivor.exit_code(), 1) << "signal " << survivor.term_signal() << "\n"
                                       << survivor.stderr_text();  // its worker's status: no crash on the way out
    if (lost == 0) {
      EXPECT_TRUE(contains(survivor.stderr_text(),
                           "lost the job's store on node 0 (" + hosts.address(0) + "): the job ends with it"))
          << survivor.stderr_text();
    } else {
      EXPECT_TRUE(contains(survivor.stderr_text(), "lockstep run: node 1 (on ")) << survivor.stderr_text();
      EXPECT_TRUE(contains(survivor.stderr_text(), ") is lost: its launcher stopped answering"))
          << survivor.stderr_text();
    }
  }
}

// With a restart left, the job stops on both hosts, waits for the lost one, and goes on
// when its launcher is started again; without it coming back, it ends naming the node.
// The surviving workers usually see the lost peers' connections close at once; where they
// do not, the launchers' heartbeats notice the lost host within --heartbeat-timeout, which
// is set below the test's waits so that they cover the slower path too.
TEST(NamespacedHosts, ALostHostIsWaitedForWhileRestartsAreLeft) {
  NetworkHosts hosts;
  if (!hosts.available()) GTEST_SKIP() << hosts.why_not();
  for (const bool comes_back : {true, false}) {
    const std::string port = std::to_string(free_port());
    const std::vector<std::string> extra = {"--max-restarts",      "1", "--rdzv-timeout", comes_back ? "60" : "3",
                                            "--heartbeat-timeout", "5"};
    auto first = launch_on(hosts, 0, port, "2", "loop-then-all", extra);
    auto second = launch_on(hosts, 1, port, "2", "loop-then-all", extra);
    ASSERT_TRUE(all_looping({first.get(), second.get()}, 4)) << first->stderr_text() << second->stderr_text();
    kill(second->pid(), SIGKILL);
    ASSERT_TRUE(second->wait_for_exit(std::chrono::seconds(5)));
    if (comes_back) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      auto again = launch_on(hosts, 1, port, "2", "loop-then-all", extra);
      ASSERT_TRUE(first->wait_for_exit(std::chrono::seconds(120)))
          << first->stderr_text() << first->stdout_text() << "node 1, started again:\n"
          << again->stderr_text() << process_list();
      ASSERT_TRUE(again->wait_for_exit(std::chrono::seconds(30))) << again->stderr_text();
      EXPECT_EQ(first->exit_code(), 0) << first->stdout_text() << first->stderr_text();
      EXPECT_EQ(again->exit_code(), 0) << again->stdout_text() << again->stderr_text();
      EXPECT_TRUE(contains(first->stderr_text(), "lockstep run: restart 1 of 1: ")) << first->stderr_text();
      const std::string all = first->stdout_text() + again->stdout_text();
      for (int r = 0; r < 4; ++r) {
        EXPECT_TRUE(contains(all, "rank " + std::to_string(r) + " of 4 (local " + std::to_string(r % 2) +
                                      " of 2, gloo, shm+gloo): all collectives correct"))
            << all;
      }
    } else {
      ASSERT_TRUE(first->wait_for_exit(std::chrono::seconds(30)))
          << first->stderr_text() << first->stdout_text() << process_list();
      EXPECT_NE(first->exit_code(), 0);
      EXPECT_TRUE(contains(first->stderr_text(), "node 1 did not come back for restart 1 within 3 s (--rdzv-timeout)"))
          << first->stderr_text();
    }
  }
}

// A host cut off from the network, its processes still running: the other host's launcher
// names it within the heartbeat timeout (its workers would wait for their collectives'
// 60 s) and ends the job.
TEST(NamespacedHosts, AHostCutOffIsNamedWithinTheHeartbeatTimeout) {
  NetworkHosts hosts;
  if (!hosts.available()) GTEST_SKIP() << hosts.why_not();
  const std::string port = std::to_string(free_port());
  auto first = launch_on(hosts, 0, port, "2", "loop-and-fail", {"--heartbeat-timeout", "3"});
  auto second = launch_on(hosts, 1, port, "2", "loop-and-fail", {"--heartbeat-timeout", "3"});
  ASSERT_TRUE(all_looping({first.get(), second.get()}, 4)) << first->stderr_text() << second->stderr_text();
  const auto cut = Clock::now();
  hosts.cut_off(1);
  ASSERT_TRUE(first->wait_for_exit(std::chrono::seconds(30))) << first->stderr_text();
  EXPECT_LT(Clock::now() - cut, std::chrono::seconds(3 + 10)) << first->stderr_text();
  EXPECT_NE(first->exit_code(), 0);
  EXPECT_TRUE(contains(first->stderr_text(), "node 1 (on ")) << first->stderr_text();
  EXPECT_TRUE(
      contains(first->stderr_text(), ") stopped answering for 3 s: its launcher is gone or cut off from node 0"))
      << first->stderr_text();
}

TEST(NamespacedHosts, MismatchedWorkerCountsFailWithinTenSecondsNamingBoth) {
  NetworkHosts hosts;
  if (!hosts.available()) GTEST_SKIP() << hosts.why_not();
  const std::string port = std::to_string(free_port());
  const auto started = Clock::now();
  auto first = launch_on(hosts, 0, port, "2", "all");
  auto second = launch_on(hosts, 1, port, "3", "all");
  for (auto* node : {first.get(), second.get()}) {
    ASSERT_TRUE(node->wait_for_exit(std::chrono::seconds(30)));
    EXPECT_EQ(node->exit_code(), 2) << node->stderr_text();
    EXPECT_EQ(node->stdout_text(), "");  // no worker started
  }
  EXPECT_LT(Clock::now() - started, std::chrono::seconds(10));
  EXPECT_TRUE(contains(first->stderr_text(), "this launcher, node 0, has -n 2 but node 1 (on "))
      << first->stderr_text();
  EXPECT_TRUE(contains(first->stderr_text(), ") has -n 3; every node needs the same -n")) << first->stderr_text();
  EXPECT_TRUE(contains(second->stderr_text(), "this launcher, node 1, has -n 3 but node 0 (on "))
      << second->stderr_text();
  EXPECT_TRUE(contains(second->stderr_text(), ") has -n 2; every node needs the same -n")) << second->stderr_text();
}

}  // namespace
}  // namespace lockstep::testing
