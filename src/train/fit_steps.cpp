#include "train/fit_steps.h"

#include <algorithm>

#include "lockstep/comm/init.h"
#include "timeline/recorder.h"

namespace lockstep::train {

namespace tl = timeline::detail;

TimelineSteps::TimelineSteps(ProcessGroup group, std::function<size_t()> buckets)
    : group_(std::move(group)), buckets_(std::move(buckets)), rank_(lockstep::rank()) {}

void TimelineSteps::batch_arrived(int64_t step, double fetch_started_us) {
  first_collective_ = group_.collectives_called();
  // The step holds the wait for its batch: begun where that wait began.
  tl::record(rank_, tl::Track::training, 'B', tl::event::kStep, fetch_started_us, 0,
             tl::Args().add(tl::key::kStep, step));
  tl::record(rank_, tl::Track::training, 'X', tl::event::kDataWait, fetch_started_us, tl::now_us(rank_));
}

void TimelineSteps::step_ended(int64_t /*step*/) {
  // The collectives the comm layer counted in this step, by sequence number.
  tl::record(rank_, tl::Track::training, 'E', tl::event::kStep, tl::now_us(rank_), 0,
             tl::Args()
                 .add(tl::key::kFirstCollective, static_cast<int64_t>(first_collective_))
                 .add(tl::key::kCollectives, static_cast<int64_t>(group_.collectives_called() - first_collective_))
                 .add(tl::key::kBuckets, static_cast<int64_t>(buckets_())));
}

StragglerNotices::StragglerNotices(ProcessGroup group, std::function<void(const std::string&)> notice)
    : watch_(std::move(group)), notice_(std::move(notice)) {}

void StragglerNotices::updated(const StepTimes& t) {
  // On CUDA the wait is the device's, of a step the host may have queued a while ago.
  watch_.add_step(t.data_seconds, std::max(0.0, t.compute_seconds - t.gradient_wait_seconds), t.gradient_wait_seconds);
  const std::string notice = watch_.take_notice();
  if (!notice.empty()) notice_(notice);
}

CheckpointPolicy::CheckpointPolicy(ProcessGroup group, bool handle_signals, std::function<bool()> joiner_waiting,
                                   int64_t checkpoint_every, int64_t stop_after_step)
    : group_(std::move(group)),
      joiner_waiting_(std::move(joiner_waiting)),
      checkpoint_every_(checkpoint_every),
      stop_after_step_(stop_after_step) {
  if (handle_signals || joiner_waiting_) signals_.emplace(handle_signals);
}

CheckpointPolicy::Decision CheckpointPolicy::at_step(int64_t step) {
  const SignalRequests::Asked asked =
      signals_ ? signals_->agree(group_, joiner_waiting_ && joiner_waiting_()) : SignalRequests::Asked();
  Decision d;
  d.stop = asked.stop || (stop_after_step_ > 0 && step >= stop_after_step_);
  d.preempted = asked.stop;
  d.asked_by_signal = asked.checkpoint;
  d.save = d.stop || asked.checkpoint || (checkpoint_every_ > 0 && step % checkpoint_every_ == 0);
  // A joiner needs no checkpoint: it is healed from a peer.
  d.regroup = asked.joiner && !d.stop;
  d.stop = d.stop || d.regroup;
  return d;
}

}  // namespace lockstep::train
