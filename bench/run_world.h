#pragma once

// Starting a benchmark's ranks as real processes on this machine, as a launcher would.
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace lockstep::bench {

// Starts `argv` as `n` ranks of one world (torchrun-style variables), or as `n` independent
// processes with no world variables, rank 0's output going to `out_fd` and the others' to
// /dev/null, and returns their pids. With LOCKSTEP_BENCH_BIND=core, process r runs on the
// r-th CPU this one may use, as `lockstep run --bind core` places workers on a machine whose
// CPUs are separate cores.
inline std::vector<pid_t> start_world(int n, const std::vector<std::string>& argv, bool independent, int out_fd) {
  const std::string port = std::to_string(29000 + getpid() % 1000);
  std::fflush(stdout);  // or the children would print what the parent has buffered
  const auto now =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch());
  setenv("LOCKSTEP_BENCH_START_NS", std::to_string(now.count()).c_str(), 1);
  const char* bind = std::getenv("LOCKSTEP_BENCH_BIND");
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  sched_getaffinity(0, sizeof allowed, &allowed);
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
  }
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      if (bind != nullptr && std::string(bind) == "core" && !cpus.empty()) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus[r % cpus.size()], &one);
        sched_setaffinity(0, sizeof one, &one);
      }
      if (!independent) {
        setenv("RANK", std::to_string(r).c_str(), 1);
        setenv("WORLD_SIZE", std::to_string(n).c_str(), 1);
        setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
        setenv("LOCAL_WORLD_SIZE", std::to_string(n).c_str(), 1);
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        setenv("MASTER_PORT", port.c_str(), 1);
      }
      setenv("OMP_NUM_THREADS", "1", 1);
      if (r == 0 && dup2(out_fd, STDOUT_FILENO) < 0) _exit(126);
      if (r != 0 && !freopen("/dev/null", "w", stdout)) _exit(126);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execvp(args[0], args.data());
      _exit(127);
    }
    pids.push_back(pid);
  }
  return pids;
}

// Runs `argv` as start_world does and returns the first line rank 0 printed.
inline std::string run_world(int n, const std::vector<std::string>& argv, bool independent = false) {
  const std::string out = std::filesystem::temp_directory_path() / ("lockstep-bench-" + std::to_string(getpid()));
  FILE* f = std::fopen(out.c_str(), "w+");
  if (f == nullptr) return "";
  for (pid_t pid : start_world(n, argv, independent, fileno(f))) waitpid(pid, nullptr, 0);
  std::rewind(f);
  char text[256] = {};
  if (std::fgets(text, sizeof(text), f) == nullptr) text[0] = 0;
  std::fclose(f);
  std::filesystem::remove(out);
  return text;
}

// Runs `argv` as start_world does and returns, for each line rank 0 printed, the seconds
// from the start to its arrival: how a benchmark times a program's steady state from the
// progress it prints, start-up excluded.
inline std::vector<double> run_world_line_times(int n, const std::vector<std::string>& argv, bool independent = false) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  const auto start = std::chrono::steady_clock::now();
  const std::vector<pid_t> pids = start_world(n, argv, independent, fds[1]);
  close(fds[1]);
  std::vector<double> times;
  FILE* lines = fdopen(fds[0], "r");
  char text[256];
  while (std::fgets(text, sizeof(text), lines) != nullptr) {
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::fclose(lines);
  for (pid_t pid : pids) waitpid(pid, nullptr, 0);
  return times;
}

/// Runs `argv` (its program looked up in PATH) with `env` added to this process's
/// environment, and returns its exit code.
inline int run_command(std::vector<std::string> argv, const std::map<std::string, std::string>& env = {}) {
  const pid_t pid = fork();
  if (pid == 0) {
    for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::perror(args[0]);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace lockstep::bench
