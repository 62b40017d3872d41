#pragma once

// NumPy's .npy format for uint8 images, the raw-tensor member of shards: Python's
// webdataset and numpy.load read it as it is. Images are stored as numpy and PIL lay them
// out, H×W (gray) or H×W×C, and come back as lockstep's C×H×W.

#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>

namespace lockstep::data {

/// uint8 C×H×W (C = 1 or 3) as .npy bytes.
std::vector<uint8_t> encode_npy_image(const torch::Tensor& image);

/// .npy bytes of a uint8 H×W or H×W×C (C = 1 or 3) array as C×H×W; anything else throws
/// DataError naming `source`.
torch::Tensor decode_npy_image(const uint8_t* bytes, size_t size, const std::string& source);

}  // namespace lockstep::data
