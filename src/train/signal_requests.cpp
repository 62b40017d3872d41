#include "train/signal_requests.h"

#include <signal.h>

#include <atomic>
#include <mutex>

#include <ATen/ATen.h>

#include "lockstep/comm/collectives.h"

namespace lockstep::train {
namespace {

// Written by the handler, read by every Trainer (replicas of one process share them).
std::atomic<int> stop_signals{0};
std::atomic<int> checkpoint_signals{0};
static_assert(std::atomic<int>::is_always_lock_free, "the handler needs lock-free atomics");

void on_signal(int number) {
  if (number == SIGUSR1) {
    checkpoint_signals.fetch_add(1);
  } else if (stop_signals.fetch_add(1) > 0) {
    signal(number, SIG_DFL);  // asked twice: stop now
    raise(number);
  }
}

void install_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    for (int number : {SIGTERM, SIGINT, SIGUSR1}) sigaction(number, &action, nullptr);
  });
}

}  // namespace

SignalRequests::SignalRequests(bool handle_signals) : handle_signals_(handle_signals) {
  if (handle_signals_) install_handlers();
}

SignalRequests::Asked SignalRequests::agree(const ProcessGroup& group, bool joiner_waiting) {
  const int checkpoints = handle_signals_ ? checkpoint_signals.load() : 0;
  const bool stop = handle_signals_ && stop_signals.load() > 0;
  at::Tensor flags =
      at::tensor({stop ? 1 : 0, checkpoints > checkpoints_seen_ ? 1 : 0, joiner_waiting ? 1 : 0}, at::kInt);
  checkpoints_seen_ = checkpoints;
  all_reduce(flags, ReduceOp::Max, group);
  return {flags[0].item<int>() != 0, flags[1].item<int>() != 0, flags[2].item<int>() != 0};
}

}  // namespace lockstep::train
