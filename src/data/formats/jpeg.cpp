#include "lockstep/data/jpeg.h"

#include <turbojpeg.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "lockstep/error.h"

namespace lockstep::data {
namespace {

// A TurboJPEG handle serves one thread at a time, and decoding runs in many loader
// threads: each thread keeps its own, freed when the thread ends.
class TurboHandle {
 public:
  explicit TurboHandle(tjhandle (*init)()) : init_(init) {}
  ~TurboHandle() { reset(); }
  TurboHandle(const TurboHandle&) = delete;
  TurboHandle& operator=(const TurboHandle&) = delete;

  tjhandle get() {
    if (!handle_) handle_ = init_();
    if (!handle_) throw Error(std::string("cannot start TurboJPEG: ") + tjGetErrorStr2(nullptr));
    return handle_;
  }

  // Call after a failure: TurboJPEG 2.1 can leave a handle that failed mid-header unable
  // to decode the next, valid image ("Invalid argument"). A fresh handle is cheap.
  void reset() {
    if (handle_) tjDestroy(handle_);
    handle_ = nullptr;
  }

 private:
  tjhandle (*init_)();
  tjhandle handle_ = nullptr;
};

TurboHandle& decompressor() {
  thread_local TurboHandle handle(tjInitDecompress);
  return handle;
}

TurboHandle& compressor() {
  thread_local TurboHandle handle(tjInitCompress);
  return handle;
}

// TurboJPEG's message for the last failure on `turbo`, which is then replaced by a fresh one.
std::string failure_of(TurboHandle& turbo) {
  const std::string message = tjGetErrorStr2(turbo.get());
  turbo.reset();
  return message;
}

// libjpeg cannot convert CMYK to RGB itself, and a few ImageNet photos are CMYK. It gives
// Adobe's inverted CMYK, which becomes RGB as in libjpeg-turbo's own tools: R = C*K/255.
torch::Tensor cmyk_to_rgb(const torch::Tensor& cmyk) {
  const torch::Tensor values = cmyk.to(torch::kFloat);
  return (values.narrow(2, 0, 3) * values.narrow(2, 3, 1) / 255).round_().to(torch::kUInt8);
}

// ITU-R BT.601 luma, the weights libjpeg uses for its own RGB to grayscale conversion.
torch::Tensor rgb_to_gray(const torch::Tensor& rgb) {
  const torch::Tensor weights = torch::tensor({0.299f, 0.587f, 0.114f});
  return (rgb.to(torch::kFloat) * weights).sum(2, /*keepdim=*/true).round_().to(torch::kUInt8);
}

}  // namespace

torch::Tensor decode_jpeg(const std::vector<uint8_t>& bytes, int channels, const std::string& source) {
  return decode_jpeg(bytes.data(), bytes.size(), channels, source);
}

torch::Tensor decode_jpeg(const uint8_t* data, size_t size, int channels, const std::string& source) {
  if (channels != 1 && channels != 3) {
    throw ConfigError(source + ": channels must be 1 (grayscale) or 3 (RGB), got " + std::to_string(channels));
  }
  TurboHandle& turbo = decompressor();
  const tjhandle handle = turbo.get();
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(handle, data, size, &width, &height, &subsampling, &colorspace) != 0) {
    throw DataError(source + ": not a readable JPEG: " + failure_of(turbo));
  }
  const bool cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  const int format = cmyk ? TJPF_CMYK : channels == 1 ? TJPF_GRAY : TJPF_RGB;
  torch::Tensor pixels = torch::empty({height, width, tjPixelSize[format]}, torch::kUInt8);
  // Warnings fail too: "Premature end of JPEG file" is only a warning to libjpeg, but a
  // truncated image must never pass as a whole one.
  if (tjDecompress2(handle, data, size, pixels.data_ptr<uint8_t>(), width, 0, height, format, TJFLAG_STOPONWARNING) !=
      0) {
    const bool warning = tjGetErrorCode(handle) == TJERR_WARNING;
    throw DataError(source + (warning ? ": truncated or corrupt JPEG: " : ": corrupt JPEG: ") + failure_of(turbo));
  }
  if (cmyk) {
    pixels = cmyk_to_rgb(pixels);
    if (channels == 1) pixels = rgb_to_gray(pixels);
  }
  return pixels.permute({2, 0, 1}).contiguous();
}

torch::Tensor read_jpeg(const std::string& path, int channels) {
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  if (error) throw DataError(path + ": cannot read image file: " + error.message());
  std::vector<uint8_t> bytes(size);
  std::ifstream file(path, std::ios::binary);
  if (!file.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size))) {
    throw DataError(path + ": cannot read image file: " + std::strerror(errno));
  }
  return decode_jpeg(bytes, channels, path);
}

std::vector<uint8_t> encode_jpeg(const torch::Tensor& image, int quality) {
  if (!image.defined() || image.scalar_type() != torch::kUInt8 || image.dim() != 3 ||
      (image.size(0) != 1 && image.size(0) != 3)) {
    throw ConfigError("encode_jpeg: expected a uint8 C x H x W image with C = 1 or 3, got " +
                      (image.defined() ? c10::str(image.scalar_type(), " ", image.sizes()) : "an undefined tensor"));
  }
  if (quality < 1 || quality > 100) {
    throw ConfigError("encode_jpeg: quality must be within 1..100, got " + std::to_string(quality));
  }
  const bool gray = image.size(0) == 1;
  const torch::Tensor pixels = image.to(torch::kCPU).permute({1, 2, 0}).contiguous();
  unsigned char* jpeg = nullptr;
  unsigned long jpeg_size = 0;
  TurboHandle& turbo = compressor();
  const int status = tjCompress2(turbo.get(), pixels.data_ptr<uint8_t>(), static_cast<int>(image.size(2)), 0,
                                 static_cast<int>(image.size(1)), gray ? TJPF_GRAY : TJPF_RGB, &jpeg, &jpeg_size,
                                 gray ? TJSAMP_GRAY : TJSAMP_444, quality, 0);
  const std::unique_ptr<unsigned char, void (*)(unsigned char*)> owned(jpeg, tjFree);
  if (status != 0) {
    throw Error("encode_jpeg: cannot encode " + c10::str(image.sizes()) + ": " + failure_of(turbo));
  }
  return std::vector<uint8_t>(jpeg, jpeg + jpeg_size);
}

}  // namespace lockstep::data
