#pragma once

#include <string>

namespace lockstep::timeline::detail {

/// Live recovery's change of members, as a mark on this rank's timeline (when it records):
/// the generation that goes on, its number of workers, why the one before ended, and how long
/// the new group took to form and the members' state to heal, in seconds.
void mark_membership(int generation, int workers, const std::string& why, double regroup_seconds, double heal_seconds);

}  // namespace lockstep::timeline::detail
