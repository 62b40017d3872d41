// The timeline watching comm: each collective a span on its rank's collectives track (a
// mark when it failed), and the timeline started as ranks join when LOCKSTEP_TIMELINE asks,
// stopped as they leave. Registered when the library loads, so comm includes nothing of
// the timeline.
#include <cstdlib>
#include <string>

#include <c10/core/ScalarType.h>

#include "comm/groups/call_observer.h"
#include "lockstep/comm/init.h"
#include "lockstep/error.h"
#include "lockstep/timeline.h"
#include "timeline/recorder.h"

namespace lockstep::timeline::detail {
namespace {

// The bytes a call moves and its dtypes ("float32,int64").
std::pair<int64_t, std::string> bytes_and_dtypes(const Call& call) {
  int64_t bytes = 0;
  std::string dtypes;
  for (size_t i = 0; i < call.shapes.size(); ++i) {
    int64_t elements = 1;
    for (int64_t d : call.shapes[i]) elements *= d;
    bytes += elements * static_cast<int64_t>(c10::elementSize(call.dtypes[i]));
    const std::string dtype = dtype_name(call.dtypes[i]);
    if (dtypes.find(dtype) == std::string::npos) dtypes += (dtypes.empty() ? "" : ",") + dtype;
  }
  return {bytes, dtypes};
}

// A job the launcher restarted: where the new attempt begins, and why the last one ended (a
// worker that died, or one that missed its heartbeats).
void mark_restart(int rank, const WorldSpec& spec) {
  if (spec.restart_count == 0) return;
  const bool hung = spec.restart_reason.find("missed its heartbeats") != std::string::npos;
  record(rank, Track::marks, 'i', hung ? event::kRestartAfterMissedHeartbeats : event::kRestart, now_us(rank), 0,
         Args().add(key::kAttempt, static_cast<int64_t>(spec.restart_count)).add(key::kWhy, spec.restart_reason));
}

class TimelineObserver : public lockstep::detail::CallObserver {
 public:
  bool watching() const override { return on(); }
  double now_us(int world_rank) const override { return timeline::detail::now_us(world_rank); }

  void call_ended(const lockstep::detail::CallSeen& seen) override {
    const auto [bytes, dtypes] = bytes_and_dtypes(seen.call);
    auto args = Args()
                    .add(key::kSeq, static_cast<int64_t>(seen.call.seq))
                    .add(key::kGroup, seen.group)
                    .add(key::kTransport, seen.transport)
                    .add(key::kDtype, dtypes)
                    .add(key::kBytes, bytes);
    const StreamSpan& device = seen.on_device;
    if (device.started && device.ended && seen.error == nullptr) {
      record_device_span(seen.world_rank, Track::collectives, to_string(seen.call.kind), device.device, device.started,
                         device.ended, seen.queued_us > 0 ? seen.queued_us : seen.started_us, args);
      return;
    }
    record(seen.world_rank, Track::collectives, 'X', to_string(seen.call.kind), seen.started_us, seen.ended_us,
           args.add(key::kQueuedUs, seen.queued_us > 0 ? seen.started_us - seen.queued_us : 0.0));
    if (seen.error == nullptr) return;
    const bool mismatch = dynamic_cast<const MismatchError*>(seen.error) != nullptr;
    record(seen.world_rank, Track::marks, 'i', mismatch ? event::kMismatch : event::kCollectiveFailed, seen.ended_us, 0,
           Args().add(key::kWhat, std::string(seen.error->what())));
  }

  void joined(const WorldSpec& spec) override {
    const std::string& prefix = prefix_from_environment();
    if (prefix.empty()) return;
    timeline::start(generation_prefix(prefix, spec.generation));
    mark_restart(lockstep::rank(), spec);
  }

  void leaving() override {
    if (timeline::enabled()) timeline::stop();
  }
};

[[maybe_unused]] const bool registered = [] {
  static TimelineObserver observer;
  lockstep::detail::set_call_observer(&observer);
  return true;
}();

}  // namespace
}  // namespace lockstep::timeline::detail
