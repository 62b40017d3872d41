#include "lockstep/comm/work.h"

#include "comm/calls/work_state.h"

namespace lockstep {

Work::Work(std::shared_ptr<detail::WorkState> state) : state_(std::move(state)) {}

Work Work::completed(std::vector<at::Tensor> outputs) {
  Work work;
  work.outputs_ = std::move(outputs);
  return work;
}

void Work::wait() const {
  if (!state_) return;
  std::unique_lock<std::mutex> lock(state_->mutex);
  if (!state_->done && state_->run_here) {
    const auto run_here = state_->run_here;
    lock.unlock();
    run_here(*state_);
    lock.lock();
  }
  // No deadline here: every collective is bounded by the process group's own timeout.
  state_->done_changed.wait(lock, [&] { return state_->done; });
  if (state_->error) std::rethrow_exception(state_->error);
  const auto after_done = state_->after_done;
  lock.unlock();
  if (after_done) after_done();
}

bool Work::is_completed() const {
  if (!state_) return true;
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->done;
}

std::vector<at::Tensor> Work::result() const {
  if (!state_) return outputs_;
  wait();
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->outputs;
}

}  // namespace lockstep
