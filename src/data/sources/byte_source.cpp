#include "data/sources/byte_source.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "data/formats/shard_index.h"
#include "lockstep/error.h"

namespace lockstep::data {
namespace {

class LocalFolder : public ByteSource {
 public:
  explicit LocalFolder(std::string folder) : folder_(std::move(folder)) {}

  std::vector<uint8_t> read(const std::string& name) const override {
    const std::string path = locate(name);
    std::ifstream file(path, std::ios::binary | std::ios::ate);
    if (!file) throw DataError("cannot read " + path + ": " + std::strerror(errno));
    std::vector<uint8_t> bytes(static_cast<size_t>(file.tellg()));
    file.seekg(0);
    if (!file.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()))) {
      throw DataError("cannot read " + path + ": reading stopped short");
    }
    return bytes;
  }

  // In pieces of a check block, so that a shard on a slow or cold disk is used as it is read.
  bool stream(const std::string& name, const Arrived& arrived) const override {
    const std::string path = locate(name);
    std::ifstream file(path, std::ios::binary);
    if (!file) throw DataError("cannot read " + path + ": " + std::strerror(errno));
    std::vector<uint8_t> piece(kCheckBlockBytes);
    while (file) {
      file.read(reinterpret_cast<char*>(piece.data()), static_cast<std::streamsize>(piece.size()));
      if (file.bad()) throw DataError("cannot read " + path + ": reading stopped short");
      const auto got = static_cast<size_t>(file.gcount());
      if (got > 0 && !arrived(piece.data(), got)) return false;
    }
    return true;
  }

  std::string locate(const std::string& name) const override { return folder_ + "/" + name; }

 private:
  std::string folder_;
};

}  // namespace

std::shared_ptr<ByteSource> open_byte_source(const std::string& folder, const ShardOptions& options) {
  std::string trimmed = folder;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  if (trimmed.rfind("http://", 0) == 0 || trimmed.rfind("https://", 0) == 0) return open_http_source(trimmed, options);
  if (trimmed.rfind("s3://", 0) == 0) return open_s3_source(trimmed, options);
  if (const size_t scheme = trimmed.find("://"); scheme != std::string::npos) {
    throw ConfigError(folder + ": scheme " + trimmed.substr(0, scheme) +
                      ":// is not read (local paths, http://, https:// and s3:// are)");
  }
  return std::make_shared<LocalFolder>(trimmed);
}

}  // namespace lockstep::data
