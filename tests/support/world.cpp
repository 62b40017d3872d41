#include "support/world.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <stdexcept>

#include "support/tool_process.h"

namespace lockstep::testing {

bool is_launcher_variable(const std::string& entry) {
  // Where this machine keeps a dataset is no launcher's setting (gpu-check sets it).
  if (entry.rfind("LOCKSTEP_DATA_PATH_", 0) == 0) return false;
  for (const char* prefix : {"RANK=", "WORLD_SIZE=", "LOCAL_RANK=", "LOCAL_WORLD_SIZE=", "MASTER_ADDR=", "MASTER_PORT=",
                             "OMPI_", "PMIX_", "SLURM_", "LOCKSTEP_", "TORCHELASTIC_"}) {
    if (entry.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

std::vector<Finished> run_processes(int n, const std::vector<std::string>& argv,
                                    const std::function<Env(int rank)>& env_for, std::chrono::seconds deadline) {
  std::vector<std::unique_ptr<ToolProcess>> processes;
  for (int r = 0; r < n; ++r) {
    std::vector<std::string> extra;
    for (const auto& [name, value] : env_for(r)) extra.push_back(name + "=" + value);
    processes.push_back(std::make_unique<ToolProcess>(
        argv, extra, [](const std::string& entry) { return !is_launcher_variable(entry); }));
  }
  const auto end = std::chrono::steady_clock::now() + deadline;
  std::vector<Finished> results;
  for (auto& p : processes) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    const bool exited = p->wait_for_exit(std::max(left, std::chrono::milliseconds(0)));
    const int code = !exited ? -1 : p->term_signal() != 0 ? 128 + p->term_signal() : p->exit_code();
    results.push_back(Finished{code, p->stdout_text() + p->stderr_text()});
  }
  return results;
}

Finished run_process(const std::vector<std::string>& argv, const Env& env, std::chrono::seconds deadline) {
  return run_processes(
             1, argv, [&](int) { return env; }, deadline)
      .at(0);
}

std::function<Env(int rank)> tcp_world(int n, Env extra) {
  const std::string port = std::to_string(free_port());
  return [=](int rank) {
    Env env = extra;
    env["RANK"] = std::to_string(rank);
    env["WORLD_SIZE"] = std::to_string(n);
    env["MASTER_ADDR"] = "127.0.0.1";
    env["MASTER_PORT"] = port;
    return env;
  };
}

std::function<Env(int rank)> file_world(int n, Env extra) {
  const std::string dir = fresh_directory();
  return [=](int rank) {
    Env env = extra;
    env["RANK"] = std::to_string(rank);
    env["WORLD_SIZE"] = std::to_string(n);
    env["LOCKSTEP_INIT_FILE"] = dir + "/store";
    return env;
  };
}

std::vector<std::string> mpirun(int n) { return {MPIRUN, "-n", std::to_string(n), "--oversubscribe"}; }

Env mpirun_env(Env extra) {
  extra["OMPI_ALLOW_RUN_AS_ROOT"] = "1";
  extra["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1";
  return extra;
}

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw std::runtime_error("cannot find a free port");
  }
  close(fd);
  return ntohs(address.sin_port);
}

std::string fresh_directory() {
  char pattern[] = "/tmp/lockstep-test-XXXXXX";
  if (mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp failed");
  return pattern;
}

size_t count_lines(const std::string& text) {
  size_t lines = 0;
  for (const auto& line : lines_of(text)) lines += !line.empty();
  return lines;
}

}  // namespace lockstep::testing
