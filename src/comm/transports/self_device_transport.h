#pragma once

#include <map>
#include <mutex>

#include "comm/transports/transport.h"

namespace lockstep {

/// A group of one rank's device tensors: every collective is already done, on the device.
/// Without it they would be staged through host memory and back for nothing (12% of a
/// ResNet-50 step at world 1 on an H100, docs/GPU.md). Its calls run on a stream of its own
/// per device, ordered after the caller's work and before the waiter's, as NCCL's do.
class SelfDeviceTransport : public DeviceTransport {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "self"; }
  bool averages(at::ScalarType) const override { return true; }  // the mean of one is itself

  void all_reduce(at::Tensor&, ReduceOp, uint32_t) override {}
  void broadcast(at::Tensor&, int, uint32_t) override {}
  void reduce(at::Tensor&, int, ReduceOp, uint32_t) override {}
  void all_gather(const at::Tensor& input, at::Tensor& output, uint32_t) override;
  void reduce_scatter(const at::Tensor& input, at::Tensor& output, ReduceOp, uint32_t) override;

  std::optional<c10::Stream> device_stream(at::Device device) override;
  bool connected(at::Device) override { return true; }  // nothing to set up: capturable at once
  std::string device_error() override { return ""; }
  void abort() override {}
  void leave_gracefully() override {}

 private:
  std::mutex mutex_;
  std::map<c10::DeviceIndex, c10::Stream> streams_;  // of the one device type it moves
};

}  // namespace lockstep
