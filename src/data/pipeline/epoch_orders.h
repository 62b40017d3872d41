#pragma once

// The shuffles an epoch's order is made of, shared by DistributedSampler and GlobalOrder:
// driven by draw_below(), so that the same seed gives the same order on every machine.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace lockstep::data {

/// 0..size-1, shuffled from (seed, epoch) when `shuffle` (Fisher-Yates), else in order.
std::vector<size_t> epoch_order(size_t size, bool shuffle, uint64_t seed, int64_t epoch);

/// `walk` cut into windows of `window` elements, each shuffled whole from `seed`. Unlike a
/// streaming shuffle buffer, whose samples can linger for any number of draws, a window
/// never holds a sample back: reads touch at most the shards one window spans, and a shard
/// is done with once the walk has passed it, so memory for those shards is enough to read
/// each once.
std::vector<size_t> shuffled_in_windows(std::vector<size_t> walk, size_t window, uint64_t seed);

}  // namespace lockstep::data
