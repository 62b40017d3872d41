#pragma once

// An epoch's order that belongs to the data, not to the workers: which samples global step
// s trains is a function of (seed, epoch, s) and the dataset's shards alone, so that a run
// on any number of workers trains the same samples at every step, and a checkpoint resumes
// mid-epoch on another number of workers with every sample of the epoch exactly once.
//
// The epoch walks the shards in an order from (seed, epoch), and the walk is cut into
// `partitions` stretches of equal length (within one sample), each shuffled window by
// window from (seed, epoch, partition). Every step draws from every partition in
// proportion to its length: after k samples of the epoch, the partitions before p have
// given floor(k * A_p / N) of them (A_p: their total length, N: the epoch's), so every
// partition ends with the epoch, and a stretch of partitions gives each step its share of
// G within one sample. A worker of M owns the partitions [r P / M, (r + 1) P / M): where M
// divides P it owns them whole and reads only their shards, each once per epoch, sharing
// at most the shard at each end of its stretch with a neighbour; where it does not, the
// partitions that straddle two workers are split between them at every step, and both
// read those partitions' shards. This is the idea of Mosaic StreamingDataset's canonical
// nodes, with the steps' shares given by a closed form, so that a resume computes its place
// in O(P) and the order in O(N).

#include <cstddef>
#include <cstdint>
#include <vector>

#include <torch/arg.h>

namespace lockstep::data {

struct GlobalOrderOptions {
  /// Samples per step, over all workers together.
  TORCH_ARG(size_t, global_batch_size) = 256;
  /// Canonical partitions: a run keeps its number for life (a resume needs the same). Each
  /// worker holds the current shard of each of its P / M partitions in memory at once;
  /// 12 is divided by 1, 2, 3, 4, 6 and 12 workers.
  TORCH_ARG(size_t, partitions) = 12;
  TORCH_ARG(bool, shuffle) = true;
  TORCH_ARG(uint64_t, seed) = 0;
  /// Samples shuffled together within a partition (SamplerOptions::shuffle_window).
  TORCH_ARG(size_t, shuffle_window) = 1000;
  /// Leave out the epoch's last step when it would hold fewer than global_batch_size.
  TORCH_ARG(bool, drop_last) = false;
  /// The dataset's shards (Dataset::shard_sizes()); empty for a dataset read sample by
  /// sample, whose walk is then a permutation of all its samples.
  TORCH_ARG(std::vector<size_t>, shard_sizes);
};

class GlobalOrder {
 public:
  /// Epoch `epoch`'s order. ConfigError for an empty dataset, a global batch or partitions
  /// of 0, or shard sizes that do not add up to `dataset_size`.
  GlobalOrder(size_t dataset_size, GlobalOrderOptions options, int64_t epoch = 0);

  /// Computes epoch `epoch`'s order: O(dataset size).
  void set_epoch(int64_t epoch);
  int64_t epoch() const { return epoch_; }

  /// Steps in an epoch: the dataset over global_batch_size, rounded up (down with drop_last).
  size_t steps() const;
  /// The samples that worker `rank` of `world` trains at `step`, in order. Over the ranks
  /// of any world these are the same samples, those of part(step, 0, 1). ConfigError for a
  /// world larger than the global batch, a rank outside it or a step past the epoch.
  std::vector<size_t> part(size_t step, size_t rank, size_t world) const;
  /// part(step, rank, world).size(), without the samples: the same for every epoch.
  size_t part_size(size_t step, size_t rank, size_t world) const;

  const GlobalOrderOptions& options() const { return options_; }

 private:
  // How many of the epoch's first k samples partition p gives.
  size_t taken(size_t partition, size_t k) const;
  // Calls take(partition, first, end) for each stretch of a partition's positions that
  // worker `rank` of `world` trains at `step`.
  template <typename Take>
  void for_each_stretch(size_t step, size_t rank, size_t world, const Take& take) const;

  size_t dataset_size_;
  GlobalOrderOptions options_;
  int64_t epoch_ = 0;
  std::vector<size_t> starts_;  // each partition's first position in order_, then N
  std::vector<size_t> order_;   // the walk, each partition's stretch shuffled
};

}  // namespace lockstep::data
