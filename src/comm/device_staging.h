#pragma once

// The one place where collectives meet devices. Transports move host memory (gloo, MPI,
// shared memory, threads); a collective on CUDA tensors reaches them through pinned host
// copies, made on a side stream after the work already queued on the caller's current
// stream, and its results go back the same way. The CPU build (no CUDA in the libtorch it
// was built against) refuses device tensors with a message saying so; the CUDA build's
// staging is in src/cuda/. docs/GPU.md tells the stream rules a user can rely on.

#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "comm/call.h"

namespace lockstep {

/// One collective's device tensors, copied to host memory for a transport, and the way back.
class HostStaging {
 public:
  virtual ~HostStaging() = default;

  /// The host copies of the tensors, once copied (blocks the collective's thread until the
  /// copies out are done, never the caller's).
  virtual std::vector<at::Tensor> host_tensors() = 0;
  /// Queues the host `results` back to the device: a result that is one of `host` (written
  /// in place) goes into its device tensor, any other into a new device tensor. Returns the
  /// device tensors, which are the collective's outputs.
  virtual std::vector<at::Tensor> copy_back(const std::vector<at::Tensor>& host,
                                            const std::vector<at::Tensor>& results) = 0;
  /// On the thread that waits for the collective: its current stream waits for the copies
  /// back; the host does not.
  virtual void order_current_stream() = 0;
};

/// Null when `tensors` are on the CPU (nothing to stage). Called on the caller's thread, so
/// that the copies follow the work its current stream has queued. Tensors on a device the
/// build cannot stage throw Error naming the collective `kind`.
std::shared_ptr<HostStaging> stage_on_host(const std::vector<at::Tensor>& tensors, Collective kind);

/// Whether this build stages CUDA tensors (it was built against a libtorch with CUDA).
bool built_with_cuda();

}  // namespace lockstep
