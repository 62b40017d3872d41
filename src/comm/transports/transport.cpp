#include "comm/transports/transport.h"

#include <ATen/ATen.h>

namespace lockstep {

void Transport::reduce_scatter(const at::Tensor& input, at::Tensor& output, ReduceOp op, uint32_t tag) {
  at::Tensor reduced = input.clone();
  all_reduce(reduced, op, tag);
  output.copy_(reduced.chunk(size(), 0)[rank()]);
}

void Transport::reduce_to_owners(at::Tensor& tensor, const std::vector<OwnedRange>&, ReduceOp op, uint32_t tag) {
  all_reduce(tensor, op, tag);
}

at::Tensor HostTransport::empty_shared(at::IntArrayRef sizes, at::ScalarType dtype, uint32_t) {
  return at::empty(sizes, at::TensorOptions().dtype(dtype));
}

bool HostTransport::same_fingerprint_everywhere(uint64_t) { return true; }

std::exception_ptr HostTransport::explain_failure(const Call& call, const std::exception& failure,
                                                  std::chrono::steady_clock::duration elapsed,
                                                  std::chrono::milliseconds timeout) {
  return reports_ ? reports_->explain(call, failure, elapsed, timeout) : nullptr;
}

std::exception_ptr HostTransport::explain_device_failure(const Call& call, const std::exception& failure,
                                                         std::chrono::steady_clock::duration elapsed,
                                                         std::chrono::milliseconds timeout) {
  const auto& reports = reports_ ? reports_ : device_reports_;
  return reports ? reports->explain(call, failure, elapsed, timeout) : nullptr;
}

}  // namespace lockstep
