#include "lockstep/data/export.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "lockstep/error.h"
#include "lockstep/data/jpeg.h"

namespace lockstep::data {
namespace {

namespace fs = std::filesystem;

// Made-up WordNet-style ids, one per class, so that they sort in label order as ImageNet's do.
std::string synset_id(int64_t label) {
  char id[16];
  std::snprintf(id, sizeof id, "n%08lld", static_cast<long long>(label));
  return id;
}

std::string val_image_id(int64_t index) {
  char id[32];
  std::snprintf(id, sizeof id, "ILSVRC2012_val_%08lld", static_cast<long long>(index + 1));
  return id;
}

std::ofstream open_for_writing(const fs::path& path) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) throw Error("cannot write " + path.string());
  return file;
}

void write_bytes(const fs::path& path, const std::vector<uint8_t>& bytes) {
  auto file = open_for_writing(path);
  file.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!file) throw Error("cannot write " + path.string() + " (disk full?)");
}

// Kaggle's PredictionString: the synset and a box; the whole image is the object here.
std::string prediction(const std::string& synset, const torch::Tensor& image) {
  return synset + " 0 0 " + std::to_string(image.size(2) - 1) + " " + std::to_string(image.size(1) - 1);
}

int64_t exported_count(const Dataset& dataset, int64_t limit) {
  const auto size = static_cast<int64_t>(dataset.size());
  return limit > 0 ? std::min(limit, size) : size;
}

// Writes the images of one split and returns its CSV rows. Train images go into a folder per
// synset, val images into one folder, as in Kaggle's ILSVRC/Data/CLS-LOC.
std::string write_split(const Dataset& dataset, int64_t count, bool train, const fs::path& image_dir, int quality,
                        size_t num_classes) {
  std::string rows = "ImageId,PredictionString\n";
  for (int64_t i = 0; i < count; ++i) {
    const Sample sample = dataset.get(static_cast<size_t>(i));
    if (sample.label < 0 || static_cast<size_t>(sample.label) >= num_classes) {
      throw DataError(dataset.describe(static_cast<size_t>(i)) + " has label " + std::to_string(sample.label) +
                      ", outside the " + std::to_string(num_classes) + " classes");
    }
    const std::string synset = synset_id(sample.label);
    const std::string id = train ? synset + "_" + std::to_string(i) : val_image_id(i);
    const fs::path folder = train ? image_dir / synset : image_dir;
    write_bytes(folder / (id + ".JPEG"), encode_jpeg(sample.image, quality));
    rows += id + "," + prediction(synset, sample.image) + "\n";
  }
  return rows;
}

void write_text(const fs::path& path, const std::string& text) {
  auto file = open_for_writing(path);
  file << text;
  if (!file) throw Error("cannot write " + path.string() + " (disk full?)");
}

}  // namespace

ExportSummary export_imagenet_layout(const Dataset& train, const Dataset& val,
                                     const std::vector<std::string>& class_names, const std::string& out, int64_t limit,
                                     int quality) {
  const fs::path root(out);
  const fs::path images = root / "ILSVRC" / "Data" / "CLS-LOC";
  const char* tables[] = {"LOC_synset_mapping.txt", "LOC_train_solution.csv", "LOC_val_solution.csv"};
  std::error_code error;
  for (const char* table : tables) fs::remove(root / table, error);
  fs::create_directories(images / "val", error);
  for (size_t c = 0; c < class_names.size() && !error; ++c) {
    fs::create_directories(images / "train" / synset_id(static_cast<int64_t>(c)), error);
  }
  if (error) throw Error("cannot create folders under " + out + ": " + error.message());

  std::string mapping;
  for (size_t c = 0; c < class_names.size(); ++c)
    mapping += synset_id(static_cast<int64_t>(c)) + " " + class_names[c] + "\n";

  ExportSummary summary;
  summary.train_images = exported_count(train, limit);
  summary.val_images = exported_count(val, limit);
  const auto train_rows = write_split(train, summary.train_images, true, images / "train", quality, class_names.size());
  const auto val_rows = write_split(val, summary.val_images, false, images / "val", quality, class_names.size());
  // The tables last: an interrupted export has no CSV that names images it never wrote.
  write_text(root / tables[0], mapping);
  write_text(root / tables[1], train_rows);
  write_text(root / tables[2], val_rows);
  return summary;
}

}  // namespace lockstep::data
