#pragma once

#include <deque>
#include <memory>
#include <string>

#include <ATen/core/Tensor.h>

#include "comm/transports/stream_marks.h"

namespace lockstep {

// DDP's gradient wait and bucket spans as the device saw them (review #17). On CUDA the
// host only queues backward's kernels and the reductions, so the host's clock says how
// long queueing took, not how long the device waited for gradients. While the timeline
// records, this marks the current stream where the wait begins and ends and where each
// bucket launches and is written out, and puts the spans in the timeline once the device
// passed them. The newest wait the device finished is what DDP reports: a step or so behind
// the host, which runs ahead of the device. On the CPU it does nothing.
class DeviceWaitTimes {
 public:
  DeviceWaitTimes(at::Device device, int timeline_rank);

  /// Whether the spans are device times: a CUDA model while the timeline records.
  bool timed() const { return timed_; }
  /// A backward's gradient wait begins (the last bucket launches), at `host_us`.
  void wait_began(double host_us);
  /// A bucket launches: the mark its span starts at (null where not timed).
  std::shared_ptr<StreamMark> bucket_launched() const;
  /// A bucket, launched at `host_us` and `launched`, is written out: its span, on the device.
  void bucket_written(size_t bucket, const std::shared_ptr<StreamMark>& launched, double host_us, int64_t bytes,
                      int64_t parameters) const;
  /// The wait ends, its reductions written out; returns the newest wait the device
  /// finished, in seconds (0 before the first).
  double wait_ended();

 private:
  struct Wait {
    std::shared_ptr<StreamMark> began, ended;
  };

  at::Device device_;
  int timeline_rank_;
  bool timed_ = false;
  double began_us_ = 0;
  std::shared_ptr<StreamMark> began_;
  std::deque<Wait> unfinished_;  // waits queued, the device not yet past them
  double newest_seconds_ = 0;
};

}  // namespace lockstep
