#pragma once

#include <signal.h>

#include <iterator>
#include <optional>

namespace lockstep::launch {

/// The stop signals (SIGINT, SIGTERM, SIGHUP, SIGQUIT, as torchrun forwards), SIGUSR1 (passed
/// on to the workers: lockstep train checkpoints on it) and SIGCHLD as
/// readable events on a file descriptor (signalfd), so one poll(2) loop sees worker output,
/// worker exits and stop requests without signal handlers.
/// The signals stay blocked in this thread and in threads created afterwards (the store's),
/// and are unblocked again on destruction. A thread that already ran (libtorch 2.x starts
/// some while a command prepares) has them unblocked: a handler there passes each on to this
/// thread, so none is lost (a worker's exit) or acted on by default (SIGTERM ending the
/// launcher).
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
  void restore_actions();

  static constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGCHLD};

  sigset_t previous_mask_;
  struct sigaction previous_actions_[std::size(kSignals)];
  int fd_ = -1;
};

}  // namespace lockstep::launch
