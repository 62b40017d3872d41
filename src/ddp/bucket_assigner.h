#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <c10/core/ScalarType.h>

namespace lockstep {

/// What bucketing needs to know of a parameter.
struct ParameterSize {
  size_t index;  // in the module's parameter list
  int64_t bytes;
  c10::ScalarType dtype;
};

/// Groups parameters, taken in the given order (the order their gradients are expected),
/// into buckets of one dtype each. A bucket closes once it holds at least `cap_bytes`, the
/// first bucket of each dtype at `first_cap_bytes` so that communication starts early.
/// Buckets come out in the order they close, so that the first ready is the first sent.
std::vector<std::vector<size_t>> assign_buckets(const std::vector<ParameterSize>& in_order, int64_t first_cap_bytes,
                                                int64_t cap_bytes);

}  // namespace lockstep
