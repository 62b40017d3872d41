#pragma once

#include <string>

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include "lockstep/train/checkpoint.h"
#include "optim/optimizer_shards.h"

namespace lockstep::train {

/// load_checkpoint, also giving the checkpoint's shard layout (world_size 0 when its
/// optimizer state is in the file itself). Into a ShardedOptimizer of more than one rank it
/// reads the state of this rank's parameters only: each rank reads its own.
CheckpointState load_checkpoint_and_layout(const std::string& path, torch::nn::Module& model,
                                           torch::optim::Optimizer& optimizer, optim::ShardLayout& layout);

}  // namespace lockstep::train
