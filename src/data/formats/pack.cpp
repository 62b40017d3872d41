#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "data/formats/npy_format.h"
#include "data/formats/shard_index.h"
#include "data/formats/tar_format.h"
#include "lockstep/data/image_files.h"
#include "lockstep/data/shards.h"
#include "lockstep/error.h"
#include "s3/s3_client.h"

namespace lockstep::data {
namespace {

namespace fs = std::filesystem;

// Where packed files go. Either way a reader sees a whole file or none of it, and the
// index is written last, so no index names a shard that is not there yet.
class PackTarget {
 public:
  virtual ~PackTarget() = default;
  virtual void write(const std::string& name, const uint8_t* data, size_t size) = 0;
  virtual std::string locate(const std::string& name) const = 0;
};

// A local folder: each file under a temporary name, then renamed.
class FolderTarget : public PackTarget {
 public:
  explicit FolderTarget(const std::string& folder) : folder_(folder) {
    std::error_code failure;
    fs::create_directories(folder_, failure);
    if (failure) throw DataError("cannot create " + folder + ": " + failure.message());
  }

  void write(const std::string& name, const uint8_t* data, size_t size) override {
    const fs::path path = folder_ / name;
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

  std::string locate(const std::string& name) const override { return (folder_ / name).string(); }

 private:
  fs::path folder_;
};

// An s3://BUCKET/PREFIX: each file one PUT, which S3 makes visible whole or not at all.
class S3Target : public PackTarget {
 public:
  S3Target(const std::string& url, const PackOptions& options)
      : prefix_(s3::parse_s3_url(url)), client_(settings_of(options)) {}

  void write(const std::string& name, const uint8_t* data, size_t size) override {
    client_.put(prefix_.child(name), data, size);
  }

  std::string locate(const std::string& name) const override { return prefix_.child(name).str(); }

 private:
  static s3::S3Settings settings_of(const PackOptions& options) {
    s3::S3Settings settings;
    settings.endpoint = options.endpoint();
    settings.region = options.region();
    settings.addressing = options.addressing();
    settings.ca_file = options.ca_file();
    return settings;
  }

  s3::S3Url prefix_;
  s3::S3Client client_;
};

std::unique_ptr<PackTarget> open_target(const std::string& out, const PackOptions& options) {
  if (s3::is_s3_url(out)) return std::make_unique<S3Target>(out, options);
  return std::make_unique<FolderTarget>(out);
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
  const std::unique_ptr<PackTarget> target = open_target(out, options);

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
    target->write(name, shard.data(), shard.size());
    index.shards.push_back(shard_entry(name, shard_samples, shard.data(), shard.size()));
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
  target->write(index_file_name(split), reinterpret_cast<const uint8_t*>(text.data()), text.size());
  summary.index = target->locate(index_file_name(split));
  summary.samples = dataset.size();
  summary.shards = index.shards.size();
  return summary;
}

}  // namespace lockstep::data
