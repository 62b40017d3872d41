#include "comm/transports/gloo_transport.h"

#include <cstdint>

#include <ATen/ATen.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/reduce.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include "comm/transports/failure_reports.h"
#include "job/process_sockets.h"
#include "comm/transports/reduce_kernels.h"
#include "lockstep/error.h"

namespace lockstep {
namespace {

// gloo only needs an element's size (to split buffers); the math is ours, so any type of
// that size will do.
template <typename Fn>
void with_element_type(const at::Tensor& tensor, Fn&& fn) {
  switch (tensor.element_size()) {
    case 1: return fn(static_cast<uint8_t*>(tensor.data_ptr()));
    case 2: return fn(static_cast<uint16_t*>(tensor.data_ptr()));
    case 4: return fn(static_cast<uint32_t*>(tensor.data_ptr()));
    case 8: return fn(static_cast<uint64_t*>(tensor.data_ptr()));
  }
  throw Error("lockstep: gloo cannot move elements of " + std::to_string(tensor.element_size()) + " bytes");
}

template <typename T>
T* same_type(const at::Tensor& tensor, T*) {
  return static_cast<T*>(tensor.data_ptr());
}

}  // namespace

GlooTransport::GlooTransport(std::shared_ptr<gloo::Context> context, std::shared_ptr<gloo::rendezvous::Store> store,
                             std::chrono::milliseconds timeout, std::vector<int> group_ranks, std::set<ino_t> sockets)
    : context_(std::move(context)), timeout_(timeout), sockets_(std::move(sockets)) {
  // Gloo's data path fails as a whole; the rendezvous store usually still answers.
  report_failures_through(
      std::make_shared<FailureReports>(std::move(store), context_->rank, context_->size, std::move(group_ranks)));
}

void GlooTransport::all_reduce(at::Tensor& tensor, ReduceOp op, uint32_t tag) {
  gloo::AllreduceOptions opts(context_);
  with_element_type(tensor, [&](auto* data) { opts.setOutput(data, tensor.numel()); });
  opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::BCUBE);
  opts.setReduceFunction(reduce_function(tensor.scalar_type(), op));
  opts.setTag(tag);
  opts.setTimeout(timeout_);
  gloo::allreduce(opts);
}

void GlooTransport::broadcast(at::Tensor& tensor, int root, uint32_t tag) {
  gloo::BroadcastOptions opts(context_);
  with_element_type(tensor, [&](auto* data) { opts.setOutput(data, tensor.numel()); });
  opts.setRoot(root);
  opts.setTag(tag);
  opts.setTimeout(timeout_);
  gloo::broadcast(opts);
}

void GlooTransport::reduce(at::Tensor& tensor, int root, ReduceOp op, uint32_t tag) {
  gloo::ReduceOptions opts(context_);
  // gloo uses the output as scratch on every rank; non-roots get a throwaway one so that
  // their tensor stays as it was.
  at::Tensor scratch = rank() == root ? tensor : at::empty_like(tensor);
  with_element_type(tensor, [&](auto* data) {
    opts.setInput(data, tensor.numel());
    opts.setOutput(same_type(scratch, data), scratch.numel());
  });
  opts.setRoot(root);
  opts.setReduceFunction(reduce_function(tensor.scalar_type(), op));
  opts.setTag(tag);
  opts.setTimeout(timeout_);
  gloo::reduce(opts);
}

void GlooTransport::all_gather(const at::Tensor& input, at::Tensor& output, uint32_t tag) {
  gloo::AllgatherOptions opts(context_);
  with_element_type(input, [&](auto* data) {
    opts.setInput(data, input.numel());
    opts.setOutput(same_type(output, data), output.numel());
  });
  opts.setTag(tag);
  opts.setTimeout(timeout_);
  gloo::allgather(opts);
}

void GlooTransport::barrier(uint32_t tag) {
  gloo::BarrierOptions opts(context_);
  opts.setTag(tag);
  opts.setTimeout(timeout_);
  gloo::barrier(opts);
}

void GlooTransport::all_gather_bytes(const void* input, void* output, size_t bytes, uint32_t tag) {
  gloo::AllgatherOptions opts(context_);
  opts.setInput(static_cast<char*>(const_cast<void*>(input)), bytes);
  opts.setOutput(static_cast<char*>(output), bytes * size());
  opts.setTag(tag);
  opts.setTimeout(timeout_);
  gloo::allgather(opts);
}

void GlooTransport::exchange_with_peer(const void* send, size_t send_bytes, void* receive, size_t receive_bytes,
                                       uint32_t tag) {
  // A slot of no gloo collective's prefix (gloo/types.h has 0x01 to 0x08).
  constexpr uint8_t kPairSlotPrefix = 0x7e;
  const uint64_t slot = gloo::Slot::build(kPairSlotPrefix, tag);
  const int peer = 1 - rank();
  // Sizes mirror each other: what one rank sends, the other receives.
  std::unique_ptr<gloo::transport::UnboundBuffer> in, out;
  if (receive_bytes > 0) {
    in = context_->createUnboundBuffer(receive, receive_bytes);
    in->recv(peer, slot);
  }
  if (send_bytes > 0) {
    out = context_->createUnboundBuffer(const_cast<void*>(send), send_bytes);
    out->send(peer, slot);
  }
  if (in && !in->waitRecv(timeout_)) {
    throw Error("lockstep: gloo: receiving from rank " + std::to_string(peer) + " was aborted");
  }
  if (out && !out->waitSend(timeout_)) {
    throw Error("lockstep: gloo: sending to rank " + std::to_string(peer) + " was aborted");
  }
}

void GlooTransport::abort(const std::string&) { shut_down(sockets_); }

}  // namespace lockstep
