#include "lockstep/ddp/comm_hook.h"

#include <optional>

#include <ATen/ATen.h>

#include "lockstep/comm/collectives.h"

namespace lockstep {
namespace {

// Sums `tensor` across the bucket's group, for the bucket's owners where it has them: the
// last bucket right here, since its future is waited for at once (nothing to wait for
// then), the others in the background.
std::optional<Work> sum_across(const GradBucket& bucket, at::Tensor tensor) {
  if (!bucket.owners.empty()) {
    if (!bucket.last) return reduce_to_owners_async(tensor, bucket.owners, ReduceOp::Sum, bucket.group);
    reduce_to_owners(tensor, bucket.owners, ReduceOp::Sum, bucket.group);
    return std::nullopt;
  }
  if (!bucket.last) return all_reduce_async(tensor, ReduceOp::Sum, bucket.group);
  all_reduce(tensor, ReduceOp::Sum, bucket.group);
  return std::nullopt;
}

// Sums a copy of the bucket in `wire_dtype`, then writes it back: fewer bytes on the wire.
CommHook compressing_hook(at::ScalarType wire_dtype) {
  return [wire_dtype](GradBucket& bucket) -> ReducedBucket {
    at::Tensor compressed = bucket.buffer.to(wire_dtype);
    std::optional<Work> work = sum_across(bucket, compressed);
    at::Tensor buffer = bucket.buffer;
    return [work, compressed, buffer]() mutable {
      if (work) work->wait();
      buffer.copy_(compressed);
      return buffer;
    };
  };
}

}  // namespace

CommHook allreduce_hook() {
  return [](GradBucket& bucket) -> ReducedBucket {
    at::Tensor buffer = bucket.buffer;
    std::optional<Work> work = sum_across(bucket, buffer);
    if (!work) return [buffer] { return buffer; };  // small enough for std::function to hold inline
    return [work = *work, buffer] {
      work.wait();
      return buffer;
    };
  };
}

CommHook fp16_compress_hook() { return compressing_hook(at::kHalf); }

CommHook bf16_compress_hook() { return compressing_hook(at::kBFloat16); }

}  // namespace lockstep
