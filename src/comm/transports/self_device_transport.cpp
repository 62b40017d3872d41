#include "comm/transports/self_device_transport.h"

#include <c10/core/impl/VirtualGuardImpl.h>

namespace lockstep {

// On the stream the device call made current (device_stream's), as a copy by NCCL would be.
void SelfDeviceTransport::all_gather(const at::Tensor& input, at::Tensor& output, uint32_t) { output.copy_(input); }

void SelfDeviceTransport::reduce_scatter(const at::Tensor& input, at::Tensor& output, ReduceOp, uint32_t) {
  output.copy_(input);
}

std::optional<c10::Stream> SelfDeviceTransport::device_stream(at::Device device) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = streams_.find(device.index());
  if (found == streams_.end()) {
    const c10::Stream stream = c10::impl::VirtualGuardImpl(device.type()).getStreamFromGlobalPool(device);
    found = streams_.emplace(device.index(), stream).first;
  }
  return found->second;
}

}  // namespace lockstep
