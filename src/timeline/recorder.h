#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <type_traits>

#include "timeline/events.h"

// What lockstep's own code records into the timeline (include/lockstep/timeline.h), in the
// format of timeline/events.h. Times are microseconds of the steady clock, which every
// process of a host shares; the writer moves each rank's onto rank 0's clock.
namespace lockstep {
class StreamMark;  // comm/transports/stream_marks.h
}

namespace lockstep::timeline::detail {

using format::Track;
namespace event = format::event;
namespace key = format::key;

// Process-wide by nature, like the clock it reads: recording must cost one load when off,
// without a recorder passed through every layer.
extern std::atomic<bool> recording;

inline bool on() { return recording.load(std::memory_order_relaxed); }

/// This rank's clock now, in microseconds (a test may shift one rank's: test_hooks.h).
double now_us(int rank);

/// LOCKSTEP_TIMELINE: the prefix every rank of a job records under, "" when unset. Read
/// once, here: init() starts the timeline by it, and the Trainer leaves its own off then.
const std::string& prefix_from_environment();

/// The prefix of a generation's files: `prefix` for the first, PREFIX.generation-G after
/// live recovery regroups, whose ranks are other workers' (and so other files).
inline std::string generation_prefix(const std::string& prefix, int generation) {
  return generation == 0 ? prefix : prefix + ".generation-" + std::to_string(generation);
}

/// "\"text\"" with JSON's escapes.
std::string quoted(const std::string& text);

/// An event's args, key by key (keys from events.h): Args().add(key::kBytes, 512).
class Args {
 public:
  template <typename Integer, std::enable_if_t<std::is_integral_v<Integer>, int> = 0>
  Args& add(const char* key, Integer value) {
    return add_json(key, std::to_string(value));
  }
  Args& add(const char* key, double value) { return add_json(key, std::to_string(value)); }
  Args& add(const char* key, const std::string& value) { return add_json(key, quoted(value)); }
  /// The inside of a JSON object ("\"bytes\": 512"), or empty.
  const std::string& json() const { return json_; }

 private:
  Args& add_json(const char* key, const std::string& value) {
    json_ += (json_.empty() ? "\"" : ", \"") + std::string(key) + "\": " + value;
    return *this;
  }

  std::string json_;
};

/// A span from `start_us` to `end_us` ("X"), a span's begin ("B") or end ("E"), or an instant
/// ("i", at start_us).
void record(int rank, Track track, char phase, const std::string& name, double start_us, double end_us = 0,
            const Args& args = Args());

/// A span ("X") of work on `device`, from stream mark `start` to `end`: written once the
/// device passed both (the writer asks every 100 ms; stop() waits for the rank's), with
/// key::kDevice, and key::kQueuedUs from `called_us`, the host's time of the call that
/// queued the work, to the span's start.
void record_device_span(int rank, Track track, const std::string& name, const std::string& device,
                        std::shared_ptr<StreamMark> start, std::shared_ptr<StreamMark> end, double called_us,
                        const Args& args);

}  // namespace lockstep::timeline::detail
