#pragma once

#include <functional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "lockstep/comm/process_group.h"
#include "lockstep/comm/types.h"

namespace lockstep {

/// One bucket of gradients, packed into a flat buffer, ready to be summed across ranks. The
/// gradients in it are already scaled (by 1 / world size for Avg), so a sum is all it needs.
/// float16 and bfloat16 gradients are bucketed as float32, so that their sum cannot
/// overflow and is rounded once, into grad().
struct GradBucket {
  int index;           // buckets are launched in index order on every rank
  at::Tensor buffer;   // flat, one dtype; the hook may reduce it in place
  ProcessGroup group;  // the ranks to sum over: DistributedDataParallel's group
  /// The last bucket of this backward pass: it is waited for as soon as it is launched, so
  /// nothing is left to overlap it with and a hook may as well reduce it on the calling
  /// thread (the built-in hooks do, which spares waking a background thread every step).
  bool last = false;
  /// With sharded gradients (ZeRO-2), who needs which of the buffer's sums: the rank that
  /// steps each parameter, every rank for the parameters no rank steps alone. A hook may
  /// pass them to reduce_to_owners, or sum the whole bucket as without. Empty: every rank
  /// needs every sum.
  std::vector<OwnedRange> owners;
};

/// A future of the reduced bucket: waits for the reduction and returns the summed contents
/// (the bucket's buffer itself or a tensor of the same size and dtype).
using ReducedBucket = std::function<at::Tensor()>;

/// How DistributedDataParallel reduces a bucket: starts the reduction (without waiting for
/// it, so that it overlaps the rest of backward) and returns its future.
using CommHook = std::function<ReducedBucket(GradBucket& bucket)>;

/// Sums the bucket across ranks, for its owners where it has them: the default.
CommHook allreduce_hook();
/// Halves the bytes on the wire: sums a float16 copy, then scales it back into the bucket.
CommHook fp16_compress_hook();
/// Like fp16_compress_hook with bfloat16: the range of float32, less precision.
CommHook bf16_compress_hook();

}  // namespace lockstep
