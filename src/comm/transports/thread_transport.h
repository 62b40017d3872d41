#pragma once

#include <memory>
#include <vector>

#include "comm/transports/shm_meeting.h"
#include "comm/transports/transport.h"

namespace lockstep {

/// Where the replica threads of one group meet: the meeting, and the address of each rank's
/// data for the call in progress.
class ThreadMeetingPlace {
 public:
  explicit ThreadMeetingPlace(int size);
  ~ThreadMeetingPlace();
  ThreadMeetingPlace(const ThreadMeetingPlace&) = delete;
  ThreadMeetingPlace& operator=(const ThreadMeetingPlace&) = delete;

  void* meeting_memory() const { return meeting_memory_; }
  /// Written by its own rank before a meeting, used by the others after it.
  std::vector<char*>& published() { return published_; }

 private:
  void* meeting_memory_;
  std::vector<char*> published_;
};

/// Collectives between threads of one process (the replicas of run_replicas). Every rank's
/// tensors are in the same address space, so there is nothing to copy in: each rank
/// publishes where its data is, meets the others, and reads theirs directly. all_reduce
/// splits the tensor into one slice per rank, which that rank reduces from every tensor and
/// writes into every tensor; a second meeting says that all slices are done.
///
/// The meeting is ShmMeeting's, so waiting, mismatched calls (CallsDiffer) and deadlines
/// work as between processes; a replica that failed or returned is named at once.
class ThreadTransport : public HostTransport {
 public:
  /// `group_ranks[r]` is how errors name rank r; `absence` says why a rank will not come.
  ThreadTransport(std::shared_ptr<ThreadMeetingPlace> place, int rank, int size, std::chrono::milliseconds timeout,
                  std::vector<int> group_ranks, ShmMeeting::Absence absence);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "threads"; }
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

 private:
  /// Publishes `data` and meets: afterwards, peer(r) is rank r's. Read-only data is never
  /// written through its address.
  void publish(const void* data, uint32_t tag);
  char* peer(int r) const { return place_->published()[r]; }
  /// Each rank reduces its slice of the `count` elements every rank published, and writes
  /// it into rank `into`'s data, or where `into` is -1 into every rank's, or with `owners`
  /// into each element's owners'.
  void reduce_slices(size_t count, at::ScalarType dtype, ReduceOp op, int into,
                     const std::vector<OwnedRange>* owners = nullptr);
  void meet(uint32_t tag);

  std::shared_ptr<ThreadMeetingPlace> place_;
  ShmMeeting meeting_;
  const int rank_;
  const int size_;
  uint64_t phase_ = 0;
  ShmMeeting::Deadline deadline_;
  std::vector<const void*> inputs_;  // one per rank, for the reduction kernels
};

}  // namespace lockstep
