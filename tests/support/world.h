#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "support/tool_process.h"

// Runs real worker processes for the multi-process tests.
namespace lockstep::testing {

using Env = std::map<std::string, std::string>;

struct Finished {
  int exit_code;       // 128 + signal when killed; -1 when it outlived the deadline
  std::string output;  // stdout and stderr together
};

/// Whether "NAME=value" is a launcher's (RANK, OMPI_*, LOCKSTEP_*, ...), which must not leak
/// from the test's own environment into the processes it starts.
bool is_launcher_variable(const std::string& entry);

/// Starts `n` processes of `argv`, rank r with `env_for(r)` added to a clean environment
/// (no RANK, OMPI_*, ... from the test's own), and waits for all of them, killing what is
/// left at `deadline`.
std::vector<Finished> run_processes(int n, const std::vector<std::string>& argv,
                                    const std::function<Env(int rank)>& env_for,
                                    std::chrono::seconds deadline = std::chrono::seconds(120));

/// One process, e.g. mpirun or the launcher.
Finished run_process(const std::vector<std::string>& argv, const Env& env = {},
                     std::chrono::seconds deadline = std::chrono::seconds(120));

/// The environment a torchrun-style TCP rendezvous needs, on a free local port.
std::function<Env(int rank)> tcp_world(int n, Env extra = {});
/// The environment a file-store rendezvous needs, in a fresh directory.
std::function<Env(int rank)> file_world(int n, Env extra = {});
/// argv prefix that runs `n` processes under mpirun.
std::vector<std::string> mpirun(int n);
/// Environment mpirun needs in the tests (we may run as root).
Env mpirun_env(Env extra = {});

int free_port();
std::string fresh_directory();
size_t count_lines(const std::string& text);

}  // namespace lockstep::testing
