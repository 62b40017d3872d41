#include "timeline/membership_mark.h"

#include "lockstep/comm/init.h"
#include "timeline/recorder.h"

namespace lockstep::timeline::detail {

void mark_membership(int generation, int workers, const std::string& why, double regroup_seconds, double heal_seconds) {
  if (!on()) return;
  const int rank = lockstep::rank();
  record(rank, Track::marks, 'i', event::kMembership, now_us(rank), 0,
         Args()
             .add(key::kGeneration, static_cast<int64_t>(generation))
             .add(key::kWorkers, static_cast<int64_t>(workers))
             .add(key::kWhy, why)
             .add(key::kRegroupSeconds, regroup_seconds)
             .add(key::kHealSeconds, heal_seconds));
}

}  // namespace lockstep::timeline::detail
