// What live recovery (`lockstep train --recovery live`) costs and how fast it is:
//
//   bench/live_recovery
//   bench/live_recovery faults [SECONDS]
//
// runs the default CNN job on 3 worker processes (--mode processes under either recovery;
// global batch 96, one logged line per step, 12,800 examples: 133 steps) and
// - SIGKILLs rank 1 at step 30, 5 times, timing from the kill the launcher's report
//   (detection), rank 0's report that the 2 left went on (regrouped and healed), and the
//   next step's log line (the next committed step);
// - SIGSTOPs rank 1 at step 30 with --heartbeat-timeout 2, 3 times, timing the same from
//   the stop: the heartbeat timeout plus what recovery adds;
// - without a fault, times steps 20 to 120 under --recovery live and --recovery restart,
//   5 pairs in ABBA order, and reports the median ratio: what the per-step agreement costs.
// Times are on the steady clock, taken as the lines arrive; figures are medians.
// `faults` instead trains the whole training set for SECONDS (default 300) without a fault,
// then with one every 30 s (SIGKILL and SIGSTOP in turn, replacements rejoining), and
// reports the samples/s of the second over the first.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "median.h"

namespace {

using lockstep::bench::median;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::vector<pid_t> children_of(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  std::vector<pid_t> pids;
  for (pid_t child; file >> child;) pids.push_back(child);
  return pids;
}

bool has(const std::string& line, const std::string& part) { return line.find(part) != std::string::npos; }

// 133 steps: one epoch of 12,800 examples.
const std::vector<std::string> kShortJob = {"--epochs", "1", "--limit", "12800"};
// Far more steps than 5 minutes take: the whole training set, 50 epochs.
const std::vector<std::string> kLongJob = {"--epochs", "50"};

// Runs `lockstep train` with the job's flags, `length` and `extra`, calling
// `on_line(launcher, line)` for each line of its output as it comes; false when the job failed.
bool run_job(const std::vector<std::string>& extra, const std::function<void(pid_t, const std::string&)>& on_line,
             const std::vector<std::string>& length = kShortJob) {
  static const std::string tool =
      (fs::canonical("/proc/self/exe").parent_path().parent_path() / "tools" / "lockstep").string();
  const std::string out = fs::temp_directory_path() / ("lockstep-live-recovery-" + std::to_string(getpid()));
  fs::remove_all(out);
  std::vector<std::string> args = {tool, "train",       "-n", "3",      "--global-batch-size", "96",    "--val-limit",
                                   "64", "--log-every", "1",  "--mode", "processes",           "--out", out};
  args.insert(args.end(), length.begin(), length.end());
  args.insert(args.end(), extra.begin(), extra.end());
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) std::exit(1);
  const pid_t launcher = fork();
  if (launcher == 0) {
    dup2(pipe_fds[1], STDOUT_FILENO);
    dup2(pipe_fds[1], STDERR_FILENO);
    close(pipe_fds[0]);
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  std::string pending;
  char buffer[4096];
  for (ssize_t n; (n = read(pipe_fds[0], buffer, sizeof buffer)) > 0;) {
    pending.append(buffer, static_cast<size_t>(n));
    for (size_t end; (end = pending.find('\n')) != std::string::npos; pending.erase(0, end + 1)) {
      on_line(launcher, pending.substr(0, end));
    }
  }
  close(pipe_fds[0]);
  int status = 0;
  waitpid(launcher, &status, 0);
  fs::remove_all(out);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

double seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// One fault at step 30: the moments after it, in seconds.
std::map<std::string, double> one_fault(int signal) {
  std::map<std::string, double> at;
  Clock::time_point faulted{};
  std::vector<std::string> extra = {"--recovery", "live"};
  if (signal == SIGSTOP) extra.insert(extra.end(), {"--heartbeat-timeout", "2"});
  const bool ok = run_job(extra, [&](pid_t launcher, const std::string& line) {
    const auto now = Clock::now();
    if (faulted == Clock::time_point{}) {
      if (has(line, "step 30/")) {
        const auto workers = children_of(launcher);
        if (workers.size() == 3) kill(workers[1], signal);
        faulted = Clock::now();
      }
      return;
    }
    const auto mark = [&](const std::string& name) {
      if (!at.count(name)) at[name] = seconds(faulted, now);
    };
    if (has(line, "was killed by signal") || has(line, "missed its heartbeats")) mark("detected");
    if (has(line, "goes on after step")) {
      mark("regrouped");
      const auto regrouped = line.find("regrouped in "), healed = line.find("healed in ");
      if (regrouped != std::string::npos) at["forming"] = std::atof(line.c_str() + regrouped + 13);
      if (healed != std::string::npos) at["healing"] = std::atof(line.c_str() + healed + 10);
    } else if (at.count("regrouped") && has(line, " ETA ")) {
      mark("next step");
    }
  });
  if (!ok) std::printf("(a job with a fault failed)\n");
  return at;
}

// Seconds from step 20's line to step 120's, without a fault.
double steady_steps(const std::string& recovery) {
  Clock::time_point first{}, last{};
  run_job({"--recovery", recovery}, [&](pid_t, const std::string& line) {
    if (has(line, "step 20/")) first = Clock::now();
    if (has(line, "step 120/")) last = Clock::now();
  });
  return seconds(first, last);
}

// A step takes about 0.06 s here: a longer gap between two is a fault's.
constexpr double kStall = 0.25;

// The step number of a progress line ("step 412/31250 ..."), or -1.
int64_t step_of(const std::string& line) {
  const auto at = line.find("step ");
  if (at == std::string::npos || line.find('/', at) == std::string::npos) return -1;
  return std::atoll(line.c_str() + at + 5);
}

// Samples a second over `window` from the first step, --recovery live; with `faults`, a
// fault every 30 s, SIGKILL and SIGSTOP in turn, of one of the workers there are then (the
// launcher ends a stopped one after its heartbeat timeout of 2 s and starts replacements).
double throughput(double window, bool faults) {
  Clock::time_point start{}, last_line{};
  double stalled = 0;  // in gaps of over kStall between committed steps: faults' cost
  int64_t first_step = -1, last_step = -1;
  int faulted = 0;
  bool ended = false;
  run_job(
      {"--recovery", "live", "--max-restarts", "100", "--heartbeat-timeout", "2"},
      [&](pid_t launcher, const std::string& line) {
        const int64_t step = step_of(line);
        if (step < 0 || ended) return;
        const auto now = Clock::now();
        if (first_step < 0) {
          first_step = step;
          start = now;
        }
        last_step = std::max(last_step, step);
        if (last_line != Clock::time_point{} && seconds(last_line, now) > kStall) stalled += seconds(last_line, now);
        last_line = now;
        const double elapsed = seconds(start, now);
        if (elapsed >= window) {
          ended = true;
          kill(launcher, SIGTERM);  // the workers save a checkpoint and end
          return;
        }
        if (faults && elapsed >= 30.0 * (faulted + 1)) {
          const auto workers = children_of(launcher);
          if (workers.empty()) return;
          kill(workers[faulted % workers.size()], faulted % 2 == 0 ? SIGKILL : SIGSTOP);
          ++faulted;
        }
      },
      kLongJob);
  std::printf("  %s: %lld steps in %.0f s (%d faults), %.1f s in gaps of over %.2f s between steps\n",
              faults ? "with faults" : "without a fault", static_cast<long long>(last_step - first_step), window,
              faulted, stalled, kStall);
  return static_cast<double>(last_step - first_step) * 96 / window;
}

void report_faults(const char* what, int signal, int runs) {
  std::map<std::string, std::vector<double>> times;
  for (int run = 0; run < runs; ++run) {
    for (const auto& [name, t] : one_fault(signal)) times[name].push_back(t);
  }
  std::printf("%s of rank 1 at step 30 (medians of %d):\n", what, runs);
  for (const char* name : {"detected", "regrouped", "next step", "forming", "healing"}) {
    if (times[name].size() != static_cast<size_t>(runs)) {
      std::printf("  %-10s seen in %zu of %d runs\n", name, times[name].size(), runs);
      continue;
    }
    std::printf("  %-10s %6.3f s\n", name, median(times[name]));
  }
}

}  // namespace

// `bench/live_recovery steady` runs only the comparison without a fault, 9 pairs, and the
// same for restart over restart: the noise the first ratio stands beside.
int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "faults") {
    const double window = argc > 2 ? std::atof(argv[2]) : 300;
    std::printf("samples/s over %.0f s, 3 workers, --recovery live:\n", window);
    const double fault_free = throughput(window, false);
    const double faulted = throughput(window, true);
    std::printf("with a fault every 30 s: %.1f against %.1f without: %.3f\n", faulted, fault_free,
                faulted / fault_free);
    return 0;
  }
  const bool steady_only = argc > 1 && std::string(argv[1]) == "steady";
  if (!steady_only) {
    report_faults("SIGKILL", SIGKILL, 5);
    report_faults("SIGSTOP (--heartbeat-timeout 2)", SIGSTOP, 3);
  }
  const int pairs = steady_only ? 9 : 5;
  const double ratio = lockstep::bench::median_paired_ratio(
      pairs, [] { return steady_steps("live"); }, [] { return steady_steps("restart"); });
  std::printf("steps 20 to 120 without a fault, --recovery live over restart (median of %d pairs): %.3f\n", pairs,
              ratio);
  if (steady_only) {
    const double noise = lockstep::bench::median_paired_ratio(
        pairs, [] { return steady_steps("restart"); }, [] { return steady_steps("restart"); });
    std::printf("the same, restart over restart: %.3f\n", noise);
  }
  return 0;
}
