#include "launch/signal_inbox.h"

#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "lockstep/error.h"

namespace lockstep::launch {

SignalInbox::SignalInbox() {
  // Exits are learnt from SIGCHLD; an inherited SIG_IGN would make the kernel reap workers
  // before their exit status could be read.
  signal(SIGCHLD, SIG_DFL);
  sigset_t signals;
  sigemptyset(&signals);
  for (int number : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGCHLD}) {
    sigaddset(&signals, number);
  }
  pthread_sigmask(SIG_BLOCK, &signals, &previous_mask_);
  fd_ = signalfd(-1, &signals, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd_ < 0) {
    int error = errno;
    pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
    throw Error(std::string("cannot watch for signals (signalfd): ") + std::strerror(error));
  }
}

SignalInbox::~SignalInbox() {
  // The workers are done by now; a late SIGTERM left pending would kill the launcher on unblock.
  while (next()) {
  }
  close(fd_);
  pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
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
