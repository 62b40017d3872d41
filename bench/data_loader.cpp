// Input throughput of lockstep's data layer:
//
//   bench/data_loader [IMAGES]
//
// exports IMAGES (default 10000) Fashion-MNIST training images as JPEGs in ImageNet's layout
// under a temporary folder, then measures, side by side and several times over:
//   - decode + transform on one thread, no loader: the per-thread rate of JPEG work;
//   - PrefetchLoader over Fashion-MNIST (IDX, in memory) with 1 and 2 threads;
//   - PrefetchLoader over the exported JPEGs with 1 and 2 threads;
// all with batches of 64 and the CNN recipe's augmentation (random crop with padding 2,
// horizontal flip, normalize), and prints median samples per second.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "lockstep/data/export.h"
#include "lockstep/data/fashion_mnist.h"
#include "lockstep/data/imagenet.h"
#include "lockstep/data/loader.h"
#include "lockstep/data/registry.h"
#include "median.h"

namespace {

using lockstep::bench::median;

namespace data = lockstep::data;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kRepeats = 5;
constexpr size_t kBatch = 64;

data::Transform augmentation() {
  return data::compose({data::random_crop(28, 2), data::horizontal_flip(), data::normalize({0.2860}, {0.3530})});
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// One epoch through the loader, as fast as it gives batches.
double loader_rate(const std::shared_ptr<const data::Dataset>& dataset, int threads) {
  data::PrefetchLoader loader(
      dataset, data::LoaderOptions().sampler(data::SamplerOptions().batch_size(kBatch).world_size(1).rank(0))
                   .transform(augmentation()).threads(threads).prefetch(2 * threads + 2));
  const auto start = Clock::now();
  size_t samples = 0;
  while (auto batch = loader.next()) samples += static_cast<size_t>(batch->labels.size(0));
  return samples / seconds_since(start);
}

// Read, decode and transform on this thread alone: what one loader thread can do at most.
double decode_and_transform_rate(const data::Dataset& dataset) {
  const auto transform = augmentation();
  data::Random random(0);
  const auto start = Clock::now();
  for (size_t i = 0; i < dataset.size(); ++i) transform(dataset.get(i).image, random);
  return dataset.size() / seconds_since(start);
}

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(1);
  const int64_t images = argc > 1 ? std::atoll(argv[1]) : 10000;
  const auto registry = data::Registry::load_default();
  const auto& fashion = registry.at("fashion-mnist");
  const std::shared_ptr<const data::Dataset> train = data::open_dataset(fashion, "train");
  const auto test = data::open_dataset(fashion, "test");

  const fs::path folder = fs::temp_directory_path() / ("lockstep-loader-bench-" + std::to_string(getpid()));
  data::export_imagenet_layout(*train, *test, data::class_names(fashion), folder.string(), images);
  const std::shared_ptr<const data::Dataset> jpegs = data::read_imagenet(folder.string(), "train", 1);
  std::printf("Fashion-MNIST: %zu training images in memory; %zu exported as 28x28 JPEGs\n\n", train->size(),
              jpegs->size());

  const std::vector<std::pair<std::string, std::function<double()>>> configurations = {
      {"JPEG decode + transform, 1 thread, no loader", [&] { return decode_and_transform_rate(*jpegs); }},
      {"PrefetchLoader, Fashion-MNIST IDX, 1 thread", [&] { return loader_rate(train, 1); }},
      {"PrefetchLoader, Fashion-MNIST IDX, 2 threads", [&] { return loader_rate(train, 2); }},
      {"PrefetchLoader, exported JPEGs, 1 thread", [&] { return loader_rate(jpegs, 1); }},
      {"PrefetchLoader, exported JPEGs, 2 threads", [&] { return loader_rate(jpegs, 2); }},
  };
  std::map<std::string, std::vector<double>> rates;
  for (int repeat = 0; repeat < kRepeats; ++repeat) {
    for (const auto& [name, measure] : configurations) rates[name].push_back(measure());
  }
  std::printf("| configuration (batch %zu, random crop + flip + normalize) | samples/s (median of %d) |\n|---|---:|\n",
              kBatch, kRepeats);
  for (const auto& [name, measure] : configurations) std::printf("| %s | %.0f |\n", name.c_str(), median(rates[name]));
  fs::remove_all(folder);
  return 0;
}
