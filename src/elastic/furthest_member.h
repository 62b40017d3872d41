#pragma once

#include <cstdint>

namespace lockstep::elastic {

/// The member whose state every member takes after a regroup: of those at the furthest step,
/// the lowest rank. A member that updated a step its peers did not (a collective can end on
/// some members and fail on others) is so the source, and no step is lost or applied twice.
struct FurthestMember {
  int rank;
  int64_t step;
};

/// Collective over the default group; `my_step` is the steps this member has applied, or -1
/// where it holds no state (a replacement, or a heal cut short). Throws lockstep::Error
/// naming `generation` when no member holds state any more.
FurthestMember find_furthest_member(int64_t my_step, int generation);

}  // namespace lockstep::elastic
