#include "resume_position.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include <torch/torch.h>

#include "data/formats/shard_index.h"
#include "lockstep/data/loader.h"
#include "lockstep/data/shards.h"
#include "median.h"

namespace lockstep::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::string text_of(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// `shards` shards of `per_shard` samples (8x8 gray images, labels 0-9) in `folder`: one
// shard packed for real, the others links to it under their own names, and an index
// listing them all, so that a split of a million samples costs one shard of disk.
void make_synthetic_split(const std::string& folder, size_t shards, size_t per_shard) {
  const auto n = static_cast<int64_t>(per_shard);
  const data::TensorDataset one(torch::randint(0, 256, {n, 1, 8, 8}, torch::kUInt8), torch::arange(n) % 10, 10,
                                "synthetic");
  const fs::path first = fs::path(folder) / "first";
  data::pack_shards(one, "train", first.string(), data::PackOptions().shard_bytes(size_t{1} << 30));
  data::ShardIndex index = data::index_from_json(text_of((first / "train.index.json").string()), "synthetic");
  const data::ShardEntry entry = index.shards.at(0);
  index.shards.clear();
  for (size_t s = 0; s < shards; ++s) {
    char name[32];
    std::snprintf(name, sizeof name, "train-%06zu.tar", s);
    fs::create_symlink(first / entry.name, fs::path(folder) / name);
    data::ShardEntry linked = entry;
    linked.name = name;
    index.shards.push_back(linked);
  }
  std::ofstream(fs::path(folder) / "train.index.json") << data::index_to_json(index);
}

data::LoaderOptions resumed_options(int rank, int world, size_t global_batch) {
  return data::LoaderOptions()
      .sampler(data::SamplerOptions().rank(rank).world_size(world).global_batch_size(global_batch))
      .threads(1);
}

// A worker of M starting at step `step` of epoch 1: index read, order computed, first batch
// in hand. The slowest rank's seconds.
double slowest_first_batch(const std::string& folder, int world, size_t global_batch, size_t step) {
  double slowest = 0;
  for (int rank = 0; rank < world; ++rank) {
    const auto started = Clock::now();
    auto dataset = std::make_shared<data::ShardDataset>(folder, "train");
    data::PrefetchLoader loader(dataset, resumed_options(rank, world, global_batch));
    loader.set_epoch(1, step);
    if (!loader.next()) std::abort();
    slowest = std::max(slowest, seconds_since(started));
  }
  return slowest;
}

// Shards read by every worker of `world` from step `from` to step `to` (exclusive) of
// epoch 0, each worker with a dataset of its own, as processes would be.
int64_t shard_reads(const std::string& folder, int world, size_t global_batch, size_t from, size_t to) {
  int64_t reads = 0;
  for (int rank = 0; rank < world; ++rank) {
    auto dataset = std::make_shared<data::ShardDataset>(folder, "train");
    data::PrefetchLoader loader(dataset, resumed_options(rank, world, global_batch));
    loader.set_epoch(0, from);
    for (size_t step = from; step < to && loader.next(); ++step) {
    }
    reads += dataset->shard_reads();
  }
  return reads;
}

}  // namespace

void measure_resume_on_another_world_size(const std::string& scratch) {
  // Time to the first batch: a million samples in 1,000 shards, global batch 1,024, a
  // checkpoint of step 500 (mid-epoch) resumed on 1, 2, 4 and 8 workers.
  const std::string large = scratch + "/resume-1m";
  make_synthetic_split(large, 1000, 1000);
  constexpr size_t kGlobal = 1024, kStep = 500;
  constexpr int kRepeats = 5;
  std::printf(
      "\n| resumed at step %zu of epoch 2 (1,000,000 samples in 1,000 shards, global batch %zu) | first batch, "
      "slowest worker, s (median of %d) | at the epoch's start, s |\n|---|---:|---:|\n",
      kStep, kGlobal, kRepeats);
  for (const int world : {1, 2, 4, 8}) {
    std::vector<double> resumed, fresh;
    for (int repeat = 0; repeat < kRepeats; ++repeat) {
      resumed.push_back(slowest_first_batch(large, world, kGlobal, kStep));
      fresh.push_back(slowest_first_batch(large, world, kGlobal, 0));
    }
    std::printf("| on %d worker(s) | %.3f | %.3f |\n", world, median(resumed), median(fresh));
  }

  // Shard reads: 20,000 samples in shards of 200 and of 500 (a shuffle window of 1,000
  // spans 5 or 2 to 3 of them), global batch 256 (79 steps an epoch), stopped after step 40
  // on N workers and resumed on M.
  constexpr size_t kSmallGlobal = 256, kStop = 40, kEnd = 79;
  std::printf(
      "\n| 20,000 samples, global batch %zu, stopped after step %zu on N and resumed on M | shard reads: before "
      "the stop on N + after it on M | uninterrupted on N | uninterrupted on M | extra reads per worker of M |\n"
      "|---|---:|---:|---:|---:|\n",
      kSmallGlobal, kStop);
  for (const size_t per_shard : {200, 500}) {
    const std::string small = scratch + "/resume-20k-" + std::to_string(per_shard);
    make_synthetic_split(small, 20000 / per_shard, per_shard);
    for (const auto& [from, to] : std::vector<std::pair<int, int>>{{2, 3}, {3, 2}, {4, 1}, {1, 4}, {3, 4}, {4, 3}}) {
      const int64_t before = shard_reads(small, from, kSmallGlobal, 0, kStop);
      const int64_t after = shard_reads(small, to, kSmallGlobal, kStop, kEnd);
      const int64_t whole_n = shard_reads(small, from, kSmallGlobal, 0, kEnd);
      const int64_t whole_m = shard_reads(small, to, kSmallGlobal, 0, kEnd);
      std::printf("| shards of %zu, %d then %d | %lld + %lld | %lld | %lld | %.1f |\n", per_shard, from, to,
                  static_cast<long long>(before), static_cast<long long>(after), static_cast<long long>(whole_n),
                  static_cast<long long>(whole_m), static_cast<double>(before + after - whole_n) / to);
    }
  }
}

}  // namespace lockstep::bench
