#pragma once

#include <sys/types.h>

#include <memory>
#include <set>
#include <vector>

#include <gloo/context.h>
#include <gloo/rendezvous/store.h>

#include "comm/transports/transport.h"

namespace lockstep {

/// Collectives over gloo's TCP transport. Every call's tag comes from its fingerprint, so
/// ranks that disagree never exchange bytes: they time out, then compare notes via the store
/// (FailureReports).
class GlooTransport : public HostTransport {
 public:
  /// `group_ranks[r]` is how errors name the context's rank r (its rank in the user's group;
  /// they differ when gloo connects only the leaders of a hierarchical group).
  /// `sockets`: those gloo opened to connect `context` (process_sockets.h), which abort()
  /// shuts down.
  GlooTransport(std::shared_ptr<gloo::Context> context, std::shared_ptr<gloo::rendezvous::Store> store,
                std::chrono::milliseconds timeout, std::vector<int> group_ranks = {}, std::set<ino_t> sockets = {});

  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }
  std::string name() const override { return "gloo"; }

  void all_reduce(at::Tensor& tensor, ReduceOp op, uint32_t tag) override;
  void broadcast(at::Tensor& tensor, int root, uint32_t tag) override;
  void reduce(at::Tensor& tensor, int root, ReduceOp op, uint32_t tag) override;
  void all_gather(const at::Tensor& input, at::Tensor& output, uint32_t tag) override;
  void barrier(uint32_t tag) override;
  void all_gather_bytes(const void* input, void* output, size_t bytes, uint32_t tag) override;
  void abort(const std::string& why) override;

 protected:
  bool exchanges_with_peer() const override { return true; }
  void exchange_with_peer(const void* send, size_t send_bytes, void* receive, size_t receive_bytes,
                          uint32_t tag) override;

 private:
  std::shared_ptr<gloo::Context> context_;
  std::chrono::milliseconds timeout_;
  std::set<ino_t> sockets_;
};

}  // namespace lockstep
