#include "comm/transports/thread_transport.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "comm/transports/owned_ranges.h"
#include "comm/transports/reduce_kernels.h"

namespace lockstep {
namespace {

constexpr size_t kLineBytes = 64;

}  // namespace

ThreadMeetingPlace::ThreadMeetingPlace(int size)
    : meeting_memory_(std::aligned_alloc(kLineBytes, round_up(ShmMeeting::bytes(size), kLineBytes))),
      published_(size, nullptr) {
  if (meeting_memory_ == nullptr) throw std::bad_alloc();
  std::memset(meeting_memory_, 0, ShmMeeting::bytes(size));
}

ThreadMeetingPlace::~ThreadMeetingPlace() { std::free(meeting_memory_); }

ThreadTransport::ThreadTransport(std::shared_ptr<ThreadMeetingPlace> place, int rank, int size,
                                 std::chrono::milliseconds timeout, std::vector<int> group_ranks,
                                 ShmMeeting::Absence absence)
    : place_(std::move(place)),
      meeting_(place_->meeting_memory(), rank, size, std::move(group_ranks), std::move(absence)),
      rank_(rank),
      size_(size),
      deadline_(timeout),
      inputs_(size) {}

void ThreadTransport::meet(uint32_t tag) { meeting_.meet(++phase_, tag, deadline_); }

void ThreadTransport::publish(const void* data, uint32_t tag) {
  deadline_.restart();
  place_->published()[rank_] = static_cast<char*>(const_cast<void*>(data));
  meet(tag);
}

void ThreadTransport::reduce_slices(size_t count, at::ScalarType dtype, ReduceOp op, int into,
                                    const std::vector<OwnedRange>* owners) {
  const ReduceManyFunction combine = reduce_many_function(dtype, op);
  const size_t element = c10::elementSize(dtype);
  // Only this rank touches this slice of any rank's data until the next meeting.
  const ElementRange mine = slice_of(rank_, size_, count, element);
  for_each_owned(owners, mine.begin, mine.end, [&](size_t begin, size_t end, int owner) {
    const size_t at = begin * element;
    for (int r = 0; r < size_; ++r) inputs_[r] = peer(r) + at;
    const int first = into >= 0 ? into : owner == kEveryRank ? rank_ : owner;
    combine(peer(first) + at, nullptr, inputs_.data(), size_, end - begin);
    for (int r = 0; r < size_ && into < 0 && owner == kEveryRank; ++r) {
      if (r != first) std::memcpy(peer(r) + at, peer(first) + at, (end - begin) * element);
    }
  });
}

void ThreadTransport::all_reduce(at::Tensor& tensor, ReduceOp op, uint32_t tag) {
  publish(tensor.data_ptr(), tag);
  reduce_slices(tensor.numel(), tensor.scalar_type(), op, /*into=*/-1);
  meet(tag);  // every slice is in every tensor
}

void ThreadTransport::reduce_to_owners(at::Tensor& tensor, const std::vector<OwnedRange>& ranges, ReduceOp op,
                                       uint32_t tag) {
  publish(tensor.data_ptr(), tag);
  reduce_slices(tensor.numel(), tensor.scalar_type(), op, /*into=*/-1, &ranges);
  meet(tag);  // every slice is in the tensors that need it
}

void ThreadTransport::reduce(at::Tensor& tensor, int root, ReduceOp op, uint32_t tag) {
  publish(tensor.data_ptr(), tag);
  reduce_slices(tensor.numel(), tensor.scalar_type(), op, root);
  meet(tag);
}

void ThreadTransport::broadcast(at::Tensor& tensor, int root, uint32_t tag) {
  publish(tensor.data_ptr(), tag);
  if (rank_ != root) std::memcpy(tensor.data_ptr(), peer(root), tensor.nbytes());
  meet(tag);  // the root's tensor may change again
}

void ThreadTransport::all_gather(const at::Tensor& input, at::Tensor& output, uint32_t tag) {
  all_gather_bytes(input.data_ptr(), output.data_ptr(), input.nbytes(), tag);
}

void ThreadTransport::all_gather_bytes(const void* input, void* output, size_t bytes, uint32_t tag) {
  publish(input, tag);
  for (int r = 0; r < size_; ++r) std::memcpy(static_cast<char*>(output) + r * bytes, peer(r), bytes);
  meet(tag);
}

void ThreadTransport::reduce_scatter(const at::Tensor& input, at::Tensor& output, ReduceOp op, uint32_t tag) {
  publish(input.data_ptr(), tag);
  const size_t part_bytes = output.nbytes();
  for (int r = 0; r < size_; ++r) inputs_[r] = peer(r) + rank_ * part_bytes;
  reduce_many_function(input.scalar_type(), op)(output.data_ptr(), nullptr, inputs_.data(), size_, output.numel());
  meet(tag);
}

void ThreadTransport::barrier(uint32_t tag) {
  deadline_.restart();
  meet(tag);
}

}  // namespace lockstep
