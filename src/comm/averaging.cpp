#include "comm/averaging.h"

#include <ATen/ATen.h>

namespace lockstep {
namespace {

// ATen converts float64 to float16 and bfloat16 through float32, rounding twice, which can
// miss the nearest 16-bit value by one. Rounded to odd in float32 first (at least 13 bits
// more than either has), the last rounding, into 16 bits, is the only one that counts.
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
  if (at::isFloatingType(sum.scalar_type())) {
    sum.div_(count);
  } else {
    sum.div_(count, "trunc");
  }
  if (sum.is_same(out)) return;
  const bool to_16_bits = out.scalar_type() == at::kHalf || out.scalar_type() == at::kBFloat16;
  out.copy_(to_16_bits && sum.scalar_type() == at::kDouble ? float32_rounded_to_odd(sum) : sum);
}

}  // namespace lockstep
