#pragma once

#include <optional>
#include <string>

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include "lockstep/ddp/distributed_data_parallel.h"
#include "lockstep/train/checkpoint.h"

namespace lockstep::train {

// Checkpoints of a data-parallel run: rank 0 reads and writes the files; the other ranks
// take part through collectives, so every rank must call these at the same point.

// What a run's checkpoint holds besides its position: the model and optimizer, DDP's
// learned bucket order, and the random generators of the device it trains on (and the CPU).
struct TrainedState {
  torch::nn::Module& model;
  torch::optim::Optimizer& optimizer;
  DistributedDataParallel& ddp;
  torch::Device device;
  ProcessGroup group;  // the ranks that train together: DDP's
};

// Gathers every rank's random generator states, then rank 0 saves. Returns the path on rank 0.
std::string save_collectively(const CheckpointFolder& folder, const TrainedState& state,
                              const TrainingPosition& position, const std::string& model_name);

// Rank 0 loads the newest checkpoint, then everyone gets its model, optimizer, DDP's bucket
// order, position and (on the same world size) its own random generator states, so that
// the next step is the one a run never stopped would take. nullopt when there is no
// checkpoint. A bad checkpoint throws on every rank, with rank 0's message.
std::optional<TrainingPosition> resume_collectively(const CheckpointFolder& folder, const TrainedState& state);

}  // namespace lockstep::train
