#pragma once

#include <string>

#include <torch/types.h>

namespace lockstep::data {

/// Reads an IDX file (the MNIST / Fashion-MNIST format), gzipped or not, into a tensor of
/// the dimensions and element type its header gives. A missing file, a corrupt or
/// truncated gzip stream, an unknown magic number or dimensions that do not match the
/// file's size throw DataError naming the file.
torch::Tensor read_idx(const std::string& path);

}  // namespace lockstep::data
