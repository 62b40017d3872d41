#include "comm/transports/gloo_transport.h"

#include <cstdint>
#include <iomanip>
#include <sstream>

#include <ATen/ATen.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/reduce.h>

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
  throw Error("lockstep: gloo cannot move elements of " +
              std::to_string(tensor.element_size()) + " bytes");
}

template <typename T>
T* same_type(const at::Tensor& tensor, T*) {
  return static_cast<T*>(tensor.data_ptr());
}

// How long to wait for the other ranks' reports after a failure: they fail at about the
// same moment when they disagreed, and never report when they died.
constexpr std::chrono::milliseconds kReportGrace{2000};

std::string hex(uint64_t value) {
  std::ostringstream out;
  out << std::hex << std::setw(16) << std::setfill('0') << value;
  return out.str();
}

}  // namespace

GlooTransport::GlooTransport(std::shared_ptr<gloo::Context> context,
                             std::shared_ptr<gloo::rendezvous::Store> store,
                             std::chrono::milliseconds timeout, std::vector<int> group_ranks)
    : context_(std::move(context)),
      store_(std::move(store)),
      timeout_(timeout),
      group_ranks_(std::move(group_ranks)) {}

int GlooTransport::named(int context_rank) const {
  return group_ranks_.empty() ? context_rank : group_ranks_.at(context_rank);
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

void GlooTransport::all_gather_bytes(const void* input, void* output, size_t bytes,
                                        uint32_t tag) {
  gloo::AllgatherOptions opts(context_);
  opts.setInput(static_cast<char*>(const_cast<void*>(input)), bytes);
  opts.setOutput(static_cast<char*>(output), bytes * size());
  opts.setTag(tag);
  opts.setTimeout(timeout_);
  gloo::allgather(opts);
}

std::exception_ptr GlooTransport::explain_failure(const Call& call, const std::exception& failure,
                                                  std::chrono::steady_clock::duration elapsed,
                                                  std::chrono::milliseconds) {
  // The data path failed, but the store usually still works: tell the others what this
  // rank was doing and hear what they were doing.
  const std::string mine = hex(call.fingerprint()) + call.describe();
  const std::string key = "failure-";  // one per rank: a group fails only once
  try {
    store_->set(key + std::to_string(rank()), std::vector<char>(mine.begin(), mine.end()));
  } catch (const std::exception&) {
  }
  const auto deadline = std::chrono::steady_clock::now() + std::min(kReportGrace, timeout_);
  std::ostringstream others;
  bool disagree = false;
  for (int r = 0; r < size(); ++r) {
    if (r == rank()) continue;
    others << "\n  rank " << named(r) << ": ";
    try {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      store_->wait({key + std::to_string(r)}, std::max(left, std::chrono::milliseconds(1)));
      const auto report = store_->get(key + std::to_string(r));
      const std::string theirs(report.begin(), report.end());
      disagree = disagree || theirs.compare(0, 16, mine, 0, 16) != 0;
      others << "failed in " << theirs.substr(16);
    } catch (const std::exception&) {
      others << "no report (it died, is stuck outside lockstep, or is not at collective #"
             << call.seq << ")";
    }
  }
  const auto seconds = std::chrono::duration<double>(elapsed).count();
  std::ostringstream message;
  message << "lockstep: rank " << named(rank()) << ": " << call.describe() << " failed after "
          << std::fixed << std::setprecision(1) << seconds << " s: " << failure.what()
          << others.str();
  if (disagree) {
    message << "\nranks called different collectives; every rank must pass the same shapes, "
               "dtypes, ops and roots, in the same order";
    return std::make_exception_ptr(MismatchError(message.str()));
  }
  if (elapsed >= timeout_) return std::make_exception_ptr(TimeoutError(message.str()));
  return std::make_exception_ptr(Error(message.str()));
}

}  // namespace lockstep
