#include "support/pty_process.h"

#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>

#include "support/tool_process.h"

namespace lockstep::testing {
namespace {

using Clock = std::chrono::steady_clock;

void stop_output_processing(int terminal_fd) {
  termios settings{};
  tcgetattr(terminal_fd, &settings);
  settings.c_oflag &= ~OPOST;
  tcsetattr(terminal_fd, TCSANOW, &settings);
}

// Appends what the program writes to `output` until the terminal's last holder closes it
// (true) or `deadline` passes (false).
bool read_until_closed(int master_fd, std::string& output, Clock::time_point deadline) {
  char buffer[4096];
  while (Clock::now() < deadline) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd polled{master_fd, POLLIN, 0};
    if (poll(&polled, 1, static_cast<int>(left.count())) <= 0) continue;  // timed out or interrupted
    const ssize_t got = read(master_fd, buffer, sizeof buffer);
    if (got > 0) {
      output.append(buffer, static_cast<std::size_t>(got));
    } else if (!(got < 0 && errno == EINTR)) {
      return true;  // Linux says EIO once no process holds the terminal any more
    }
  }
  return false;
}

}  // namespace

Finished run_in_terminal(const std::vector<std::string>& argv, std::chrono::seconds deadline) {
  const PreparedProgram program(
      argv, environment_with({}, [](const std::string& entry) { return !is_launcher_variable(entry); }));
  int master_fd = -1;
  const pid_t pid = forkpty(&master_fd, nullptr, nullptr, nullptr);
  if (pid < 0) throw std::runtime_error("forkpty failed: no pseudo-terminal for the test");
  if (pid == 0) {
    stop_output_processing(STDOUT_FILENO);
    program.exec();
  }
  Finished finished{-1, ""};
  const bool closed = read_until_closed(master_fd, finished.output, Clock::now() + deadline);
  if (!closed) kill(pid, SIGKILL);  // its workers follow through PDEATHSIG
  close(master_fd);
  int status = 0;
  waitpid(pid, &status, 0);
  if (closed) finished.exit_code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  return finished;
}

}  // namespace lockstep::testing
