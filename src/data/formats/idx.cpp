#include "lockstep/data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <memory>
#include <sstream>
#include <vector>

#include "lockstep/error.h"

namespace lockstep::data {
namespace {

struct GzCloser {
  void operator()(gzFile file) const { gzclose(file); }
};

// The whole file, inflated when it starts with gzip's magic bytes 1f 8b (zlib looks at the
// bytes, not the name) and read as is otherwise.
std::vector<uint8_t> read_maybe_gzipped(const std::string& path) {
  if (!std::filesystem::exists(path)) throw DataError(path + ": no such file");
  std::unique_ptr<gzFile_s, GzCloser> file(gzopen(path.c_str(), "rb"));
  if (!file) throw DataError(path + ": cannot open: " + std::strerror(errno));
  gzbuffer(file.get(), 1 << 17);
  std::vector<uint8_t> bytes;
  size_t used = 0;
  while (true) {
    if (bytes.size() - used < (1 << 16)) bytes.resize(std::max<size_t>(2 * bytes.size(), 1 << 20));
    const int got = gzread(file.get(), bytes.data() + used, static_cast<unsigned>(bytes.size() - used));
    if (got < 0) {
      int code = 0;
      throw DataError(path + ": corrupt gzip stream: " + gzerror(file.get(), &code));
    }
    if (got == 0) break;
    used += static_cast<size_t>(got);
  }
  // gzread stops quietly at a cut-off stream; only gzerror's Z_BUF_ERROR tells it apart.
  int code = Z_OK;
  const char* message = gzerror(file.get(), &code);
  if (code == Z_BUF_ERROR) throw DataError(path + ": truncated gzip stream (" + message + ")");
  if (code != Z_OK) throw DataError(path + ": cannot read gzip stream: " + message);
  bytes.resize(used);
  return bytes;
}

// IDX stores elements big-endian; assembling each value from its bytes works on any host.
template <typename Unsigned>
void copy_big_endian(const uint8_t* in, uint8_t* out, int64_t count) {
  for (int64_t i = 0; i < count; ++i, in += sizeof(Unsigned), out += sizeof(Unsigned)) {
    Unsigned value = 0;
    for (size_t b = 0; b < sizeof(Unsigned); ++b) value = static_cast<Unsigned>((value << 8) | in[b]);
    std::memcpy(out, &value, sizeof value);
  }
}

struct ElementType {
  torch::ScalarType dtype;
  size_t bytes;
};

bool element_type(uint8_t code, ElementType* type) {
  switch (code) {
    case 0x08: *type = {torch::kUInt8, 1}; return true;
    case 0x09: *type = {torch::kInt8, 1}; return true;
    case 0x0B: *type = {torch::kInt16, 2}; return true;
    case 0x0C: *type = {torch::kInt32, 4}; return true;
    case 0x0D: *type = {torch::kFloat32, 4}; return true;
    case 0x0E: *type = {torch::kFloat64, 8}; return true;
    default: return false;
  }
}

std::string hex(const uint8_t* bytes, size_t count) {
  std::ostringstream text;
  text << "0x" << std::hex;
  for (size_t i = 0; i < count; ++i) text << (bytes[i] < 16 ? "0" : "") << int{bytes[i]};
  return text.str();
}

uint32_t big_endian_u32(const uint8_t* bytes) {
  return uint32_t{bytes[0]} << 24 | uint32_t{bytes[1]} << 16 | uint32_t{bytes[2]} << 8 | bytes[3];
}

}  // namespace

torch::Tensor read_idx(const std::string& path) {
  const std::vector<uint8_t> bytes = read_maybe_gzipped(path);
  ElementType type{};
  if (bytes.size() < 4 || bytes[0] != 0 || bytes[1] != 0 || !element_type(bytes[2], &type)) {
    throw DataError(path + ": wrong IDX magic number " + hex(bytes.data(), std::min<size_t>(bytes.size(), 4)) +
                    ", expected 0x0000TTNN with type TT one of 08 09 0B 0C 0D 0E and NN dimensions");
  }
  const size_t header = 4 + 4 * size_t{bytes[3]};
  if (bytes.size() < header) {
    throw DataError(path + ": IDX header names " + std::to_string(bytes[3]) + " dimensions, but the file has only " +
                    std::to_string(bytes.size()) + " bytes");
  }
  std::vector<int64_t> dims;
  std::string shape;
  // Element count in long double, so that a corrupt header cannot overflow it.
  long double count = 1;
  for (size_t d = 0; d < bytes[3]; ++d) {
    dims.push_back(big_endian_u32(bytes.data() + 4 + 4 * d));
    shape += (d == 0 ? "" : "x") + std::to_string(dims.back());
    count *= dims.back();
  }
  const size_t data_bytes = bytes.size() - header;
  if (count * type.bytes != data_bytes) {
    std::ostringstream need;
    need << std::fixed << std::setprecision(0) << count * type.bytes;
    throw DataError(path + ": IDX dimensions " + shape + " need " + need.str() + " bytes of data after the " +
                    std::to_string(header) + "-byte header, but the file has " + std::to_string(data_bytes));
  }
  torch::Tensor tensor = torch::empty(dims, torch::TensorOptions().dtype(type.dtype));
  auto* out = static_cast<uint8_t*>(tensor.data_ptr());
  const uint8_t* in = bytes.data() + header;
  const auto n = static_cast<int64_t>(data_bytes / type.bytes);
  switch (type.bytes) {
    case 1: std::memcpy(out, in, data_bytes); break;
    case 2: copy_big_endian<uint16_t>(in, out, n); break;
    case 4: copy_big_endian<uint32_t>(in, out, n); break;
    default: copy_big_endian<uint64_t>(in, out, n); break;
  }
  return tensor;
}

}  // namespace lockstep::data
