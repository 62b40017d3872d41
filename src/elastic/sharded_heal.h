#pragma once

#include <cstdint>

#include <torch/nn/module.h>

#include "elastic/furthest_member.h"
#include "lockstep/optim/sharded_optimizer.h"

// Live recovery of a model whose optimizer is sharded (ZeRO-1), after a regroup. Under live
// recovery each partition is kept by two ranks (OptimizerSharding::mirrored), so the state of
// every parameter outlives any one member.
namespace lockstep::elastic {

/// What a member keeps of a ShardedOptimizer's partitions between regroups.
struct KeptPartitions {
  int64_t step = -1;             // the step its kept parameters and state are at; -1: none
  bool gradients_ready = false;  // it failed in the commit of step + 1, holding its gradients
};

/// A member that failed in the commit of the step that others applied (`furthest_step`)
/// applies it to the partitions it keeps: every member had averaged its gradients before any
/// commit could succeed. Local; true when it applied the step.
bool catch_up(OptimizerSharding& sharding, int64_t furthest_step, KeptPartitions& kept);

/// Every member of the default group together, after catch_up: each parameter and its state
/// come from a member that keeps them at `source.step` (OptimizerSharding::reshard), the
/// module's buffers from `source`, and the partitions become those of the new group.
void heal_sharded(OptimizerSharding& sharding, torch::nn::Module& module, const FurthestMember& source,
                  KeptPartitions& kept);

}  // namespace lockstep::elastic
