// How long the default CNN job takes to recover from a killed worker:
//
//   bench/recovery
//
// runs `lockstep train` (2 worker processes, --max-restarts 1, a checkpoint every 10 steps,
// one logged line per step) 5 times, SIGKILLs rank 1 at step 30 of each, and times, from
// the kill: the launcher's report of the failure (detection), its report of the restart
// (all old workers stopped), and, in the new attempt, rank 0 entering `lockstep train`
// (process start and libtorch loaded), joining the job (rendezvous), opening the data, and
// finishing its first step (checkpoint loaded, first batch read and trained). Every time is
// on the steady clock the processes share; the figures are medians.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "median.h"

namespace {

using lockstep::bench::median;

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

std::vector<pid_t> children_of(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  std::vector<pid_t> pids;
  for (pid_t child; file >> child;) pids.push_back(child);
  return pids;
}

// The moments of one recovery, in seconds after the kill.
std::map<std::string, double> one_recovery(const std::string& tool, const std::string& out) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) std::exit(1);
  const pid_t launcher = fork();
  if (launcher == 0) {
    dup2(pipe_fds[1], STDOUT_FILENO);
    dup2(pipe_fds[1], STDERR_FILENO);
    close(pipe_fds[0]);
    setenv("LOCKSTEP_TIMING", "1", 1);
    execl(tool.c_str(), tool.c_str(), "train", "--mode", "processes", "-n", "2", "--max-restarts", "1",
          "--checkpoint-every", "10", "--log-every", "1", "--epochs", "1", "--limit", "12800", "--val-limit", "64",
          "--out", out.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(pipe_fds[1]);
  std::map<std::string, double> at;
  Clock::time_point killed{};
  std::string pending;
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(pipe_fds[0], buffer, sizeof buffer);
    if (n <= 0) break;
    const auto now = Clock::now();
    pending.append(buffer, static_cast<size_t>(n));
    for (size_t end; (end = pending.find('\n')) != std::string::npos; pending.erase(0, end + 1)) {
      const std::string line = pending.substr(0, end);
      if (killed == Clock::time_point{}) {
        if (line.find("step 30/") != std::string::npos) {
          const auto workers = children_of(launcher);
          if (workers.size() == 2) kill(workers[1], SIGKILL);
          killed = Clock::now();
        }
        continue;
      }
      auto mark = [&](const std::string& name) {
        if (!at.count(name)) at[name] = seconds_since(killed, now);
      };
      if (line.find("was killed by signal 9") != std::string::npos) mark("detected");
      if (line.find("restart 1 of 1") != std::string::npos) mark("stopped");
      const auto timing = line.find("lockstep train timing: ");
      if (timing != std::string::npos) {
        const std::string phase = line.substr(timing + 23, line.find(" at ", timing) - timing - 23);
        const long long ns = std::atoll(line.c_str() + line.find(" at ", timing) + 4);
        at[phase] = seconds_since(killed, Clock::time_point(std::chrono::nanoseconds(ns)));
      }
      if (at.count("data") && line.find(" step ") != std::string::npos && line.find("ETA") != std::string::npos) {
        mark("first step");
      }
    }
  }
  close(pipe_fds[0]);
  int status = 0;
  waitpid(launcher, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) std::printf("(the job ended with status %d)\n", status);
  return at;
}

}  // namespace

int main() {
  const std::string tool =
      (fs::canonical("/proc/self/exe").parent_path().parent_path() / "tools" / "lockstep").string();
  const std::vector<std::string> phases = {"detected", "stopped", "started", "joined", "data", "first step"};
  std::map<std::string, std::vector<double>> times;
  for (int run = 0; run < 5; ++run) {
    const std::string out =
        fs::temp_directory_path() / ("lockstep-recovery-" + std::to_string(getpid()) + "-" + std::to_string(run));
    const auto at = one_recovery(tool, out);
    fs::remove_all(out);
    for (const auto& phase : phases) {
      if (!at.count(phase)) {
        std::printf("run %d: no '%s' seen\n", run, phase.c_str());
        return 1;
      }
      times[phase].push_back(at.at(phase));
    }
  }
  std::printf("seconds after SIGKILL of rank 1 at step 30 (medians of 5):\n");
  double previous = 0;
  const std::map<std::string, std::string> meaning = {
      {"detected", "detection: the launcher reaps the dead worker"},
      {"stopped", "stop: the other worker ends, restart begins"},
      {"started", "restart: new rank 0 runs lockstep train (libtorch loaded)"},
      {"joined", "rendezvous: init() returns"},
      {"data", "data: the datasets are open"},
      {"first step", "checkpoint load and first step: its log line"}};
  for (const auto& phase : phases) {
    const double t = median(times[phase]);
    std::printf("  %-12s %6.3f s (+%.3f s)  %s\n", phase.c_str(), t, t - previous, meaning.at(phase).c_str());
    previous = t;
  }
  std::printf("recovery, failure to the first step of the next attempt: %.3f s\n", median(times["first step"]));
  return 0;
}
