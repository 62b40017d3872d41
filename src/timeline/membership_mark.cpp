#include "timeline/membership_mark.h"

#include <mutex>
#include <optional>

#include "lockstep/comm/init.h"
#include "timeline/recorder.h"

namespace lockstep::timeline::detail {
namespace {

// A change marked while no timeline recorded (lockstep train --timeline starts one per fit,
// after the heal), kept for the next start.
std::mutex pending_mutex;
std::optional<Args> pending;

void record_pending(const std::lock_guard<std::mutex>&) {
  if (!pending || !on()) return;
  const int rank = lockstep::rank();
  record(rank, Track::marks, 'i', event::kMembership, now_us(rank), 0, *pending);
  pending.reset();
}

}  // namespace

void mark_membership(int generation, int workers, const std::string& why, double regroup_seconds, double heal_seconds) {
  std::lock_guard<std::mutex> lock(pending_mutex);
  pending = Args()
                .add(key::kGeneration, static_cast<int64_t>(generation))
                .add(key::kWorkers, static_cast<int64_t>(workers))
                .add(key::kWhy, why)
                .add(key::kRegroupSeconds, regroup_seconds)
                .add(key::kHealSeconds, heal_seconds);
  record_pending(lock);
}

void record_pending_membership_mark() {
  std::lock_guard<std::mutex> lock(pending_mutex);
  record_pending(lock);
}

}  // namespace lockstep::timeline::detail
