#pragma once

// Device time for the timeline: a mark is a CUDA event with timing, recorded on a stream,
// whose time is known once the device got there. On CUDA the host only queues work, so
// the host's clock says when work was queued, not when it ran; a span between two marks
// says when it ran (review #17). Times are on the host's steady clock, as the timeline's
// are: each device's events are measured from an anchor event whose host time is known,
// made again every few seconds so that cudaEventElapsedTime's float keeps microseconds.

#include <memory>
#include <optional>
#include <string>

#include <ATen/core/Tensor.h>
#include <c10/core/Stream.h>

namespace lockstep {

/// A point in one stream's work.
class StreamMark {
 public:
  virtual ~StreamMark() = default;
  /// When the device got there, in microseconds of the host's steady clock; nullopt while
  /// it has not, or when the device cannot tell (an error, or CUDA gone as the process
  /// exits). Never throws; safe from any thread, also while another captures a CUDA graph.
  virtual std::optional<double> steady_us() = 0;
  /// The same, waiting for the device to get there.
  virtual std::optional<double> wait_steady_us() = 0;
};

/// Where some work ran on a device stream: from `started` to `ended`, null where not timed.
struct StreamSpan {
  std::string device;  // "cuda:0"
  std::shared_ptr<StreamMark> started, ended;
};

/// Marks how far `stream` has got. Null where there is nothing to mark: a CPU stream, a
/// stream capturing a CUDA graph (its work runs at each replay), or the CPU build.
std::shared_ptr<StreamMark> mark_stream(const c10::Stream& stream);

/// Marks how far the current stream of `device` has got; null for the CPU.
std::shared_ptr<StreamMark> mark_current_stream(at::Device device);

}  // namespace lockstep
