#pragma once

#include <optional>
#include <string>

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include "lockstep/train/checkpoint.h"

namespace lockstep::train {

// Checkpoints of a data-parallel run: rank 0 reads and writes the files; the other ranks
// take part through collectives, so every rank must call these at the same point.

// Gathers every rank's random generator state, then rank 0 saves. Returns the path on rank 0.
std::string save_collectively(const CheckpointFolder& folder, const torch::nn::Module& model,
                              const torch::optim::Optimizer& optimizer, const TrainingPosition& position,
                              const std::string& model_name);

// Rank 0 loads the newest checkpoint, then everyone gets its model, optimizer, position
// and (on the same world size) its own random generator state. nullopt when there is no
// checkpoint. A bad checkpoint throws on every rank, with rank 0's message.
std::optional<TrainingPosition> resume_collectively(const CheckpointFolder& folder, torch::nn::Module& model,
                                                    torch::optim::Optimizer& optimizer);

}  // namespace lockstep::train
