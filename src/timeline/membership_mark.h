#pragma once

#include <string>

namespace lockstep::timeline::detail {

/// Live recovery's change of members, as a mark on this rank's timeline: the generation that
/// goes on, its number of workers, why the one before ended, and how long the new group took
/// to form and the members' state to heal, in seconds. Kept for the next timeline::start()
/// when none records now.
void mark_membership(int generation, int workers, const std::string& why, double regroup_seconds, double heal_seconds);

/// What timeline::start() calls once its file is open: records a change kept for it.
void record_pending_membership_mark();

}  // namespace lockstep::timeline::detail
