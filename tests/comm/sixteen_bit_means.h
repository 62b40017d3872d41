#pragma once

// Avg of float16 and bfloat16 where every sum overflows the dtype and the mean does not,
// checked bit for bit against the correctly rounded mean of exact float64 sums.
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "lockstep/comm/process_group.h"

namespace lockstep::testing {

/// Rank r of n's values, `numel` of float16 or bfloat16: magnitudes between 1.01 / n and
/// 0.999 of the dtype's largest, so that any n of them overflow when summed in the dtype;
/// signs alternate by element. On 3 ranks, float16's element 0 is a rounding trap. Tensors
/// of more than 65536 elements repeat the first 65536.
at::Tensor overflowing_input(int r, int n, int64_t numel, at::ScalarType dtype);

/// The dtype's value nearest to sum / n, ties to even, for float64 sums of 16-bit values.
at::Tensor correctly_rounded_mean(const at::Tensor& sum, int n, at::ScalarType dtype);

/// Every form of Avg (all_reduce, its async and coalesced forms, reduce, reduce_scatter,
/// an empty_shared tensor) on float16 and bfloat16 tensors of 4 KB and 4 MB, over `group`;
/// also that Sum still overflows. What was wrong, one line each.
std::vector<std::string> check_16_bit_means(const ProcessGroup& group);

}  // namespace lockstep::testing
