#include "comm/transports/transport.h"

#include <cstring>

#include <ATen/ATen.h>

#include "comm/transports/owned_ranges.h"
#include "comm/transports/reduce_kernels.h"

namespace lockstep {

void Transport::reduce_scatter(const at::Tensor& input, at::Tensor& output, ReduceOp op, uint32_t tag) {
  at::Tensor reduced = input.clone();
  all_reduce(reduced, op, tag);
  output.copy_(reduced.chunk(size(), 0)[rank()]);
}

void Transport::reduce_to_owners(at::Tensor& tensor, const std::vector<OwnedRange>& ranges, ReduceOp op, uint32_t tag) {
  // a + b and b + a have the same bits (and a * b and b * a); Min and Max may not, for
  // signed zeros and NaNs. Within what one point-to-point message of MPI can carry.
  const bool commutes = op == ReduceOp::Sum || op == ReduceOp::Product;
  if (size() != 2 || !commutes || !exchanges_with_peer() || tensor.nbytes() > (size_t{1} << 30)) {
    return all_reduce(tensor, op, tag);
  }
  const int peer = 1 - rank();
  const size_t element = tensor.element_size();
  char* data = static_cast<char*>(tensor.data_ptr());
  std::vector<ElementRange> theirs, mine;  // the elements the peer needs, and this rank
  size_t theirs_count = 0, mine_count = 0;
  for_each_owned(&ranges, 0, tensor.numel(), [&](size_t begin, size_t end, int owner) {
    if (needs(peer, owner)) {
      theirs.push_back({begin, end});
      theirs_count += end - begin;
    }
    if (needs(rank(), owner)) {
      mine.push_back({begin, end});
      mine_count += end - begin;
    }
  });
  std::vector<char> sent(theirs_count * element), received(mine_count * element);
  size_t at = 0;
  for (const auto& part : theirs) {
    std::memcpy(sent.data() + at, data + part.begin * element, (part.end - part.begin) * element);
    at += (part.end - part.begin) * element;
  }
  exchange_with_peer(sent.data(), sent.size(), received.data(), received.size(), tag);
  const ReduceFunction combine = reduce_function(tensor.scalar_type(), op);
  at = 0;
  for (const auto& part : mine) {
    char* here = data + part.begin * element;
    combine(here, here, received.data() + at, part.end - part.begin);
    at += (part.end - part.begin) * element;
  }
}

void Transport::exchange_with_peer(const void*, size_t, void*, size_t, uint32_t) {
  throw Error("lockstep: internal error: " + name() + " exchanges nothing with a peer");
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
