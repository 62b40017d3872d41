#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

namespace lockstep::data {

/// One labelled example. Readers give the image as uint8 C×H×W, as decoded; transforms
/// may turn it into float.
struct Sample {
  torch::Tensor image;
  int64_t label = 0;
};

/// Random access to labelled images. Loader threads call get() concurrently, so it must
/// not change the dataset. Bad input throws DataError naming the file.
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual size_t size() const = 0;
  virtual Sample get(size_t index) const = 0;
  virtual int64_t num_classes() const = 0;
  /// Where example `index` comes from, for messages: a file name, or "file #index".
  virtual std::string describe(size_t index) const = 0;
  /// The sizes of the runs of consecutive examples stored together (a dataset's shards),
  /// in index order; empty when every order reads equally fast. A sampler keeps each
  /// rank's reads within few of them at a time.
  virtual std::vector<size_t> shard_sizes() const { return {}; }
};

/// Examples held in memory: uint8 images N×C×H×W (or N×H×W, read as one channel) and
/// integer labels N in [0, num_classes); anything else, or no examples, throws DataError.
/// Fashion-MNIST and the registry's "tensors" type are read into one of these.
class TensorDataset : public Dataset {
 public:
  /// `source` names where the tensors came from, for messages.
  TensorDataset(torch::Tensor images, torch::Tensor labels, int64_t num_classes, std::string source);

  size_t size() const override;
  Sample get(size_t index) const override;
  int64_t num_classes() const override { return num_classes_; }
  std::string describe(size_t index) const override;

  const torch::Tensor& images() const { return images_; }
  const torch::Tensor& labels() const { return labels_; }

 private:
  torch::Tensor images_;
  torch::Tensor labels_;
  int64_t num_classes_;
  std::string source_;
};

/// The first `count` examples of `dataset` (all of them when count is 0 or larger than it):
/// short runs for tests and quick looks.
std::shared_ptr<Dataset> first_examples(std::shared_ptr<const Dataset> dataset, size_t count);

/// Saves images and labels as a "tensors" dataset file (a torch archive with the keys
/// "images" and "labels"), and reads one back.
void save_tensors(const std::string& path, const torch::Tensor& images, const torch::Tensor& labels);
std::shared_ptr<TensorDataset> load_tensors(const std::string& path, int64_t num_classes);

}  // namespace lockstep::data
