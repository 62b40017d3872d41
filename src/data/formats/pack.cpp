#include <cstdio>
#include <filesystem>
#include <fstream>

#include "data/formats/npy_format.h"
#include "data/formats/shard_index.h"
#include "data/formats/tar_format.h"
#include "lockstep/data/image_files.h"
#include "lockstep/data/shards.h"
#include "lockstep/error.h"

namespace lockstep::data {
namespace {

namespace fs = std::filesystem;

// Under a temporary name, then renamed: a reader sees the whole file or none of it.
void write_file(const fs::path& path, const uint8_t* data, size_t size) {
  const fs::path temporary = path.string() + ".tmp";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    file.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!file.flush()) throw DataError("cannot write " + temporary.string());
  }
  std::error_code failure;
  fs::rename(temporary, path, failure);
  if (failure) throw DataError("cannot write " + path.string() + ": " + failure.message());
}

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw DataError("cannot read " + path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(file), {});
}

std::string shard_name(const std::string& split, size_t number) {
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "-%06zu.tar", number);
  return split + suffix;
}

// One example as a shard holds it: its image file's bytes and extension, and its label.
struct PackedSample {
  std::vector<uint8_t> image;
  std::string kind;
  int64_t label = 0;
};

// JPEG files are kept as they are, not decoded and re-encoded (which would lose quality);
// other images are written as .npy.
PackedSample packed_sample(const Dataset& dataset, const ImageFileDataset* jpeg_files, size_t i) {
  if (jpeg_files != nullptr) return {file_bytes(jpeg_files->files()[i].path), ".jpg", jpeg_files->files()[i].label};
  const Sample sample = dataset.get(i);
  return {encode_npy_image(sample.image), ".npy", sample.label};
}

}  // namespace

PackSummary pack_shards(const Dataset& dataset, const std::string& split, const std::string& out, PackOptions options) {
  if (split.empty() || split.find('/') != std::string::npos) {
    throw ConfigError("pack_shards: split '" + split + "' must be a plain name (train, test, val)");
  }
  if (dataset.size() == 0) throw DataError("pack_shards: split " + split + " has no examples");
  std::error_code failure;
  fs::create_directories(out, failure);
  if (failure) throw DataError("cannot create " + out + ": " + failure.message());

  const auto* jpeg_files = dynamic_cast<const ImageFileDataset*>(&dataset);
  ShardIndex index;
  index.split = split;
  index.channels = static_cast<int>(dataset.get(0).image.size(0));
  index.classes = dataset.num_classes();
  index.class_names = options.class_names();

  std::vector<uint8_t> shard;
  size_t shard_samples = 0;
  PackSummary summary;
  const auto close_shard = [&] {
    finish_tar(shard);
    const std::string name = shard_name(split, index.shards.size());
    write_file(fs::path(out) / name, shard.data(), shard.size());
    index.shards.push_back({name, shard_samples, shard.size(), crc32_of(shard.data(), shard.size())});
    summary.bytes += shard.size();
    shard.clear();
    shard_samples = 0;
  };

  for (size_t i = 0; i < dataset.size(); ++i) {
    char key[32];
    std::snprintf(key, sizeof key, "%08zu", i);
    const PackedSample packed = packed_sample(dataset, jpeg_files, i);
    const std::vector<uint8_t>& image = packed.image;
    const std::string& kind = packed.kind;
    const std::string label_text = std::to_string(packed.label);
    // Two headers, the two members padded to blocks, and the end-of-archive blocks.
    const size_t sample_bytes = 512 * 2 + (image.size() + 511) / 512 * 512 + 512;
    if (shard_samples > 0 && shard.size() + sample_bytes + 1024 > options.shard_bytes()) close_shard();
    append_tar_member(shard, key + kind, image.data(), image.size());
    append_tar_member(shard, key + std::string(".cls"), reinterpret_cast<const uint8_t*>(label_text.data()),
                      label_text.size());
    ++shard_samples;
  }
  close_shard();

  const std::string text = index_to_json(index);
  summary.index = (fs::path(out) / index_file_name(split)).string();
  write_file(summary.index, reinterpret_cast<const uint8_t*>(text.data()), text.size());
  summary.samples = dataset.size();
  summary.shards = index.shards.size();
  return summary;
}

}  // namespace lockstep::data
