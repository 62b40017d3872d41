#pragma once

#include <memory>

#include <gloo/context.h>
#include <gloo/rendezvous/store.h>

#include "comm/communicator.h"

namespace lockstep {

/// Collectives over gloo's TCP transport. Every call's tag comes from its fingerprint, so
/// ranks that disagree never exchange bytes: they time out, then compare notes via the store.
class GlooCommunicator : public Communicator {
 public:
  GlooCommunicator(std::shared_ptr<gloo::Context> context,
                   std::shared_ptr<gloo::rendezvous::Store> store,
                   std::chrono::milliseconds timeout, bool debug);
  ~GlooCommunicator() override;

  Backend backend() const override { return Backend::Gloo; }

 protected:
  void run_all_reduce(at::Tensor& tensor, ReduceOp op, uint32_t tag) override;
  void run_broadcast(at::Tensor& tensor, int root, uint32_t tag) override;
  void run_reduce(at::Tensor& tensor, int root, ReduceOp op, uint32_t tag) override;
  void run_all_gather(const at::Tensor& input, at::Tensor& output, uint32_t tag) override;
  void run_barrier(uint32_t tag) override;
  void all_gather_bytes(const void* input, void* output, size_t bytes, uint32_t tag) override;
  std::exception_ptr explain_failure(const Call& call, const std::exception& failure,
                                     std::chrono::steady_clock::duration elapsed) override;

 private:
  std::shared_ptr<gloo::Context> context_;
  std::shared_ptr<gloo::rendezvous::Store> store_;
};

}  // namespace lockstep
