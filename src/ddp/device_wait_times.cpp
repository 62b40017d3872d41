#include "ddp/device_wait_times.h"

#include <algorithm>

#include "timeline/recorder.h"

namespace lockstep {

namespace tl = timeline::detail;

DeviceWaitTimes::DeviceWaitTimes(at::Device device, int timeline_rank)
    : device_(device), timeline_rank_(timeline_rank) {}

void DeviceWaitTimes::wait_began(double host_us) {
  timed_ = device_.is_cuda() && tl::on();
  if (!timed_) return;
  began_us_ = host_us;
  began_ = mark_current_stream(device_);
}

std::shared_ptr<StreamMark> DeviceWaitTimes::bucket_launched() const {
  return device_.is_cuda() && tl::on() ? mark_current_stream(device_) : nullptr;
}

void DeviceWaitTimes::bucket_written(size_t bucket, const std::shared_ptr<StreamMark>& launched, double host_us,
                                     int64_t bytes, int64_t parameters) const {
  // The current stream was just ordered after the bucket's reduction: its mark passes once
  // the reduction is done.
  if (!launched) return;
  std::shared_ptr<StreamMark> reduced = mark_current_stream(device_);
  if (!reduced) return;
  tl::record_device_span(timeline_rank_, tl::Track::buckets, tl::event::bucket(bucket), device_.str(), launched,
                         std::move(reduced), host_us,
                         tl::Args()
                             .add(tl::key::kBucket, static_cast<int64_t>(bucket))
                             .add(tl::key::kBytes, bytes)
                             .add(tl::key::kParameters, parameters));
}

double DeviceWaitTimes::wait_ended() {
  if (timed_ && began_) {
    std::shared_ptr<StreamMark> ended = mark_current_stream(device_);
    if (ended) {
      tl::record_device_span(timeline_rank_, tl::Track::buckets, tl::event::kGradientWait, device_.str(), began_, ended,
                             began_us_, tl::Args());
      unfinished_.push_back({std::move(began_), std::move(ended)});
    }
  }
  began_.reset();
  constexpr size_t kAtMost = 64;  // a wait the device cannot time (an error) is not kept forever
  while (unfinished_.size() > kAtMost) unfinished_.pop_front();
  while (!unfinished_.empty()) {
    const auto ended = unfinished_.front().ended->steady_us();
    const auto began = unfinished_.front().began->steady_us();
    if (!ended || !began) break;
    newest_seconds_ = std::max(0.0, *ended - *began) / 1e6;
    unfinished_.pop_front();
  }
  return newest_seconds_;
}

}  // namespace lockstep
