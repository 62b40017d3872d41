#pragma once

#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

namespace lockstep {

namespace detail {
struct WorkState;
}

/// Handle to a collective running in the background. Its tensors must stay untouched
/// until wait() returns; errors of the collective are thrown from wait().
class Work {
 public:
  Work() = default;  // an already completed, empty piece of work
  explicit Work(std::shared_ptr<detail::WorkState> state);
  /// Work already completed with these outputs: what a blocking collective returns, with
  /// no state shared with another thread.
  static Work completed(std::vector<at::Tensor> outputs);

  /// Waits for the host's part of the collective. For CUDA tensors the device's part may
  /// still run: the waiting thread's current stream is ordered after it (docs/GPU.md), as
  /// with PyTorch's Work::wait().
  void wait() const;
  /// Whether the host's part is done (wait() would not block). For CUDA tensors this says
  /// nothing of the device's part; synchronize the current stream after wait() to know it.
  bool is_completed() const;
  /// Waits, then returns the outputs: the reduced tensors, the gathered parts, the scattered chunk.
  std::vector<at::Tensor> result() const;

 private:
  std::shared_ptr<detail::WorkState> state_;  // null when completed from the start
  std::vector<at::Tensor> outputs_;           // the outputs then
};

}  // namespace lockstep
