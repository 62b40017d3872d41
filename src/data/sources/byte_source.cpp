#include "data/sources/byte_source.h"

#include <cerrno>
#include <cstring>
#include <fstream>

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
