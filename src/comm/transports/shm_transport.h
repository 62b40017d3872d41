#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "comm/transports/shm_meeting.h"
#include "comm/transports/shm_segment.h"
#include "comm/transports/transport.h"

namespace lockstep {

/// Collectives between ranks of one host through a shared-memory segment.
///
/// Each rank owns a slot in each of two halves of the segment; a collective copies its
/// tensor into its slot in pieces, meets the others, and reads theirs. Rounds alternate
/// halves, so a rank may refill its slot as soon as everyone has reached the previous
/// round: one meeting per round is all the synchronisation small messages need. Small
/// messages are reduced directly (every rank combines every slot); large ones are cut into
/// slices that all ranks reduce in parallel, then gathered.
///
/// Ranks that made different calls notice at the first meeting, before reading anything
/// (CallsDiffer); a rank that dies or stalls is named by ShmMeeting. Tensors made by
/// empty_shared skip the slots: every rank maps every rank's tensor.
class ShmTransport : public HostTransport {
 public:
  /// Size of the segment for `size` ranks.
  static size_t segment_bytes(int size);

  /// Meets every rank once the segment is mapped everywhere; the creator then unlinks its
  /// name. `group_ranks[r]` is how errors name local rank r.
  ShmTransport(ShmSegment segment, int rank, int size, std::chrono::milliseconds timeout, std::vector<int> group_ranks);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "shm"; }
  bool sums_independent_of_layout() const override { return true; }

  void all_reduce(at::Tensor& tensor, ReduceOp op, uint32_t tag) override;
  void broadcast(at::Tensor& tensor, int root, uint32_t tag) override;
  void reduce(at::Tensor& tensor, int root, ReduceOp op, uint32_t tag) override;
  void all_gather(const at::Tensor& input, at::Tensor& output, uint32_t tag) override;
  void reduce_scatter(const at::Tensor& input, at::Tensor& output, ReduceOp op, uint32_t tag) override;
  /// Each range's sum goes to its owner alone: the same sums as all_reduce, fewer copies.
  void reduce_to_owners(at::Tensor& tensor, const std::vector<OwnedRange>& ranges, ReduceOp op, uint32_t tag) override;
  void barrier(uint32_t tag) override;
  void all_gather_bytes(const void* input, void* output, size_t bytes, uint32_t tag) override;
  /// A tensor in a segment every local rank maps, rank r's in part r: all_reduce on it
  /// reads and writes the other ranks' tensors directly, with no copies through the slots.
  at::Tensor empty_shared(at::IntArrayRef sizes, at::ScalarType dtype, uint32_t tag) override;
  void abort(const std::string& why) override { meeting_.abort(why); }

 private:
  struct SharedBlock {
    ShmSegment segment;
    size_t part_bytes;
  };
  /// Where a tensor lies in a shared block: the block, and its offset in this rank's part.
  struct SharedLocation {
    std::shared_ptr<SharedBlock> block;
    size_t offset;
  };
  std::optional<SharedLocation> find_shared(const at::Tensor& tensor);
  /// all_reduce, or with `owners` reduce_to_owners.
  void reduce_for(at::Tensor& tensor, ReduceOp op, const std::vector<OwnedRange>* owners, uint32_t tag);
  /// Every rank reduces its slice of all ranks' tensors and writes it into all of them, or
  /// into the owners' of its elements.
  void all_reduce_shared(const SharedLocation& place, size_t count, at::ScalarType dtype, ReduceOp op,
                         const std::vector<OwnedRange>* owners, uint32_t tag);

  /// Reduces `data` across ranks; only ranks with `keep` write the result into it, and with
  /// `owners` only the elements they own or every rank does.
  void reduce_into(char* data, size_t count, at::ScalarType dtype, ReduceOp op, bool keep,
                   const std::vector<OwnedRange>* owners, uint32_t tag);
  void gather_bytes(const char* input, char* output, size_t bytes, uint32_t tag);
  /// This round's slot of rank `r`.
  char* slot(int r) const;
  void meet(uint32_t tag);
  void start_call();

  ShmSegment segment_;
  ShmMeeting meeting_;
  const int rank_;
  const int size_;
  char* slots_;
  uint64_t phase_ = 0;
  int half_ = 0;
  ShmMeeting::Deadline deadline_;
  std::vector<const void*> inputs_;                        // one per rank, for the reduction kernels
  std::vector<std::weak_ptr<SharedBlock>> shared_blocks_;  // alive while their tensors are
};

}  // namespace lockstep
