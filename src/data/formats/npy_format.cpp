#include "data/formats/npy_format.h"

#include <cstring>

#include "lockstep/error.h"

namespace lockstep::data {
namespace {

const char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
constexpr size_t kPreamble = kMagicSize + 2 + 2;  // magic, version 1.0, header length (uint16 LE)

}  // namespace

std::vector<uint8_t> encode_npy_image(const torch::Tensor& image) {
  TORCH_CHECK(image.scalar_type() == torch::kUInt8 && image.dim() == 3 && (image.size(0) == 1 || image.size(0) == 3),
              "encode_npy_image takes uint8 C x H x W with C = 1 or 3, not ", image.sizes());
  const torch::Tensor laid_out = (image.size(0) == 1 ? image[0] : image.permute({1, 2, 0})).contiguous();
  std::string shape = "(";
  for (int64_t extent : laid_out.sizes()) shape += std::to_string(extent) + ", ";
  shape.resize(shape.size() - 1);
  shape.back() = ')';
  std::string header = "{'descr': '|u1', 'fortran_order': False, 'shape': " + shape + ", }";
  // Padded with spaces and ended by a newline so that the data starts 64-byte aligned.
  const size_t total = (kPreamble + header.size() + 1 + 63) / 64 * 64;
  header.append(total - kPreamble - header.size() - 1, ' ');
  header += '\n';

  std::vector<uint8_t> bytes(kPreamble + header.size() + static_cast<size_t>(laid_out.numel()));
  std::memcpy(bytes.data(), kMagic, kMagicSize);
  bytes[6] = 1;  // version 1.0
  bytes[7] = 0;
  bytes[8] = static_cast<uint8_t>(header.size() & 0xff);
  bytes[9] = static_cast<uint8_t>(header.size() >> 8);
  std::memcpy(bytes.data() + kPreamble, header.data(), header.size());
  std::memcpy(bytes.data() + kPreamble + header.size(), laid_out.data_ptr<uint8_t>(),
              static_cast<size_t>(laid_out.numel()));
  return bytes;
}

torch::Tensor decode_npy_image(const uint8_t* bytes, size_t size, const std::string& source) {
  const auto refuse = [&](const std::string& why) -> DataError {
    return DataError(source + " is not a uint8 image in NumPy's .npy format: " + why);
  };
  if (size < kPreamble || std::memcmp(bytes, kMagic, kMagicSize) != 0) throw refuse("no .npy magic");
  if (bytes[6] != 1) throw refuse("format version " + std::to_string(bytes[6]) + " (1 is read)");
  const size_t header_size = bytes[8] | (size_t{bytes[9]} << 8);
  if (kPreamble + header_size > size) throw refuse("its header is cut short");
  const std::string header(reinterpret_cast<const char*>(bytes) + kPreamble, header_size);

  // The header is a Python dict literal; the three keys numpy writes are read by hand, as
  // a regular expression per sample would cost more than the copy.
  const auto value_of = [&](const std::string& key) -> std::string {
    const size_t at = header.find("'" + key + "'");
    if (at == std::string::npos) throw refuse("its header has no '" + key + "'");
    const size_t begin = header.find_first_not_of(" :", at + key.size() + 2);
    const bool tuple = begin != std::string::npos && header[begin] == '(';
    const size_t end = begin == std::string::npos ? begin : header.find_first_of(tuple ? ")" : ",}", begin);
    if (end == std::string::npos) throw refuse("its header's '" + key + "' is cut short");
    return header.substr(begin, end - begin + (tuple ? 1 : 0));
  };
  const std::string descr = value_of("descr");
  if (descr != "'|u1'" && descr != "'<u1'" && descr != "'>u1'") throw refuse("dtype " + descr + ", not uint8 ('|u1')");
  if (value_of("fortran_order") != "False") throw refuse("Fortran order");
  const std::string numbers = value_of("shape");
  std::vector<int64_t> extents;
  for (size_t at = 0; (at = numbers.find_first_of("0123456789", at)) != std::string::npos;) {
    const size_t end = numbers.find_first_not_of("0123456789", at);
    extents.push_back(std::stoll(numbers.substr(at, end - at)));
    at = end;
  }
  const bool gray = extents.size() == 2;
  const bool colour = extents.size() == 3 && (extents[2] == 1 || extents[2] == 3);
  if (!gray && !colour) throw refuse("shape " + numbers + ", not H x W or H x W x C with C = 1 or 3");

  int64_t count = 1;
  for (int64_t extent : extents) count *= extent;
  const size_t data = kPreamble + header_size;
  if (size - data != static_cast<size_t>(count)) {
    throw refuse(std::to_string(size - data) + " data bytes for shape " + numbers + ", which needs " +
                 std::to_string(count));
  }
  torch::Tensor array = torch::empty(extents, torch::kUInt8);
  std::memcpy(array.data_ptr<uint8_t>(), bytes + data, static_cast<size_t>(count));
  return gray ? array.unsqueeze(0) : array.permute({2, 0, 1}).contiguous();
}

}  // namespace lockstep::data
