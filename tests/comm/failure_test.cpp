// What happens when ranks disagree, die, never come, or are misconfigured: an error on
// every rank within the timeout (or the watchdog ending an MPI job), naming what to fix.
#include <signal.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "comm/transports/device_transports.h"
#include "support/tool_process.h"
#include "support/world.h"

namespace lockstep::testing {
namespace {

using std::chrono::steady_clock;

double seconds_since(steady_clock::time_point start) {
  return std::chrono::duration<double>(steady_clock::now() - start).count();
}

std::vector<std::string> worker(const std::string& scenario) { return {COLLECTIVES_WORKER, scenario}; }

const Env kGlooOnly{{"LOCKSTEP_SHM", "0"}};

Env with(Env env, const Env& more) {
  env.insert(more.begin(), more.end());
  return env;
}

TEST(Mismatch, GlooShapesDifferEveryRankRaisesNamingBoth) {
  const auto start = steady_clock::now();
  const auto ranks =
      run_processes(2, worker("mismatch-shape"), tcp_world(2, with(kGlooOnly, {{"LOCKSTEP_TIMEOUT", "2"}})));
  EXPECT_LT(seconds_since(start), 15);
  for (const auto& f : ranks) {
    EXPECT_EQ(f.exit_code, 0) << f.output;
    EXPECT_TRUE(contains(f.output, "MismatchError")) << f.output;
    EXPECT_TRUE(contains(f.output, "float32[4]") && contains(f.output, "float32[5]")) << f.output;
  }
}

TEST(Mismatch, GlooDtypesDifferEveryRankRaisesNamingBoth) {
  const auto ranks =
      run_processes(2, worker("mismatch-dtype"), file_world(2, with(kGlooOnly, {{"LOCKSTEP_TIMEOUT", "2"}})));
  for (const auto& f : ranks) {
    EXPECT_EQ(f.exit_code, 0) << f.output;
    EXPECT_TRUE(contains(f.output, "float32[4]") && contains(f.output, "int32[4]")) << f.output;
  }
}

TEST(Mismatch, DebugModeFindsItBeforeAnyDataMoves) {
  const auto start = steady_clock::now();
  const auto ranks =
      run_processes(3, worker("mismatch-shape"),
                    tcp_world(3, with(kGlooOnly, {{"LOCKSTEP_TIMEOUT", "60"}, {"LOCKSTEP_DEBUG", "1"}})));
  EXPECT_LT(seconds_since(start), 30);  // well before the 60 s timeout
  for (const auto& f : ranks) {
    EXPECT_EQ(f.exit_code, 0) << f.output;
    EXPECT_TRUE(contains(f.output, "rank 1: all_reduce #0 (float32[5], Sum)")) << f.output;
    EXPECT_TRUE(contains(f.output, "rank 2: all_reduce #0 (float32[4], Sum)")) << f.output;
  }
}

TEST(Mismatch, MpiChecksEveryCallAndRaisesOnEveryRank) {
  for (const std::string kind : {"mismatch-shape", "mismatch-dtype"}) {
    auto argv = mpirun(2);
    argv.insert(argv.end(), {COLLECTIVES_WORKER, kind});
    const auto run =
        run_process(argv, mpirun_env(with(kGlooOnly, {{"LOCKSTEP_TIMEOUT", "30"}})), std::chrono::seconds(60));
    EXPECT_EQ(run.exit_code, 0) << run.output;
    EXPECT_TRUE(contains(run.output, "rank 0 MismatchError")) << run.output;
    EXPECT_TRUE(contains(run.output, "rank 1 MismatchError")) << run.output;
    EXPECT_TRUE(contains(run.output, kind == "mismatch-shape" ? "float32[5]" : "int32[4]")) << run.output;
  }
}

TEST(DeadRank, GlooRankThatExitsGivesTheOthersAnError) {
  const auto start = steady_clock::now();
  const auto ranks = run_processes(3, worker("dead-exit"), tcp_world(3, with(kGlooOnly, {{"LOCKSTEP_TIMEOUT", "3"}})));
  EXPECT_LT(seconds_since(start), 20);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(ranks[r].exit_code, 0) << ranks[r].output;
    EXPECT_TRUE(contains(ranks[r].output, "all_reduce #1 (float32[4], Sum) failed")) << ranks[r].output;
  }
}

TEST(DeadRank, WritingToADeadPeerDoesNotKillTheRank) {
  const auto run = run_process({COLLECTIVES_WORKER, "sigpipe"});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "rank 0 survived SIGPIPE")) << run.output;
}

TEST(DeadRank, GlooRankThatHangsGivesTheOthersATimeoutNamingIt) {
  const auto ranks = run_processes(3, worker("dead-hang"), file_world(3, with(kGlooOnly, {{"LOCKSTEP_TIMEOUT", "2"}})),
                                   std::chrono::seconds(15));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(ranks[r].exit_code, 0) << ranks[r].output;
    EXPECT_TRUE(contains(ranks[r].output, "all_reduce #1 (float32[4], Sum) failed after")) << ranks[r].output;
    EXPECT_TRUE(contains(ranks[r].output, "rank 2: no report")) << ranks[r].output;
  }
}

// Live recovery's abort (elastic/membership.h: a member its launcher marked ended): the
// collective waiting on a rank that hangs fails at once, not at its 60 s timeout, over gloo
// (its sockets shut down) and over shared memory.
TEST(DeadRank, ACollectiveWaitingOnAHungRankIsAbortedAtOnce) {
  for (const Env& env : {with(kGlooOnly, {{"LOCKSTEP_TIMEOUT", "60"}}), Env{{"LOCKSTEP_TIMEOUT", "60"}}}) {
    const auto ranks = run_processes(3, worker("dead-abort"), file_world(3, env), std::chrono::seconds(30));
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(ranks[r].exit_code, 0) << ranks[r].output;
      EXPECT_TRUE(contains(ranks[r].output, "rank " + std::to_string(r) + " error: ")) << ranks[r].output;
      EXPECT_TRUE(contains(ranks[r].output, "all_reduce #1 (float32[4], Sum) was aborted: worker 2 ended"))
          << ranks[r].output;
      EXPECT_TRUE(contains(ranks[r].output, "rank " + std::to_string(r) + " waited 0 s")) << ranks[r].output;
    }
  }
}

TEST(DeadRank, MpiWatchdogEndsTheJobNamingTheStalledCollective) {
  auto argv = mpirun(2);
  argv.insert(argv.end(), {COLLECTIVES_WORKER, "dead-hang"});
  const auto start = steady_clock::now();
  const auto run =
      run_process(argv, mpirun_env(with(kGlooOnly, {{"LOCKSTEP_TIMEOUT", "2"}})), std::chrono::seconds(50));
  EXPECT_LT(seconds_since(start), 40);
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "rank 0: all_reduce #1 (float32[4], Sum) did not complete within 2.0 s"))
      << run.output;
}

TEST(Mismatch, SharedMemoryFindsItAtOnceAndTheGroupStaysUsable) {
  for (const std::string kind : {"mismatch-shape", "mismatch-dtype"}) {
    const auto start = steady_clock::now();
    const auto ranks = run_processes(3, worker(kind), file_world(3, {{"LOCKSTEP_TIMEOUT", "60"}}));
    EXPECT_LT(seconds_since(start), 30);  // well before the 60 s timeout
    for (int r = 0; r < 3; ++r) {
      const std::string& out = ranks[r].output;
      EXPECT_EQ(ranks[r].exit_code, 0) << out;
      EXPECT_TRUE(contains(out, "rank 0: all_reduce #0 (float32[4], Sum)")) << out;
      EXPECT_TRUE(contains(out, kind == "mismatch-shape" ? "rank 1: all_reduce #0 (float32[5], Sum)"
                                                         : "rank 1: all_reduce #0 (int32[4], Sum)"))
          << out;
      EXPECT_TRUE(contains(out, "rank " + std::to_string(r) + " group still usable")) << out;
    }
  }
}

TEST(DeadRank, SharedMemoryRankThatExitsIsNamedAsDead) {
  const auto start = steady_clock::now();
  const auto ranks = run_processes(3, worker("dead-exit"), file_world(3, {{"LOCKSTEP_TIMEOUT", "60"}}));
  EXPECT_LT(seconds_since(start), 30);  // well before the 60 s timeout
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(ranks[r].exit_code, 0) << ranks[r].output;
    EXPECT_TRUE(contains(ranks[r].output, "all_reduce #1 (float32[4], Sum) failed: rank 2 (pid ")) << ranks[r].output;
    EXPECT_TRUE(contains(ranks[r].output, ") died while this rank waited for it in shared memory")) << ranks[r].output;
  }
}

TEST(DeadRank, SharedMemoryRankThatHangsTimesOutNamingIt) {
  const auto ranks =
      run_processes(3, worker("dead-hang"), file_world(3, {{"LOCKSTEP_TIMEOUT", "2"}}), std::chrono::seconds(15));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(ranks[r].exit_code, 0) << ranks[r].output;
    EXPECT_TRUE(contains(ranks[r].output,
                         "all_reduce #1 (float32[4], Sum) failed: timed out waiting in "
                         "shared memory for rank 2 (pid "))
        << ranks[r].output;
  }
}

// lockstep's segments in /dev/shm whose creator is one of `pids`.
std::vector<std::string> segments_of(const std::vector<pid_t>& pids) {
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    const std::string name = entry.path().filename();
    for (pid_t pid : pids) {
      if (name.rfind("lockstep-" + std::to_string(pid) + "-", 0) == 0) found.push_back(name);
    }
  }
  return found;
}

TEST(DeadRank, SharedMemoryRankKilledInsideACollective) {
  const auto world = file_world(3, {{"LOCKSTEP_TIMEOUT", "60"}});
  std::vector<std::unique_ptr<ToolProcess>> ranks;
  std::vector<pid_t> pids;
  for (int r = 0; r < 3; ++r) {
    std::vector<std::string> env;
    for (const auto& [name, value] : world(r)) env.push_back(name + "=" + value);
    ranks.push_back(std::make_unique<ToolProcess>(worker("loop"), env));
    pids.push_back(ranks.back()->pid());
  }
  const auto deadline = steady_clock::now() + std::chrono::seconds(60);
  auto all_looping = [&] {
    for (int r = 0; r < 3; ++r) {
      if (!contains(ranks[r]->stdout_text(), "rank " + std::to_string(r) + " looping")) return false;
    }
    return true;
  };
  while (!all_looping() && steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(all_looping());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto killed_at = steady_clock::now();
  kill(pids[1], SIGKILL);
  for (int r : {0, 2}) {
    ASSERT_TRUE(ranks[r]->wait_for_exit(std::chrono::seconds(30)));
    const std::string out = ranks[r]->stdout_text() + ranks[r]->stderr_text();
    EXPECT_EQ(ranks[r]->exit_code(), 0) << out;
    EXPECT_TRUE(contains(
        out, "rank 1 (pid " + std::to_string(pids[1]) + ") died while this rank waited for it in shared memory"))
        << out;
  }
  EXPECT_LT(seconds_since(killed_at), 10);  // noticed long before the 60 s timeout
  EXPECT_TRUE(segments_of(pids).empty());
  // The next job on the machine starts cleanly.
  const auto next = run_processes(3, worker("all"), file_world(3, {{"LOCKSTEP_TIMEOUT", "60"}}));
  for (const auto& f : next) {
    EXPECT_EQ(f.exit_code, 0) << f.output;
    EXPECT_TRUE(contains(f.output, "gloo, shm): all collectives correct")) << f.output;
  }
}

// In a mount namespace of its own, /dev/shm is a 4 MB tmpfs: the group's segment fits, a
// 16 MB tensor per rank does not, and training must go on with copies.
TEST(SharedMemory, ATensorThatDoesNotFitInDevShmFallsBackToCopies) {
  const std::string script = std::string("mount -t tmpfs -o size=4m lockstep-test /dev/shm && exec ") + LOCKSTEP_TOOL +
                             " run -n 2 -- " + COLLECTIVES_WORKER + " large-shared";
  const auto run = run_process({"unshare", "--mount", "--propagation", "private", "sh", "-c", script},
                               {{"LOCKSTEP_TIMEOUT", "60"}}, std::chrono::seconds(120));
  if (run.exit_code != 0 && !contains(run.output, "[rank ")) {
    GTEST_SKIP() << "cannot make a mount namespace with a small /dev/shm here: " << run.output;
  }
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "[rank 0] rank 0: large shared tensor reduced")) << run.output;
  EXPECT_TRUE(contains(run.output, "[rank 1] rank 1: large shared tensor reduced")) << run.output;
  EXPECT_TRUE(contains(run.output, "a shared tensor of 32768 KiB would take more than half of the ")) << run.output;
  EXPECT_TRUE(contains(run.output, "shared tensors that do not fit are ordinary ones")) << run.output;
}

// With 64 KB of /dev/shm not even the group's segment fits: init() fails at once on every
// rank, saying what to do.
TEST(SharedMemory, NoRoomForTheGroupsSegmentEndsInitOnEveryRank) {
  const std::string script = std::string("mount -t tmpfs -o size=64k lockstep-test /dev/shm && exec ") + LOCKSTEP_TOOL +
                             " run -n 2 -- " + COLLECTIVES_WORKER + " init-only";
  const auto start = steady_clock::now();
  const auto run = run_process({"unshare", "--mount", "--propagation", "private", "sh", "-c", script},
                               {{"LOCKSTEP_TIMEOUT", "60"}}, std::chrono::seconds(120));
  if (run.exit_code != 0 && !contains(run.output, "[rank ")) {
    GTEST_SKIP() << "cannot make a mount namespace with a small /dev/shm here: " << run.output;
  }
  EXPECT_LT(seconds_since(start), 30);  // well before the 60 s timeout
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "shared memory in /dev/shm")) << run.output;
  EXPECT_TRUE(contains(run.output, "set LOCKSTEP_SHM=0")) << run.output;
}

// The timeout must outlast the start of the ranks that do come, or rank 0 rightly names
// rank 1 as well: on a machine loaded three times over (load average 12 on 2 cores), 6 s
// was not always enough.
TEST(Rendezvous, RankThatNeverArrivesIsNamed) {
  for (const auto& world : {tcp_world(3, {{"LOCKSTEP_TIMEOUT", "12"}}), file_world(3, {{"LOCKSTEP_TIMEOUT", "12"}})}) {
    const auto start = steady_clock::now();
    const auto ranks = run_processes(2, worker("init-only"), world, std::chrono::seconds(60));
    EXPECT_LT(seconds_since(start), 40);
    for (const auto& f : ranks) {
      EXPECT_NE(f.exit_code, 0) << f.output;
      EXPECT_TRUE(contains(f.output, "rank(s) 2 never arrived (world size 3)")) << f.output;
    }
  }
}

// Rank 0 hosts the TCP store and, started first, gives up first, taking the store along:
// the rank that gives up after it still names only the rank it never saw.
TEST(Rendezvous, TheStoreLeavingFirstDoesNotMakeItsHostMissing) {
  const auto env_of_rank = tcp_world(3, {{"LOCKSTEP_TIMEOUT", "4"}});
  std::vector<std::unique_ptr<ToolProcess>> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<std::string> env;
    for (const auto& [name, value] : env_of_rank(rank)) env.push_back(name + "=" + value);
    ranks.push_back(std::make_unique<ToolProcess>(
        worker("init-only"), env, [](const std::string& entry) { return !is_launcher_variable(entry); }));
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
  }
  for (auto& rank : ranks) {
    ASSERT_TRUE(rank->wait_for_exit(std::chrono::seconds(30)));
    EXPECT_NE(rank->exit_code(), 0);
    EXPECT_TRUE(contains(rank->stderr_text(), ": rank(s) 2 never arrived (world size 3)")) << rank->stderr_text();
  }
}

struct BadConfig {
  Env env;
  std::string message;
};

TEST(BadConfig, EndsWithOneLineSayingWhatToFix) {
  const std::string port = std::to_string(free_port());
  std::vector<BadConfig> cases = {
      {{{"RANK", "0"}, {"WORLD_SIZE", "0"}}, "WORLD_SIZE=0 must be at least 1"},
      {{{"RANK", "2"}, {"WORLD_SIZE", "2"}}, "RANK=2 is out of range for WORLD_SIZE=2"},
      {{{"RANK", "x"}, {"WORLD_SIZE", "2"}}, "RANK='x' is not an integer"},
      {{{"RANK", "0"},
        {"WORLD_SIZE", "2"},
        {"OMPI_COMM_WORLD_RANK", "1"},
        {"OMPI_COMM_WORLD_SIZE", "2"},
        {"MASTER_ADDR", "127.0.0.1"}},
       "conflicting settings: RANK=0 but OMPI_COMM_WORLD_RANK=1"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}}, "no way to meet the other ranks"},
      {{{"RANK", "1"},
        {"WORLD_SIZE", "2"},
        {"MASTER_ADDR", "10.255.255.1"},
        {"MASTER_PORT", port},
        {"LOCKSTEP_TIMEOUT", "2"}},
       "cannot reach the rendezvous store at MASTER_ADDR=10.255.255.1"},
      {{{"RANK", "1"},
        {"WORLD_SIZE", "2"},
        {"MASTER_ADDR", "no-such-host.invalid"},
        {"MASTER_PORT", port},
        {"LOCKSTEP_TIMEOUT", "2"}},
       "cannot reach the rendezvous store at MASTER_ADDR=no-such-host.invalid"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCKSTEP_INIT_FILE", "/proc/lockstep-store"}},
       "cannot create the store directory '/proc/lockstep-store'"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "70000"}},
       "MASTER_PORT=70000 is not a TCP port"},
      {{{"LOCKSTEP_BACKEND", "nccl2"}}, "LOCKSTEP_BACKEND='nccl2' must be auto, gloo or mpi"},
      {{{"LOCKSTEP_DEVICE_BACKEND", "gloo"}}, "LOCKSTEP_DEVICE_BACKEND='gloo' must be auto, staged or nccl"},
      {{{"LOCKSTEP_TIMEOUT", "-1"}}, "LOCKSTEP_TIMEOUT='-1' must be a positive number"},
  };
  if (!built_with_nccl()) {
    for (const std::string variable : {"LOCKSTEP_BACKEND", "LOCKSTEP_DEVICE_BACKEND"}) {
      cases.push_back({{{variable, "nccl"}},
                       "the device backend nccl needs lockstep built against a libtorch with "
                       "CUDA and NCCL"});
    }
  }
  for (const auto& c : cases) {
    const auto start = steady_clock::now();
    const auto run = run_process(worker("init-only"), c.env, std::chrono::seconds(30));
    EXPECT_LT(seconds_since(start), 15) << c.message;
    EXPECT_NE(run.exit_code, 0) << run.output;
    EXPECT_TRUE(contains(run.output, c.message)) << "expected: " << c.message << "\ngot: " << run.output;
    EXPECT_EQ(count_lines(run.output), 1u) << run.output;
  }
}

TEST(BadConfig, PortAlreadyTakenByAnotherStore) {
  const auto world = tcp_world(2, {{"LOCKSTEP_TIMEOUT", "3"}});
  // Two rank-0s on one port: whichever comes second cannot host the store.
  const auto ranks = run_processes(
      2, worker("init-only"), [&](int) { return world(0); }, std::chrono::seconds(30));
  const int failed = (ranks[0].exit_code != 0) + (ranks[1].exit_code != 0);
  EXPECT_EQ(failed, 2);
  const std::string all = ranks[0].output + ranks[1].output;
  EXPECT_TRUE(contains(all, "rank 0 cannot host the rendezvous store on MASTER_PORT=")) << all;
  for (const auto& f : ranks) EXPECT_EQ(count_lines(f.output), 1u) << f.output;
}

}  // namespace
}  // namespace lockstep::testing
