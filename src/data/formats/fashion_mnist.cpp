#include "lockstep/data/fashion_mnist.h"

#include <filesystem>

#include "lockstep/error.h"
#include "lockstep/data/idx.h"

namespace lockstep::data {
namespace {

constexpr int64_t kSide = 28;

// `<dir>/<name>.gz`, or `<dir>/<name>` when only the uncompressed file is there.
std::string find_idx_file(const std::string& dir, const std::string& name) {
  const std::filesystem::path base = std::filesystem::path(dir) / name;
  for (const std::string& candidate : {base.string() + ".gz", base.string()}) {
    if (std::filesystem::is_regular_file(candidate)) return candidate;
  }
  throw DataError(base.string() + "[.gz]: no such file (is " + dir + " a Fashion-MNIST folder?)");
}

std::string shape_of(const torch::Tensor& tensor) { return c10::str(tensor.sizes(), " ", tensor.scalar_type()); }

}  // namespace

const std::vector<std::string>& fashion_mnist_classes() {
  static const std::vector<std::string> classes = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                   "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return classes;
}

std::shared_ptr<TensorDataset> read_fashion_mnist(const std::string& dir, const std::string& prefix) {
  const std::string images_path = find_idx_file(dir, prefix + "-images-idx3-ubyte");
  const std::string labels_path = find_idx_file(dir, prefix + "-labels-idx1-ubyte");
  const torch::Tensor images = read_idx(images_path);
  const torch::Tensor labels = read_idx(labels_path);
  if (images.dim() != 3 || images.size(1) != kSide || images.size(2) != kSide ||
      images.scalar_type() != torch::kUInt8) {
    throw DataError(images_path + ": expected N x 28 x 28 uint8 images, got " + shape_of(images));
  }
  if (labels.dim() != 1 || labels.scalar_type() != torch::kUInt8) {
    throw DataError(labels_path + ": expected N uint8 labels, got " + shape_of(labels));
  }
  if (images.size(0) != labels.size(0)) {
    throw DataError(images_path + " has " + std::to_string(images.size(0)) + " images but " + labels_path + " has " +
                    std::to_string(labels.size(0)) + " labels");
  }
  const auto num_classes = static_cast<int64_t>(fashion_mnist_classes().size());
  return std::make_shared<TensorDataset>(images.unsqueeze(1), labels.to(torch::kLong), num_classes, images_path);
}

}  // namespace lockstep::data
