// lockstep under a real Slurm (tests/support/slurm_cluster.*: slurmctld and two slurmd on two
// namespaced hosts, n1 and n2) and under Kubernetes' PyTorchJob contract, as users run them:
// srun straight to the workers, srun to one launcher per node, preemption and requeue, two
// jobs given one port, and bad Slurm variables.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "support/network_hosts.h"
#include "support/slurm_cluster.h"
#include "support/run_output.h"
#include "support/tool_process.h"
#include "support/world.h"
#include "train/weight_lines.h"

namespace lockstep::testing {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::chrono::seconds kJobBound{180};

#define SKIP_WITHOUT_SLURM(cluster) \
  if (!(cluster).available()) GTEST_SKIP() << "no Slurm here: " << (cluster).why_not()

std::string words(const std::vector<std::string>& command) {
  std::string line;
  for (const auto& word : command) line += (line.empty() ? "" : " ") + word;
  return line;
}

// A small `lockstep train` job: 512 examples, so 4 steps an epoch on 4 workers.
std::vector<std::string> small_train(const std::string& out, int epochs, std::vector<std::string> extra = {}) {
  std::vector<std::string> command = {LOCKSTEP_TOOL,    "train",
                                      "--limit",        "512",
                                      "--val-limit",    "256",
                                      "--batch-size",   "32",
                                      "--log-every",    "4",
                                      "--warmup-steps", "4",
                                      "--epochs",       std::to_string(epochs),
                                      "--out",          out};
  command.insert(command.end(), extra.begin(), extra.end());
  return command;
}

void expect_same_parameters(const std::string& run, const std::string& reference) {
  train::expect_same_weights(train::checkpoint_weights(train::newest_checkpoint(reference)),
                             train::checkpoint_weights(train::newest_checkpoint(run)));
}

// Waits until the file at `path` holds `part`; false after `timeout`.
bool wait_for_text(const std::string& path, const std::string& part, std::chrono::seconds timeout) {
  for (const auto deadline = Clock::now() + timeout; Clock::now() < deadline;) {
    if (contains(read_file(path), part)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// Runs a job of `script` to its end; its output file's text.
std::string run_job(const SlurmCluster& cluster, const std::string& name, const std::string& script,
                    std::vector<std::string> options, const Env& env = {}) {
  const std::string output = cluster.folder() + "/" + name + ".out";
  options.insert(options.end(), {"-o", output, "-J", name});
  const std::string id = cluster.submit(script, options, env);
  const std::string state = cluster.wait_for_state(id, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, kJobBound);
  EXPECT_EQ(state, "COMPLETED") << name << ":\n" << read_file(output);
  EXPECT_EQ(cluster.job(id)["ExitCode"], "0:0") << name << ":\n" << read_file(output);
  return read_file(output);
}

// `srun` straight to a user's own program: init() meets on the first node without
// MASTER_ADDR, and a node's two tasks share memory as under `lockstep run`.
TEST(Slurm, SrunStraightToAProgramMeetsWithoutMasterAddr) {
  SlurmCluster cluster;
  SKIP_WITHOUT_SLURM(cluster);
  const std::string output =
      run_job(cluster, "collectives", "srun --kill-on-bad-exit=1 " + words({COLLECTIVES_WORKER, "all"}),
              {"-N", "2", "--ntasks-per-node", "2"});
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_TRUE(contains(output, "rank " + std::to_string(rank) + " of 4 (local " + std::to_string(rank % 2) +
                                     " of 2, gloo, shm+gloo): all collectives correct"))
        << output;
  }
  EXPECT_EQ(count_lines(output), 4u) << output;
}

// `lockstep train` through srun straight to the workers, through srun to one `lockstep run
// -n 2` per node, and through srun to one `lockstep train -n 2` per node, ends with the
// validation losses (every digit) and parameters of the same job on the same hosts without
// Slurm (two PyTorchJob-style pods, each one `lockstep train` starting its 2 workers).
TEST(Slurm, TrainThroughSrunEndsAsTheSameJobOnTheSameHostsWithoutSlurm) {
  SlurmCluster cluster;
  SKIP_WITHOUT_SLURM(cluster);
  const std::string folder = cluster.folder();

  // Outside Slurm: each host a pod of the training operator, 2 processes each (under the
  // machine's own host name: `ip netns exec` keeps it).
  std::vector<std::unique_ptr<ToolProcess>> pods;
  for (int node = 0; node < 2; ++node) {
    pods.push_back(std::make_unique<ToolProcess>(
        cluster.on(node, small_train(folder + "/pods", 2)),
        std::vector<std::string>{"MASTER_ADDR=" + cluster.address(0), "MASTER_PORT=29400", "PET_NNODES=2",
                                 "PET_NPROC_PER_NODE=2", "PET_NODE_RANK=" + std::to_string(node),
                                 "RANK=" + std::to_string(node), "WORLD_SIZE=2"},
        [](const std::string& entry) { return !is_launcher_variable(entry); }));
  }
  for (auto& pod : pods) {
    ASSERT_TRUE(pod->wait_for_exit(kJobBound)) << pod->stdout_text() << pod->stderr_text();
    EXPECT_EQ(pod->exit_code(), 0) << pod->stdout_text() << pod->stderr_text();
  }
  const std::string by_pods = pods[0]->stdout_text();
  ASSERT_EQ(validation_lines(by_pods).size(), 2u) << by_pods;

  const std::string straight =
      run_job(cluster, "straight", "srun --kill-on-bad-exit=1 " + words(small_train(folder + "/straight", 2)),
              {"-N", "2", "--ntasks-per-node", "2"});
  const std::vector<std::string> one_per_node = {"-N", "2", "--ntasks-per-node", "1"};
  std::vector<std::string> run_per_node = {"srun", LOCKSTEP_TOOL, "run", "-n", "2", "--"};
  for (const auto& word : small_train(folder + "/run-per-node", 2)) run_per_node.push_back(word);
  const std::string launched = run_job(cluster, "run-per-node", words(run_per_node), one_per_node);
  const std::string per_node =
      run_job(cluster, "per-node", "srun " + words(small_train(folder + "/per-node", 2, {"-n", "2"})), one_per_node);
  EXPECT_TRUE(contains(straight, "ranks on hosts: 0-1 n1, 2-3 n2")) << straight;
  EXPECT_TRUE(contains(per_node, "ranks on hosts: 0-1 n1, 2-3 n2")) << per_node;
  EXPECT_TRUE(contains(launched, "ranks on hosts: 0-1 n1, 2-3 n2")) << launched;
  EXPECT_EQ(validation_lines(straight), validation_lines(by_pods)) << straight;
  EXPECT_EQ(validation_lines(per_node), validation_lines(by_pods)) << per_node;
  EXPECT_EQ(validation_lines(launched), validation_lines(by_pods)) << launched;
  expect_same_parameters(folder + "/run-per-node", folder + "/pods");
  expect_same_parameters(folder + "/straight", folder + "/pods");
  expect_same_parameters(folder + "/per-node", folder + "/pods");
}

// sbatch --requeue: SIGUSR1 to the tasks (what --signal=USR1@T sends) writes a checkpoint
// and training goes on; `scontrol requeue` stops the job, which starts again with
// SLURM_RESTART_COUNT=1 and, from the same script, resumes from the newest checkpoint and
// ends with the parameters of a job that was never interrupted.
TEST(Slurm, ARequeuedJobResumesFromItsCheckpointAndEndsBitExactly) {
  SlurmCluster cluster;
  SKIP_WITHOUT_SLURM(cluster);
  const std::string folder = cluster.folder();
  const std::vector<std::string> shape = {"-N", "2", "--ntasks-per-node", "2"};
  // 40 epochs of 4 steps: long enough that the signal lands mid-run however loaded the machine is.
  const auto job = [&](const std::string& out) { return "srun " + words(small_train(out, 40, {"--keep", "100"})); };
  run_job(cluster, "whole", job(folder + "/whole"), shape);

  const std::string output = folder + "/requeued.out";
  std::vector<std::string> options = shape;
  options.insert(options.end(), {"--requeue", "--open-mode=append", "-o", output});
  const std::string id = cluster.submit(job(folder + "/requeued"), options);
  ASSERT_TRUE(wait_for_text(output, "step 8/160", std::chrono::seconds(120))) << read_file(output);
  ASSERT_EQ(cluster.client({"scancel", "--signal=USR1", id}).exit_code, 0);
  ASSERT_TRUE(wait_for_text(output, "that SIGUSR1 asked for; training goes on", std::chrono::seconds(60)))
      << read_file(output);
  ASSERT_EQ(cluster.client({"scontrol", "requeue", id}).exit_code, 0);

  const std::string state = cluster.wait_for_state(id, {"COMPLETED", "FAILED", "CANCELLED"}, kJobBound);
  const std::string text = read_file(output);
  ASSERT_EQ(state, "COMPLETED") << text;
  EXPECT_EQ(cluster.job(id)["Restarts"], "1") << text;
  EXPECT_FALSE(contains(text, "stopped after step 160")) << text;
  // Resumed, not started over: the second run logs only steps after the checkpoint.
  size_t first_steps = 0;
  for (size_t at = text.find("step 4/160"); at != std::string::npos; at = text.find("step 4/160", at + 1))
    ++first_steps;
  EXPECT_EQ(first_steps, 1u) << text;
  expect_same_parameters(folder + "/requeued", folder + "/whole");
}

// Two jobs given one MASTER_PORT on one node: the second fails within 10 s of its start (its run
// time: how long Slurm queues it is not lockstep's) naming both jobs,
// and the first ends with the validation losses of the same job run alone.
TEST(Slurm, ASecondJobOnTheSamePortFailsFastAndTheFirstEndsAsIfAlone) {
  SlurmCluster cluster;
  SKIP_WITHOUT_SLURM(cluster);
  const std::string folder = cluster.folder();
  const std::vector<std::string> shape = {"-N", "2", "--ntasks-per-node", "2"};
  const auto job = [&](const std::string& out) { return "srun " + words(small_train(out, 20)); };
  const std::string alone = run_job(cluster, "alone", job(folder + "/alone"), shape);

  const Env port = {{"MASTER_PORT", "29700"}};
  std::vector<std::string> first_options = shape;
  first_options.insert(first_options.end(), {"-o", folder + "/first.out"});
  const std::string first = cluster.submit(job(folder + "/first"), first_options, port);
  ASSERT_TRUE(wait_for_text(folder + "/first.out", "step 4/80", std::chrono::seconds(120)))
      << read_file(folder + "/first.out");

  // One task per node: rank 0 finds the port taken, rank 1 reaches the first job's store. Four
  // tasks would only add libtorch start-ups (about 1 s of CPU each) beside the first job's four
  // training ranks, and on a loaded 2-core machine that alone came to 10 s.
  const std::vector<std::string> second_options = {"-N", "2", "--ntasks-per-node", "1", "-o", folder + "/second.out"};
  const std::string second = cluster.submit("srun " + words({COLLECTIVES_WORKER, "init-only"}), second_options, port);
  EXPECT_EQ(cluster.wait_for_state(second, {"FAILED", "COMPLETED", "CANCELLED"}, std::chrono::seconds(30)), "FAILED");
  const std::chrono::seconds second_run_time = cluster.run_time(second);
  EXPECT_LT(second_run_time, std::chrono::seconds(10)) << second_run_time.count() << " s";
  const std::string refused = read_file(folder + "/second.out");
  EXPECT_TRUE(contains(refused, " of job " + second +
                                    " reached the store at MASTER_ADDR=n1 MASTER_PORT=29700, which job " + first +
                                    " holds: two jobs were given one port"))
      << refused;

  EXPECT_EQ(cluster.wait_for_state(first, {"COMPLETED", "FAILED", "CANCELLED"}, kJobBound), "COMPLETED")
      << read_file(folder + "/first.out");
  EXPECT_EQ(validation_lines(read_file(folder + "/first.out")), validation_lines(alone));
  expect_same_parameters(folder + "/first", folder + "/alone");
}

// Slurm variables that cannot be right (set by hand over srun's): one line naming the
// variable and its value, on every rank, within seconds.
TEST(Slurm, BadSlurmVariablesAreOneLineOnEveryRankWithinSeconds) {
  SlurmCluster cluster;
  SKIP_WITHOUT_SLURM(cluster);
  const std::string folder = cluster.folder();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"SLURM_STEP_NODELIST='n[1-'",
       "lockstep: SLURM_STEP_NODELIST='n[1-' is not a Slurm node list: a '[' without its ']'"},
      {"SLURM_STEP_NODELIST='nowhere[1-2]'",
       "lockstep: SLURM_STEP_NODELIST='nowhere[1-2]': its first node 'nowhere1', where rank 0 hosts the store, does "
       "not resolve ("},
      {"SLURM_NTASKS=3",
       "lockstep: SLURM_NTASKS=3, but SLURM_STEP_TASKS_PER_NODE='2(x2)' starts 4 tasks; srun sets both, so unset the "
       "one set by hand"},
  };
  int number = 0;
  for (const auto& [setting, message] : cases) {
    const std::string name = "bad-" + std::to_string(++number);
    const std::string output = folder + "/" + name + ".out";
    const std::string id = cluster.submit("srun env " + setting + " " + words({COLLECTIVES_WORKER, "init-only"}),
                                          {"-N", "2", "--ntasks-per-node", "2", "-o", output});
    EXPECT_EQ(cluster.wait_for_state(id, {"FAILED", "COMPLETED", "CANCELLED"}, std::chrono::seconds(30)), "FAILED")
        << setting;
    const std::chrono::seconds run_time = cluster.run_time(id);
    EXPECT_LT(run_time, std::chrono::seconds(10)) << setting << ": " << run_time.count() << " s";
    const std::string text = read_file(output);
    size_t ranks = 0;
    for (const std::string& line : lines_of(text)) ranks += line.rfind(message, 0) == 0 ? 1 : 0;
    EXPECT_EQ(ranks, 4u) << setting << ":\n" << text;
  }
}

// The training operator's contract: two pods (namespaced hosts), each `lockstep run` given
// exactly the operator's variables (RANK is the pod's index there), start 2 processes each
// with the right global ranks, and every collective is exact.
TEST(PyTorchJob, TwoPodsOfTwoProcessesGetTheirRanksAndExactCollectives) {
  NetworkHosts hosts;
  if (!hosts.available()) GTEST_SKIP() << hosts.why_not();
  std::vector<std::unique_ptr<ToolProcess>> pods;
  for (int pod = 0; pod < 2; ++pod) {
    pods.push_back(std::make_unique<ToolProcess>(
        hosts.on(pod, {LOCKSTEP_TOOL, "run", "--", COLLECTIVES_WORKER, "all"}),
        std::vector<std::string>{"MASTER_ADDR=" + hosts.address(0), "MASTER_PORT=23456", "PET_NNODES=2",
                                 "PET_NPROC_PER_NODE=2", "PET_NODE_RANK=" + std::to_string(pod),
                                 "RANK=" + std::to_string(pod), "WORLD_SIZE=2", "LOCKSTEP_TIMEOUT=60"},
        [](const std::string& entry) { return !is_launcher_variable(entry); }));
  }
  for (int pod = 0; pod < 2; ++pod) {
    ASSERT_TRUE(pods[pod]->wait_for_exit(std::chrono::seconds(120))) << pods[pod]->stderr_text();
    EXPECT_EQ(pods[pod]->exit_code(), 0) << pods[pod]->stdout_text() << pods[pod]->stderr_text();
    for (int local = 0; local < 2; ++local) {
      const int rank = pod * 2 + local;
      EXPECT_TRUE(contains(pods[pod]->stdout_text(), "[rank " + std::to_string(rank) + "] rank " +
                                                         std::to_string(rank) + " of 4 (local " +
                                                         std::to_string(local) + " of 2, gloo, "))
          << pods[pod]->stdout_text();
    }
  }
}

}  // namespace
}  // namespace lockstep::testing
