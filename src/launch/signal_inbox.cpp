#include "launch/signal_inbox.h"

#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "lockstep/error.h"

namespace lockstep::launch {
namespace {

// The thread that reads the inbox, where the signals are blocked and wait for signalfd.
std::atomic<pid_t> inbox_thread{0};

// Runs in a thread that has the signal unblocked; the signal goes on to the inbox's thread
// (tgkill is async-signal-safe), pending there until signalfd reads it.
void pass_to_inbox(int number) {
  const int saved = errno;
  syscall(SYS_tgkill, getpid(), inbox_thread.load(), number);
  errno = saved;
}

}  // namespace

SignalInbox::SignalInbox() {
  sigset_t signals;
  sigemptyset(&signals);
  for (int number : kSignals) sigaddset(&signals, number);
  pthread_sigmask(SIG_BLOCK, &signals, &previous_mask_);
  inbox_thread = static_cast<pid_t>(syscall(SYS_gettid));
  // Also replaces an inherited SIG_IGN for SIGCHLD, which would make the kernel reap workers
  // before their exit status could be read.
  struct sigaction pass {};
  pass.sa_handler = pass_to_inbox;
  pass.sa_flags = SA_RESTART;
  sigfillset(&pass.sa_mask);
  for (size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &pass, &previous_actions_[i]);
  fd_ = signalfd(-1, &signals, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd_ < 0) {
    int error = errno;
    restore_actions();
    pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
    throw Error(std::string("cannot watch for signals (signalfd): ") + std::strerror(error));
  }
}

SignalInbox::~SignalInbox() {
  // The workers are done by now; a late SIGTERM left pending would kill the launcher on unblock.
  while (next()) {
  }
  close(fd_);
  restore_actions();
  pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
}

void SignalInbox::restore_actions() {
  for (size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &previous_actions_[i], nullptr);
}

std::optional<int> SignalInbox::next() {
  signalfd_siginfo info;
  ssize_t got;
  do {
    got = read(fd_, &info, sizeof info);
  } while (got < 0 && errno == EINTR);
  if (got != static_cast<ssize_t>(sizeof info)) {
    return std::nullopt;
  }
  return static_cast<int>(info.ssi_signo);
}

}  // namespace lockstep::launch
