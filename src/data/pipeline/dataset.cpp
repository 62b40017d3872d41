#include "lockstep/data/dataset.h"

#include <algorithm>
#include <filesystem>

#include <torch/serialize.h>

#include "lockstep/error.h"

namespace lockstep::data {
namespace {

// The first label outside [0, num_classes), or -1 when all are inside.
int64_t first_bad_label(const torch::Tensor& labels, int64_t num_classes) {
  const auto bad = torch::nonzero(labels.lt(0).logical_or(labels.ge(num_classes)));
  return bad.numel() == 0 ? -1 : bad[0][0].item<int64_t>();
}

}  // namespace

TensorDataset::TensorDataset(torch::Tensor images, torch::Tensor labels, int64_t num_classes, std::string source)
    : num_classes_(num_classes), source_(std::move(source)) {
  if (num_classes <= 0) {
    throw ConfigError(source_ + ": num_classes must be positive, got " + std::to_string(num_classes));
  }
  if (!images.defined() || !labels.defined()) throw DataError(source_ + ": images or labels missing");
  if (images.dim() != 3 && images.dim() != 4) {
    throw DataError(source_ + ": images must be N x C x H x W or N x H x W, got " + c10::str(images.sizes()));
  }
  if (images.scalar_type() != torch::kUInt8) {
    throw DataError(source_ + ": images must be uint8, got " + c10::str(images.scalar_type()));
  }
  if (labels.dim() != 1 || labels.is_floating_point() || labels.is_complex()) {
    throw DataError(source_ + ": labels must be integers of shape N, got " +
                    c10::str(labels.scalar_type(), " ", labels.sizes()));
  }
  if (images.size(0) != labels.size(0)) {
    throw DataError(source_ + ": " + std::to_string(images.size(0)) + " images but " + std::to_string(labels.size(0)) +
                    " labels");
  }
  if (images.size(0) == 0) throw DataError(source_ + " has no examples");
  // One channel stored as N×H×W is read as N×1×H×W; unsqueeze is a view, not a copy.
  images_ = images.dim() == 3 ? images.unsqueeze(1) : images;
  labels_ = labels.to(torch::kLong);
  const int64_t bad = first_bad_label(labels_, num_classes);
  if (bad >= 0) {
    throw DataError(source_ + ": label " + std::to_string(labels_[bad].item<int64_t>()) + " of example #" +
                    std::to_string(bad) + " is outside [0, " + std::to_string(num_classes) + ")");
  }
}

size_t TensorDataset::size() const { return static_cast<size_t>(images_.size(0)); }

Sample TensorDataset::get(size_t index) const {
  if (index >= size()) {
    throw ConfigError(source_ + ": index " + std::to_string(index) + " is past the end (size " +
                      std::to_string(size()) + ")");
  }
  const auto row = static_cast<int64_t>(index);
  // A copy of one row, so that transforms working in place cannot change the dataset.
  return Sample{images_[row].clone(), labels_[row].item<int64_t>()};
}

std::string TensorDataset::describe(size_t index) const { return source_ + " #" + std::to_string(index); }

void save_tensors(const std::string& path, const torch::Tensor& images, const torch::Tensor& labels) {
  torch::serialize::OutputArchive archive;
  archive.write("images", images);
  archive.write("labels", labels);
  try {
    archive.save_to(path);
  } catch (const c10::Error& e) {
    throw DataError(path + ": cannot write tensors: " + e.what_without_backtrace());
  }
}

std::shared_ptr<TensorDataset> load_tensors(const std::string& path, int64_t num_classes) {
  if (!std::filesystem::is_regular_file(path)) throw DataError(path + ": no such tensors file");
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(path);
  } catch (const c10::Error& e) {
    throw DataError(path + ": not a tensors file (a torch archive): " + e.what_without_backtrace());
  }
  torch::Tensor images;
  torch::Tensor labels;
  for (auto [key, tensor] : {std::pair{"images", &images}, std::pair{"labels", &labels}}) {
    if (!archive.try_read(key, *tensor)) throw DataError(path + ": no tensor named \"" + key + "\"");
  }
  return std::make_shared<TensorDataset>(images, labels, num_classes, path);
}

namespace {

class FirstExamples : public Dataset {
 public:
  FirstExamples(std::shared_ptr<const Dataset> all, size_t count) : all_(std::move(all)), count_(count) {}
  size_t size() const override { return count_; }
  Sample get(size_t index) const override { return all_->get(index); }
  int64_t num_classes() const override { return all_->num_classes(); }
  std::string describe(size_t index) const override { return all_->describe(index); }
  // The shards that hold the first count_ examples, the last one cut.
  std::vector<size_t> shard_sizes() const override {
    std::vector<size_t> sizes;
    size_t taken = 0;
    for (size_t size : all_->shard_sizes()) {
      if (taken == count_) break;
      sizes.push_back(std::min(size, count_ - taken));
      taken += sizes.back();
    }
    return sizes;
  }

 private:
  std::shared_ptr<const Dataset> all_;
  size_t count_;
};

}  // namespace

std::shared_ptr<Dataset> first_examples(std::shared_ptr<const Dataset> dataset, size_t count) {
  const size_t size = dataset->size();
  return std::make_shared<FirstExamples>(std::move(dataset), count == 0 ? size : std::min(count, size));
}

}  // namespace lockstep::data
