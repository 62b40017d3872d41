#include "support/world.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace lockstep::testing {
namespace {

// Variables of launchers that must not leak from the test's environment into workers.
bool is_launcher_variable(const std::string& name) {
  for (const char* prefix : {"RANK=", "WORLD_SIZE=", "LOCAL_RANK=", "LOCAL_WORLD_SIZE=",
                             "MASTER_ADDR=", "MASTER_PORT=", "OMPI_", "PMIX_", "SLURM_",
                             "LOCKSTEP_", "TORCHELASTIC_"}) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

pid_t start(const std::vector<std::string>& argv, const Env& env, const std::string& log) {
  // Everything is prepared before fork: the child only redirects and execs.
  std::vector<std::string> entries;
  for (char** e = environ; *e; ++e) {
    if (!is_launcher_variable(*e)) entries.emplace_back(*e);
  }
  for (const auto& [name, value] : env) entries.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (auto& entry : entries) envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    execvpe(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(fd);
  return pid;
}

}  // namespace

std::vector<Finished> run_processes(int n, const std::vector<std::string>& argv,
                                    const std::function<Env(int rank)>& env_for,
                                    std::chrono::seconds deadline) {
  const std::string dir = fresh_directory();
  std::vector<pid_t> pids;
  std::vector<Finished> results(n, Finished{-1, ""});
  for (int r = 0; r < n; ++r) pids.push_back(start(argv, env_for(r), dir + "/" + std::to_string(r)));
  const auto end = std::chrono::steady_clock::now() + deadline;
  int running = n;
  while (running > 0 && std::chrono::steady_clock::now() < end) {
    for (int r = 0; r < n; ++r) {
      int status = 0;
      if (pids[r] == 0 || waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      results[r].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      pids[r] = 0;
      --running;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (int r = 0; r < n; ++r) {
    if (pids[r] == 0) continue;
    kill(pids[r], SIGKILL);
    waitpid(pids[r], nullptr, 0);
  }
  for (int r = 0; r < n; ++r) results[r].output = read_file(dir + "/" + std::to_string(r));
  return results;
}

Finished run_process(const std::vector<std::string>& argv, const Env& env,
                     std::chrono::seconds deadline) {
  return run_processes(1, argv, [&](int) { return env; }, deadline).at(0);
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

std::vector<std::string> mpirun(int n) {
  return {MPIRUN, "-n", std::to_string(n), "--oversubscribe"};
}

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
  std::istringstream in(text);
  size_t lines = 0;
  for (std::string line; std::getline(in, line);) lines += !line.empty();
  return lines;
}

}  // namespace lockstep::testing
