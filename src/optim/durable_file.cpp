#include "optim/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "lockstep/error.h"
#include "s3/s3_client.h"

namespace lockstep::optim {
namespace {

namespace fs = std::filesystem;

void sync_to_disk(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) throw Error("cannot open " + path + " to flush it to disk");
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!synced) throw Error("cannot flush " + path + " to disk (fsync failed)");
}

// Checkpoints name no store of their own: the endpoint, region and credentials are the
// environment's and the AWS profile's (docs/TRAINING.md).
s3::S3Client s3_client() { return s3::S3Client(s3::S3Settings{}); }

}  // namespace

void save_archive_atomically(torch::serialize::OutputArchive& archive, const std::string& path) {
  if (s3::is_s3_url(path)) {
    std::vector<uint8_t> bytes;
    archive.save_to([&bytes](const void* data, size_t size) {
      bytes.insert(bytes.end(), static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + size);
      return size;
    });
    s3_client().put(s3::parse_s3_url(path), bytes.data(), bytes.size());
    return;
  }
  const std::string temporary = path + ".tmp";
  try {
    archive.save_to(temporary);
  } catch (const c10::Error& e) {
    std::error_code ignored;
    fs::remove(temporary, ignored);
    throw Error("cannot write " + temporary + ": " + e.what_without_backtrace());
  }
  sync_to_disk(temporary, O_RDONLY);
  if (std::rename(temporary.c_str(), path.c_str()) != 0) throw Error("cannot rename " + temporary + " to " + path);
}

void save_text_atomically(const std::string& text, const std::string& path) {
  if (s3::is_s3_url(path)) {
    s3_client().put(s3::parse_s3_url(path), reinterpret_cast<const uint8_t*>(text.data()), text.size());
    return;
  }
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    file << text;
    if (!file.flush()) throw Error("cannot write " + temporary);
  }
  sync_to_disk(temporary, O_RDONLY);
  if (std::rename(temporary.c_str(), path.c_str()) != 0) throw Error("cannot rename " + temporary + " to " + path);
}

std::optional<std::string> read_text(const std::string& path) {
  if (s3::is_s3_url(path)) {
    const auto bytes = s3_client().get_if_present(s3::parse_s3_url(path));
    if (!bytes) return std::nullopt;
    return std::string(bytes->begin(), bytes->end());
  }
  if (!fs::exists(path)) return std::nullopt;
  std::ifstream file(path, std::ios::binary);
  std::ostringstream text;
  text << file.rdbuf();
  if (!file) throw DataError("cannot read " + path);
  return text.str();
}

void sync_folder(const std::string& folder) {
  if (!s3::is_s3_url(folder)) sync_to_disk(folder, O_RDONLY | O_DIRECTORY);
}

bool load_archive(torch::serialize::InputArchive& archive, const std::string& path) {
  if (s3::is_s3_url(path)) {
    const auto bytes = s3_client().get_if_present(s3::parse_s3_url(path));
    if (!bytes) return false;
    archive.load_from(reinterpret_cast<const char*>(bytes->data()), bytes->size(), torch::Device(torch::kCPU));
    return true;
  }
  if (!fs::is_regular_file(path)) return false;
  archive.load_from(path, torch::Device(torch::kCPU));
  return true;
}

std::vector<std::string> names_in_folder(const std::string& folder) {
  std::vector<std::string> names;
  if (s3::is_s3_url(folder)) {
    const s3::S3Url prefix = s3::parse_s3_url(folder);
    const size_t skip = prefix.key.empty() ? 0 : prefix.key.size() + 1;
    for (const auto& object : s3_client().list(prefix)) {
      const std::string name = object.key.substr(skip);
      if (name.find('/') == std::string::npos) names.push_back(name);
    }
    return names;
  }
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(folder, error)) names.push_back(entry.path().filename().string());
  return names;
}

void remove_file(const std::string& path) {
  if (s3::is_s3_url(path)) {
    s3_client().remove(s3::parse_s3_url(path));
    return;
  }
  std::error_code ignored;
  fs::remove(path, ignored);
}

void make_folder(const std::string& folder) {
  if (s3::is_s3_url(folder)) return;
  std::error_code error;
  fs::create_directories(folder, error);
  if (error) throw Error("cannot create the checkpoint folder " + folder + ": " + error.message());
}

}  // namespace lockstep::optim
