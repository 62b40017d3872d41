// A local copy of a remote shard folder, so that a second epoch, a restarted job or the
// other workers of a node read nothing from the network while it fits.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>

#include <unistd.h>

#include "data/sources/byte_source.h"
#include "lockstep/error.h"

namespace lockstep::data {
namespace {

namespace fs = std::filesystem;

class CachedSource : public ByteSource {
 public:
  CachedSource(std::shared_ptr<ByteSource> origin, const std::string& cache, size_t limit)
      : origin_(std::move(origin)), limit_(limit), opened_(fs::file_time_type::clock::now()) {
    // One folder per origin, so that one cache can serve several datasets.
    folder_ = fs::path(cache) / ("folder-" + std::to_string(std::hash<std::string>()(origin_->locate(""))));
    std::error_code failure;
    fs::create_directories(folder_, failure);
    if (failure) throw ConfigError("cannot use " + folder_.string() + " as the shard cache: " + failure.message());
  }

  std::vector<uint8_t> read(const std::string& name) const override {
    if (auto bytes = copy_of(name)) return std::move(*bytes);
    std::vector<uint8_t> bytes = origin_->read(name);
    keep(folder_ / name, bytes);
    return bytes;
  }

  // A copy in one piece; else the origin's pieces as they come, kept once all are here.
  bool stream(const std::string& name, const Arrived& arrived) const override {
    if (auto bytes = copy_of(name)) return arrived(bytes->data(), bytes->size());
    std::vector<uint8_t> bytes;
    const bool whole = origin_->stream(name, [&](const uint8_t* piece, size_t size) {
      bytes.insert(bytes.end(), piece, piece + size);
      return arrived(piece, size);
    });
    if (whole) keep(folder_ / name, bytes);
    return whole;
  }

  std::string locate(const std::string& name) const override { return origin_->locate(name); }

  void drop_copy(const std::string& name) const override {
    std::error_code ignored;
    fs::remove(folder_ / name, ignored);
  }

 private:
  std::optional<std::vector<uint8_t>> copy_of(const std::string& name) const {
    const fs::path copy = folder_ / name;
    std::ifstream file(copy, std::ios::binary | std::ios::ate);
    if (!file) return std::nullopt;
    std::vector<uint8_t> bytes(static_cast<size_t>(file.tellg()));
    file.seekg(0);
    if (!file.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()))) {
      return std::nullopt;
    }
    std::error_code ignored;
    fs::last_write_time(copy, fs::file_time_type::clock::now(), ignored);  // recently used
    return bytes;
  }

  // Written under a name of this process's and renamed, so that workers sharing the cache
  // never read a half-written copy. A copy that cannot be written only costs a later read
  // from the origin.
  void keep(const fs::path& copy, const std::vector<uint8_t>& bytes) const {
    if (bytes.size() > limit_) return;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!make_room(bytes.size())) return;
    const fs::path temporary = copy.string() + ".tmp-" + std::to_string(getpid());
    {
      std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
      file.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
      if (!file.flush()) return;
    }
    std::error_code failure;
    fs::rename(temporary, copy, failure);
    if (failure) fs::remove(temporary, failure);
  }

  // Room for `bytes` more within the limit, made by removing copies nobody has used since
  // this source opened, least recently used first; false when that is not enough. Copies
  // in use are never given up for a new one: epochs walk every shard, so plain LRU would
  // evict each copy just before the next epoch needs it, and a cache of half the shards
  // would serve none of them.
  bool make_room(size_t bytes) const {
    std::vector<std::pair<fs::file_time_type, fs::path>> stale;
    size_t total = 0;
    std::error_code failure;
    for (const auto& entry : fs::directory_iterator(folder_, failure)) {
      if (!entry.is_regular_file(failure) || entry.path().string().find(".tmp-") != std::string::npos) continue;
      total += entry.file_size(failure);
      const auto used = entry.last_write_time(failure);
      if (used < opened_) stale.emplace_back(used, entry.path());
    }
    std::sort(stale.begin(), stale.end());
    for (const auto& [used, path] : stale) {
      if (total + bytes <= limit_) break;
      const size_t size = fs::file_size(path, failure);
      if (fs::remove(path, failure)) total -= size;
    }
    return total + bytes <= limit_;
  }

  std::shared_ptr<ByteSource> origin_;
  size_t limit_;
  fs::file_time_type opened_;
  fs::path folder_;
  mutable std::mutex mutex_;
};

}  // namespace

std::shared_ptr<ByteSource> cached_source(std::shared_ptr<ByteSource> origin, const std::string& cache, size_t limit) {
  return std::make_shared<CachedSource>(std::move(origin), cache, limit);
}

}  // namespace lockstep::data
