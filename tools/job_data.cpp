#include "job_data.h"

#include <cstdlib>

#include <algorithm>
#include <tuple>
#include <vector>

#include "lockstep/data/registry.h"

namespace lockstep::tools {
namespace {

// Per-channel mean and standard deviation of the first images: the normalization every
// dataset gets, with no table of per-dataset constants to keep.
std::pair<std::vector<double>, std::vector<double>> channel_statistics(const data::Dataset& dataset) {
  std::vector<torch::Tensor> images;
  for (size_t i = 0; i < std::min<size_t>(dataset.size(), 512); ++i) {
    images.push_back(dataset.get(i).image.to(torch::kFloat).div(255).flatten(1));
  }
  const auto pixels = torch::cat(images, 1);
  std::vector<double> mean, std;
  for (int64_t c = 0; c < pixels.size(0); ++c) {
    mean.push_back(pixels[c].mean().item<double>());
    std.push_back(std::max(pixels[c].std().item<double>(), 1e-3));
  }
  return {mean, std};
}

// Small images keep their size (with --augment, padded random crops and flips); large ones
// are cropped to 224 as for ImageNet.
std::pair<data::Transform, data::Transform> transforms_for(int64_t image_size, bool augment,
                                                           const data::Dataset& train) {
  const auto [mean, std] = channel_statistics(train);
  const auto normalize = data::normalize(mean, std);
  if (image_size <= 64) {
    if (!augment) return {normalize, normalize};
    return {data::compose({data::random_crop(image_size, std::max<int64_t>(image_size / 14, 1)),
                           data::horizontal_flip(), normalize}),
            normalize};
  }
  return {data::compose({data::random_resized_crop(224), data::horizontal_flip(), normalize}),
          data::compose({data::resize(256), data::center_crop(224), normalize})};
}

}  // namespace

JobData open_job_data(const TrainJob& job) {
  const data::Registry registry = job.datasets.load(job.dataset);
  data::DatasetEntry entry = registry.at(job.dataset);
  // The launcher's copies of the indexes (train_command.cpp): one read of each per job.
  if (const char* copies = std::getenv(kIndexCopiesVariable)) entry.index_copies = copies;
  JobData d;
  d.val_split = !job.val_split.empty() ? job.val_split : data::held_out_split(entry);
  d.train_set = data::first_examples(data::open_dataset(entry, "train"), job.limit);
  d.val_set = data::first_examples(data::open_dataset(entry, d.val_split), job.val_limit);
  const auto sample = d.train_set->get(0).image;
  d.image_size = sample.size(1) <= 64 ? sample.size(1) : 224;
  std::tie(d.train_transform, d.val_transform) = transforms_for(d.image_size, job.augment, *d.train_set);
  return d;
}

}  // namespace lockstep::tools
