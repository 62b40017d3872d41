#include "elastic/sharded_heal.h"

#include <vector>

#include <torch/utils.h>

#include "comm/tensors/broadcast_into.h"
#include "lockstep/comm/process_group.h"

namespace lockstep::elastic {

bool catch_up(OptimizerSharding& sharding, int64_t furthest_step, KeptPartitions& kept) {
  const bool behind = kept.gradients_ready && kept.step == furthest_step - 1;
  kept.gradients_ready = false;
  if (!behind) return false;
  torch::NoGradGuard no_grad;
  sharding.step_kept_partitions();
  kept.step = furthest_step;
  return true;
}

void heal_sharded(OptimizerSharding& sharding, torch::nn::Module& module, const FurthestMember& source,
                  KeptPartitions& kept) {
  torch::NoGradGuard no_grad;
  const bool holds = kept.step == source.step;
  // A member cut off while its peers sent their parameters holds stale ones of others'
  // partitions: each parameter comes from a member that keeps it, only the buffers from
  // `source`. A heal cut short leaves what a holder keeps as it was: it still holds.
  if (!holds) kept.step = -1;
  const std::vector<at::Tensor> buffers = module.buffers();
  if (!buffers.empty()) detail::broadcast_into(buffers, source.rank, ProcessGroup(), /*large_alone=*/true);
  sharding.reshard(ProcessGroup(), holds);
  kept.step = source.step;
}

}  // namespace lockstep::elastic
