// Input throughput of lockstep's data layer:
//
//   bench/data_loader [IMAGES] [--cold]
//
// exports IMAGES (default 10000) Fashion-MNIST training images as JPEGs in ImageNet's layout
// under a temporary folder, then measures, side by side and several times over:
//   - decode + transform on one thread, no loader: the per-thread rate of JPEG work;
//   - PrefetchLoader over Fashion-MNIST (IDX, in memory) with 1 and 2 threads;
//   - PrefetchLoader over the exported JPEGs with 1 and 2 threads;
// all with batches of 64 and the CNN recipe's augmentation (random crop with padding 2,
// horizontal flip, normalize), and prints median samples per second. Then the read path
// alone (decode and to_float, one loader thread), for the 28x28 JPEGs and for IMAGES / 5 of
// them enlarged to 224x224 RGB: one file per sample, the same JPEGs packed into 64 MB tar
// shards on local disk, and those shards from a real nginx and from a real S3 (Ceph's RADOS
// Gateway) on loopback (when the tests' support is built, which starts them); then two
// epochs from S3 through a local cache, uncapped against capped at half the shards. With --cold (root only) the page
// cache is dropped before each read-path measurement, as files on a network file system or a cold disk would be read.
// Last, a global batch's resume on another number of workers (bench/resume_position.h);
// with --resume, only that.
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
#include "lockstep/data/shards.h"
#include "median.h"
#include "resume_position.h"
#ifdef LOCKSTEP_BENCH_NGINX
#include "support/nginx_server.h"
#include "support/s3_gateway.h"
#endif

namespace {

using lockstep::bench::median;

namespace data = lockstep::data;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kRepeats = 5;
// The read paths' epochs last 0.15 to 1.2 s, so their ratios move with the machine's
// other work: more repeats, side by side, for a firm median.
constexpr int kReadPathRepeats = 15;
constexpr size_t kBatch = 64;

data::Transform augmentation() {
  return data::compose({data::random_crop(28, 2), data::horizontal_flip(), data::normalize({0.2860}, {0.3530})});
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// One epoch through the loader, as fast as it gives batches.
double loader_rate(const std::shared_ptr<const data::Dataset>& dataset, int threads,
                   const data::Transform& transform = augmentation(), size_t shuffle_window = 1000) {
  data::PrefetchLoader loader(
      dataset,
      data::LoaderOptions()
          .sampler(data::SamplerOptions().batch_size(kBatch).world_size(1).rank(0).shuffle_window(shuffle_window))
          .transform(transform)
          .threads(threads)
          .prefetch(2 * threads + 2));
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

// Fashion-MNIST enlarged to 224x224 RGB, for JPEGs of ImageNet's size.
class Enlarged : public data::Dataset {
 public:
  explicit Enlarged(std::shared_ptr<const data::Dataset> small) : small_(std::move(small)) {}
  size_t size() const override { return small_->size(); }
  int64_t num_classes() const override { return small_->num_classes(); }
  std::string describe(size_t index) const override { return small_->describe(index); }
  data::Sample get(size_t index) const override {
    data::Sample sample = small_->get(index);
    namespace F = torch::nn::functional;
    const auto large = F::interpolate(
        sample.image.unsqueeze(0).to(torch::kFloat),
        F::InterpolateFuncOptions().size(std::vector<int64_t>{224, 224}).mode(torch::kBilinear).align_corners(false));
    sample.image = large[0].round().clamp(0, 255).to(torch::kUInt8).repeat({3, 1, 1});
    return sample;
  }

 private:
  std::shared_ptr<const data::Dataset> small_;
};

void drop_page_cache() {
  sync();
  std::FILE* control = std::fopen("/proc/sys/vm/drop_caches", "w");
  if (control == nullptr) {
    std::fprintf(stderr, "--cold needs root, to write /proc/sys/vm/drop_caches\n");
    std::exit(2);
  }
  std::fputs("3\n", control);
  std::fclose(control);
}

// The same JPEGs three ways, one loader thread, decode and to_float only.
void compare_read_paths(const std::string& label, const std::shared_ptr<const data::Dataset>& files,
                        const std::string& shards, const std::string& url, const std::string& s3,
                        const std::string& s3_endpoint, bool cold) {
  const auto rate_of = [cold](const std::shared_ptr<const data::Dataset>& dataset) {
    if (cold) drop_page_cache();
    return loader_rate(dataset, 1, data::to_float());
  };
  // A fresh ShardDataset per repeat, so that every repeat reads its shards again.
  std::vector<std::pair<std::string, std::function<double()>>> paths = {
      {"one file per sample", [&] { return rate_of(files); }},
      {"tar shards, local disk", [&] { return rate_of(std::make_shared<data::ShardDataset>(shards, "train")); }},
  };
  if (!url.empty()) {
    paths.push_back({"tar shards, nginx over loopback",
                     [&] { return rate_of(std::make_shared<data::ShardDataset>(url, "train")); }});
  }
  if (!s3.empty()) {
    paths.push_back({"tar shards, S3 gateway over loopback", [&] {
                       return rate_of(std::make_shared<data::ShardDataset>(s3, "train",
                                                                           data::ShardOptions().endpoint(s3_endpoint)));
                     }});
  }
  std::map<std::string, std::vector<double>> rates;
  for (int repeat = 0; repeat < kReadPathRepeats; ++repeat) {
    for (const auto& [name, measure] : paths) rates[name].push_back(measure());
  }
  // Each ratio is the median of the repeats' own ratios: a repeat's paths ran back to back,
  // under the same load.
  const auto paired_ratio = [&](const std::string& name, const std::string& against) {
    std::vector<double> ratios;
    for (size_t i = 0; i < rates[name].size(); ++i) ratios.push_back(rates[name][i] / rates[against][i]);
    return median(ratios);
  };
  for (const auto& [name, measure] : paths) {
    const bool remote = name.find("over loopback") != std::string::npos;
    std::printf("| %s | %s | %.0f | %.2f |\n", label.c_str(), name.c_str(), median(rates[name]),
                paired_ratio(name, remote ? "tar shards, local disk" : "one file per sample"));
  }
}

// Two epochs from S3 through a local cache, the second read from it: the cache holding
// every shard against one capped at half of them (each epoch then reads half from S3 again).
void compare_capped_cache(const std::string& s3, const std::string& endpoint, const std::string& scratch) {
  const auto shards = data::ShardDataset(s3, "train", data::ShardOptions().endpoint(endpoint)).shard_sizes();
  size_t bytes = 0;
  for (const auto& entry : fs::directory_iterator(scratch + "/shards-224-small")) {
    if (entry.path().extension() == ".tar") bytes += entry.file_size();
  }
  const auto two_epochs = [&](size_t cache_bytes, int repeat) {
    const std::string cache = scratch + "/cache-" + std::to_string(cache_bytes) + "-" + std::to_string(repeat);
    // Memory for the shards the sampler's window reads at once, not for the epoch: the
    // second epoch reads the cache, not memory.
    const auto dataset = std::make_shared<data::ShardDataset>(
        s3, "train",
        data::ShardOptions().endpoint(endpoint).cache(cache).cache_bytes(cache_bytes).memory_bytes(3 * (2 << 20)));
    const auto start = Clock::now();
    // A window of 100 samples spans two of these shards: with the next, the three in memory.
    loader_rate(dataset, 1, data::to_float(), 100);
    loader_rate(dataset, 1, data::to_float(), 100);
    return 2.0 * static_cast<double>(dataset->size()) / seconds_since(start);
  };
  std::vector<double> whole, half;
  for (int repeat = 0; repeat < kRepeats; ++repeat) {
    whole.push_back(two_epochs(bytes * 2, repeat));
    half.push_back(two_epochs(bytes / 2, repeat));
  }
  std::printf(
      "\n| 224x224 RGB from S3, %zu shards, %zu bytes, two epochs through a local cache | samples/s (median of %d) "
      "| ratio |\n|---|---:|---:|\n| cache_bytes uncapped | %.0f | 1.00 |\n| cache_bytes half the shards | %.0f | "
      "%.2f |\n",
      shards.size(), bytes, kRepeats, median(whole), median(half), median(half) / median(whole));
}

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(1);
  int64_t images = 10000;
  bool cold = false, resume_only = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--cold") {
      cold = true;
    } else if (std::string(argv[i]) == "--resume") {
      resume_only = true;
    } else {
      images = std::atoll(argv[i]);
    }
  }
  const auto registry = data::Registry::load_default();
  const auto& fashion = registry.at("fashion-mnist");
  const std::shared_ptr<const data::Dataset> train = data::open_dataset(fashion, "train");
  const auto test = data::open_dataset(fashion, "test");

  const fs::path folder = fs::temp_directory_path() / ("lockstep-loader-bench-" + std::to_string(getpid()));
  if (resume_only) {
    fs::create_directories(folder);
    lockstep::bench::measure_resume_on_another_world_size(folder.string());
    fs::remove_all(folder);
    return 0;
  }
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

  // The read paths: files against shards against shards over HTTP.
  const std::string large_folder = folder.string() + "/large";
  const auto large_train = std::make_shared<Enlarged>(train);
  data::export_imagenet_layout(*large_train, *test, data::class_names(fashion), large_folder,
                               std::max<int64_t>(images / 5, 1));
  const std::shared_ptr<const data::Dataset> large_jpegs = data::read_imagenet(large_folder, "train", 3);
  data::pack_shards(*jpegs, "train", folder.string() + "/shards-28");
  data::pack_shards(*large_jpegs, "train", folder.string() + "/shards-224");
  std::string url;
#ifdef LOCKSTEP_BENCH_NGINX
  lockstep::testing::NginxServer nginx(folder.string(), false);
  if (nginx.available()) url = nginx.url();
  if (!nginx.available()) std::printf("\n(no nginx: %s)\n", nginx.why_not().c_str());
#endif
  std::string s3_endpoint;
#ifdef LOCKSTEP_BENCH_NGINX
  lockstep::testing::S3Gateway gateway;
  if (gateway.available() && gateway.make_bucket("bench")) {
    s3_endpoint = gateway.endpoint();
    setenv("AWS_ACCESS_KEY_ID", gateway.access_key().c_str(), 1);
    setenv("AWS_SECRET_ACCESS_KEY", gateway.secret_key().c_str(), 1);
    for (const std::string size : {"28", "224"}) {
      data::pack_shards(*(size == "28" ? jpegs : large_jpegs), "train", "s3://bench/shards-" + size,
                        data::PackOptions().endpoint(s3_endpoint));
    }
    // Shards of 2 MB for the cache's comparison: a cap of half of them must hold some.
    for (const std::string out : {folder.string() + "/shards-224-small", std::string("s3://bench/shards-224-small")}) {
      data::pack_shards(*large_jpegs, "train", out, data::PackOptions().shard_bytes(2 << 20).endpoint(s3_endpoint));
    }
  } else {
    std::printf("\n(no S3 gateway: %s)\n", gateway.why_not().c_str());
  }
#endif
  const auto s3_of = [&](const std::string& size) { return s3_endpoint.empty() ? "" : "s3://bench/shards-" + size; };
  std::printf(
      "\n| images | read path (1 loader thread, decode + to_float%s) | samples/s (median of %d) | ratio |\n"
      "|---|---|---:|---:|\n",
      cold ? ", page cache dropped" : "", kReadPathRepeats);
  compare_read_paths("28x28 gray, " + std::to_string(jpegs->size()), jpegs, folder.string() + "/shards-28",
                     url.empty() ? "" : url + "/shards-28", s3_of("28"), s3_endpoint, cold);
  compare_read_paths("224x224 RGB, " + std::to_string(large_jpegs->size()), large_jpegs,
                     folder.string() + "/shards-224", url.empty() ? "" : url + "/shards-224", s3_of("224"), s3_endpoint,
                     cold);
  std::printf("\nratio: shards / files for local shards; nginx or S3 / local shards for those\n");
  if (!s3_endpoint.empty()) compare_capped_cache("s3://bench/shards-224-small", s3_endpoint, folder.string());
  lockstep::bench::measure_resume_on_another_world_size(folder.string());
  fs::remove_all(folder);
  return 0;
}
