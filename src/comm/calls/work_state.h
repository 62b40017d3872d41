#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <vector>

#include <ATen/core/Tensor.h>

namespace lockstep::detail {

/// What a Work handle waits on: filled in once by whoever ran the collective.
struct WorkState {
  std::mutex mutex;
  std::condition_variable done_changed;
  bool done = false;
  std::exception_ptr error;
  std::vector<at::Tensor> outputs;
  /// Set while queued: runs the work (and what is queued before it) on the waiting thread
  /// when the background thread has not started it, sparing two thread hand-offs.
  std::function<void(WorkState&)> run_here;
  /// Run by every wait() that sees the work succeed, on the waiting thread: how a staged
  /// collective orders the waiter's current CUDA stream after its copies back.
  std::function<void()> after_done;

  void finish(std::vector<at::Tensor> results, std::exception_ptr failure) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      outputs = std::move(results);
      error = failure;
      done = true;
    }
    done_changed.notify_all();
  }
};

}  // namespace lockstep::detail
