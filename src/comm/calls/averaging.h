#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

// Avg, which no transport does itself: a Sum, in a dtype wide enough, then one division.
namespace lockstep {

/// The dtype Avg of `dtype` is summed in, so that the sum cannot overflow where the mean is
/// finite: float64 for float16 and bfloat16 (float32 would overflow on bfloat16's largest
/// values). Sums of up to 8192 float16 values are exact there, so their mean is the same
/// in any summation order, and correctly rounded. Every other dtype is summed in itself.
at::ScalarType averaging_dtype(at::ScalarType dtype);

/// Divides `sum` (in averaging_dtype(out's dtype), or `out` itself) by `count` and writes
/// the mean into `out`, rounded once. Integers divide truncating toward zero.
void write_mean(at::Tensor& sum, int64_t count, at::Tensor& out);

}  // namespace lockstep
