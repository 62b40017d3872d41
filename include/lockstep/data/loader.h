#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <torch/arg.h>
#include <torch/types.h>

#include "lockstep/data/dataset.h"
#include "lockstep/data/sampler.h"
#include "lockstep/data/transforms.h"

namespace lockstep::data {

/// A batch: images stacked N×C×H×W, labels N (int64), and each sample's index in the
/// dataset (what a sample log records).
struct Batch {
  torch::Tensor images;
  torch::Tensor labels;
  std::vector<int64_t> ids;
};

/// How a PrefetchLoader reads, transforms and batches.
struct LoaderOptions {
  TORCH_ARG(SamplerOptions, sampler);
  /// Applied to every sample; to_float() when unset.
  TORCH_ARG(Transform, transform);
  /// Background threads that read, decode, transform and batch; 0 builds each batch in
  /// next(), on the calling thread.
  TORCH_ARG(int, threads) = 2;
  /// Batches prepared or in progress at once, counting the one next() returns next.
  TORCH_ARG(int, prefetch) = 4;
  /// Leave out samples that fail to read (counted by skipped()) instead of failing the batch.
  /// A batch can then be smaller than the others; the number of batches does not change.
  TORCH_ARG(bool, skip_bad_samples) = false;
  /// Build batches in page-locked memory, so that their copies to a GPU can run without
  /// blocking (a CUDA build of libtorch, with a GPU, only).
  TORCH_ARG(bool, pin_memory) = false;
};

/// Reads one rank's share of a dataset in background threads, ahead of training, batch by
/// batch in the sampler's order. The output depends only on the dataset, the options and
/// the epoch, not on the number of threads or their timing.
///
/// libtorch's torch::data::DataLoader does not say how long training waited for data, and
/// gives transforms no per-sample random source, so augmentation would depend on thread
/// timing; hence this loader.
class PrefetchLoader {
 public:
  PrefetchLoader(std::shared_ptr<const Dataset> dataset, LoaderOptions options = LoaderOptions());
  ~PrefetchLoader();
  PrefetchLoader(const PrefetchLoader&) = delete;
  PrefetchLoader& operator=(const PrefetchLoader&) = delete;

  /// Starts epoch `epoch` (reshuffled) from batch `first_batch` (non-zero to resume a
  /// checkpoint mid-epoch), dropping batches prepared for the previous one. Without it,
  /// next() reads epoch 0.
  void set_epoch(int64_t epoch, size_t first_batch = 0);
  /// The next batch of this epoch, or nullopt at its end. Rethrows a read error (DataError
  /// naming the file) in the calling thread, when it reaches the batch that failed; the
  /// following call goes on with the batch after it.
  std::optional<Batch> next();

  size_t batches_per_epoch() const;
  /// The loader's sampler; batches_taken() counts the batches next() has returned.
  const DistributedSampler& sampler() const;
  /// Total time next() spent waiting for a batch that was not ready yet (with threads = 0,
  /// all the time it spent building batches).
  std::chrono::duration<double> waited() const;
  /// Samples left out by skip_bad_samples.
  int64_t skipped() const;

 private:
  struct State;  // threads and queues, kept out of this header
  std::unique_ptr<State> state_;
};

}  // namespace lockstep::data
