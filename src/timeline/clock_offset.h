#pragma once

#include "lockstep/comm/process_group.h"

namespace lockstep::timeline::detail {

/// Rank 0's clock (detail::now_us) minus this rank's, in microseconds, as every rank of
/// `group` calls it together: `rank` is this rank's in the default group, whose clock it reads.
double measure_clock_offset(int rank, const ProcessGroup& group);

}  // namespace lockstep::timeline::detail
