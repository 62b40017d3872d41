#include "timeline/clock_offset.h"

#include <ATen/ATen.h>

#include "lockstep/comm/collectives.h"
#include "timeline/recorder.h"

namespace lockstep::timeline::detail {
namespace {

constexpr int kRoundTrips = 10;

}  // namespace

// Cristian's algorithm over collectives: a rank reads its clock (a), joins an all_reduce that
// cannot end on rank 0 before this rank entered it, then receives rank 0's clock (t), read after
// that all_reduce ended there, and reads its own again (b). So t was read between a and b:
// offset t - (a + b) / 2, off by at most (b - a) / 2. The quickest round trip is kept.
double measure_clock_offset(int rank, const ProcessGroup& group) {
  if (group.size() == 1) return 0;
  double best_offset = 0, best_trip = -1;
  at::Tensor ping = at::zeros({1}, at::kDouble);
  at::Tensor rank0_time = at::zeros({1}, at::kDouble);
  for (int i = 0; i < kRoundTrips; ++i) {
    const double a = now_us(rank);
    all_reduce(ping, ReduceOp::Sum, group);
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
