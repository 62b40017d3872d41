// A worker the launcher tests start through `lockstep run`. Its arguments are steps run in
// order, so each test composes the behaviour it needs:
//   env                     print the variables the launcher sets, one NAME=value per line
//   store                   join the hosted TCP store, set a key, read every rank's key
//   pidfile DIR             write this process's pid to DIR/rank<RANK>.pid
//   await-pidfiles DIR N    wait (at most 20 s) until N pid files exist in DIR
//   exit-on-rank R STATUS   exit with STATUS if this is rank R
//   trap-term               on SIGTERM print "rank R got SIGTERM" and exit 0
//   ignore-term             ignore SIGTERM (only SIGKILL stops this worker)
//   partial TEXT            print TEXT to stdout without a newline
//   sleep SECONDS
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "job/tcp_store_options.h"

namespace {

const char* kReportedVariables[] = {
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "LOCKSTEP_BACKEND",
    "LOCKSTEP_USE_AGENT_STORE",
    "OMPI_COMM_WORLD_RANK",
    "PMIX_RANK",
    "LOCKSTEP_RESTART_COUNT",
    "LOCKSTEP_RESTART_REASON",
    "LOCKSTEP_JOB_ID",
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TRIM_THRESHOLD_",
    "MALLOC_TOP_PAD_",
};

std::string variable(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "<unset>";
}

int rank() {
  const char* value = std::getenv("RANK");
  return value != nullptr ? std::atoi(value) : -1;
}

void print_environment() {
  for (const char* name : kReportedVariables) {
    std::cout << name << "=" << variable(name) << "\n";
  }
  std::cout << std::flush;
}

void check_store() {
  int port = std::stoi(variable("MASTER_PORT"));
  c10d::TCPStore store(variable("MASTER_ADDR"),
                       lockstep::tcp_store_options(port, /*is_server=*/false, std::chrono::seconds(20)));

  int world_size = std::stoi(variable("WORLD_SIZE"));
  std::string mine = "hello from " + std::to_string(rank());
  store.set("probe/" + std::to_string(rank()), std::vector<uint8_t>(mine.begin(), mine.end()));
  for (int other = 0; other < world_size; ++other) {
    std::vector<uint8_t> value = store.get("probe/" + std::to_string(other));
    if (std::string(value.begin(), value.end()) != "hello from " + std::to_string(other)) {
      std::cout << "store read a wrong value for rank " << other << std::endl;
      std::exit(1);
    }
  }
  std::cout << "store ok" << std::endl;
}

std::filesystem::path pid_file(const std::string& directory, int of_rank) {
  return std::filesystem::path(directory) / ("rank" + std::to_string(of_rank) + ".pid");
}

void await_pid_files(const std::string& directory, int count) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    int present = 0;
    for (int other = 0; other < count; ++other) {
      present += std::filesystem::exists(pid_file(directory, other)) ? 1 : 0;
    }
    if (present == count) {
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::cerr << "pid files of " << count << " ranks did not appear in " << directory << std::endl;
  std::exit(1);
}

// Filled before the handler is installed: a signal handler reaches only globals, and may not allocate.
char sigterm_line[64];
int sigterm_line_length = 0;

void report_sigterm_and_exit(int) {
  (void)!write(STDOUT_FILENO, sigterm_line, sigterm_line_length);
  _exit(0);
}

void trap_sigterm() {
  sigterm_line_length = std::snprintf(sigterm_line, sizeof sigterm_line, "rank %d got SIGTERM\n", rank());
  signal(SIGTERM, report_sigterm_and_exit);
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string step = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "launch_probe: step '" << step << "' needs an argument" << std::endl;
        std::exit(2);
      }
      return argv[++i];
    };
    if (step == "env") {
      print_environment();
    } else if (step == "store") {
      check_store();
    } else if (step == "pidfile") {
      std::string directory = next();
      std::filesystem::path final_path = pid_file(directory, rank());
      std::filesystem::path partial_path = final_path.string() + ".tmp";
      std::ofstream(partial_path) << getpid() << "\n";
      std::filesystem::rename(partial_path, final_path);  // readers never see half a pid
    } else if (step == "await-pidfiles") {
      std::string directory = next();
      await_pid_files(directory, std::stoi(next()));
    } else if (step == "exit-on-rank") {
      int exiting_rank = std::stoi(next());
      int status = std::stoi(next());
      if (rank() == exiting_rank) {
        std::exit(status);
      }
    } else if (step == "trap-term") {
      trap_sigterm();
    } else if (step == "ignore-term") {
      signal(SIGTERM, SIG_IGN);
    } else if (step == "partial") {
      std::cout << next() << std::flush;
    } else if (step == "sleep-if-first") {  // only in the job's first attempt
      const double seconds = std::stod(next());
      const char* restarts = std::getenv("LOCKSTEP_RESTART_COUNT");
      if (restarts == nullptr || std::string(restarts) == "0") {
        std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
      }
    } else if (step == "sleep") {
      std::this_thread::sleep_for(std::chrono::duration<double>(std::stod(next())));
    } else {
      std::cerr << "launch_probe: unknown step '" << step << "'" << std::endl;
      return 2;
    }
  }
  return 0;
}
