#pragma once

// The one place where collectives meet devices. A collective on CUDA tensors follows the
// work queued on the caller's current stream and is followed by the waiter's. Its tensors
// reach a transport in one of two ways, chosen in the call's turn: the group's device
// transport for their device type (NCCL) gets them as they are, on its own stream; where
// there is none, or it stages this device, the host transport (gloo, MPI, shared memory,
// threads) gets pinned host copies made on a side stream, and the results go back the same
// way. Host copies and host waits cannot be captured in a CUDA graph, so a staged call on a
// capturing stream is refused. The CPU build (no CUDA in the libtorch it was built
// against) refuses device tensors with a message saying so; the CUDA build's side is in
// device_call_cuda.cpp. docs/GPU.md tells the stream rules a user can rely on.

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "comm/calls/call.h"
#include "comm/transports/stream_marks.h"
#include "comm/transports/transport.h"

namespace lockstep {

/// One collective's tensors on one device, from the caller's stream to the transport and back.
class DeviceCall {
 public:
  /// The collective itself, on the tensors `transport` moves; returns its outputs.
  using Body = std::function<std::vector<at::Tensor>(Transport& transport, std::vector<at::Tensor>& tensors)>;

  virtual ~DeviceCall() = default;

  /// On the collective's thread, in its turn: runs `body` with `device` on the device
  /// tensors themselves, on its stream, where there is one that moves this device, else with
  /// `host` on host copies of them. Returns the outputs on the device; the device may still
  /// be working on them.
  virtual std::vector<at::Tensor> run(DeviceTransport* device, HostTransport& host, const Body& body) = 0;
  /// On the thread that waits for the collective: its current stream waits for the
  /// outputs; the host does not.
  virtual void order_current_stream() = 0;
  /// Whether work that run() queued on a device transport's stream is unfinished: such work
  /// outlives the call, and only the device knows when it ends (the watchdog asks, from its
  /// own thread, without disturbing a graph another thread captures). False for work
  /// captured in a CUDA graph, which runs only when the graph is replayed.
  virtual bool device_work_pending() = 0;
  /// Where its work began and ended on the stream run() queued it on, for the timeline:
  /// null marks unless begin_device_call was asked to time it.
  virtual StreamSpan device_span() const { return {}; }
};

/// Null when `tensors` are on the CPU. Called on the caller's thread, where it marks how
/// far the caller's current stream has got. Tensors on a device the build cannot move
/// throw Error naming the collective `kind`. `timed`: the call marks its device span.
std::shared_ptr<DeviceCall> begin_device_call(const std::vector<at::Tensor>& tensors, Collective kind, bool timed);

/// Whether this build moves CUDA tensors (it was built against a libtorch with CUDA).
bool built_with_cuda();

/// Makes CUDA device `index` this thread's current one, as InitOptions::device asks. Throws
/// ConfigError naming the device when the build or the machine has no such device.
void use_cuda_device(int index);

/// Makes CUDA device `index` the one `torch::kCUDA` means on this thread, without creating
/// its context: that comes with the first real use, so a job that never touches the GPU
/// costs it nothing (no half-gigabyte context, no failure on a GPU another job holds
/// exclusively). A no-op in the CPU build.
void prefer_cuda_device(int index);

/// How many CUDA devices this process sees: 0 in the CPU build.
int visible_cuda_devices();

/// The GPU a local rank uses when the user chose none: local rank mod the visible GPUs (more
/// ranks than GPUs share them), none where no GPU is visible. init() makes it current, so
/// that `torch::kCUDA` means a GPU of the rank's own. Pure, so the choice is tested on the CPU.
inline std::optional<int> gpu_of_local_rank(int local_rank, int visible_gpus) {
  if (visible_gpus <= 0) return std::nullopt;
  return local_rank % visible_gpus;
}

}  // namespace lockstep
