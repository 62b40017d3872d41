#include "data/pipeline/global_order.h"

#include <algorithm>
#include <string>

#include "data/pipeline/epoch_orders.h"
#include "data/pipeline/portable_random.h"
#include "lockstep/error.h"

namespace lockstep::data {
namespace {

// floor(a * b / c) without overflow for any sizes a dataset can have.
size_t scaled(size_t a, size_t b, size_t c) { return static_cast<size_t>(static_cast<unsigned __int128>(a) * b / c); }

std::string text(size_t value) { return std::to_string(value); }

}  // namespace

GlobalOrder::GlobalOrder(size_t dataset_size, GlobalOrderOptions options, int64_t epoch)
    : dataset_size_(dataset_size), options_(std::move(options)) {
  if (dataset_size_ == 0) throw ConfigError("GlobalOrder: the dataset has no examples");
  if (options_.global_batch_size() == 0) throw ConfigError("GlobalOrder: global_batch_size 0 must be at least 1");
  if (options_.partitions() == 0) throw ConfigError("GlobalOrder: partitions 0 must be at least 1");
  if (options_.drop_last() && dataset_size_ < options_.global_batch_size()) {
    throw ConfigError("GlobalOrder: a dataset of " + text(dataset_size_) + " examples has no full step of " +
                      "global_batch_size " + text(options_.global_batch_size()) +
                      " with drop_last; lower the batch or turn drop_last off");
  }
  size_t total = 0;
  for (const size_t size : options_.shard_sizes()) {
    if (size == 0) throw ConfigError("GlobalOrder: shard_sizes holds an empty shard");
    total += size;
  }
  if (!options_.shard_sizes().empty() && total != dataset_size_) {
    throw ConfigError("GlobalOrder: shard_sizes add up to " + text(total) + " examples, not the dataset's " +
                      text(dataset_size_));
  }
  set_epoch(epoch);
}

void GlobalOrder::set_epoch(int64_t epoch) {
  epoch_ = epoch;
  const GlobalOrderOptions& o = options_;
  // The walk: every shard whole, in an order from (seed, epoch); without shards, every
  // sample in such an order.
  const std::vector<size_t>& sizes = o.shard_sizes();
  if (sizes.empty()) {
    order_ = epoch_order(dataset_size_, o.shuffle(), o.seed(), epoch);
  } else {
    std::vector<size_t> first(sizes.size(), 0);
    for (size_t shard = 1; shard < sizes.size(); ++shard) first[shard] = first[shard - 1] + sizes[shard - 1];
    order_.clear();
    order_.reserve(dataset_size_);
    for (const size_t shard : epoch_order(sizes.size(), o.shuffle(), o.seed(), epoch)) {
      for (size_t i = 0; i < sizes[shard]; ++i) order_.push_back(first[shard] + i);
    }
  }
  const size_t partitions = o.partitions();
  starts_.resize(partitions + 1);
  for (size_t p = 0; p <= partitions; ++p) starts_[p] = scaled(p, dataset_size_, partitions);
  if (!o.shuffle()) return;
  for (size_t p = 0; p < partitions; ++p) {
    const auto begin = order_.begin() + static_cast<std::ptrdiff_t>(starts_[p]);
    const auto end = order_.begin() + static_cast<std::ptrdiff_t>(starts_[p + 1]);
    const std::vector<size_t> mixed = shuffled_in_windows(std::vector<size_t>(begin, end), o.shuffle_window(),
                                                          mix_seed({o.seed(), static_cast<uint64_t>(epoch), p}));
    std::copy(mixed.begin(), mixed.end(), begin);
  }
}

size_t GlobalOrder::steps() const {
  const size_t batch = options_.global_batch_size();
  return options_.drop_last() ? dataset_size_ / batch : (dataset_size_ + batch - 1) / batch;
}

size_t GlobalOrder::taken(size_t partition, size_t k) const {
  // The partitions before p have given floor(k A_p / N) of the first k samples.
  return scaled(k, starts_[partition + 1], dataset_size_) - scaled(k, starts_[partition], dataset_size_);
}

template <typename Take>
void GlobalOrder::for_each_stretch(size_t step, size_t rank, size_t world, const Take& take) const {
  const size_t batch = options_.global_batch_size(), partitions = options_.partitions();
  if (world > batch) {
    throw ConfigError("global batch size " + text(batch) + " is smaller than the " + text(world) +
                      " workers: each worker needs at least one sample a step");
  }
  if (rank >= world) throw ConfigError("GlobalOrder: rank " + text(rank) + " is outside a world of " + text(world));
  if (step >= steps()) {
    throw ConfigError("GlobalOrder: step " + text(step) + " is past the epoch's " + text(steps()) + " steps");
  }
  const size_t before = step * batch, after = std::min(before + batch, dataset_size_);
  // This worker's share of partition p, as a fraction in 1/world: [rank P, (rank + 1) P)
  // in partition units times world, clipped to p's own [p world, (p + 1) world).
  const auto share = [&](size_t bound, size_t p) {
    const size_t start = p * world;
    return std::min(std::max(bound, start), start + world) - start;
  };
  const size_t first = rank * partitions / world, last = ((rank + 1) * partitions + world - 1) / world;
  for (size_t p = first; p < last; ++p) {
    const size_t low = taken(p, before), count = taken(p, after) - low;
    take(p, low + count * share(rank * partitions, p) / world, low + count * share((rank + 1) * partitions, p) / world);
  }
}

std::vector<size_t> GlobalOrder::part(size_t step, size_t rank, size_t world) const {
  std::vector<size_t> samples;
  for_each_stretch(step, rank, world, [&](size_t p, size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) samples.push_back(order_[starts_[p] + i]);
  });
  return samples;
}

size_t GlobalOrder::part_size(size_t step, size_t rank, size_t world) const {
  size_t size = 0;
  for_each_stretch(step, rank, world, [&](size_t, size_t from, size_t to) { size += to - from; });
  return size;
}

}  // namespace lockstep::data
