#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

namespace lockstep::train {

/// Where training stood when a checkpoint was saved.
struct TrainingPosition {
  int64_t epoch = 0;       // the epoch in progress, from 0
  int64_t batch = 0;       // batches of that epoch already trained
  int64_t step = 0;        // optimizer steps since the run began
  int64_t world_size = 1;  // ranks that trained it
  /// Samples per step over all ranks (SamplerOptions::global_batch_size); 0 for a batch
  /// per rank. With it, `batch` is a step of the data's own order, valid on any world size.
  int64_t global_batch_size = 0;
  /// Samples an epoch of the training dataset; 0 in checkpoints written before it was kept.
  int64_t dataset_size = 0;
};

/// Everything a checkpoint holds besides the model and optimizer, which load in place.
struct CheckpointState {
  TrainingPosition position;
  std::string model_name;
  /// Each rank's random generator states end to end, row r for rank r: the CPU's, then
  /// that of the CUDA device it trained on, if any.
  torch::Tensor rng_states;
  /// DistributedDataParallel::bucket_order() of the run; empty before it was learned.
  std::vector<int64_t> bucket_order;
};

/// A folder of checkpoints `step-<step>.pt`. Only one process (rank 0) writes to it.
class CheckpointFolder {
 public:
  /// Keeps the newest `keep` checkpoints (at least 1).
  CheckpointFolder(std::string folder, int keep);

  /// Writes the model (parameters and buffers), the optimizer and `state` atomically: to a
  /// temporary file, fsync, rename, fsync of the folder, so that a crash at any moment
  /// leaves the previous checkpoint whole. Then removes the oldest beyond `keep`. Returns
  /// the file written.
  std::string save(const torch::nn::Module& model, const torch::optim::Optimizer& optimizer,
                   const CheckpointState& state) const;

  /// The file of the checkpoint of `step`.
  std::string path(int64_t step) const;
  /// The newest checkpoint, or "" when there is none.
  std::string latest() const;
  /// Every checkpoint, oldest first.
  std::vector<std::string> list() const;
  const std::string& folder() const { return folder_; }

 private:
  std::string folder_;
  int keep_;
};

/// Loads a checkpoint into `model` and `optimizer`. A file that is not a checkpoint, is
/// corrupt, or was saved from another model (names or shapes of parameters differ) throws
/// DataError naming the file and the first difference, before anything is changed.
CheckpointState load_checkpoint(const std::string& path, torch::nn::Module& model, torch::optim::Optimizer& optimizer);

/// Loads only a checkpoint's model tensors into `model`, with the same checks.
void load_model_weights(const std::string& path, torch::nn::Module& model);

/// A checkpoint's model tensors by name as in Python's state_dict() ("fc.weight",
/// "bn1.running_mean"): the parameters, then the buffers, each in name order.
std::vector<std::pair<std::string, torch::Tensor>> load_state_dict(const std::string& path);

}  // namespace lockstep::train
