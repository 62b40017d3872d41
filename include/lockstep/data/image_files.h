#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/data/dataset.h"

namespace lockstep::data {

/// An image file and its class index.
struct LabeledFile {
  std::string path;
  int64_t label = 0;
};

/// Examples decoded from JPEG files on demand, as `channels` 1 or 3. An unreadable file
/// throws DataError naming it.
class ImageFileDataset : public Dataset {
 public:
  ImageFileDataset(std::vector<LabeledFile> files, std::vector<std::string> classes, int channels);

  size_t size() const override { return files_.size(); }
  Sample get(size_t index) const override;
  int64_t num_classes() const override { return static_cast<int64_t>(classes_.size()); }
  std::string describe(size_t index) const override;

  const std::vector<LabeledFile>& files() const { return files_; }
  const std::vector<std::string>& classes() const { return classes_; }

 private:
  std::vector<LabeledFile> files_;
  std::vector<std::string> classes_;
  int channels_;
};

/// A folder with one subfolder per class (classes in sorted order, as torchvision's
/// ImageFolder), each holding .jpg/.jpeg files. A missing or empty folder, or a class
/// folder without images, throws DataError.
std::shared_ptr<ImageFileDataset> read_image_folder(const std::string& root, int channels = 3);

}  // namespace lockstep::data
