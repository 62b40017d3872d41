#pragma once

#include <algorithm>
#include <cstddef>

#include <c10/core/ScalarType.h>

#include "lockstep/comm/types.h"

// Element-wise reductions on raw buffers, for backends that call back into us for the math
// (gloo for every dtype, MPI for the 16-bit floats it has no built-in type for).
namespace lockstep {

/// out[i] = a[i] op b[i] for `count` elements; `out` may alias `a` or `b`.
using ReduceFunction = void (*)(void* out, const void* a, const void* b, size_t count);

template <typename T, ReduceOp Op>
void reduce_elements(void* out, const void* a, const void* b, size_t count) {
  auto* o = static_cast<T*>(out);
  const auto* x = static_cast<const T*>(a);
  const auto* y = static_cast<const T*>(b);
  for (size_t i = 0; i < count; ++i) {
    if constexpr (Op == ReduceOp::Sum) o[i] = x[i] + y[i];
    if constexpr (Op == ReduceOp::Product) o[i] = x[i] * y[i];
    if constexpr (Op == ReduceOp::Min) o[i] = y[i] < x[i] ? y[i] : x[i];
    if constexpr (Op == ReduceOp::Max) o[i] = x[i] < y[i] ? y[i] : x[i];
  }
}

/// The function for `dtype` and `op` (Sum, Product, Min or Max; Avg is Sum then a division).
ReduceFunction reduce_function(c10::ScalarType dtype, ReduceOp op);

/// out[i] = inputs[0][i] op inputs[1][i] op ... op inputs[n - 1][i] for `count` elements,
/// always in input order, so every rank that computes it gets the same bits; also written
/// to `copy` unless it is null. float16 and bfloat16 are combined in float32 and rounded
/// once. `out` and `copy` may be inputs.
using ReduceManyFunction = void (*)(void* out, void* copy, const void* const* inputs, int n, size_t count);

ReduceManyFunction reduce_many_function(c10::ScalarType dtype, ReduceOp op);

/// Elements [begin, end) of a buffer.
struct ElementRange {
  size_t begin;
  size_t end;
};

/// Rank r's part of `count` elements when each of `ranks` ranks reduces one part. Parts
/// start on cache-line boundaries, so that ranks writing theirs never share a line.
inline ElementRange slice_of(int r, int ranks, size_t count, size_t element_size) {
  constexpr size_t kLineBytes = 64;
  const size_t align = std::max<size_t>(1, kLineBytes / element_size);
  const size_t per_rank = ((count + ranks - 1) / ranks + align - 1) / align * align;
  const size_t begin = std::min(count, per_rank * r);
  return {begin, std::min(count, begin + per_rank)};
}

}  // namespace lockstep
