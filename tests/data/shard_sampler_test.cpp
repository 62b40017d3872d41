// The sampler over a sharded dataset: every rank the same number of batches in every epoch,
// its own run of shards, an order fixed by (seed, epoch), reads that stay within
// few shards and never go back to one, and an exact resume mid-epoch.
#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/serialize/archive.h>

#include "lockstep/error.h"
#include "lockstep/data/sampler.h"

namespace lockstep::data {
namespace {

// Uneven shards, as the last shard of a pack and real data give.
std::vector<size_t> uneven_shards(size_t count) {
  std::vector<size_t> sizes;
  for (size_t shard = 0; shard < count; ++shard) sizes.push_back(40 + 13 * shard);
  return sizes;
}

size_t shard_of(const std::vector<size_t>& sizes, size_t index) {
  size_t shard = 0;
  for (size_t first = 0; index >= first + sizes[shard]; first += sizes[shard++]) {
  }
  return shard;
}

SamplerOptions sharded(const std::vector<size_t>& sizes, int rank, int world, bool drop_last = false) {
  return SamplerOptions()
      .rank(rank)
      .world_size(world)
      .batch_size(8)
      .drop_last(drop_last)
      .shard_sizes(sizes)
      .shuffle_window(16);
}

TEST(ShardedSampler, EveryRankGetsTheSameNumberOfBatchesFor1And3And7ShardsOn2And3Ranks) {
  for (size_t shards : {1, 3, 7}) {
    for (int world : {2, 3}) {
      for (bool drop_last : {false, true}) {
        size_t batches_of_epoch_zero = 0;
        for (int64_t epoch : {0, 1}) {
          const std::vector<size_t> sizes = uneven_shards(shards);
          const size_t total = std::accumulate(sizes.begin(), sizes.end(), size_t{0});
          const std::string what = std::to_string(shards) + " shards, " + std::to_string(world) + " ranks, drop_last " +
                                   std::to_string(drop_last) + ", epoch " + std::to_string(epoch);
          std::set<size_t> seen;
          std::vector<std::set<size_t>> shards_of_rank(world);
          size_t batches = 0, samples = 0;
          for (int rank = 0; rank < world; ++rank) {
            DistributedSampler sampler(total, sharded(sizes, rank, world, drop_last));
            sampler.set_epoch(epoch);
            if (rank == 0) {
              batches = sampler.batches_per_epoch();
              samples = sampler.samples_per_rank();
            }
            EXPECT_EQ(sampler.batches_per_epoch(), batches) << what << ", rank " << rank;
            EXPECT_EQ(sampler.samples_per_rank(), samples) << what << ", rank " << rank;
            if (drop_last) EXPECT_EQ(samples % 8, 0u) << what;
            for (size_t index : sampler.indices()) {
              ASSERT_LT(index, total) << what;
              seen.insert(index);
              shards_of_rank[rank].insert(shard_of(sizes, index));
            }
          }
          EXPECT_GT(batches, 0u) << what;
          if (!drop_last) EXPECT_EQ(seen.size(), total) << what << ": every sample, at least once";
          // Each rank walks its own run of shards, sharing at most the ones at its ends (with
          // fewer shards than ranks, stretches of one shard).
          std::map<size_t, int> readers;
          for (int rank = 0; rank < world; ++rank) {
            EXPECT_LE(shards_of_rank[rank].size(), (shards + world - 1) / world + 1) << what << ", rank " << rank;
            for (size_t shard : shards_of_rank[rank]) ++readers[shard];
          }
          if (shards >= static_cast<size_t>(world)) {
            for (const auto& [shard, count] : readers) EXPECT_LE(count, 2) << what << ": shard " << shard;
          }
          // The same count every epoch, so steps per epoch and the schedule do not change.
          if (epoch == 0) batches_of_epoch_zero = batches;
          EXPECT_EQ(batches, batches_of_epoch_zero) << what;
        }
      }
    }
  }
}

TEST(ShardedSampler, TheOrderIsFixedBySeedAndEpochAndMixesWithinWindows) {
  const std::vector<size_t> sizes = uneven_shards(5);
  const size_t total = std::accumulate(sizes.begin(), sizes.end(), size_t{0});
  const auto order = [&](uint64_t seed, int64_t epoch) {
    DistributedSampler sampler(total, sharded(sizes, 0, 1).seed(seed));
    sampler.set_epoch(epoch);
    return sampler.indices();
  };
  EXPECT_EQ(order(7, 2), order(7, 2));
  EXPECT_NE(order(7, 2), order(7, 3));
  EXPECT_NE(order(7, 2), order(8, 2));
  std::vector<size_t> sorted = order(7, 2);
  std::sort(sorted.begin(), sorted.end());
  std::vector<size_t> all(total);
  std::iota(all.begin(), all.end(), size_t{0});
  EXPECT_EQ(sorted, all);

  // Reads stay close: a window of 16 samples spans at most 2 shards (each holds more), and
  // once the walk leaves a shard it never comes back to it; the order is not the shards' own.
  const std::vector<size_t> walked = order(7, 2);
  std::map<size_t, std::vector<size_t>> windows_of_shard;
  for (size_t start = 0; start < walked.size(); start += 16) {
    std::set<size_t> touched;
    for (size_t i = start; i < std::min(start + 16, walked.size()); ++i) touched.insert(shard_of(sizes, walked[i]));
    EXPECT_LE(touched.size(), 2u) << "at " << start;
    for (size_t shard : touched) windows_of_shard[shard].push_back(start / 16);
  }
  for (const auto& [shard, windows] : windows_of_shard) {
    EXPECT_EQ(windows.back() - windows.front() + 1, windows.size()) << "shard " << shard << " is read in windows apart";
  }
  EXPECT_FALSE(std::is_sorted(walked.begin(), walked.begin() + 40));
}

TEST(ShardedSampler, ResumesMidEpochExactly) {
  const std::vector<size_t> sizes = uneven_shards(7);
  const size_t total = std::accumulate(sizes.begin(), sizes.end(), size_t{0});
  DistributedSampler original(total, sharded(sizes, 1, 3));
  original.set_epoch(4);
  for (int i = 0; i < 3; ++i) original.next(8);
  torch::serialize::OutputArchive out;
  original.save(out);
  std::stringstream stream;
  out.save_to(stream);

  DistributedSampler resumed(total, sharded(sizes, 1, 3));
  torch::serialize::InputArchive in;
  in.load_from(stream);
  resumed.load(in);
  EXPECT_EQ(resumed.epoch(), 4);
  while (auto batch = original.next(8)) EXPECT_EQ(resumed.next(8), batch);
  EXPECT_FALSE(resumed.next(8).has_value());
}

TEST(ShardedSampler, ShardSizesThatDoNotAddUpAreRefused) {
  try {
    DistributedSampler sampler(100, sharded({40, 50}, 0, 1));
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& error) {
    EXPECT_STREQ(error.what(), "DistributedSampler: shard_sizes add up to 90 examples, not the dataset's 100");
  }
}

}  // namespace
}  // namespace lockstep::data
