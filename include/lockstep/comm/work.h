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
  Work();  // an already completed, empty piece of work
  explicit Work(std::shared_ptr<detail::WorkState> state);

  void wait() const;
  bool is_completed() const;
  /// Waits, then returns the outputs: the reduced tensors, the gathered parts, the scattered chunk.
  std::vector<at::Tensor> result() const;

 private:
  std::shared_ptr<detail::WorkState> state_;
};

}  // namespace lockstep
