#include "lockstep/data/image_files.h"

#include <algorithm>
#include <filesystem>

#include "lockstep/error.h"
#include "lockstep/data/jpeg.h"

namespace fs = std::filesystem;

namespace lockstep::data {
namespace {

bool is_jpeg_name(const fs::path& path) {
  const std::string extension = path.extension().string();
  return extension == ".jpg" || extension == ".jpeg" || extension == ".JPG" || extension == ".JPEG";
}

// Entries of `folder` that `keep` accepts, sorted by name so that labels and order do not
// depend on the file system.
template <typename Keep>
std::vector<fs::path> sorted_entries(const fs::path& folder, Keep keep) {
  std::vector<fs::path> entries;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder)) {
    if (keep(entry)) entries.push_back(entry.path());
  }
  std::sort(entries.begin(), entries.end());
  return entries;
}

}  // namespace

ImageFileDataset::ImageFileDataset(std::vector<LabeledFile> files, std::vector<std::string> classes, int channels)
    : files_(std::move(files)), classes_(std::move(classes)), channels_(channels) {
  if (channels != 1 && channels != 3) {
    throw ConfigError("ImageFileDataset: channels must be 1 (grayscale) or 3 (RGB), got " + std::to_string(channels));
  }
  for (const LabeledFile& file : files_) {
    if (file.label < 0 || file.label >= num_classes()) {
      throw DataError(file.path + ": label " + std::to_string(file.label) + " is outside [0, " +
                      std::to_string(num_classes()) + ")");
    }
  }
}

Sample ImageFileDataset::get(size_t index) const {
  if (index >= files_.size()) {
    throw ConfigError("ImageFileDataset: index " + std::to_string(index) + " is past the end (size " +
                      std::to_string(files_.size()) + ")");
  }
  return Sample{read_jpeg(files_[index].path, channels_), files_[index].label};
}

std::string ImageFileDataset::describe(size_t index) const {
  return index < files_.size() ? files_[index].path : "image #" + std::to_string(index) + " (past the end)";
}

std::shared_ptr<ImageFileDataset> read_image_folder(const std::string& root, int channels) {
  std::error_code error;
  if (!fs::is_directory(root, error)) {
    throw DataError(root + ": no such image folder" + (error ? " (" + error.message() + ")" : ""));
  }
  std::vector<std::string> classes;
  std::vector<LabeledFile> files;
  try {
    for (const fs::path& folder : sorted_entries(root, [](const auto& entry) { return entry.is_directory(); })) {
      const auto images = sorted_entries(
          folder, [](const auto& entry) { return entry.is_regular_file() && is_jpeg_name(entry.path()); });
      // As torchvision's ImageFolder: an empty class would be a label no example has.
      if (images.empty()) throw DataError(folder.string() + ": class folder has no .jpg/.jpeg images");
      for (const fs::path& image : images) files.push_back({image.string(), static_cast<int64_t>(classes.size())});
      classes.push_back(folder.filename().string());
    }
  } catch (const fs::filesystem_error& e) {
    throw DataError(root + ": cannot list image folder: " + e.what());
  }
  if (files.empty()) {
    throw DataError(root + " has no examples (expected one subfolder per class holding .jpg/.jpeg files)");
  }
  return std::make_shared<ImageFileDataset>(std::move(files), std::move(classes), channels);
}

}  // namespace lockstep::data
