#include "lockstep/data/loader.h"

#include <chrono>
#include <memory>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lockstep/error.h"

namespace lockstep::data {
namespace {

using std::chrono::milliseconds;
using Seconds = std::chrono::duration<double>;

// Example i is a 1×4×4 uint8 image of distinct values starting at i, labelled i. Examples
// in `bad` throw DataError naming their file; every get() sleeps `delay`.
class CountingDataset : public Dataset {
 public:
  explicit CountingDataset(size_t size, std::set<size_t> bad = {}, milliseconds delay = milliseconds(0))
      : size_(size), bad_(std::move(bad)), delay_(delay) {}

  size_t size() const override { return size_; }
  int64_t num_classes() const override { return static_cast<int64_t>(size_); }
  std::string describe(size_t index) const override { return "shard-" + std::to_string(index) + ".bin"; }
  Sample get(size_t index) const override {
    if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
    if (bad_.count(index)) throw DataError(describe(index) + ": truncated record");
    const int64_t start = static_cast<int64_t>(index);
    return {torch::arange(start, start + 16).remainder(256).to(torch::kByte).view({1, 4, 4}), start};
  }

 private:
  size_t size_;
  std::set<size_t> bad_;
  milliseconds delay_;
};

LoaderOptions options_for(int threads, size_t batch = 3) {
  return LoaderOptions()
      .sampler(SamplerOptions().rank(1).world_size(2).batch_size(batch).seed(3))
      .threads(threads)
      .prefetch(2);
}

std::vector<Batch> take_all(PrefetchLoader& loader) {
  std::vector<Batch> batches;
  while (auto batch = loader.next()) batches.push_back(std::move(*batch));
  return batches;
}

std::vector<int64_t> labels_of(const std::vector<Batch>& batches) {
  std::vector<int64_t> labels;
  for (const Batch& batch : batches) {
    for (int64_t i = 0; i < batch.labels.size(0); ++i) labels.push_back(batch.labels[i].item<int64_t>());
  }
  return labels;
}

std::vector<int64_t> sampler_labels(size_t size, const LoaderOptions& options, int64_t epoch) {
  DistributedSampler sampler(size, options.sampler());
  sampler.set_epoch(epoch);
  return {sampler.indices().begin(), sampler.indices().end()};
}

TEST(Loader, BatchesFollowTheSamplerOrder) {
  auto dataset = std::make_shared<CountingDataset>(23);
  PrefetchLoader loader(dataset, options_for(2));
  const std::vector<Batch> batches = take_all(loader);
  ASSERT_EQ(batches.size(), loader.batches_per_epoch());
  ASSERT_EQ(batches.size(), 4u);  // 12 samples per rank in batches of 3
  EXPECT_EQ(labels_of(batches), sampler_labels(23, options_for(2), 0));
  EXPECT_EQ(loader.sampler().batches_taken(), 4u);
  for (const Batch& batch : batches) {
    EXPECT_EQ(batch.images.sizes(), torch::IntArrayRef({3, 1, 4, 4}));
    EXPECT_EQ(batch.labels.scalar_type(), torch::kInt64);
    for (int64_t i = 0; i < 3; ++i) {  // the default transform: to_float()
      const int64_t label = batch.labels[i].item<int64_t>();
      EXPECT_FLOAT_EQ(batch.images[i][0][0][0].item<float>(), static_cast<float>(label) / 255);
    }
  }
  EXPECT_FALSE(loader.next().has_value());
  EXPECT_FALSE(loader.next().has_value());
}

TEST(Loader, OutputDoesNotDependOnThreads) {
  auto dataset = std::make_shared<CountingDataset>(41);
  std::vector<std::vector<Batch>> runs;
  for (int threads : {0, 1, 2, 4}) {
    PrefetchLoader loader(dataset, options_for(threads, 4).transform(compose({random_crop(4, 1), horizontal_flip()})));
    std::vector<Batch> epochs = take_all(loader);
    loader.set_epoch(1);
    for (Batch& batch : take_all(loader)) epochs.push_back(std::move(batch));
    runs.push_back(std::move(epochs));
  }
  for (size_t run = 1; run < runs.size(); ++run) {
    ASSERT_EQ(runs[run].size(), runs[0].size());
    for (size_t b = 0; b < runs[0].size(); ++b) {
      EXPECT_TRUE(torch::equal(runs[run][b].images, runs[0][b].images)) << "run " << run << " batch " << b;
      EXPECT_TRUE(torch::equal(runs[run][b].labels, runs[0][b].labels)) << "run " << run << " batch " << b;
    }
  }
}

// With a global batch a sample's augmentation comes from its own id: the same image whether
// one rank reads it or either of two.
TEST(Loader, WithAGlobalBatchASampleIsAugmentedAlikeOnAnyWorldSize) {
  auto dataset = std::make_shared<CountingDataset>(48);
  const auto images_by_label = [&](int rank, int world) {
    PrefetchLoader loader(dataset,
                          LoaderOptions()
                              .sampler(SamplerOptions().rank(rank).world_size(world).global_batch_size(8).seed(3))
                              .transform(compose({random_crop(4, 1), horizontal_flip()}))
                              .threads(1));
    loader.set_epoch(1);
    std::map<int64_t, torch::Tensor> images;
    while (auto batch = loader.next()) {
      for (int64_t i = 0; i < batch->labels.size(0); ++i) images[batch->labels[i].item<int64_t>()] = batch->images[i];
    }
    return images;
  };
  const auto one = images_by_label(0, 1);
  ASSERT_EQ(one.size(), 48u);
  auto two = images_by_label(0, 2);
  const auto other = images_by_label(1, 2);
  two.insert(other.begin(), other.end());
  ASSERT_EQ(two.size(), 48u);
  for (const auto& [label, image] : one) EXPECT_TRUE(torch::equal(image, two.at(label))) << "sample " << label;
}

TEST(Loader, SetEpochCanStartAtALaterBatch) {
  auto dataset = std::make_shared<CountingDataset>(23);
  for (int threads : {0, 2}) {
    PrefetchLoader loader(dataset, options_for(threads));
    loader.set_epoch(4);
    const std::vector<int64_t> whole = labels_of(take_all(loader));
    loader.set_epoch(4, 2);  // as when resuming a checkpoint taken after 2 batches
    const std::vector<int64_t> rest = labels_of(take_all(loader));
    EXPECT_EQ(rest, std::vector<int64_t>(whole.begin() + 6, whole.end())) << "threads " << threads;
    EXPECT_EQ(loader.sampler().batches_taken(), loader.batches_per_epoch());
  }
  PrefetchLoader loader(dataset, options_for(1));
  EXPECT_THROW(loader.set_epoch(0, loader.batches_per_epoch() + 1), ConfigError);
}

TEST(Loader, DropLastKeepsTheSamplerBatchCount) {
  auto dataset = std::make_shared<CountingDataset>(23);
  LoaderOptions options = options_for(2, 5);
  options.sampler().drop_last(true);
  PrefetchLoader loader(dataset, options);
  const std::vector<Batch> batches = take_all(loader);
  ASSERT_EQ(batches.size(), 2u);  // floor(floor(23 / 2) / 5)
  for (const Batch& batch : batches) EXPECT_EQ(batch.labels.size(0), 5);
}

TEST(Loader, ReadErrorIsRethrownAtItsBatch) {
  const std::vector<int64_t> order = sampler_labels(23, options_for(2), 0);
  const size_t bad = static_cast<size_t>(order[7]);  // in batch 2
  for (int threads : {0, 2}) {
    PrefetchLoader loader(std::make_shared<CountingDataset>(23, std::set<size_t>{bad}), options_for(threads));
    EXPECT_TRUE(loader.next().has_value());
    EXPECT_TRUE(loader.next().has_value());
    try {
      loader.next();
      ADD_FAILURE() << "expected a DataError for batch 2";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("shard-" + std::to_string(bad) + ".bin"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(loader.next().has_value()) << "the batch after the bad one still comes";
    EXPECT_FALSE(loader.next().has_value());
  }
}

TEST(Loader, SkipBadSamplesLeavesThemOutAndCounts) {
  const std::vector<int64_t> order = sampler_labels(23, options_for(2), 0);
  const std::set<size_t> bad = {static_cast<size_t>(order[0]), static_cast<size_t>(order[4]),
                                static_cast<size_t>(order[5])};
  PrefetchLoader loader(std::make_shared<CountingDataset>(23, bad), options_for(2).skip_bad_samples(true));
  const std::vector<Batch> batches = take_all(loader);
  ASSERT_EQ(batches.size(), 4u);
  EXPECT_EQ(loader.skipped(), 3);
  EXPECT_EQ(batches[0].labels.size(0), 2);
  EXPECT_EQ(batches[1].labels.size(0), 1);
  std::vector<int64_t> expected;
  for (int64_t label : order) {
    if (!bad.count(static_cast<size_t>(label))) expected.push_back(label);
  }
  EXPECT_EQ(labels_of(batches), expected);
}

TEST(Loader, WholeBadBatchThrows) {
  const std::vector<int64_t> order = sampler_labels(23, options_for(1), 0);
  std::set<size_t> bad;
  for (size_t i = 3; i < 6; ++i) bad.insert(static_cast<size_t>(order[i]));  // all of batch 1
  PrefetchLoader loader(std::make_shared<CountingDataset>(23, bad), options_for(1).skip_bad_samples(true));
  EXPECT_TRUE(loader.next().has_value());
  try {
    loader.next();
    ADD_FAILURE() << "expected a DataError for the empty batch 1";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("every sample of batch 1"), std::string::npos) << e.what();
  }
  EXPECT_EQ(loader.skipped(), 3);
}

TEST(Loader, WaitedGrowsWhenTheDatasetIsSlow) {
  auto slow = std::make_shared<CountingDataset>(16, std::set<size_t>{}, milliseconds(5));
  for (int threads : {0, 1}) {
    PrefetchLoader loader(slow, options_for(threads, 2));
    take_all(loader);  // 4 batches of 2 samples, 5 ms each: about 40 ms
    EXPECT_GT(loader.waited().count(), 0.02) << "threads " << threads;
  }
}

TEST(Loader, WaitedStaysSmallWhenPrefetchKeepsUp) {
  // 2-sample batches against 30 ms of "training" each: only a stalled machine makes it wait.
  PrefetchLoader loader(std::make_shared<CountingDataset>(20), options_for(2, 2).prefetch(4));
  const auto begin = std::chrono::steady_clock::now();
  while (loader.next()) std::this_thread::sleep_for(milliseconds(30));
  const Seconds elapsed = std::chrono::steady_clock::now() - begin;
  EXPECT_LT(loader.waited().count(), 0.25 * elapsed.count())
      << "waited " << loader.waited().count() << " s of " << elapsed.count() << " s";
}

TEST(Loader, DestroyingMidEpochDoesNotWaitForPendingBatches) {
  auto slow = std::make_shared<CountingDataset>(200, std::set<size_t>{}, milliseconds(20));
  auto loader = std::make_unique<PrefetchLoader>(slow, options_for(4, 8).prefetch(4));
  ASSERT_TRUE(loader->next().has_value());  // the rest of the epoch takes seconds
  const auto begin = std::chrono::steady_clock::now();
  loader.reset();
  const Seconds took = std::chrono::steady_clock::now() - begin;
  EXPECT_LT(took.count(), 0.5);
}

TEST(Loader, SetEpochMidEpochRestartsWithTheNewOrder) {
  PrefetchLoader loader(std::make_shared<CountingDataset>(23), options_for(2));
  loader.next();
  loader.next();
  loader.set_epoch(1);
  const std::vector<int64_t> epoch_one = labels_of(take_all(loader));
  EXPECT_EQ(epoch_one, sampler_labels(23, options_for(2), 1));
  EXPECT_NE(epoch_one, sampler_labels(23, options_for(2), 0));
  EXPECT_EQ(loader.sampler().epoch(), 1);
}

TEST(Loader, BadOptionsRaiseConfigError) {
  auto dataset = std::make_shared<CountingDataset>(10);
  EXPECT_THROW(PrefetchLoader(dataset, LoaderOptions().threads(-1)), ConfigError);
  EXPECT_THROW(PrefetchLoader(dataset, LoaderOptions().prefetch(0)), ConfigError);
  EXPECT_THROW(PrefetchLoader(nullptr), ConfigError);
}

TEST(Loader, ImagesOfDifferentShapesNameTheSamples) {
  // Crop sizes that depend on the sample make a batch that cannot stack.
  const Transform uneven = [](torch::Tensor image, Random& random) {
    return image.narrow(2, 0, 1 + static_cast<int64_t>(random() % 4));
  };
  PrefetchLoader loader(std::make_shared<CountingDataset>(40), options_for(1, 8).transform(uneven));
  try {
    take_all(loader);
    ADD_FAILURE() << "expected a DataError for images of different shapes";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("shard-"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("resize()"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lockstep::data
