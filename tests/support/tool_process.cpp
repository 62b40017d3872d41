#include "support/tool_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace lockstep::testing {
std::string read_file(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

namespace {

std::vector<char*> as_null_terminated(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& text : strings) {
    pointers.push_back(text.data());
  }
  pointers.push_back(nullptr);
  return pointers;
}

std::string name_of(const std::string& entry) { return entry.substr(0, entry.find('=')); }

}  // namespace

std::vector<std::string> environment_with(const std::vector<std::string>& extra, const InheritFilter& inherit) {
  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    bool replaced = false;
    for (const std::string& added : extra) {
      replaced = replaced || name_of(added) == name_of(*entry);
    }
    if (!replaced && (!inherit || inherit(*entry))) {
      environment.emplace_back(*entry);
    }
  }
  environment.insert(environment.end(), extra.begin(), extra.end());
  return environment;
}

PreparedProgram::PreparedProgram(std::vector<std::string> command, std::vector<std::string> environment)
    : command_(std::move(command)),
      environment_(std::move(environment)),
      argv_(as_null_terminated(command_)),
      envp_(as_null_terminated(environment_)) {}

void PreparedProgram::exec() const {
  execvpe(argv_[0], argv_.data(), envp_.data());
  _exit(126);
}

ToolProcess::ToolProcess(const std::vector<std::string>& command, const std::vector<std::string>& extra_environment,
                         const InheritFilter& inherit) {
  const PreparedProgram program(command, environment_with(extra_environment, inherit));
  std::string stdout_path = output_directory_.path() + "/stdout";
  std::string stderr_path = output_directory_.path() + "/stderr";

  pid_ = fork();
  if (pid_ < 0) {
    throw std::runtime_error("fork failed");
  }
  if (pid_ == 0) {
    int out = open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    program.exec();
  }
}

ToolProcess::~ToolProcess() {
  if (!exited_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

bool ToolProcess::wait_for_exit(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!exited_) {
    exited_ = waitpid(pid_, &wait_status_, WNOHANG) == pid_;
    if (!exited_ && std::chrono::steady_clock::now() >= deadline) {
      kill(pid_, SIGKILL);  // its workers follow through PDEATHSIG
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(exited_ ? 0 : 10));
  }
  return true;
}

int ToolProcess::exit_code() const { return WIFEXITED(wait_status_) ? WEXITSTATUS(wait_status_) : -1; }

int ToolProcess::term_signal() const { return WIFSIGNALED(wait_status_) ? WTERMSIG(wait_status_) : 0; }

std::string ToolProcess::stdout_text() const { return read_file(output_directory_.path() + "/stdout"); }

std::string ToolProcess::stderr_text() const { return read_file(output_directory_.path() + "/stderr"); }

TemporaryDirectory::TemporaryDirectory() {
  char path[] = "/tmp/lockstep-launch-test-XXXXXX";
  if (mkdtemp(path) == nullptr) {
    throw std::runtime_error("cannot create a directory under /tmp for a launcher test");
  }
  path_ = path;
}

TemporaryDirectory::~TemporaryDirectory() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::vector<pid_t> wait_for_pid_files(const std::string& directory, int count, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::vector<pid_t> pids;
    for (int rank = 0; rank < count; ++rank) {
      std::ifstream file(directory + "/rank" + std::to_string(rank) + ".pid");
      pid_t pid = 0;
      if (file >> pid) {
        pids.push_back(pid);
      }
    }
    if (static_cast<int>(pids.size()) == count) {
      return pids;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return {};
}

bool process_alive(pid_t pid) {
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  std::size_t command_end = stat.rfind(')');  // "pid (command) state ...", command may hold spaces
  if (command_end == std::string::npos || command_end + 2 >= stat.size()) {
    return false;
  }
  char state = stat[command_end + 2];
  return state != 'Z' && state != 'X';
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream stream(text);
  std::string line;
  while (std::getline(stream, line)) {
    lines.push_back(line);
  }
  return lines;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::vector<double> numbers_on_lines(const std::string& text, const std::string& pattern) {
  const std::regex line(pattern);
  std::vector<double> numbers;
  for (const std::string& l : lines_of(text)) {
    std::smatch match;
    if (std::regex_search(l, match, line)) numbers.push_back(std::stod(match[2]));
  }
  return numbers;
}

}  // namespace lockstep::testing
