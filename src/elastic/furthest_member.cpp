#include "elastic/furthest_member.h"

#include <string>

#include <ATen/ATen.h>

#include "lockstep/comm/collectives.h"
#include "lockstep/comm/init.h"
#include "lockstep/error.h"

namespace lockstep::elastic {

FurthestMember find_furthest_member(int64_t my_step, int generation) {
  at::Tensor furthest = at::tensor({my_step}, at::kLong);
  all_reduce(furthest, ReduceOp::Max);
  const int64_t step = furthest.item<int64_t>();
  if (step < 0) {
    throw Error("lockstep: no member of generation " + std::to_string(generation) +
                " holds the training state any more; restart the job with --resume");
  }
  at::Tensor lowest = at::tensor({my_step == step ? int64_t{lockstep::rank()} : int64_t{lockstep::world_size()}});
  all_reduce(lowest, ReduceOp::Min);
  return {static_cast<int>(lowest.item<int64_t>()), step};
}

}  // namespace lockstep::elastic
