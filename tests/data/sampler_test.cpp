#include "lockstep/data/sampler.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/serialize/archive.h>

#include "lockstep/error.h"

namespace lockstep::data {
namespace {

using Batches = std::vector<std::vector<size_t>>;

SamplerOptions options_for(int rank, int world, size_t batch, bool drop_last = false) {
  return SamplerOptions().rank(rank).world_size(world).batch_size(batch).drop_last(drop_last);
}

Batches take_all(DistributedSampler& sampler) {
  Batches batches;
  while (auto batch = sampler.next(sampler.options().batch_size())) batches.push_back(*batch);
  return batches;
}

// The whole epoch's order: what a world of one sees, without padding.
std::vector<size_t> epoch_order(size_t size, uint64_t seed, int64_t epoch) {
  DistributedSampler sampler(size, SamplerOptions().rank(0).world_size(1).seed(seed));
  sampler.set_epoch(epoch);
  return sampler.indices();
}

bool is_permutation_of_range(std::vector<size_t> order) {
  std::sort(order.begin(), order.end());
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i] != i) return false;
  }
  return true;
}

template <typename Body>
void expect_config_error(Body body, const std::string& needle) {
  try {
    body();
    ADD_FAILURE() << "expected a ConfigError naming '" << needle << "'";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

const size_t kSizes[] = {1, 7, 10, 97, 1000};
const size_t kBatchSizes[] = {3, 8};

TEST(Sampler, PaddedEpochCoversDatasetWithSameBatchesOnEveryRank) {
  for (size_t size : kSizes) {
    for (int world = 1; world <= 4; ++world) {
      for (size_t batch : kBatchSizes) {
        SCOPED_TRACE("size " + std::to_string(size) + " world " + std::to_string(world) + " batch " +
                     std::to_string(batch));
        const std::vector<size_t> order = epoch_order(size, 0, 2);
        const size_t per_rank = (size + world - 1) / world;
        std::map<size_t, int> seen;
        for (int rank = 0; rank < world; ++rank) {
          DistributedSampler sampler(size, options_for(rank, world, batch));
          sampler.set_epoch(2);
          ASSERT_EQ(sampler.samples_per_rank(), per_rank);
          const Batches batches = take_all(sampler);
          ASSERT_EQ(batches.size(), (per_rank + batch - 1) / batch);
          EXPECT_EQ(batches.size(), sampler.batches_per_epoch());
          EXPECT_EQ(sampler.batches_taken(), batches.size());
          for (size_t b = 0; b + 1 < batches.size(); ++b) EXPECT_EQ(batches[b].size(), batch);
          EXPECT_EQ(batches.back().size(), per_rank - (batches.size() - 1) * batch);
          for (const auto& indices : batches) {
            for (size_t index : indices) ++seen[index];
          }
        }
        // Every index once, plus one more for each padding position, which wraps to the
        // start of the order: per_rank * world - size extra, from order[0] on.
        std::map<size_t, int> expected;
        for (size_t p = 0; p < per_rank * world; ++p) ++expected[order[p % size]];
        EXPECT_EQ(seen.size(), size);
        EXPECT_EQ(seen, expected);
      }
    }
  }
}

TEST(Sampler, UnevenSplitForEvaluationTakesEachSampleOnce) {
  for (size_t size : {1, 7, 10, 97}) {
    for (int world = 1; world <= 4; ++world) {
      std::multiset<size_t> seen;
      for (int rank = 0; rank < world; ++rank) {
        DistributedSampler sampler(
            size, SamplerOptions().rank(rank).world_size(world).batch_size(3).shuffle(false).even(false));
        seen.insert(sampler.indices().begin(), sampler.indices().end());
        EXPECT_EQ(sampler.samples_per_rank(), size / world + (static_cast<size_t>(rank) < size % world ? 1 : 0));
      }
      std::multiset<size_t> expected;
      for (size_t i = 0; i < size; ++i) expected.insert(i);
      EXPECT_EQ(seen, expected) << "size " << size << ", world " << world;
    }
  }
}

TEST(Sampler, RanksTakeStridedPositions) {
  const std::vector<size_t> order = epoch_order(97, 5, 0);
  DistributedSampler sampler(97, options_for(2, 4, 8).seed(5));
  for (size_t local = 0; local < sampler.samples_per_rank(); ++local) {
    EXPECT_EQ(sampler.global_position(local), 2 + local * 4);
    EXPECT_EQ(sampler.indices()[local], order[sampler.global_position(local) % 97]);
  }
}

TEST(Sampler, DropLastGivesFullDisjointBatches) {
  for (size_t size : kSizes) {
    for (int world = 1; world <= 4; ++world) {
      for (size_t batch : kBatchSizes) {
        SCOPED_TRACE("size " + std::to_string(size) + " world " + std::to_string(world) + " batch " +
                     std::to_string(batch));
        const size_t batches_expected = size / world / batch;
        if (batches_expected == 0) {
          expect_config_error([&] { DistributedSampler(size, options_for(0, world, batch, true)); }, "too small");
          continue;
        }
        std::map<size_t, int> seen;
        for (int rank = 0; rank < world; ++rank) {
          DistributedSampler sampler(size, options_for(rank, world, batch, true));
          const Batches batches = take_all(sampler);
          ASSERT_EQ(batches.size(), batches_expected);
          for (const auto& indices : batches) {
            EXPECT_EQ(indices.size(), batch);
            for (size_t index : indices) EXPECT_EQ(++seen[index], 1) << "index " << index;
          }
        }
        EXPECT_EQ(seen.size(), batches_expected * batch * world);
      }
    }
  }
}

TEST(Sampler, EpochsGiveDifferentPermutations) {
  for (size_t size : {10, 97, 1000}) {
    const std::vector<size_t> first = epoch_order(size, 0, 0);
    const std::vector<size_t> second = epoch_order(size, 0, 1);
    EXPECT_TRUE(is_permutation_of_range(first));
    EXPECT_TRUE(is_permutation_of_range(second));
    EXPECT_NE(first, second) << "size " << size;
  }
}

TEST(Sampler, SeedDecidesTheOrder) {
  EXPECT_EQ(epoch_order(1000, 7, 3), epoch_order(1000, 7, 3));
  EXPECT_NE(epoch_order(1000, 7, 3), epoch_order(1000, 8, 3));
}

// Guards against accidental changes: every machine of a job, and every checkpoint that
// resumes one, relies on this exact order.
TEST(Sampler, OrderForSeedZeroIsFixed) {
  const std::vector<size_t> expected = {9, 4, 5, 7, 3, 6, 1, 8, 0, 2};
  EXPECT_EQ(epoch_order(10, 0, 0), expected);
}

TEST(Sampler, ShuffleOffKeepsDatasetOrder) {
  DistributedSampler sampler(10, options_for(1, 3, 2).shuffle(false));
  EXPECT_EQ(sampler.indices(), (std::vector<size_t>{1, 4, 7, 0}));  // 10 and 11 wrap to 0, 1
}

TEST(Sampler, SaveAndLoadResumeMidEpoch) {
  DistributedSampler original(97, options_for(1, 3, 4).seed(11));
  original.set_epoch(3);
  original.next(4);
  original.next(4);
  std::stringstream stream;
  torch::serialize::OutputArchive out;
  original.save(out);
  out.save_to(stream);
  const Batches rest = take_all(original);

  DistributedSampler resumed(97, options_for(1, 3, 4).seed(11));
  torch::serialize::InputArchive in;
  in.load_from(stream);
  resumed.load(in);
  EXPECT_EQ(resumed.epoch(), 3);
  EXPECT_EQ(resumed.batches_taken(), 2u);
  EXPECT_EQ(take_all(resumed), rest);
}

TEST(Sampler, LoadRejectsAnotherWorld) {
  DistributedSampler original(97, options_for(0, 3, 4));
  std::stringstream stream;
  torch::serialize::OutputArchive out;
  original.save(out);
  out.save_to(stream);
  DistributedSampler other(97, options_for(0, 2, 4));
  torch::serialize::InputArchive in;
  in.load_from(stream);
  expect_config_error([&] { other.load(in); }, "world_size 3");
}

SamplerOptions global_options(int rank, int world, size_t global_batch = 48) {
  return SamplerOptions().rank(rank).world_size(world).global_batch_size(global_batch).seed(3);
}

std::vector<size_t> sorted(std::vector<size_t> values) {
  std::sort(values.begin(), values.end());
  return values;
}

// With a global batch the steps belong to the data: worlds of 1, 2, 3 and 5 ranks train the
// same samples at every step, each sample once an epoch.
TEST(Sampler, AGlobalBatchTrainsTheSameSamplesAtEveryStepOnAnyWorldSize) {
  for (const int64_t epoch : {0, 1}) {
    DistributedSampler one(500, global_options(0, 1));
    one.set_epoch(epoch);
    const Batches whole = take_all(one);
    ASSERT_EQ(whole.size(), 11u);  // 10 steps of 48 and one of 20
    std::vector<size_t> epoch_samples;
    for (const auto& step : whole) epoch_samples.insert(epoch_samples.end(), step.begin(), step.end());
    EXPECT_TRUE(is_permutation_of_range(epoch_samples));
    for (const int world : {2, 3, 5}) {
      std::vector<DistributedSampler> ranks;
      for (int rank = 0; rank < world; ++rank) {
        ranks.emplace_back(500, global_options(rank, world));
        ranks.back().set_epoch(epoch);
        ASSERT_EQ(ranks.back().batches_per_epoch(), 11u);
      }
      for (size_t step = 0; step < whole.size(); ++step) {
        std::vector<size_t> together;
        for (auto& rank : ranks) {
          const auto part = rank.next(rank.options().batch_size());
          ASSERT_TRUE(part.has_value());
          together.insert(together.end(), part->begin(), part->end());
        }
        EXPECT_EQ(sorted(together), sorted(whole[step])) << "world " << world << ", step " << step;
      }
    }
  }
}

// Saved mid-epoch on 2 ranks, loaded on 3: the remaining steps are those of the run that
// went on, and another global batch or dataset is refused naming both values.
TEST(Sampler, AGlobalBatchResumesMidEpochOnAnotherWorldSize) {
  DistributedSampler saved_on_two(500, global_options(1, 2));
  saved_on_two.set_epoch(2);
  for (int step = 0; step < 4; ++step) saved_on_two.next(64);
  std::stringstream stream;
  torch::serialize::OutputArchive out;
  saved_on_two.save(out);
  out.save_to(stream);
  const std::string saved = stream.str();
  const auto archive = [&] {
    auto in = std::make_unique<torch::serialize::InputArchive>();
    std::stringstream copy(saved);
    in->load_from(copy);
    return in;
  };

  DistributedSampler one(500, global_options(0, 1));
  one.set_epoch(2);
  const Batches whole = take_all(one);
  std::vector<std::vector<size_t>> rest(whole.size());
  for (int rank = 0; rank < 3; ++rank) {
    DistributedSampler resumed(500, global_options(rank, 3));
    resumed.load(*archive());
    EXPECT_EQ(resumed.epoch(), 2);
    EXPECT_EQ(resumed.batches_taken(), 4u);
    size_t step = 4;
    while (auto part = resumed.next(64)) {
      rest[step].insert(rest[step].end(), part->begin(), part->end());
      ++step;
    }
    EXPECT_EQ(step, whole.size());
  }
  for (size_t step = 4; step < whole.size(); ++step) EXPECT_EQ(sorted(rest[step]), sorted(whole[step])) << step;

  DistributedSampler other_batch(500, global_options(0, 3, 32));
  expect_config_error([&] { other_batch.load(*archive()); },
                      "DistributedSampler::load: the checkpoint was saved with global_batch_size 48, but this sampler "
                      "has 32; resume with the same global_batch_size");
  DistributedSampler other_data(499, global_options(0, 3));
  expect_config_error([&] { other_data.load(*archive()); },
                      "the checkpoint was saved with dataset_size 500, but this sampler has 499");
  DistributedSampler per_rank(500, options_for(0, 2, 24));
  expect_config_error([&] { per_rank.load(*archive()); },
                      "the checkpoint was saved with global_batch_size 48, but this sampler has 0");
}

TEST(Sampler, AGlobalBatchSmallerThanTheWorldIsRefused) {
  expect_config_error(
      [] { DistributedSampler(500, global_options(0, 5, 4)); },
      "global batch size 4 is smaller than the 5 workers: each worker needs at least one sample a step");
  // 5 ranks share 12 partitions unevenly: with 5 samples a step one of them gets none.
  expect_config_error([] { DistributedSampler(500, global_options(0, 5, 5)); }, "no sample at step");
}

TEST(Sampler, ResetRewindsAndTakesANewSize) {
  DistributedSampler sampler(20, options_for(0, 2, 3));
  const Batches first = take_all(sampler);
  EXPECT_FALSE(sampler.next(3).has_value());
  sampler.reset();
  EXPECT_EQ(take_all(sampler), first);
  sampler.reset(7);
  EXPECT_EQ(sampler.samples_per_rank(), 4u);
  EXPECT_EQ(take_all(sampler).size(), 2u);
}

TEST(Sampler, WithoutInitIsAWorldOfOne) {
  DistributedSampler sampler(10, SamplerOptions().batch_size(4));
  EXPECT_EQ(sampler.options().rank(), 0);
  EXPECT_EQ(sampler.options().world_size(), 1);
  EXPECT_EQ(sampler.samples_per_rank(), 10u);
}

TEST(Sampler, BadOptionsNameTheValue) {
  expect_config_error([] { DistributedSampler(10, options_for(0, 0, 4)); }, "world_size 0");
  expect_config_error([] { DistributedSampler(10, options_for(4, 4, 4)); }, "rank 4");
  expect_config_error([] { DistributedSampler(10, options_for(-2, 4, 4)); }, "rank -2");
  expect_config_error([] { DistributedSampler(10, options_for(0, 1, 0)); }, "batch_size 0");
  expect_config_error([] { DistributedSampler(0, options_for(0, 1, 4)); }, "dataset_size 0");
  expect_config_error([] { DistributedSampler(10, options_for(0, 4, 3, true)); }, "world_size 4 x batch_size 3");
  DistributedSampler sampler(10, options_for(0, 1, 4));
  expect_config_error([&] { sampler.next(5); }, "batch_size 5");
  expect_config_error([&] { sampler.reset(0); }, "dataset_size 0");
}

}  // namespace
}  // namespace lockstep::data
