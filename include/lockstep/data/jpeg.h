#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>

namespace lockstep::data {

/// Decodes JPEG bytes with libjpeg-turbo into uint8 C×H×W with `channels` 1 (grayscale)
/// or 3 (RGB), converting as needed. Corrupt or truncated data throws DataError naming
/// `source`.
torch::Tensor decode_jpeg(const std::vector<uint8_t>& bytes, int channels, const std::string& source);
/// The same for `size` bytes at `data` (a member inside a shard in memory).
torch::Tensor decode_jpeg(const uint8_t* data, size_t size, int channels, const std::string& source);

/// Reads and decodes a JPEG file.
torch::Tensor read_jpeg(const std::string& path, int channels);

/// Encodes uint8 C×H×W (C = 1 or 3) as JPEG at `quality` (1..100).
std::vector<uint8_t> encode_jpeg(const torch::Tensor& image, int quality = 95);

}  // namespace lockstep::data
