#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace lockstep::testing {

/// How long the tests let a launcher take to exit once its job is done or stopped.
constexpr std::chrono::seconds kExitBound{30};

/// A fresh empty directory under /tmp, removed with everything in it when this goes away.
class TemporaryDirectory {
 public:
  TemporaryDirectory();
  ~TemporaryDirectory();

  TemporaryDirectory(const TemporaryDirectory&) = delete;
  TemporaryDirectory& operator=(const TemporaryDirectory&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// Which of the test's own "NAME=value" entries a started process inherits.
using InheritFilter = std::function<bool(const std::string& entry)>;

/// This process's "NAME=value" entries that `inherit` keeps (all, without it), with `extra`
/// added or replacing those of the same name: the environment a started program gets.
std::vector<std::string> environment_with(const std::vector<std::string>& extra, const InheritFilter& inherit);

/// PROGRAM (looked up in PATH), its arguments and its environment, made ready before fork():
/// the child of a threaded test process must not allocate, so it only calls exec().
class PreparedProgram {
 public:
  PreparedProgram(std::vector<std::string> command, std::vector<std::string> environment);
  PreparedProgram(const PreparedProgram&) = delete;
  PreparedProgram& operator=(const PreparedProgram&) = delete;

  /// In the forked child: becomes the program; exits 126 when it cannot.
  [[noreturn]] void exec() const;

 private:
  std::vector<std::string> command_;
  std::vector<std::string> environment_;
  std::vector<char*> argv_;  // point into the strings above
  std::vector<char*> envp_;
};

/// A program a test starts and watches from outside, as a user's shell would: stdout and
/// stderr go to files, extra "NAME=value" entries are added to (or replace) the inherited
/// environment. A process still running when this is destroyed is SIGKILLed.
class ToolProcess {
 public:
  ToolProcess(const std::vector<std::string>& command, const std::vector<std::string>& extra_environment = {},
              const InheritFilter& inherit = nullptr);
  ~ToolProcess();

  ToolProcess(const ToolProcess&) = delete;
  ToolProcess& operator=(const ToolProcess&) = delete;

  pid_t pid() const { return pid_; }
  /// True once it has exited; false if it was still running after `timeout` (it is then SIGKILLed).
  bool wait_for_exit(std::chrono::milliseconds timeout);
  /// Its exit status, or -1 when a signal killed it.
  int exit_code() const;
  /// The signal that killed it, or 0.
  int term_signal() const;
  std::string stdout_text() const;
  std::string stderr_text() const;

 private:
  TemporaryDirectory output_directory_;
  pid_t pid_ = -1;
  bool exited_ = false;
  int wait_status_ = 0;
};

/// The pids in DIR/rank<r>.pid for r in [0, count), once all exist; empty after `timeout`.
std::vector<pid_t> wait_for_pid_files(const std::string& directory, int count, std::chrono::milliseconds timeout);

/// Whether `pid` is a live process (a zombie counts as gone).
bool process_alive(pid_t pid);

/// The text of file `path`; "" when it cannot be read.
std::string read_file(const std::string& path);

/// `text` split at newlines, without them.
std::vector<std::string> lines_of(const std::string& text);

/// Whether `part` occurs in `text`.
bool contains(const std::string& text, const std::string& part);

/// The number in capture group 2 of `pattern` on every line of `text` that matches it.
std::vector<double> numbers_on_lines(const std::string& text, const std::string& pattern);

}  // namespace lockstep::testing
