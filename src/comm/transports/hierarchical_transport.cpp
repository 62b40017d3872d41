#include "comm/transports/hierarchical_transport.h"

#include <algorithm>
#include <cstring>

#include <ATen/ATen.h>

namespace lockstep {
namespace {

// Calls every rank makes alike, whatever the user's call: the tag must not depend on it.
constexpr uint32_t kFingerprintCheckTag = 0x7fffffffu;

}  // namespace

HierarchicalTransport::HierarchicalTransport(int rank, std::vector<HostRank> places,
                                             std::unique_ptr<HostTransport> local,
                                             std::unique_ptr<HostTransport> leaders, std::string backend_name,
                                             bool backend_checks_every_call)
    : rank_(rank),
      places_(std::move(places)),
      local_(std::move(local)),
      leaders_(std::move(leaders)),
      backend_name_(std::move(backend_name)),
      backend_checks_every_call_(backend_checks_every_call) {}

bool HierarchicalTransport::sums_independent_of_layout() const {
  const auto hosts = std::count_if(places_.begin(), places_.end(), [](const HostRank& p) { return p.local == 0; });
  return local_->sums_independent_of_layout() && hosts <= 2;
}

void HierarchicalTransport::all_reduce(at::Tensor& tensor, ReduceOp op, uint32_t tag) {
  local_->reduce(tensor, 0, op, tag);
  if (is_leader()) leaders_->all_reduce(tensor, op, tag);
  local_->broadcast(tensor, 0, tag);
}

void HierarchicalTransport::broadcast(at::Tensor& tensor, int root, uint32_t tag) {
  const HostRank from = places_[root];
  const bool on_roots_host = places_[rank_].host == from.host;
  if (on_roots_host) local_->broadcast(tensor, from.local, tag);
  if (is_leader()) leaders_->broadcast(tensor, from.host, tag);
  if (!on_roots_host) local_->broadcast(tensor, 0, tag);
}

void HierarchicalTransport::reduce(at::Tensor& tensor, int root, ReduceOp op, uint32_t tag) {
  // Reduced in a scratch copy: ranks other than the root keep their tensor as it was.
  const HostRank to = places_[root];
  at::Tensor scratch = tensor.clone();
  local_->reduce(scratch, 0, op, tag);
  if (is_leader()) leaders_->reduce(scratch, to.host, op, tag);
  if (places_[rank_].host == to.host && to.local != 0) local_->broadcast(scratch, 0, tag);
  if (rank_ == root) tensor.copy_(scratch);
}

void HierarchicalTransport::all_gather(const at::Tensor& input, at::Tensor& output, uint32_t tag) {
  all_gather_bytes(input.data_ptr(), output.data_ptr(), input.nbytes(), tag);
}

void HierarchicalTransport::all_gather_bytes(const void* input, void* output, size_t bytes, uint32_t tag) {
  // Hosts may hold different numbers of ranks, in any order, which the backends' gathers do
  // not allow. Every rank puts its bytes in its own row of zeros, and a byte-wise Max of the
  // rows, exact for any content, is the gathered result.
  at::Tensor rows = at::zeros({size(), static_cast<int64_t>(bytes)}, at::kByte);
  std::memcpy(rows[rank_].data_ptr(), input, bytes);
  all_reduce(rows, ReduceOp::Max, tag);
  std::memcpy(output, rows.data_ptr(), rows.nbytes());
}

void HierarchicalTransport::barrier(uint32_t tag) {
  local_->barrier(tag);
  if (is_leader()) leaders_->barrier(tag);
  local_->barrier(tag);
}

bool HierarchicalTransport::same_fingerprint_everywhere(uint64_t fingerprint) {
  // max(f) and max(~f) = ~min(f) in one small call: equal everywhere iff max(f) == min(f).
  at::Tensor both = at::empty({2}, at::kLong);
  both[0] = static_cast<int64_t>(fingerprint);
  both[1] = static_cast<int64_t>(~fingerprint);
  all_reduce(both, ReduceOp::Max, kFingerprintCheckTag);
  return both[0].item<int64_t>() == ~both[1].item<int64_t>();
}

}  // namespace lockstep
