#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>

// Lists of integers and text as int64 tensors: how checkpoint files and broadcasts carry them.
namespace lockstep::detail {

inline std::vector<int64_t> as_int64_vector(const at::Tensor& tensor) {
  const at::Tensor flat = tensor.to(at::kLong).contiguous();
  return std::vector<int64_t>(flat.data_ptr<int64_t>(), flat.data_ptr<int64_t>() + flat.numel());
}

/// One int64 per character.
inline at::Tensor text_tensor(const std::string& text) {
  return at::tensor(std::vector<int64_t>(text.begin(), text.end()), at::kLong);
}

inline std::string text_of(const at::Tensor& tensor) {
  std::string text;
  for (const int64_t c : as_int64_vector(tensor)) text += static_cast<char>(c);
  return text;
}

}  // namespace lockstep::detail
