#pragma once

#include <memory>
#include <vector>

#include "comm/transports/transport.h"

namespace lockstep {

/// A group spread over several hosts: shared memory inside each host, the host backend (gloo or/// MPI) among one
/// leader per host (the host's first rank), then shared memory again to fan the result out. Only leaders touch the
/// network, once per collective.
class HierarchicalTransport : public HostTransport {
 public:
  /// Where each rank of the group sits: its host's index and its index among that host's
  /// ranks (0 is the leader).
  struct HostRank {
    int host;
    int local;
  };

  /// `leaders` connects the hosts' leaders and is null on other ranks; `backend_name` and
  /// `backend_checks_every_call` describe it on every rank.
  HierarchicalTransport(int rank, std::vector<HostRank> places, std::unique_ptr<HostTransport> local,
                        std::unique_ptr<HostTransport> leaders, std::string backend_name,
                        bool backend_checks_every_call);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(places_.size()); }
  std::string name() const override { return "shm+" + backend_name_; }
  /// Each host sums in rank order; the hosts' sums meet in the backend.
  bool sums_independent_of_layout() const override;

  void all_reduce(at::Tensor& tensor, ReduceOp op, uint32_t tag) override;
  void broadcast(at::Tensor& tensor, int root, uint32_t tag) override;
  void reduce(at::Tensor& tensor, int root, ReduceOp op, uint32_t tag) override;
  void all_gather(const at::Tensor& input, at::Tensor& output, uint32_t tag) override;
  void barrier(uint32_t tag) override;
  void all_gather_bytes(const void* input, void* output, size_t bytes, uint32_t tag) override;
  bool checks_every_call(const Call&) const override { return backend_checks_every_call_; }
  bool same_fingerprint_everywhere(uint64_t fingerprint) override;
  bool can_give_up() const override { return !leaders_ || leaders_->can_give_up(); }
  void abort(const std::string& why) override {
    local_->abort(why);
    if (leaders_) leaders_->abort(why);
  }

 private:
  bool is_leader() const { return places_[rank_].local == 0; }

  const int rank_;
  const std::vector<HostRank> places_;
  const std::unique_ptr<HostTransport> local_;
  const std::unique_ptr<HostTransport> leaders_;
  const std::string backend_name_;
  const bool backend_checks_every_call_;
};

}  // namespace lockstep
