// `lockstep run` as users meet it: the built tool starts real probe workers (launch_probe.cpp).
// Every wait is bounded so that a launcher that hangs fails the test instead of stalling it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>

#include <gtest/gtest.h>
#include <torch/version.h>

#include "support/tool_process.h"
#include "support/world.h"

namespace lockstep::testing {
namespace {

std::vector<std::string> lockstep_run(const std::vector<std::string>& options, const std::vector<std::string>& steps) {
  std::vector<std::string> command = {LOCKSTEP_TOOL, "run"};
  command.insert(command.end(), options.begin(), options.end());
  command.push_back("--");
  command.push_back(LAUNCH_PROBE);
  command.insert(command.end(), steps.begin(), steps.end());
  return command;
}

// What rank `rank` printed as NAME=value in launch_probe's `env` step ("<missing>" if nothing).
std::string printed_value(const std::string& output, int rank, const std::string& name) {
  std::string start = "[rank " + std::to_string(rank) + "] " + name + "=";
  for (const std::string& line : lines_of(output)) {
    if (line.rfind(start, 0) == 0) {
      return line.substr(start.size());
    }
  }
  return "<missing>";
}

TEST(LockstepRun, EnvAndPrefix) {
  std::string probe_directory = std::filesystem::path(LAUNCH_PROBE).parent_path();
  // PROGRAM is found through PATH; variables of an outer MPI job must not leak into workers.
  ToolProcess launcher({LOCKSTEP_TOOL, "run", "-n", "3", "--", "launch_probe", "env", "store"},
                       {"PATH=" + probe_directory + ":" + std::getenv("PATH"), "OMPI_COMM_WORLD_RANK=7",
                        "OMPI_COMM_WORLD_SIZE=9", "PMIX_RANK=7"});
  ASSERT_TRUE(launcher.wait_for_exit(kExitBound)) << launcher.stderr_text();
  EXPECT_EQ(launcher.exit_code(), 0) << launcher.stderr_text();

  std::string output = launcher.stdout_text();
  for (const std::string& line : lines_of(output)) {
    EXPECT_EQ(line.rfind("[rank ", 0), 0u) << "unprefixed line: " << line;
  }
  std::string port = printed_value(output, 0, "MASTER_PORT");
  EXPECT_GT(std::atoi(port.c_str()), 0) << output;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(printed_value(output, rank, "RANK"), std::to_string(rank)) << output;
    EXPECT_EQ(printed_value(output, rank, "WORLD_SIZE"), "3");
    EXPECT_EQ(printed_value(output, rank, "LOCAL_RANK"), std::to_string(rank));
    EXPECT_EQ(printed_value(output, rank, "LOCAL_WORLD_SIZE"), "3");
    EXPECT_EQ(printed_value(output, rank, "GROUP_RANK"), "0");
    EXPECT_EQ(printed_value(output, rank, "MASTER_ADDR"), "127.0.0.1");
    EXPECT_EQ(printed_value(output, rank, "MASTER_PORT"), port);
    EXPECT_EQ(printed_value(output, rank, "LOCKSTEP_USE_AGENT_STORE"), "1");
    EXPECT_EQ(printed_value(output, rank, "LOCKSTEP_BACKEND"), "<unset>");
    EXPECT_EQ(printed_value(output, rank, "OMPI_COMM_WORLD_RANK"), "<unset>");
    EXPECT_EQ(printed_value(output, rank, "PMIX_RANK"), "<unset>");
    EXPECT_TRUE(contains(output, "[rank " + std::to_string(rank) + "] store ok\n")) << output;
  }
}

// torchrun's command lines work as they are.
TEST(LockstepRun, TakesTorchrunsSpellings) {
  const Finished standalone = run_process(
      lockstep_run({"--nproc_per_node", "2", "--standalone", "--max_restarts", "0", "--rdzv-id", "job-7"}, {"env"}), {},
      kExitBound);
  ASSERT_EQ(standalone.exit_code, 0) << standalone.output;
  const int port = free_port();
  const Finished at_endpoint =
      run_process(lockstep_run({"--nproc_per_node=2", "--nnodes=1", "--node_rank=0", "--rdzv_backend=c10d",
                                "--rdzv_endpoint=127.0.0.1:" + std::to_string(port)},
                               {"env"}),
                  {}, kExitBound);
  ASSERT_EQ(at_endpoint.exit_code, 0) << at_endpoint.output;
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(printed_value(standalone.output, rank, "RANK"), std::to_string(rank)) << standalone.output;
    EXPECT_EQ(printed_value(standalone.output, rank, "WORLD_SIZE"), "2") << standalone.output;
    EXPECT_EQ(printed_value(standalone.output, rank, "LOCKSTEP_JOB_ID"), "job-7") << standalone.output;
    EXPECT_EQ(printed_value(at_endpoint.output, rank, "WORLD_SIZE"), "2") << at_endpoint.output;
    EXPECT_EQ(printed_value(at_endpoint.output, rank, "MASTER_ADDR"), "127.0.0.1") << at_endpoint.output;
    EXPECT_EQ(printed_value(at_endpoint.output, rank, "MASTER_PORT"), std::to_string(port)) << at_endpoint.output;
  }
}

// Workers keep freed memory for their next step (glibc's MALLOC_*_ variables) unless the
// user turns it off or chose an allocator's settings of their own, which are kept as given.
TEST(LockstepRun, WorkersKeepFreedMemoryUnlessRefusedOrChosen) {
  const std::vector<std::string> names = {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_"};
  const auto values = [&](const std::vector<std::string>& options, const Env& environment) {
    const Finished ran = run_process(lockstep_run(options, {"env"}), environment, kExitBound);
    EXPECT_EQ(ran.exit_code, 0) << ran.output;
    std::vector<std::string> found;
    for (int rank = 0; rank < 2; ++rank) {
      for (const auto& name : names) found.push_back(printed_value(ran.output, rank, name));
    }
    return found;
  };
  const std::vector<std::string> kept = {"4294967296", "4294967296", "268435456"};
  const std::vector<std::string> unset(3, "<unset>");
  const auto twice = [](const std::vector<std::string>& three) {
    std::vector<std::string> both = three;
    both.insert(both.end(), three.begin(), three.end());
    return both;
  };
  EXPECT_EQ(values({"-n", "2"}, {}), twice(kept));
  EXPECT_EQ(values({"-n", "2", "--no-malloc-tuning"}, {}), twice(unset));
  EXPECT_EQ(values({"-n", "2"}, {{"LOCKSTEP_MALLOC_TUNING", "0"}}), twice(unset));
  EXPECT_EQ(values({"-n", "2"}, {{"MALLOC_TOP_PAD_", "1048576"}}), twice({"<unset>", "<unset>", "1048576"}));
  EXPECT_EQ(values({"-n", "2"}, {{"GLIBC_TUNABLES", "glibc.malloc.trim_threshold=65536"}}), twice(unset));
}

// `lockstep` alone prints its help, which names every command.
TEST(LockstepCommand, AloneItPrintsItsHelp) {
  const Finished ran = run_process({LOCKSTEP_TOOL}, {}, std::chrono::seconds(20));
  EXPECT_EQ(ran.exit_code, 0) << ran.output;
  for (const std::string command : {"run", "train", "eval", "datasets", "data", "plot", "export", "timeline"}) {
    EXPECT_TRUE(contains(ran.output, "\n  " + command + " ")) << command << "\n" << ran.output;
  }
}

// K + 1 failures end the job with the last one's status and cause; each restart starts every
// worker afresh and tells it which attempt it is.
TEST(LockstepRun, MaxRestartsRestartsEveryWorkerUntilTheBudgetIsSpent) {
  ToolProcess launcher(lockstep_run({"-n", "2", "--max-restarts", "2"}, {"env", "exit-on-rank", "1", "3"}));
  ASSERT_TRUE(launcher.wait_for_exit(kExitBound)) << launcher.stderr_text();
  EXPECT_EQ(launcher.exit_code(), 3) << launcher.stderr_text();
  const std::string errors = launcher.stderr_text();
  EXPECT_TRUE(contains(errors, "lockstep run: restart 1 of 2: starting every worker afresh after rank 1 (pid "))
      << errors;
  EXPECT_TRUE(contains(errors, "lockstep run: restart 2 of 2: starting every worker afresh after rank 1 (pid "))
      << errors;
  EXPECT_TRUE(contains(errors,
                       "lockstep run: the job failed 3 times, which --max-restarts 2 allows no more; "
                       "the last failure: rank 1 (pid "))
      << errors;
  EXPECT_TRUE(contains(errors, ") exited with status 3")) << errors;
  const std::string output = launcher.stdout_text();
  // Rank 1, which fails, prints before it does; rank 0 may be stopped before it prints.
  for (const std::string attempt : {"0", "1", "2"}) {
    EXPECT_TRUE(contains(output, "[rank 1] LOCKSTEP_RESTART_COUNT=" + attempt)) << output;
  }
  EXPECT_FALSE(contains(output, "LOCKSTEP_RESTART_COUNT=3")) << output;

  // Success, or a launcher asked to stop, is not restarted.
  ToolProcess fine(lockstep_run({"-n", "2", "--max-restarts", "2"}, {"env"}));
  ASSERT_TRUE(fine.wait_for_exit(kExitBound));
  EXPECT_EQ(fine.exit_code(), 0) << fine.stderr_text();
  EXPECT_FALSE(contains(fine.stderr_text(), "restart")) << fine.stderr_text();
}

TEST(LockstepRun, SecondNodeNumbersItsRanksAfterTheFirst) {
  const std::string port = std::to_string(free_port());
  ToolProcess first(lockstep_run({"-n", "2", "--nnodes", "2", "--node-rank", "0", "--master-addr", "127.0.0.1",
                                  "--master-port", port, "--backend", "gloo"},
                                 {"env"}));
  ToolProcess launcher(lockstep_run({"-n", "2", "--nnodes", "2", "--node-rank", "1", "--master-addr", "127.0.0.1",
                                     "--master-port", port, "--backend", "gloo"},
                                    {"env"}));
  ASSERT_TRUE(first.wait_for_exit(kExitBound)) << first.stderr_text();
  ASSERT_TRUE(launcher.wait_for_exit(kExitBound)) << launcher.stderr_text();
  EXPECT_EQ(launcher.exit_code(), 0) << launcher.stderr_text();
  std::string output = launcher.stdout_text();
  for (int local_rank = 0; local_rank < 2; ++local_rank) {
    int rank = 2 + local_rank;
    EXPECT_EQ(printed_value(output, rank, "RANK"), std::to_string(rank)) << output;
    EXPECT_EQ(printed_value(output, rank, "LOCAL_RANK"), std::to_string(local_rank));
    EXPECT_EQ(printed_value(output, rank, "WORLD_SIZE"), "4");
    EXPECT_EQ(printed_value(output, rank, "LOCAL_WORLD_SIZE"), "2");
    EXPECT_EQ(printed_value(output, rank, "GROUP_RANK"), "1");
    EXPECT_EQ(printed_value(output, rank, "MASTER_PORT"), port);
    EXPECT_EQ(printed_value(output, rank, "LOCKSTEP_BACKEND"), "gloo");
  }
}

// Node `node` of a job of two nodes of one worker each on this machine, running `steps`.
std::unique_ptr<ToolProcess> node_of_two(int node, const std::string& port, const std::vector<std::string>& steps,
                                         const std::vector<std::string>& extra = {}) {
  std::vector<std::string> options = {"-n",
                                      "1",
                                      "--nnodes",
                                      "2",
                                      "--node-rank",
                                      std::to_string(node),
                                      "--master-addr",
                                      "127.0.0.1",
                                      "--master-port",
                                      port,
                                      "--backend",
                                      "gloo"};
  options.insert(options.end(), extra.begin(), extra.end());
  return std::make_unique<ToolProcess>(lockstep_run(options, steps));
}

// Until `launcher` has started its worker (which wrote its pid file), or a bounded wait.
bool worker_started(const ToolProcess& launcher, const std::string& directory, int rank) {
  return !wait_for_pid_files(directory, rank + 1, std::chrono::seconds(30)).empty() && process_alive(launcher.pid());
}

TEST(LockstepRun, TwoLiveLaunchersWithOneNodeRankAreRefusedNamingTheFirst) {
  TemporaryDirectory dir;
  const std::string port = std::to_string(free_port());
  const std::vector<std::string> steps = {"pidfile", dir.path(), "sleep", "20"};
  auto first = node_of_two(0, port, steps);
  auto second = node_of_two(1, port, steps);
  ASSERT_TRUE(worker_started(*second, dir.path(), 1)) << second->stderr_text();
  auto duplicate = node_of_two(1, port, steps);
  ASSERT_TRUE(duplicate->wait_for_exit(kExitBound)) << duplicate->stderr_text();
  EXPECT_EQ(duplicate->exit_code(), 2) << duplicate->stderr_text();
  EXPECT_TRUE(contains(duplicate->stderr_text(), "--node-rank 1 is already taken by node 1 (on "))
      << duplicate->stderr_text();
  EXPECT_TRUE(process_alive(second->pid())) << "the first launcher of node 1 goes on";
}

// Node 1's launcher is killed, and started again before the job noticed (its workers do not
// talk to each other, and the heartbeat timeout is far off): the attempt it left fails at
// once, and both nodes run the next one.
TEST(LockstepRun, ALauncherStartedAgainBeforeTheJobNoticedItsLossRestartsTheJob) {
  TemporaryDirectory dir;
  const std::string port = std::to_string(free_port());
  const std::vector<std::string> steps = {"pidfile", dir.path(), "sleep-if-first", "60", "env"};
  const std::vector<std::string> restarts = {"--max-restarts", "1", "--heartbeat-timeout", "60"};
  auto first = node_of_two(0, port, steps, restarts);
  auto second = node_of_two(1, port, steps, restarts);
  ASSERT_TRUE(worker_started(*second, dir.path(), 1)) << second->stderr_text();
  kill(second->pid(), SIGKILL);
  ASSERT_TRUE(second->wait_for_exit(std::chrono::seconds(5)));
  auto again = node_of_two(1, port, steps, restarts);
  ASSERT_TRUE(again->wait_for_exit(kExitBound)) << again->stderr_text();
  ASSERT_TRUE(first->wait_for_exit(kExitBound)) << first->stderr_text();
  EXPECT_EQ(again->exit_code(), 0) << again->stderr_text();
  EXPECT_EQ(first->exit_code(), 0) << first->stderr_text();
  EXPECT_TRUE(contains(again->stderr_text(),
                       "lockstep run: restart 1 of 1: this node's launcher before this one is "
                       "gone"))
      << again->stderr_text();
  EXPECT_TRUE(contains(first->stderr_text(),
                       "lockstep run: restart 1 of 1: starting every worker afresh after node 1 "
                       "(on "))
      << first->stderr_text();
  EXPECT_TRUE(contains(first->stderr_text(), "): its launcher was started again")) << first->stderr_text();
  EXPECT_EQ(printed_value(first->stdout_text(), 0, "LOCKSTEP_RESTART_COUNT"), "1") << first->stdout_text();
  EXPECT_EQ(printed_value(again->stdout_text(), 1, "LOCKSTEP_RESTART_COUNT"), "1") << again->stdout_text();
  // Its workers are told why, as the other node's are.
  EXPECT_TRUE(
      contains(printed_value(again->stdout_text(), 1, "LOCKSTEP_RESTART_REASON"), "its launcher was started again"))
      << again->stdout_text();
  EXPECT_EQ(printed_value(again->stdout_text(), 1, "LOCKSTEP_RESTART_REASON"),
            printed_value(first->stdout_text(), 0, "LOCKSTEP_RESTART_REASON"));
}

TEST(LockstepRun, UnfinishedLastLineIsFlushedWhenTheWorkerEnds) {
  ToolProcess launcher(lockstep_run({"-n", "1"}, {"partial", "no newline at the end"}));
  ASSERT_TRUE(launcher.wait_for_exit(kExitBound));
  EXPECT_EQ(launcher.exit_code(), 0) << launcher.stderr_text();
  EXPECT_EQ(launcher.stdout_text(), "[rank 0] no newline at the end\n");
}

TEST(LockstepRun, StorePortInUseIsNamed) {
  int socket_fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(bind(socket_fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(listen(socket_fd, 1), 0);
  socklen_t length = sizeof address;
  getsockname(socket_fd, reinterpret_cast<sockaddr*>(&address), &length);
  std::string port = std::to_string(ntohs(address.sin_port));

  ToolProcess launcher(lockstep_run({"-n", "1", "--master-port", port}, {"env"}));
  ASSERT_TRUE(launcher.wait_for_exit(kExitBound));
  close(socket_fd);
  EXPECT_EQ(launcher.exit_code(), 1);
  EXPECT_EQ(launcher.stdout_text(), "");
  std::vector<std::string> error_lines = lines_of(launcher.stderr_text());
  ASSERT_EQ(error_lines.size(), 1u) << launcher.stderr_text();
  EXPECT_TRUE(contains(error_lines[0], "port " + port)) << error_lines[0];
}

// Each bad command line gets one line on stderr that names what to fix, and no workers.
struct BadCommandLine {
  std::string name;
  std::vector<std::string> arguments;
  int exit_code;
  std::string message;
};

void PrintTo(const BadCommandLine& command_line, std::ostream* out) { *out << command_line.name; }

class LockstepRunRejects : public ::testing::TestWithParam<BadCommandLine> {};

TEST_P(LockstepRunRejects, WithOneClearLine) {
  std::vector<std::string> command = {LOCKSTEP_TOOL};
  command.insert(command.end(), GetParam().arguments.begin(), GetParam().arguments.end());
  ToolProcess launcher(command);
  ASSERT_TRUE(launcher.wait_for_exit(kExitBound));
  EXPECT_EQ(launcher.exit_code(), GetParam().exit_code);
  EXPECT_EQ(launcher.stdout_text(), "");
  std::vector<std::string> error_lines = lines_of(launcher.stderr_text());
  ASSERT_EQ(error_lines.size(), 1u) << launcher.stderr_text();
  EXPECT_EQ(error_lines[0], GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    BadInput, LockstepRunRejects,
    ::testing::Values(
        BadCommandLine{
            "ZeroWorkers", {"run", "-n", "0", "--", "true"}, 2, "lockstep run: -n must be at least 1 (got 0)"},
        BadCommandLine{
            "NegativeWorkers", {"run", "-n", "-2", "--", "true"}, 2, "lockstep run: -n must be at least 1 (got -2)"},
        BadCommandLine{"MissingProgram",
                       {"run", "-n", "2"},
                       2,
                       "lockstep run: no PROGRAM to run; put it after '--': lockstep run -n N -- PROGRAM ARGS..."},
        BadCommandLine{"ProgramNotFound",
                       {"run", "-n", "2", "--", "no-such-program-xyz"},
                       127,
                       "lockstep run: rank 0: cannot run 'no-such-program-xyz': No such file or directory"},
        BadCommandLine{"UnknownBackend",
                       {"run", "-n", "1", "--backend", "ucc", "--", "true"},
                       2,
                       "lockstep run: --backend must be gloo or mpi, or nccl for --device-backend nccl (got 'ucc')"},
        BadCommandLine{"UnknownDeviceBackend",
                       {"run", "-n", "1", "--device-backend", "host", "--", "true"},
                       2,
                       "lockstep run: --device-backend must be auto, staged or nccl (got 'host')"},
        BadCommandLine{"NcclBackendAgainstStagedDevices",
                       {"run", "-n", "1", "--backend", "nccl", "--device-backend", "staged", "--", "true"},
                       2,
                       "lockstep run: --backend nccl means --device-backend nccl, which conflicts with "
                       "--device-backend staged; leave out --backend nccl"},
        BadCommandLine{"NodeRankOutOfRange",
                       {"run", "-n", "1", "--nnodes", "2", "--node-rank", "2", "--master-addr", "h", "--master-port",
                        "1234", "--", "true"},
                       2,
                       "lockstep run: --node-rank must be in [0, 2) for --nnodes 2 (got 2)"},
        BadCommandLine{"SeveralNodesWithoutStoreAddress",
                       {"run", "-n", "1", "--nnodes", "2", "--node-rank", "1", "--", "true"},
                       2,
                       "lockstep run: --nnodes 2 needs --master-addr and --master-port so every node finds the "
                       "same store"},
        BadCommandLine{"AnUnknownFlagOfRunNamesWherePROGRAMGoes",
                       {"run", "-n", "2", "--bogus", "--", "true"},
                       2,
                       "lockstep run: The following arguments were not expected: -- --bogus (put PROGRAM and its "
                       "ARGS after --)"},
        BadCommandLine{"AnUnknownFlagOfTrainNamesTrainsHelp",
                       {"train", "--bogus"},
                       2,
                       "lockstep train: The following argument was not expected: --bogus (see lockstep train --help)"},
        BadCommandLine{"AnUnknownCommand",
                       {"bogus"},
                       2,
                       "lockstep: The following argument was not expected: bogus (see lockstep --help)"},
        BadCommandLine{"AnEndpointWithoutPort",
                       {"run", "-n", "1", "--rdzv-endpoint", "localhost", "--", "true"},
                       2,
                       "lockstep run: --rdzv-endpoint wants HOST:PORT, got 'localhost'"},
        BadCommandLine{"StandaloneOnSeveralNodes",
                       {"run", "-n", "1", "--standalone", "--nnodes", "2", "--", "true"},
                       2,
                       "lockstep run: --standalone runs one node, but --nnodes is 2"},
        BadCommandLine{"MpiOnSeveralNodes",
                       {"run", "-n", "1", "--nnodes", "2", "--backend", "mpi", "--master-addr", "h", "--master-port",
                        "1234", "--", "true"},
                       2,
                       "lockstep run: --backend mpi runs on one node only; for several nodes use mpirun with a "
                       "hostfile directly"}),
    [](const ::testing::TestParamInfo<BadCommandLine>& info) { return info.param.name; });

TEST(LockstepRun, MpiBackendHandsTheJobToMpirun) {
  ToolProcess launcher(lockstep_run({"-n", "2", "--backend", "mpi"}, {"env"}));
  ASSERT_TRUE(launcher.wait_for_exit(kExitBound)) << launcher.stderr_text();
  ASSERT_EQ(launcher.exit_code(), 0) << launcher.stdout_text() << launcher.stderr_text();
  std::string output = launcher.stdout_text();
  EXPECT_TRUE(contains(output, "OMPI_COMM_WORLD_RANK=0\n")) << output;
  EXPECT_TRUE(contains(output, "OMPI_COMM_WORLD_RANK=1\n")) << output;
  std::size_t first = output.find("LOCKSTEP_BACKEND=mpi\n");
  ASSERT_NE(first, std::string::npos) << output;
  EXPECT_NE(output.find("LOCKSTEP_BACKEND=mpi\n", first + 1), std::string::npos) << output;
}

// The line a problem report starts with: lockstep's version, the libtorch it was built
// against, and the device support CMake found (tools/CMakeLists.txt).
TEST(LockstepCommand, VersionNamesLockstepLibtorchAndTheBuildsDeviceSupport) {
  const Finished ran = run_process({LOCKSTEP_TOOL, "--version"}, {}, std::chrono::seconds(20));
  EXPECT_EQ(ran.exit_code, 0) << ran.output;
  EXPECT_EQ(ran.output, "lockstep " LOCKSTEP_VERSION " (libtorch " TORCH_VERSION ", " LOCKSTEP_DEVICE_SUPPORT ")\n");
}

}  // namespace
}  // namespace lockstep::testing
