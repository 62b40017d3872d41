#include "comm/calls/averaging.h"

#include <cmath>
#include <cstring>

#include <ATen/ATen.h>

namespace lockstep {
namespace {

// ATen converts float64 to float16 and bfloat16 through float32, rounding twice, which can
// miss the nearest 16-bit value by one. Rounded to odd in float32 first (at least 13 bits
// more than either has), the last rounding, into 16 bits, is the only one that counts.
float float32_rounded_to_odd(double wide) {
  float narrow = static_cast<float>(wide);
  const double back = narrow;
  if (back == wide) return narrow;
  if (std::fabs(back) > std::fabs(wide)) narrow = std::nextafter(narrow, 0.0f);
  uint32_t bits;
  std::memcpy(&bits, &narrow, sizeof bits);
  bits |= 1;
  std::memcpy(&narrow, &bits, sizeof bits);
  return narrow;
}

template <typename Narrow>
void write_mean_of(const double* sum, int64_t count, Narrow* out, int64_t numel) {
  for (int64_t i = 0; i < numel; ++i) out[i] = static_cast<Narrow>(float32_rounded_to_odd(sum[i] / count));
}

// The same on tensors, for sums on a device.
at::Tensor float32_rounded_to_odd(const at::Tensor& wide) {
  at::Tensor narrow = wide.to(at::kFloat);
  const at::Tensor back = narrow.to(at::kDouble);
  const at::Tensor inexact = back.ne(wide);
  narrow = at::where(back.abs().gt(wide.abs()), at::nextafter(narrow, at::zeros_like(narrow)), narrow);
  narrow.view(at::kInt).bitwise_or_(inexact.to(at::kInt));
  return narrow;
}

}  // namespace

at::ScalarType averaging_dtype(at::ScalarType dtype) {
  switch (dtype) {
    case at::kHalf:
    case at::kBFloat16: return at::kDouble;
    default: return dtype;
  }
}

void write_mean(at::Tensor& sum, int64_t count, at::Tensor& out) {
  const bool to_16_bits =
      sum.scalar_type() == at::kDouble && (out.scalar_type() == at::kHalf || out.scalar_type() == at::kBFloat16);
  if (to_16_bits && sum.is_cpu() && out.is_contiguous()) {
    const double* from = sum.data_ptr<double>();
    if (out.scalar_type() == at::kHalf) {
      write_mean_of(from, count, out.data_ptr<at::Half>(), out.numel());
    } else {
      write_mean_of(from, count, out.data_ptr<at::BFloat16>(), out.numel());
    }
    return;
  }
  if (at::isFloatingType(sum.scalar_type())) {
    sum.div_(count);
  } else {
    sum.div_(count, "trunc");
  }
  if (sum.is_same(out)) return;
  out.copy_(to_16_bits ? float32_rounded_to_odd(sum) : sum);
}

}  // namespace lockstep
