#include "lockstep/ddp/comm_hook.h"

#include <ATen/ATen.h>

#include "lockstep/comm/collectives.h"

namespace lockstep {
namespace {

// Starts summing `tensor` across the bucket's group; the last bucket is summed right here,
// since its future is waited for at once.
Work sum_across(const GradBucket& bucket, at::Tensor tensor) {
  if (!bucket.last) return all_reduce_async(tensor, ReduceOp::Sum, bucket.group);
  all_reduce(tensor, ReduceOp::Sum, bucket.group);
  return Work();
}

// Sums a copy of the bucket in `wire_dtype`, then writes it back: fewer bytes on the wire.
CommHook compressing_hook(at::ScalarType wire_dtype) {
  return [wire_dtype](GradBucket& bucket) -> ReducedBucket {
    at::Tensor compressed = bucket.buffer.to(wire_dtype);
    Work work = sum_across(bucket, compressed);
    at::Tensor buffer = bucket.buffer;
    return [work, compressed, buffer]() mutable {
      work.wait();
      buffer.copy_(compressed);
      return buffer;
    };
  };
}

}  // namespace

CommHook allreduce_hook() {
  return [](GradBucket& bucket) -> ReducedBucket {
    Work work = sum_across(bucket, bucket.buffer);
    at::Tensor buffer = bucket.buffer;
    return [work, buffer] {
      work.wait();
      return buffer;
    };
  };
}

CommHook fp16_compress_hook() { return compressing_hook(at::kHalf); }

CommHook bf16_compress_hook() { return compressing_hook(at::kBFloat16); }

}  // namespace lockstep
