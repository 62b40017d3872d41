#include "lockstep/data/loader.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "data/pipeline/portable_random.h"
#include "lockstep/error.h"

namespace lockstep::data {
namespace {

using Clock = std::chrono::steady_clock;

// One batch claimed by a thread: being built until `done`, then a batch or an error.
struct Slot {
  bool done = false;
  Batch batch;
  std::exception_ptr error;
  int64_t skipped = 0;  // added to skipped() when next() hands the batch out
};

// The sampler walks the dataset's shards unless the options already name them.
SamplerOptions with_shards_of(const Dataset& dataset, SamplerOptions options) {
  if (options.shard_sizes().empty()) options.shard_sizes(dataset.shard_sizes());
  return options;
}

}  // namespace

struct PrefetchLoader::State {
  State(std::shared_ptr<const Dataset> dataset_in, LoaderOptions options_in)
      : dataset(std::move(dataset_in)),
        options(std::move(options_in)),
        sampler(dataset->size(), with_shards_of(*dataset, options.sampler())) {}

  std::shared_ptr<const Dataset> dataset;
  LoaderOptions options;
  DistributedSampler sampler;

  std::mutex mutex;
  std::condition_variable batch_done;  // a thread finished a slot: next() may go on
  std::condition_variable slot_freed;  // next() took a slot, or stop: threads may go on
  std::deque<Slot> slots;              // batches next_to_return, next_to_return + 1, ...
  size_t next_to_claim = 0;            // next batch a thread may start
  size_t next_to_return = 0;           // next batch next() returns
  std::atomic<bool> stopping{false};   // also read between samples, to stop promptly
  std::vector<std::thread> threads;

  std::chrono::duration<double> waited{0};
  int64_t skipped = 0;

  void start();
  void stop();
  void work();
  Batch build(size_t batch_index, int64_t& skipped_samples) const;
};

void PrefetchLoader::State::start() {
  next_to_claim = next_to_return;
  try {
    for (int t = 0; t < options.threads(); ++t) threads.emplace_back([this] { work(); });
  } catch (...) {
    stop();
    throw;
  }
}

void PrefetchLoader::State::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  slot_freed.notify_all();
  for (std::thread& thread : threads) thread.join();
  threads.clear();
  slots.clear();
  stopping = false;
}

void PrefetchLoader::State::work() {
  const size_t batches = sampler.batches_per_epoch();
  const size_t ahead = static_cast<size_t>(options.prefetch());
  std::unique_lock<std::mutex> lock(mutex);
  while (true) {
    // Claims go in batch order, so slots.back() is the batch just claimed.
    slot_freed.wait(lock,
                    [&] { return stopping || (next_to_claim < batches && next_to_claim < next_to_return + ahead); });
    if (stopping) return;
    const size_t batch_index = next_to_claim++;
    Slot& slot = slots.emplace_back();  // deque references survive pushes and pops at the ends
    lock.unlock();
    Batch batch;
    std::exception_ptr error;
    int64_t skipped_samples = 0;
    try {
      batch = build(batch_index, skipped_samples);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    slot.batch = std::move(batch);
    slot.error = error;
    slot.skipped = skipped_samples;
    slot.done = true;
    batch_done.notify_all();
  }
}

// Reads, transforms and stacks one batch. Each sample's Random comes from (seed, epoch,
// global position), so the result does not depend on which thread builds it, or when; with
// a global batch the position is the sample's id, so not on the world size either.
// Per-sample ops on small images stay below ATen's parallel grain size, so loader threads
// rarely compete with training for intra-op threads.
Batch PrefetchLoader::State::build(size_t batch_index, int64_t& skipped_samples) const {
  const std::vector<size_t>& indices = sampler.indices();
  const size_t begin = sampler.batch_begin(batch_index), end = sampler.batch_begin(batch_index + 1);
  std::vector<torch::Tensor> images;
  std::vector<int64_t> labels;
  std::vector<int64_t> ids;  // dataset indices of `images`
  images.reserve(end - begin);
  std::string first_error;
  for (size_t local = begin; local < end; ++local) {
    if (stopping) return {};  // discarded anyway: the epoch is being dropped
    const size_t index = indices[local];
    try {
      Sample sample = dataset->get(index);
      Random random(
          mix_seed({sampler.options().seed(), static_cast<uint64_t>(sampler.epoch()), sampler.global_position(local)}));
      images.push_back(options.transform()(std::move(sample.image), random));
      labels.push_back(sample.label);
      ids.push_back(static_cast<int64_t>(index));
    } catch (const DataError& e) {
      if (!options.skip_bad_samples()) throw;
      ++skipped_samples;
      if (first_error.empty()) first_error = e.what();
    }
  }
  if (images.empty()) {
    throw DataError("PrefetchLoader: every sample of batch " + std::to_string(batch_index) + " (epoch " +
                    std::to_string(sampler.epoch()) +
                    ") failed to read, so skip_bad_samples left nothing; the first error: " + first_error);
  }
  for (size_t i = 1; i < images.size(); ++i) {
    if (!images[i].sizes().equals(images[0].sizes())) {
      throw DataError("PrefetchLoader: " + dataset->describe(static_cast<size_t>(ids[i])) + " has shape " +
                      c10::str(images[i].sizes()) + " after the transform but " +
                      dataset->describe(static_cast<size_t>(ids[0])) + " has " + c10::str(images[0].sizes()) +
                      "; add resize() or center_crop() to the transform so images stack");
    }
  }
  Batch batch{torch::stack(images), torch::tensor(labels, torch::kInt64), std::move(ids)};
  if (options.pin_memory()) {
    batch.images = batch.images.pin_memory();
    batch.labels = batch.labels.pin_memory();
  }
  return batch;
}

PrefetchLoader::PrefetchLoader(std::shared_ptr<const Dataset> dataset, LoaderOptions options) {
  if (!dataset) throw ConfigError("PrefetchLoader: dataset is null");
  if (options.threads() < 0) {
    throw ConfigError("PrefetchLoader: threads " + std::to_string(options.threads()) +
                      " must be at least 0 (0 reads on the calling thread)");
  }
  if (options.prefetch() < 1) {
    throw ConfigError("PrefetchLoader: prefetch " + std::to_string(options.prefetch()) + " must be at least 1");
  }
  if (!options.transform()) options.transform(to_float());
  state_ = std::make_unique<State>(std::move(dataset), std::move(options));
}

PrefetchLoader::~PrefetchLoader() { state_->stop(); }

void PrefetchLoader::set_epoch(int64_t epoch, size_t first_batch) {
  State& s = *state_;
  s.stop();
  s.sampler.set_epoch(epoch);
  const size_t batches = s.sampler.batches_per_epoch();
  if (first_batch > batches) {
    throw ConfigError("PrefetchLoader::set_epoch: first_batch " + std::to_string(first_batch) +
                      " is past the epoch's " + std::to_string(batches) + " batches");
  }
  const size_t batch_size = s.sampler.options().batch_size();
  for (size_t b = 0; b < first_batch; ++b) s.sampler.next(batch_size);
  s.next_to_return = first_batch;
  s.next_to_claim = first_batch;
}

std::optional<Batch> PrefetchLoader::next() {
  State& s = *state_;
  if (s.next_to_return >= s.sampler.batches_per_epoch()) return std::nullopt;
  const size_t batch_size = s.sampler.options().batch_size();
  if (s.options.threads() == 0) {
    // Training waits for every batch built here, so all of it counts as waiting.
    const Clock::time_point begin = Clock::now();
    const size_t batch_index = s.next_to_return++;
    s.sampler.next(batch_size);
    int64_t skipped_samples = 0;
    Batch batch;
    std::exception_ptr error;
    try {
      batch = s.build(batch_index, skipped_samples);
    } catch (...) {
      error = std::current_exception();
    }
    s.skipped += skipped_samples;
    s.waited += Clock::now() - begin;
    if (error) std::rethrow_exception(error);
    return batch;
  }
  if (s.threads.empty()) s.start();
  Slot slot;
  {
    std::unique_lock<std::mutex> lock(s.mutex);
    auto ready = [&] { return !s.slots.empty() && s.slots.front().done; };
    if (!ready()) {
      const Clock::time_point begin = Clock::now();
      s.batch_done.wait(lock, ready);
      s.waited += Clock::now() - begin;
    }
    slot = std::move(s.slots.front());
    s.slots.pop_front();
    ++s.next_to_return;
  }
  s.slot_freed.notify_one();
  s.sampler.next(batch_size);  // workers only read the sampler's indices, not its position
  s.skipped += slot.skipped;
  if (slot.error) std::rethrow_exception(slot.error);
  return std::move(slot.batch);
}

size_t PrefetchLoader::batches_per_epoch() const { return state_->sampler.batches_per_epoch(); }
const DistributedSampler& PrefetchLoader::sampler() const { return state_->sampler; }
std::chrono::duration<double> PrefetchLoader::waited() const { return state_->waited; }
int64_t PrefetchLoader::skipped() const { return state_->skipped; }

}  // namespace lockstep::data
