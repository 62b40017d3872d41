// The epoch's order as the data's own: every world size trains the same samples at every
// step, each sample once an epoch, and a worker reads only its own shards where the world
// divides the partitions.
#include <algorithm>
#include <list>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "data/pipeline/global_order.h"
#include "lockstep/error.h"

namespace lockstep::testing {
namespace {

// 1000 samples in 23 shards of uneven sizes, as packing real data gives.
std::vector<size_t> uneven_shards() {
  std::vector<size_t> sizes;
  size_t total = 0;
  for (size_t i = 0; total < 1000; ++i) {
    sizes.push_back(std::min<size_t>(30 + (i * 37) % 41, 1000 - total));
    total += sizes.back();
  }
  return sizes;
}

data::GlobalOrderOptions options_of(const std::vector<size_t>& shards) {
  return data::GlobalOrderOptions().global_batch_size(64).partitions(12).shuffle_window(50).seed(7).shard_sizes(shards);
}

std::vector<size_t> sorted(std::vector<size_t> values) {
  std::sort(values.begin(), values.end());
  return values;
}

TEST(GlobalOrder, EveryWorldSizeTrainsTheSameSamplesAtEveryStepEachOnceAnEpoch) {
  for (const auto& shards : {uneven_shards(), std::vector<size_t>{}}) {
    data::GlobalOrder order(1000, options_of(shards));
    for (const int64_t epoch : {0, 1}) {
      order.set_epoch(epoch);
      ASSERT_EQ(order.steps(), 16u);  // 15 of 64 and one of 40
      std::vector<size_t> epoch_samples;
      for (size_t step = 0; step < order.steps(); ++step) {
        const std::vector<size_t> whole = order.part(step, 0, 1);
        EXPECT_EQ(whole.size(), step + 1 < order.steps() ? 64u : 40u);
        epoch_samples.insert(epoch_samples.end(), whole.begin(), whole.end());
        for (const size_t world : {2, 3, 4, 5, 6, 7, 12, 13, 40}) {
          std::vector<size_t> together;
          for (size_t rank = 0; rank < world; ++rank) {
            const auto part = order.part(step, rank, world);
            together.insert(together.end(), part.begin(), part.end());
          }
          ASSERT_EQ(sorted(together), sorted(whole)) << "world " << world << ", step " << step << ", epoch " << epoch;
        }
      }
      std::vector<size_t> every(1000);
      std::iota(every.begin(), every.end(), size_t{0});
      EXPECT_EQ(sorted(epoch_samples), every) << "epoch " << epoch;
    }
  }
}

// Parts differ by one sample where the world divides the partitions, and by a few where it
// does not (a straddled partition is split at every step).
TEST(GlobalOrder, PartsAreEvenWithinOneSampleWhereTheWorldDividesThePartitions) {
  data::GlobalOrder order(1000, options_of(uneven_shards()));
  for (const size_t world : {1, 2, 3, 4, 6, 12, 5, 7}) {
    for (size_t step = 0; step < order.steps(); ++step) {
      size_t least = 1000, most = 0;
      for (size_t rank = 0; rank < world; ++rank) {
        const size_t size = order.part(step, rank, world).size();
        least = std::min(least, size);
        most = std::max(most, size);
      }
      EXPECT_LE(most - least, 12 % world == 0 ? 1u : 2u) << "world " << world << ", step " << step;
    }
  }
}

// Each worker holding, per partition it owns, the shards one shuffle window spans (up to
// three here: windows of 50 over shards of 30 to 70), least recently used dropped first,
// reads each shard of its stretch once an epoch; neighbours share at most the shard where
// their stretches meet.
TEST(GlobalOrder, AWorkerReadsEachOfItsShardsOnceWhereTheWorldDividesThePartitions) {
  const std::vector<size_t> shards = uneven_shards();
  std::vector<size_t> shard_of;
  for (size_t shard = 0; shard < shards.size(); ++shard) shard_of.insert(shard_of.end(), shards[shard], shard);
  data::GlobalOrder order(1000, options_of(shards));
  for (const size_t world : {1, 2, 3, 4, 6, 12}) {
    size_t shards_read = 0;
    for (size_t rank = 0; rank < world; ++rank) {
      const size_t memory = 3 * 12 / world;
      std::list<size_t> held;  // most recently used first
      std::set<size_t> distinct;
      size_t reads = 0;
      for (size_t step = 0; step < order.steps(); ++step) {
        for (const size_t sample : order.part(step, rank, world)) {
          const size_t shard = shard_of[sample];
          distinct.insert(shard);
          const auto found = std::find(held.begin(), held.end(), shard);
          if (found != held.end()) {
            held.erase(found);
          } else {
            ++reads;
            if (held.size() == memory) held.pop_back();
          }
          held.push_front(shard);
        }
      }
      EXPECT_EQ(reads, distinct.size()) << "world " << world << ", rank " << rank;
      shards_read += distinct.size();
    }
    EXPECT_LE(shards_read, shards.size() + world - 1) << "world " << world;
  }
}

TEST(GlobalOrder, BadOptionsAreOneLineNamingTheValues) {
  const auto config_error = [](const auto& make) {
    try {
      make();
    } catch (const ConfigError& error) {
      return std::string(error.what());
    }
    return std::string("no ConfigError");
  };
  data::GlobalOrder order(1000, options_of({}));
  EXPECT_EQ(config_error([&] { order.part(0, 0, 65); }),
            "global batch size 64 is smaller than the 65 workers: each worker needs at least one sample a step");
  EXPECT_EQ(config_error([&] { order.part(16, 0, 1); }), "GlobalOrder: step 16 is past the epoch's 16 steps");
  EXPECT_EQ(
      config_error([] { data::GlobalOrder(10, data::GlobalOrderOptions().global_batch_size(64).drop_last(true)); }),
      "GlobalOrder: a dataset of 10 examples has no full step of global_batch_size 64 with drop_last; lower the "
      "batch or turn drop_last off");
  EXPECT_EQ(config_error([] {
              data::GlobalOrder(10, data::GlobalOrderOptions().shard_sizes({4, 5}));
            }),
            "GlobalOrder: shard_sizes add up to 9 examples, not the dataset's 10");
}

}  // namespace
}  // namespace lockstep::testing
