#pragma once

#include <cstdint>
#include <vector>

#include <torch/arg.h>
#include <torch/data/samplers/base.h>

namespace lockstep::data {

/// How a DistributedSampler orders and splits a dataset.
struct SamplerOptions {
  /// This rank and the number of ranks; by default those of lockstep::init(), else 0 of 1.
  TORCH_ARG(int, rank) = -1;
  TORCH_ARG(int, world_size) = -1;
  TORCH_ARG(size_t, batch_size) = 64;
  /// Shuffle globally each epoch, from (seed, epoch); in dataset order when off.
  TORCH_ARG(bool, shuffle) = true;
  TORCH_ARG(uint64_t, seed) = 0;
  /// Drop the tail so every batch is full. When off, the order is padded by wrapping
  /// around to its start until every rank has as many samples as the others; the last
  /// batch may then be smaller (by the same amount on every rank).
  TORCH_ARG(bool, drop_last) = false;
  /// Off: each sample exactly once, no padding, so ranks may get one batch more or less
  /// than each other. Only for evaluation, where no collective runs per batch.
  TORCH_ARG(bool, even) = true;
  /// The dataset's shards (Dataset::shard_sizes(); PrefetchLoader fills it in). When
  /// shuffling with `even`, the epoch then walks whole shards in an order from (seed,
  /// epoch), each rank a contiguous stretch of that walk (its own run of shards), shuffled
  /// window by window, so that reads stay within few shards at a time.
  TORCH_ARG(std::vector<size_t>, shard_sizes);
  /// Samples shuffled together when walking shards: wider mixes more, but the shards one
  /// window spans (and the next, for the loader's prefetch) must fit in the dataset's
  /// memory (ShardOptions::memory_bytes) for each shard to be read once per epoch. 1000
  /// spans two or three 64 MB shards of ImageNet-sized JPEGs.
  TORCH_ARG(size_t, shuffle_window) = 1000;
  /// Samples per step over all ranks together; 0 (the default) for batch_size per rank.
  /// With it the order belongs to the data: which samples each step trains comes from
  /// (seed, epoch, step) alone, whatever world_size, each rank takes its part of them
  /// (parts differ by about one sample; batch_size is not used), and a mid-epoch position
  /// saved on one world size loads on another. docs/DATA.md says how shards are shared.
  TORCH_ARG(size_t, global_batch_size) = 0;
  /// The canonical partitions a global batch's order is cut into: a rank of world_size M
  /// owns partitions/M of them and reads only their shards where M divides it. Fixed for a
  /// run's life.
  TORCH_ARG(size_t, partitions) = 12;
};

/// Each rank's share of a dataset for one epoch: a global permutation from (seed, epoch),
/// split strided across ranks (rank r takes positions r, r + N, ...), with the same number
/// of batches on every rank, so no rank waits at the end of an epoch for peers that have
/// already stopped. Same seed and epoch give the same order on every machine. A sharded
/// dataset is walked shard by shard instead (SamplerOptions::shard_sizes), with the same
/// guarantees.
///
/// libtorch's DistributedRandomSampler seeds only from the epoch (no user seed) and splits
/// contiguously; this sampler keeps its interface, so torch::data loaders accept it.
class DistributedSampler : public torch::data::samplers::Sampler<> {
 public:
  DistributedSampler(size_t dataset_size, SamplerOptions options = SamplerOptions());

  /// Starts epoch `epoch` from its first batch. Call it before each epoch, as in PyTorch.
  void set_epoch(int64_t epoch);
  int64_t epoch() const { return epoch_; }

  /// This rank's dataset indices for the current epoch, in order.
  const std::vector<size_t>& indices() const { return indices_; }
  /// Where this rank's sample `indices()[local_position]` sits in the padded epoch order:
  /// unique across ranks, for seeding per-sample randomness.
  size_t global_position(size_t local_position) const;
  /// Batch `batch`'s stretch of indices(): [batch_begin(batch), batch_begin(batch + 1)).
  size_t batch_begin(size_t batch) const;
  /// With a global batch, the samples of step `batch` over all ranks: global_batch_size, or
  /// fewer in an epoch's last step; 0 without one.
  size_t step_samples(size_t batch) const;
  size_t batches_per_epoch() const;
  size_t dataset_size() const { return dataset_size_; }
  /// Samples this rank takes per epoch, padding included.
  size_t samples_per_rank() const { return indices_.size(); }
  /// Batches already handed out this epoch; restored by load() to resume mid-epoch.
  size_t batches_taken() const;
  /// The options, with rank and world_size of -1 resolved.
  const SamplerOptions& options() const { return options_; }

  // torch::data::samplers::Sampler: batches of indices, then nullopt at the end of the epoch.
  /// Rewinds to the first batch; a new size (validated) also recomputes the indices.
  void reset(torch::optional<size_t> new_size = torch::nullopt) override;
  /// `batch_size` must equal options().batch_size() (ConfigError otherwise), so that the
  /// batch count and drop_last's full batches hold; give a torch::data::DataLoader the same.
  torch::optional<std::vector<size_t>> next(size_t batch_size) override;
  /// Stores the epoch and position (and the dataset size and world size, which load()
  /// checks); load() recomputes that epoch's indices and resumes at the stored batch. With
  /// a global batch the position is the step, and load() takes it on any world size (the
  /// global batch and partitions must be the same).
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;

 private:
  void fill_indices();
  void fill_indices_by_shard();
  void fill_indices_by_global_step();
  void load_global_step(torch::serialize::InputArchive& archive, int64_t saved_size, int64_t saved_batch);
  bool global() const { return options_.global_batch_size() > 0; }

  size_t dataset_size_;
  SamplerOptions options_;
  int64_t epoch_ = 0;
  size_t next_ = 0;
  size_t next_batch_ = 0;  // with a global batch, whose batches differ in size
  std::vector<size_t> indices_;
  std::vector<size_t> batch_starts_;  // with a global batch: each step's start, then the end
};

}  // namespace lockstep::data
