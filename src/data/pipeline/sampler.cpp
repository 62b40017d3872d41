#include "lockstep/data/sampler.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <utility>

#include <torch/serialize/archive.h>

#include "data/pipeline/epoch_orders.h"
#include "data/pipeline/global_order.h"
#include "data/pipeline/portable_random.h"
#include "lockstep/error.h"
#include "lockstep/comm/init.h"

namespace lockstep::data {
namespace {

// -1 means "this process's place in the lockstep world", or a world of one without init().
SamplerOptions resolve_world(SamplerOptions options) {
  const bool joined = lockstep::is_initialized();
  if (options.rank() == -1) options.rank(joined ? lockstep::rank() : 0);
  if (options.world_size() == -1) options.world_size(joined ? lockstep::world_size() : 1);
  return options;
}

void check_dataset_size(size_t dataset_size) {
  if (dataset_size == 0) {
    throw ConfigError("DistributedSampler: dataset_size 0 must be at least 1; the dataset has no examples");
  }
}

void check_options(const SamplerOptions& options) {
  if (options.world_size() < 1) {
    throw ConfigError("DistributedSampler: world_size " + std::to_string(options.world_size()) +
                      " must be at least 1 (or -1 to take lockstep::world_size())");
  }
  if (options.rank() < 0 || options.rank() >= options.world_size()) {
    throw ConfigError("DistributedSampler: rank " + std::to_string(options.rank()) + " must be in [0, world_size " +
                      std::to_string(options.world_size()) + ") (or -1 to take lockstep::rank())");
  }
  if (options.batch_size() == 0) {
    throw ConfigError("DistributedSampler: batch_size 0 must be at least 1");
  }
}

void check_shard_sizes(const SamplerOptions& options, size_t dataset_size) {
  if (options.shard_sizes().empty()) return;
  size_t total = 0;
  for (size_t size : options.shard_sizes()) {
    if (size == 0) throw ConfigError("DistributedSampler: shard_sizes holds an empty shard");
    total += size;
  }
  if (total != dataset_size) {
    throw ConfigError("DistributedSampler: shard_sizes add up to " + std::to_string(total) +
                      " examples, not the dataset's " + std::to_string(dataset_size));
  }
}

[[noreturn]] void too_small_for_drop_last(size_t samples, size_t world, size_t batch) {
  throw ConfigError("DistributedSampler: dataset of " + std::to_string(samples) +
                    " examples is too small for world_size " + std::to_string(world) + " x batch_size " +
                    std::to_string(batch) + " with drop_last; lower batch_size or turn drop_last off");
}

int64_t read_int(torch::serialize::InputArchive& archive, const char* key) {
  torch::Tensor value;
  archive.read(key, value);
  return value.item<int64_t>();
}

}  // namespace

DistributedSampler::DistributedSampler(size_t dataset_size, SamplerOptions options)
    : dataset_size_(dataset_size), options_(resolve_world(std::move(options))) {
  check_dataset_size(dataset_size_);
  check_options(options_);
  check_shard_sizes(options_, dataset_size_);
  fill_indices();
}

void DistributedSampler::fill_indices() {
  if (global()) {
    fill_indices_by_global_step();
    return;
  }
  if (!options_.shard_sizes().empty() && options_.shuffle() && options_.even()) {
    fill_indices_by_shard();
    return;
  }
  const size_t world = static_cast<size_t>(options_.world_size());
  const size_t rank = static_cast<size_t>(options_.rank());
  const size_t batch = options_.batch_size();
  size_t per_rank = 0;
  if (options_.drop_last()) {
    per_rank = dataset_size_ / world / batch * batch;
    if (per_rank == 0) too_small_for_drop_last(dataset_size_, world, batch);
  } else if (options_.even()) {
    per_rank = (dataset_size_ + world - 1) / world;
  } else {
    per_rank = dataset_size_ / world + (rank < dataset_size_ % world ? 1 : 0);
  }
  // Positions past the end of the order wrap around to its start (the padding); with
  // drop_last every position is below dataset_size_.
  const std::vector<size_t> order = epoch_order(dataset_size_, options_.shuffle(), options_.seed(), epoch_);
  indices_.resize(per_rank);
  for (size_t local = 0; local < per_rank; ++local) {
    indices_[local] = order[(rank + local * world) % dataset_size_];
  }
}

void DistributedSampler::fill_indices_by_shard() {
  const std::vector<size_t>& sizes = options_.shard_sizes();
  const size_t world = static_cast<size_t>(options_.world_size());
  const size_t rank = static_cast<size_t>(options_.rank());
  const size_t batch = options_.batch_size();
  std::vector<size_t> first(sizes.size(), 0);
  for (size_t shard = 1; shard < sizes.size(); ++shard) first[shard] = first[shard - 1] + sizes[shard - 1];

  // The epoch's walk: every shard whole, in an order from (seed, epoch). Each rank takes a
  // contiguous stretch of it, so it reads its own run of shards and shares at most the one
  // at each end with a neighbour; stretches differ by one sample at most, so the count per
  // rank is the same every epoch whatever the shards' sizes (one shard on three ranks too).
  std::vector<size_t> walk;
  walk.reserve(dataset_size_);
  for (size_t shard : epoch_order(sizes.size(), true, options_.seed(), epoch_)) {
    for (size_t i = 0; i < sizes[shard]; ++i) walk.push_back(first[shard] + i);
  }
  const auto begin = walk.begin() + static_cast<std::ptrdiff_t>(rank * dataset_size_ / world);
  const auto end = walk.begin() + static_cast<std::ptrdiff_t>((rank + 1) * dataset_size_ / world);
  const std::vector<size_t> mine =
      shuffled_in_windows(std::vector<size_t>(begin, end), options_.shuffle_window(),
                          mix_seed({options_.seed(), static_cast<uint64_t>(epoch_), rank}));

  size_t per_rank = (dataset_size_ + world - 1) / world;
  if (options_.drop_last()) {
    per_rank = dataset_size_ / world / batch * batch;
    if (per_rank == 0) too_small_for_drop_last(dataset_size_, world, batch);
  }
  indices_.assign(mine.begin(), mine.begin() + static_cast<std::ptrdiff_t>(std::min(per_rank, mine.size())));
  // Padding (one sample at most, or more where ranks outnumber samples) repeats the last
  // samples read, whose shard is still in memory.
  const std::vector<size_t>& pool = mine.empty() ? walk : mine;
  for (size_t pad = 0; indices_.size() < per_rank; ++pad) indices_.push_back(pool[pool.size() - 1 - pad % pool.size()]);
}

// Each step's part from the data's own order (GlobalOrder); every rank checks every rank's
// parts, so that all of them refuse a world that leaves one without a sample, not just it.
void DistributedSampler::fill_indices_by_global_step() {
  const size_t world = static_cast<size_t>(options_.world_size());
  const size_t rank = static_cast<size_t>(options_.rank());
  const GlobalOrder order(dataset_size_,
                          GlobalOrderOptions()
                              .global_batch_size(options_.global_batch_size())
                              .partitions(options_.partitions())
                              .shuffle(options_.shuffle())
                              .seed(options_.seed())
                              .shuffle_window(options_.shuffle_window())
                              .drop_last(options_.drop_last())
                              .shard_sizes(options_.shard_sizes()),
                          epoch_);
  indices_.clear();
  batch_starts_.assign(1, 0);
  for (size_t step = 0; step < order.steps(); ++step) {
    for (size_t other = 0; other < world; ++other) {
      if (order.part_size(step, other, world) == 0) {
        throw ConfigError("DistributedSampler: global_batch_size " + std::to_string(options_.global_batch_size()) +
                          " over " + std::to_string(world) + " ranks leaves rank " + std::to_string(other) +
                          " no sample at step " + std::to_string(step) + " of " + std::to_string(order.steps()) +
                          " (dataset of " + std::to_string(dataset_size_) +
                          "); give every rank two samples a step or more, or turn drop_last on");
      }
    }
    const std::vector<size_t> part = order.part(step, rank, world);
    indices_.insert(indices_.end(), part.begin(), part.end());
    batch_starts_.push_back(indices_.size());
  }
}

void DistributedSampler::set_epoch(int64_t epoch) {
  epoch_ = epoch;
  fill_indices();
  next_ = 0;
  next_batch_ = 0;
}

size_t DistributedSampler::global_position(size_t local_position) const {
  // A sample is trained once an epoch with a global batch: its own id, whatever the world.
  if (global()) return indices_[local_position];
  return static_cast<size_t>(options_.rank()) + local_position * static_cast<size_t>(options_.world_size());
}

size_t DistributedSampler::batch_begin(size_t batch) const {
  if (global()) return batch_starts_.at(batch);
  return std::min(batch * options_.batch_size(), indices_.size());
}

size_t DistributedSampler::step_samples(size_t batch) const {
  const size_t global_batch = options_.global_batch_size();
  if (global_batch == 0 || batch * global_batch >= dataset_size_) return 0;
  return std::min(global_batch, dataset_size_ - batch * global_batch);
}

size_t DistributedSampler::batches_per_epoch() const {
  if (global()) return batch_starts_.size() - 1;
  return (indices_.size() + options_.batch_size() - 1) / options_.batch_size();
}

size_t DistributedSampler::batches_taken() const {
  if (global()) return next_batch_;
  // Only the last batch can be short, so rounding up counts it too.
  return (next_ + options_.batch_size() - 1) / options_.batch_size();
}

void DistributedSampler::reset(torch::optional<size_t> new_size) {
  if (new_size.has_value()) {
    check_dataset_size(*new_size);
    check_shard_sizes(options_, *new_size);
    dataset_size_ = *new_size;
    fill_indices();
  }
  next_ = 0;
  next_batch_ = 0;
}

torch::optional<std::vector<size_t>> DistributedSampler::next(size_t batch_size) {
  if (batch_size != options_.batch_size()) {
    throw ConfigError("DistributedSampler::next: batch_size " + std::to_string(batch_size) +
                      " differs from SamplerOptions::batch_size " + std::to_string(options_.batch_size()) +
                      "; give both the same value");
  }
  if (global()) {
    if (next_batch_ >= batches_per_epoch()) return torch::nullopt;
    next_ = batch_starts_[++next_batch_];
    return std::vector<size_t>(indices_.begin() + static_cast<std::ptrdiff_t>(batch_starts_[next_batch_ - 1]),
                               indices_.begin() + static_cast<std::ptrdiff_t>(next_));
  }
  if (next_ >= indices_.size()) return torch::nullopt;
  const size_t end = std::min(next_ + batch_size, indices_.size());
  std::vector<size_t> batch(indices_.begin() + static_cast<std::ptrdiff_t>(next_),
                            indices_.begin() + static_cast<std::ptrdiff_t>(end));
  next_ = end;
  return batch;
}

void DistributedSampler::save(torch::serialize::OutputArchive& archive) const {
  archive.write("epoch", torch::tensor(static_cast<int64_t>(epoch_)));
  archive.write("position", torch::tensor(static_cast<int64_t>(next_)));
  archive.write("dataset_size", torch::tensor(static_cast<int64_t>(dataset_size_)));
  archive.write("world_size", torch::tensor(static_cast<int64_t>(options_.world_size())));
  if (global()) {
    archive.write("global_batch_size", torch::tensor(static_cast<int64_t>(options_.global_batch_size())));
    archive.write("partitions", torch::tensor(static_cast<int64_t>(options_.partitions())));
    archive.write("step", torch::tensor(static_cast<int64_t>(next_batch_)));
  }
}

void DistributedSampler::load(torch::serialize::InputArchive& archive) {
  const int64_t saved_size = read_int(archive, "dataset_size");
  const int64_t saved_world = read_int(archive, "world_size");
  torch::Tensor saved_global;
  const int64_t saved_batch = archive.try_read("global_batch_size", saved_global) ? saved_global.item<int64_t>() : 0;
  if (saved_batch != 0 || global()) {
    load_global_step(archive, saved_size, saved_batch);
    return;
  }
  if (saved_size != static_cast<int64_t>(dataset_size_) || saved_world != options_.world_size()) {
    throw ConfigError("DistributedSampler::load: the checkpoint was saved for dataset_size " +
                      std::to_string(saved_size) + " and world_size " + std::to_string(saved_world) +
                      ", but this sampler has " + std::to_string(dataset_size_) + " and " +
                      std::to_string(options_.world_size()) + "; resume with the same dataset and world");
  }
  const int64_t epoch = read_int(archive, "epoch");
  const int64_t position = read_int(archive, "position");
  // Every epoch has as many samples per rank, so the position can be checked up front.
  if (position < 0 || static_cast<size_t>(position) > indices_.size()) {
    throw ConfigError("DistributedSampler::load: position " + std::to_string(position) + " is outside the epoch's " +
                      std::to_string(indices_.size()) + " samples");
  }
  set_epoch(epoch);
  next_ = static_cast<size_t>(position);
}

// A step of the data's own order, from any world size: the dataset, the global batch and
// the partitions must be those it was saved with, as they decide which samples a step holds.
void DistributedSampler::load_global_step(torch::serialize::InputArchive& archive, int64_t saved_size,
                                          int64_t saved_batch) {
  const int64_t saved_partitions = saved_batch == 0 ? 0 : read_int(archive, "partitions");
  const auto differs = [&](const std::string& what, int64_t saved, int64_t now) {
    throw ConfigError("DistributedSampler::load: the checkpoint was saved with " + what + " " + std::to_string(saved) +
                      ", but this sampler has " + std::to_string(now) + "; resume with the same " + what);
  };
  if (saved_batch != static_cast<int64_t>(options_.global_batch_size())) {
    differs("global_batch_size", saved_batch, static_cast<int64_t>(options_.global_batch_size()));
  }
  if (saved_size != static_cast<int64_t>(dataset_size_)) {
    differs("dataset_size", saved_size, static_cast<int64_t>(dataset_size_));
  }
  if (saved_partitions != static_cast<int64_t>(options_.partitions())) {
    differs("partitions", saved_partitions, static_cast<int64_t>(options_.partitions()));
  }
  const int64_t epoch = read_int(archive, "epoch");
  const int64_t step = read_int(archive, "step");
  set_epoch(epoch);
  if (step < 0 || static_cast<size_t>(step) > batches_per_epoch()) {
    throw ConfigError("DistributedSampler::load: step " + std::to_string(step) + " is outside the epoch's " +
                      std::to_string(batches_per_epoch()) + " steps");
  }
  next_batch_ = static_cast<size_t>(step);
  next_ = batch_starts_[next_batch_];
}

}  // namespace lockstep::data
