// `lockstep train --recovery live` on two hosts, each a network namespace with its own
// address and its own `lockstep run` of two workers: a host cut off, and the nodes of a node
// range (--nnodes MIN:MAX) coming, going and coming back, while the other host's workers
// train on in the same processes.
#include <signal.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "live_jobs.h"
#include "support/network_hosts.h"
#include "support/tool_process.h"
#include "support/wait_for.h"
#include "support/world.h"
#include "trained_steps.h"
#include "weight_lines.h"
#include "worker_processes.h"

namespace lockstep::train {
namespace {

using testing::contains;
using testing::TemporaryDirectory;
using testing::wait_for;

// Host `host`'s `lockstep run` of two workers (`nnodes`: "2", or a range) under live recovery,
// node 0 hosting the store, training `live_job(out, extra)` with worker 0 slowed by `slow`.
std::unique_ptr<testing::ToolProcess> start_node(const testing::NetworkHosts& hosts, int host, const std::string& port,
                                                 const std::string& nnodes, const std::string& out,
                                                 const std::vector<std::string>& extra, const std::string& slow) {
  std::vector<std::string> command = {LOCKSTEP_TOOL, "run", "-n", "2", "--nnodes", nnodes, "--recovery", "live"};
  command.insert(command.end(), {"--node-rank", std::to_string(host), "--master-addr", hosts.address(0),
                                 "--master-port", port, "--heartbeat-timeout", "3", "--"});
  for (const auto& part : live_job(out, extra)) command.push_back(part);
  return std::make_unique<testing::ToolProcess>(hosts.on(host, command),
                                                std::vector<std::string>{slow, "LOCKSTEP_TIMEOUT=60"});
}

// Two hosts (network namespaces) of two workers, each host with its own launcher; host 1's
// link is cut mid-training. Its workers' connections never close: host 0's launcher finds
// host 1's launcher silent for the heartbeat timeout and marks its workers ended, which
// aborts the collective host 0's workers wait in (not its 60 s timeout); they regroup
// without host 1 and train the job to its end in the same processes.
TEST(LiveHosts, AHostCutOffLeavesTheOtherHostsWorkersTrainingOnInTheSameProcesses) {
  testing::NetworkHosts hosts;
  if (!hosts.available()) GTEST_SKIP() << hosts.why_not();
  TemporaryDirectory dir;
  const std::string out = dir.path() + "/live";
  const std::string port = std::to_string(testing::free_port());
  std::vector<std::unique_ptr<testing::ToolProcess>> nodes;
  for (int host = 0; host < 2; ++host) nodes.push_back(start_node(hosts, host, port, "2", out, {}, kSlowSteps));
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

  // The replay, on two nodes of two workers until the cut, has the live run's bits.
  const std::string replayed = replay(dir.path() + "/replay", went_on_after(first.stdout_text()), 4, 2);
  EXPECT_EQ(trained_steps(out), trained_steps(dir.path() + "/replay"));
  expect_equal_parameters(replayed, newest_checkpoint(out));
}

// --nnodes 1:2 on two hosts of two workers: host 0 starts the job alone; host 1's workers
// join it at a step's end; host 1's launcher is killed, its workers with it, and the others
// go on; host 1's launcher, started again, joins once more. Host 0's workers train throughout
// in the same processes, and the run ends with the bits of the replay of its memberships.
TEST(LiveHosts, NodesOfANodeRangeComeGoAndComeBackWhileTheOthersTrainOn) {
  testing::NetworkHosts hosts;
  if (!hosts.available()) GTEST_SKIP() << hosts.why_not();
  TemporaryDirectory dir;
  const std::string out = dir.path() + "/live";
  const std::string port = std::to_string(testing::free_port());
  const std::vector<std::string> epochs = {"--epochs", "6"};
  // Slow enough that the job outlasts two joins of host 1 on a loaded machine: with 200 ms,
  // a launcher started again (libtorch loaded three times, 3 s to tell it from the one
  // before) found the job done after its last 33 steps, 10 s.
  const std::string slow = "LOCKSTEP_TEST_SLOW_RANK=0:compute:400";
  auto node = [&](int host) { return start_node(hosts, host, port, "1:2", out, epochs, slow); };
  auto first = node(0);
  ASSERT_TRUE(wait_for([&] { return contains(first->stdout_text(), "step 4/"); }))
      << first->stdout_text() << first->stderr_text();
  const std::vector<pid_t> workers = children_of(first->pid());
  ASSERT_EQ(workers.size(), 2u);
  auto second = node(1);
  auto sized = [&](int size) {
    return wait_for([&] {
      const auto found = generations(first->stdout_text());
      return !found.empty() && found.back().first == size;
    });
  };
  ASSERT_TRUE(sized(4)) << first->stdout_text() << first->stderr_text() << second->stderr_text();
  kill(second->pid(), SIGKILL);
  ASSERT_TRUE(second->wait_for_exit(std::chrono::seconds(10)));
  ASSERT_TRUE(sized(2)) << first->stdout_text() << first->stderr_text();
  second = node(1);
  ASSERT_TRUE(sized(4)) << first->stdout_text() << first->stderr_text() << second->stderr_text();
  EXPECT_EQ(children_of(first->pid()), workers);  // the same processes
  ASSERT_TRUE(first->wait_for_exit(std::chrono::seconds(180)));
  ASSERT_EQ(first->exit_code(), 0) << first->stdout_text() << first->stderr_text();
  ASSERT_TRUE(second->wait_for_exit(std::chrono::seconds(30)));
  EXPECT_EQ(second->exit_code(), 0) << second->stderr_text();
  const auto changes = generations(first->stdout_text());
  EXPECT_EQ(changes.back().first, 4) << first->stdout_text();
  expect_every_sample_once_and_members_alike(*first, out, 6);

  // Replayed with four workers as two nodes of two, as host 0's and host 1's, whose sums the
  // transport adds: the live run's bits (four on one node sum in another order, and 66 steps
  // of training took that rounding past 1e-6 of the parameters' size). Three, when host 1's
  // workers were admitted one at a time, sum alike on one node.
  const std::string replayed = dir.path() + "/replay";
  replay_memberships(replayed, 2, changes, epochs, 2);
  EXPECT_EQ(trained_steps(out), trained_steps(replayed));
  expect_equal_parameters(newest_checkpoint(replayed), newest_checkpoint(out));
}

}  // namespace
}  // namespace lockstep::train
