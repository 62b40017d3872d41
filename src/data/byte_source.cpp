#include "data/byte_source.h"

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

std::shared_ptr<ByteSource> open_byte_source(const std::string& folder) {
  std::string trimmed = folder;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  return std::make_shared<LocalFolder>(trimmed);
}

}  // namespace lockstep::data
