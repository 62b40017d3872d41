#include "comm/reduce_kernels.h"

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

}  // namespace

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
