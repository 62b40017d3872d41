#include "comm/reduce_kernels.h"

#include <algorithm>
#include <cstdint>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "lockstep/comm/error.h"

namespace lockstep {
namespace {

template <typename T>
ReduceFunction for_type(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return &reduce_elements<T, ReduceOp::Sum>;
    case ReduceOp::Product: return &reduce_elements<T, ReduceOp::Product>;
    case ReduceOp::Min: return &reduce_elements<T, ReduceOp::Min>;
    case ReduceOp::Max: return &reduce_elements<T, ReduceOp::Max>;
    case ReduceOp::Avg: break;
  }
  throw Error("lockstep: internal error: no element-wise function for " + to_string(op));
}

// Element i of every input is combined in a small accumulator that stays in L1, written
// out once: `out` may alias an input, and 16-bit floats are rounded only at the end.
template <typename T>
struct Accumulated {
  using type = T;
};
template <>
struct Accumulated<c10::Half> {
  using type = float;
};
template <>
struct Accumulated<c10::BFloat16> {
  using type = float;
};

template <typename A, ReduceOp Op>
inline A combine(A x, A y) {
  if constexpr (Op == ReduceOp::Sum) return x + y;
  if constexpr (Op == ReduceOp::Product) return x * y;
  if constexpr (Op == ReduceOp::Min) return y < x ? y : x;
  if constexpr (Op == ReduceOp::Max) return x < y ? y : x;
  return x;
}

// Memory-bound: built for AVX2 or AVX-512 as well (target_clones), it ran no faster in
// bench/allreduce's 1 MB and 16 MB cases, so the baseline build is all there is.
template <typename T, ReduceOp Op>
void reduce_many(void* out, void* copy, const void* const* inputs, int n, size_t count) {
  using A = typename Accumulated<T>::type;
  constexpr size_t kBlock = 1024;
  A acc[kBlock];
  for (size_t start = 0; start < count; start += kBlock) {
    const size_t len = std::min(kBlock, count - start);
    const T* first = static_cast<const T*>(inputs[0]) + start;
    const T* second = static_cast<const T*>(inputs[n > 1 ? 1 : 0]) + start;
    if (n > 1) {
      for (size_t i = 0; i < len; ++i) {
        acc[i] = combine<A, Op>(static_cast<A>(first[i]), static_cast<A>(second[i]));
      }
    } else {
      for (size_t i = 0; i < len; ++i) acc[i] = static_cast<A>(first[i]);
    }
    for (int k = 2; k < n; ++k) {
      const T* next = static_cast<const T*>(inputs[k]) + start;
      for (size_t i = 0; i < len; ++i) acc[i] = combine<A, Op>(acc[i], static_cast<A>(next[i]));
    }
    T* o = static_cast<T*>(out) + start;
    for (size_t i = 0; i < len; ++i) o[i] = static_cast<T>(acc[i]);
    if (copy == nullptr) continue;
    T* c = static_cast<T*>(copy) + start;
    for (size_t i = 0; i < len; ++i) c[i] = static_cast<T>(acc[i]);
  }
}

template <typename T>
ReduceManyFunction many_for_type(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return &reduce_many<T, ReduceOp::Sum>;
    case ReduceOp::Product: return &reduce_many<T, ReduceOp::Product>;
    case ReduceOp::Min: return &reduce_many<T, ReduceOp::Min>;
    case ReduceOp::Max: return &reduce_many<T, ReduceOp::Max>;
    case ReduceOp::Avg: break;
  }
  throw Error("lockstep: internal error: no element-wise function for " + to_string(op));
}

}  // namespace

ReduceManyFunction reduce_many_function(c10::ScalarType dtype, ReduceOp op) {
  switch (dtype) {
    case c10::kFloat: return many_for_type<float>(op);
    case c10::kDouble: return many_for_type<double>(op);
    case c10::kHalf: return many_for_type<c10::Half>(op);
    case c10::kBFloat16: return many_for_type<c10::BFloat16>(op);
    case c10::kInt: return many_for_type<int32_t>(op);
    case c10::kLong: return many_for_type<int64_t>(op);
    case c10::kByte: return many_for_type<uint8_t>(op);
    default: break;
  }
  throw Error(std::string("lockstep: dtype ") + c10::toString(dtype) + " cannot be reduced");
}

ReduceFunction reduce_function(c10::ScalarType dtype, ReduceOp op) {
  switch (dtype) {
    case c10::kFloat: return for_type<float>(op);
    case c10::kDouble: return for_type<double>(op);
    case c10::kHalf: return for_type<c10::Half>(op);
    case c10::kBFloat16: return for_type<c10::BFloat16>(op);
    case c10::kInt: return for_type<int32_t>(op);
    case c10::kLong: return for_type<int64_t>(op);
    case c10::kByte: return for_type<uint8_t>(op);
    default: break;
  }
  throw Error(std::string("lockstep: dtype ") + c10::toString(dtype) + " cannot be reduced");
}

}  // namespace lockstep
