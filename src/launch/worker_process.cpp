#include "launch/worker_process.h"

#include <sched.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "lockstep/error.h"

namespace lockstep::launch {
namespace {

struct Pipe {
  int read_end = -1;
  int write_end = -1;
};

Pipe open_pipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    throw Error(std::string("cannot create a pipe for a worker: ") + std::strerror(errno));
  }
  return Pipe{fds[0], fds[1]};
}

std::vector<char*> as_null_terminated(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (const std::string& text : strings) {
    pointers.push_back(const_cast<char*>(text.c_str()));
  }
  pointers.push_back(nullptr);
  return pointers;
}

// Runs in the forked child of a multi-threaded parent: async-signal-safe calls only.
[[noreturn]] void become_worker(char* const argv[], char* const envp[], pid_t launcher_pid, const Pipe& out,
                                const Pipe& err, const Pipe& exec_error, const cpu_set_t* cpu) {
  setpgid(0, 0);  // own group: the launcher signals it as a whole, a terminal's Ctrl-C does not
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != launcher_pid) {
    _exit(127);  // the launcher died before PDEATHSIG was armed
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);  // the launcher blocks signals it reads via signalfd
  dup2(out.write_end, STDOUT_FILENO);
  dup2(err.write_end, STDERR_FILENO);
  if (cpu != nullptr && sched_setaffinity(0, sizeof *cpu, cpu) != 0) {
    int affinity_errno = errno;
    (void)!write(exec_error.write_end, &affinity_errno, sizeof affinity_errno);
    _exit(127);
  }
  execvpe(argv[0], argv, envp);
  int exec_errno = errno;
  (void)!write(exec_error.write_end, &exec_errno, sizeof exec_errno);
  _exit(127);
}

// Blocks until the child has exec'd (the close-on-exec pipe closes) or reported why it could not.
int read_exec_errno(int fd) {
  int exec_errno = 0;
  ssize_t got;
  do {
    got = read(fd, &exec_errno, sizeof exec_errno);
  } while (got < 0 && errno == EINTR);
  return got == static_cast<ssize_t>(sizeof exec_errno) ? exec_errno : 0;
}

}  // namespace

WorkerProcess spawn_worker(const std::vector<std::string>& command, const std::vector<std::string>& environment,
                           int cpu) {
  std::vector<char*> argv = as_null_terminated(command);
  std::vector<char*> envp = as_null_terminated(environment);
  Pipe out = open_pipe();
  Pipe err = open_pipe();
  Pipe exec_error = open_pipe();
  pid_t launcher_pid = getpid();
  cpu_set_t pinned;  // made before fork: the child may only make async-signal-safe calls
  CPU_ZERO(&pinned);
  if (cpu >= 0) CPU_SET(cpu, &pinned);

  pid_t pid = fork();
  if (pid == 0) {
    become_worker(argv.data(), envp.data(), launcher_pid, out, err, exec_error, cpu >= 0 ? &pinned : nullptr);
  }
  int fork_errno = errno;
  close(out.write_end);
  close(err.write_end);
  close(exec_error.write_end);
  if (pid < 0) {
    close(out.read_end);
    close(err.read_end);
    close(exec_error.read_end);
    throw Error(std::string("cannot fork a worker: ") + std::strerror(fork_errno));
  }
  setpgid(pid, pid);  // also here, so the group exists before anyone signals it

  int exec_errno = read_exec_errno(exec_error.read_end);
  close(exec_error.read_end);
  if (exec_errno != 0) {
    waitpid(pid, nullptr, 0);  // it has already called _exit
    close(out.read_end);
    close(err.read_end);
    throw Error("cannot run '" + command.front() + "': " + std::strerror(exec_errno));
  }
  fcntl(out.read_end, F_SETFL, O_NONBLOCK);
  fcntl(err.read_end, F_SETFL, O_NONBLOCK);
  return WorkerProcess{pid, out.read_end, err.read_end};
}

}  // namespace lockstep::launch
