#pragma once

#include <signal.h>

#include <optional>

namespace lockstep::launch {

/// The stop signals (SIGINT, SIGTERM, SIGHUP, SIGQUIT, as torchrun forwards), SIGUSR1 (passed
/// on to the workers: lockstep train checkpoints on it) and SIGCHLD as
/// readable events on a file descriptor (signalfd), so one poll(2) loop sees worker output,
/// worker exits and stop requests without signal handlers.
/// Construct it before starting any thread: the signals stay blocked in this thread and in
/// threads created afterwards (the store's), and are unblocked again on destruction.
class SignalInbox {
 public:
  SignalInbox();
  ~SignalInbox();

  SignalInbox(const SignalInbox&) = delete;
  SignalInbox& operator=(const SignalInbox&) = delete;

  /// Readable (POLLIN) while a signal is waiting.
  int fd() const { return fd_; }
  /// The next waiting signal's number, or nullopt when none is waiting.
  std::optional<int> next();

 private:
  sigset_t previous_mask_;
  int fd_ = -1;
};

}  // namespace lockstep::launch
