#include "timeline/clock_offset.h"

#include <ATen/ATen.h>

#include "lockstep/comm/collectives.h"
#include "timeline/recorder.h"

namespace lockstep::timeline::detail {
namespace {

// At least this many round trips, and more while the slowest rank's quickest one is longer
// than kTripGoal: a loaded machine can deschedule a rank in every one of ten.
constexpr int kMinRoundTrips = 10;
constexpr int kMaxRoundTrips = 200;
constexpr double kTripGoalUs = 500;  // an error of at most a quarter of a millisecond

}  // namespace

// Cristian's algorithm over collectives: a rank reads its clock (a), joins an all_reduce that
// cannot end on rank 0 before this rank entered it, then receives rank 0's clock (t), read after
// that all_reduce ended there, and reads its own again (b). So t was read between a and b:
// offset t - (a + b) / 2, off by at most (b - a) / 2. The quickest round trip is kept. The
// all_reduce carries each rank's quickest trip so far, so every rank sees the same largest
// and they stop after the same round trip.
double measure_clock_offset(int rank, const ProcessGroup& group) {
  if (group.size() == 1) return 0;
  double best_offset = 0, best_trip = -1;
  at::Tensor slowest_best_trip = at::zeros({1}, at::kDouble);
  at::Tensor rank0_time = at::zeros({1}, at::kDouble);
  for (int i = 0; i < kMaxRoundTrips; ++i) {
    const double a = now_us(rank);
    slowest_best_trip.fill_(best_trip < 0 ? kTripGoalUs + 1 : best_trip);
    all_reduce(slowest_best_trip, ReduceOp::Max, group);
    if (i >= kMinRoundTrips && slowest_best_trip.item<double>() <= kTripGoalUs) break;
    if (group.rank() == 0) rank0_time.fill_(now_us(rank));
    broadcast(rank0_time, 0, group);
    const double b = now_us(rank);
    if (best_trip < 0 || b - a < best_trip) {
      best_trip = b - a;
      best_offset = rank0_time.item<double>() - (a + b) / 2;
    }
  }
  return group.rank() == 0 ? 0 : best_offset;
}

}  // namespace lockstep::timeline::detail
