#include "lockstep/ddp/comm_hook.h"

#include <ATen/ATen.h>

#include "lockstep/comm/collectives.h"

namespace lockstep {
namespace {

// Sums a copy of the bucket in `wire_dtype`, then writes it back: fewer bytes on the wire.
CommHook compressing_hook(at::ScalarType wire_dtype) {
  return [wire_dtype](GradBucket& bucket) -> ReducedBucket {
    at::Tensor compressed = bucket.buffer.to(wire_dtype);
    Work work = all_reduce_async(compressed, ReduceOp::Sum, bucket.group);
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
    Work work = all_reduce_async(bucket.buffer, ReduceOp::Sum, bucket.group);
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
