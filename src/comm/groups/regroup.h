#pragma once

#include <string>

namespace lockstep::detail {

/// Live recovery's membership change (elastic/membership.h): leaves the default group
/// without waiting for anyone (some of its members may be gone) and joins `generation` as
/// `rank` of `world_size`, under store keys of that generation's own, keeping this worker's
/// `member_id` (its launcher's name for it, which its heartbeats carry). Joins for the
/// first time where init() has not run (a replacement). Every member of the new
/// generation calls it with the same `generation` and `world_size`.
void regroup(int member_id, int rank, int world_size, int generation);

/// The default group's generation: 0 until live recovery regroups.
int generation();

/// Fails the default group, from any thread, if it is still `generation`'s: its collective
/// running now and every later one fail with `why` (Communicator::abort).
void abort_default_group(int generation, const std::string& why);

/// Whether the default group's communicator has failed (a peer is gone or broke a call):
/// what live recovery regroups after, where any other error ends the worker.
bool default_group_failed();

}  // namespace lockstep::detail
