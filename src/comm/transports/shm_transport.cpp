#include "comm/transports/shm_transport.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include <ATen/ATen.h>

#include "comm/transports/owned_ranges.h"
#include "comm/transports/reduce_kernels.h"

namespace lockstep {
namespace {

// A slot per rank per half. Small enough that a round's slots stay in the caches, large
// enough that meetings cost little next to the copies (bench/allreduce).
constexpr size_t kSlotBytes = 256 << 10;
// Up to this size every rank reduces the whole message itself: one meeting instead of two.
constexpr size_t kDirectBytes = 32 << 10;
constexpr size_t kAlign = 4096;

}  // namespace

size_t ShmTransport::segment_bytes(int size) {
  return round_up(ShmMeeting::bytes(size), kAlign) + 2 * size * kSlotBytes;
}

ShmTransport::ShmTransport(ShmSegment segment, int rank, int size, std::chrono::milliseconds timeout,
                           std::vector<int> group_ranks)
    : segment_(std::move(segment)),
      meeting_(segment_.data(), rank, size, std::move(group_ranks)),
      rank_(rank),
      size_(size),
      deadline_(timeout),
      slots_(static_cast<char*>(segment_.data()) + round_up(ShmMeeting::bytes(size), kAlign)),
      inputs_(size) {
  start_call();
  meet(/*tag=*/0);  // everyone has the segment mapped: its name can go
  segment_.unlink();
}

char* ShmTransport::slot(int r) const { return slots_ + (half_ * size_ + r) * kSlotBytes; }

void ShmTransport::start_call() { deadline_.restart(); }

void ShmTransport::meet(uint32_t tag) { meeting_.meet(++phase_, tag, deadline_); }

void ShmTransport::all_reduce(at::Tensor& tensor, ReduceOp op, uint32_t tag) {
  reduce_for(tensor, op, /*owners=*/nullptr, tag);
}

void ShmTransport::reduce_to_owners(at::Tensor& tensor, const std::vector<OwnedRange>& ranges, ReduceOp op,
                                    uint32_t tag) {
  reduce_for(tensor, op, &ranges, tag);
}

void ShmTransport::reduce_for(at::Tensor& tensor, ReduceOp op, const std::vector<OwnedRange>* owners, uint32_t tag) {
  start_call();
  if (tensor.nbytes() > kDirectBytes) {
    if (const auto place = find_shared(tensor)) {
      return all_reduce_shared(*place, tensor.numel(), tensor.scalar_type(), op, owners, tag);
    }
  }
  reduce_into(static_cast<char*>(tensor.data_ptr()), tensor.numel(), tensor.scalar_type(), op,
              /*keep=*/true, owners, tag);
}

void ShmTransport::reduce(at::Tensor& tensor, int root, ReduceOp op, uint32_t tag) {
  start_call();
  reduce_into(static_cast<char*>(tensor.data_ptr()), tensor.numel(), tensor.scalar_type(), op,
              /*keep=*/rank_ == root, /*owners=*/nullptr, tag);
}

void ShmTransport::reduce_into(char* data, size_t count, at::ScalarType dtype, ReduceOp op, bool keep,
                               const std::vector<OwnedRange>* owners, uint32_t tag) {
  const ReduceManyFunction combine = reduce_many_function(dtype, op);
  const size_t element = c10::elementSize(dtype);
  if (count * element <= kDirectBytes) {
    std::memcpy(slot(rank_), data, count * element);
    meet(tag);
    for_each_owned(owners, 0, count, [&](size_t begin, size_t end, int owner) {
      if (!keep || !needs(rank_, owner)) return;
      for (int r = 0; r < size_; ++r) inputs_[r] = slot(r) + begin * element;
      combine(data + begin * element, nullptr, inputs_.data(), size_, end - begin);
    });
    half_ ^= 1;
    return;
  }
  const size_t per_round = kSlotBytes / element;
  for (size_t offset = 0; offset < count; offset += per_round) {
    const size_t n = std::min(per_round, count - offset);
    char* piece = data + offset * element;
    auto part = [&](int r) { return slice_of(r, size_, n, element); };
    // Over part `p` of this round's piece: `segment(begin, end, owner)`, relative to the piece.
    auto for_each_owned_in = [&](const ElementRange& p, auto&& segment) {
      for_each_owned(owners, offset + p.begin, offset + p.end,
                     [&](size_t begin, size_t end, int owner) { segment(begin - offset, end - offset, owner); });
    };
    // The others need every part of this rank's data but the one it reduces itself.
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      const ElementRange p = part(r);
      std::memcpy(slot(rank_) + p.begin * element, piece + p.begin * element, (p.end - p.begin) * element);
    }
    meet(tag);
    // This rank's part: its own data straight from the tensor, the others' from their slots;
    // the result goes into this rank's slot for the others, and into the tensor where this
    // rank needs it.
    for_each_owned_in(part(rank_), [&](size_t begin, size_t end, int owner) {
      for (int r = 0; r < size_; ++r) inputs_[r] = (r == rank_ ? piece : slot(r)) + begin * element;
      char* kept = keep && needs(rank_, owner) ? piece + begin * element : nullptr;
      combine(slot(rank_) + begin * element, kept, inputs_.data(), size_, end - begin);
    });
    meet(tag);
    for (int r = 0; r < size_ && keep; ++r) {
      if (r == rank_) continue;
      for_each_owned_in(part(r), [&](size_t begin, size_t end, int owner) {
        if (!needs(rank_, owner)) return;
        std::memcpy(piece + begin * element, slot(r) + begin * element, (end - begin) * element);
      });
    }
    half_ ^= 1;
  }
}

at::Tensor ShmTransport::empty_shared(at::IntArrayRef sizes, at::ScalarType dtype, uint32_t tag) {
  start_call();
  const size_t bytes = c10::multiply_integers(sizes) * c10::elementSize(dtype);
  const size_t part = round_up(std::max<size_t>(bytes, 1), kAlign);
  // Local rank 0 makes the segment and passes its name (empty if it failed) through its slot.
  std::optional<ShmSegment> segment;
  char name[256] = {};
  if (rank_ == 0) {
    // A full /dev/shm (a container's 64 MB) costs speed, not the job; and shared tensors take
    // at most half of what is free, so that other groups and jobs on the host find room.
    static std::once_flag warned;
    auto fall_back = [&](const std::string& why) {
      std::call_once(warned, [&] {
        std::fprintf(stderr,
                     "%s; shared tensors that do not fit are ordinary ones, reduced "
                     "through copies\n",
                     why.c_str());
      });
    };
    const size_t free_bytes = shm_free_bytes();
    if (part * size_ > free_bytes / 2) {
      fall_back("lockstep: a shared tensor of " + std::to_string(part * size_ >> 10) +
                " KiB "
                "would take more than half of the " +
                std::to_string(free_bytes >> 10) + " KiB free in /dev/shm (docker run --shm-size gives more)");
    } else {
      try {
        segment.emplace(ShmSegment::create(part * size_));
        std::strncpy(name, segment->name().c_str(), sizeof(name) - 1);
      } catch (const std::exception& e) {
        fall_back(e.what());
      }
    }
    std::memcpy(slot(0), name, sizeof(name));
  }
  meet(tag);
  if (rank_ != 0) std::memcpy(name, slot(0), sizeof(name));
  half_ ^= 1;
  if (name[0] == '\0') return at::empty(sizes, at::TensorOptions().dtype(dtype));
  if (!segment) segment.emplace(ShmSegment::open(name, part * size_));
  meet(tag);  // mapped everywhere: the name can go
  segment->unlink();
  auto block = std::make_shared<SharedBlock>(SharedBlock{std::move(*segment), part});
  shared_blocks_.push_back(block);
  char* mine = static_cast<char*>(block->segment.data()) + rank_ * part;
  return at::from_blob(
      mine, sizes, [block](void*) {}, at::TensorOptions().dtype(dtype));
}

std::optional<ShmTransport::SharedLocation> ShmTransport::find_shared(const at::Tensor& tensor) {
  const char* data = static_cast<const char*>(tensor.data_ptr());
  for (auto it = shared_blocks_.begin(); it != shared_blocks_.end();) {
    auto block = it->lock();
    if (!block) {
      it = shared_blocks_.erase(it);
      continue;
    }
    const char* mine = static_cast<const char*>(block->segment.data()) + rank_ * block->part_bytes;
    if (data >= mine && data + tensor.nbytes() <= mine + block->part_bytes) {
      return SharedLocation{block, static_cast<size_t>(data - mine)};
    }
    ++it;
  }
  return std::nullopt;
}

void ShmTransport::all_reduce_shared(const SharedLocation& place, size_t count, at::ScalarType dtype, ReduceOp op,
                                     const std::vector<OwnedRange>* owners, uint32_t tag) {
  const ReduceManyFunction combine = reduce_many_function(dtype, op);
  const size_t element = c10::elementSize(dtype);
  char* first = static_cast<char*>(place.block->segment.data()) + place.offset;
  auto tensor_of = [&](int r) { return first + r * place.block->part_bytes; };
  // The meeting's tag also says where the tensor lies: every rank must pass the same place,
  // and ranks passing an ordinary tensor take the other path.
  const uint32_t shared_tag = tag ^ 0x5a5a5a5au ^ static_cast<uint32_t>(place.offset * 2654435761u);
  meet(shared_tag);  // every rank's tensor holds its input
  // This rank's slice of every tensor is its alone until the next meeting: it reduces it in
  // pieces that stay in cache while they are copied into the others' tensors; an owned
  // piece's sum goes straight into its owner's tensor, and nowhere else.
  const ElementRange mine = slice_of(rank_, size_, count, element);
  const size_t per_piece = kSlotBytes / element;
  for (size_t begin = mine.begin; begin < mine.end; begin += per_piece) {
    for_each_owned(owners, begin, std::min(begin + per_piece, mine.end), [&](size_t from, size_t to, int owner) {
      const size_t at = from * element;
      const size_t bytes = (to - from) * element;
      for (int r = 0; r < size_; ++r) inputs_[r] = tensor_of(r) + at;
      const int into = owner == kEveryRank ? rank_ : owner;
      combine(tensor_of(into) + at, nullptr, inputs_.data(), size_, to - from);
      for (int r = 0; r < size_ && owner == kEveryRank; ++r) {
        if (r != rank_) std::memcpy(tensor_of(r) + at, tensor_of(rank_) + at, bytes);
      }
    });
  }
  meet(shared_tag);  // every slice is in every tensor that needs it
}

void ShmTransport::broadcast(at::Tensor& tensor, int root, uint32_t tag) {
  start_call();
  char* data = static_cast<char*>(tensor.data_ptr());
  const size_t bytes = tensor.nbytes();
  for (size_t offset = 0; offset < bytes; offset += kSlotBytes) {
    const size_t n = std::min(kSlotBytes, bytes - offset);
    if (rank_ == root) std::memcpy(slot(root), data + offset, n);
    meet(tag);
    if (rank_ != root) std::memcpy(data + offset, slot(root), n);
    half_ ^= 1;
  }
}

void ShmTransport::all_gather(const at::Tensor& input, at::Tensor& output, uint32_t tag) {
  start_call();
  gather_bytes(static_cast<const char*>(input.data_ptr()), static_cast<char*>(output.data_ptr()), input.nbytes(), tag);
}

void ShmTransport::all_gather_bytes(const void* input, void* output, size_t bytes, uint32_t tag) {
  start_call();
  gather_bytes(static_cast<const char*>(input), static_cast<char*>(output), bytes, tag);
}

void ShmTransport::gather_bytes(const char* input, char* output, size_t bytes, uint32_t tag) {
  for (size_t offset = 0; offset < bytes; offset += kSlotBytes) {
    const size_t n = std::min(kSlotBytes, bytes - offset);
    std::memcpy(slot(rank_), input + offset, n);
    meet(tag);
    for (int r = 0; r < size_; ++r) std::memcpy(output + r * bytes + offset, slot(r), n);
    half_ ^= 1;
  }
}

void ShmTransport::reduce_scatter(const at::Tensor& input, at::Tensor& output, ReduceOp op, uint32_t tag) {
  start_call();
  const ReduceManyFunction combine = reduce_many_function(input.scalar_type(), op);
  const size_t element = input.element_size();
  const size_t count = output.numel();  // of each rank's part
  const size_t per_round = kSlotBytes / element / size_;
  const char* in = static_cast<const char*>(input.data_ptr());
  char* out = static_cast<char*>(output.data_ptr());
  for (size_t offset = 0; offset < count; offset += per_round) {
    const size_t n = std::min(per_round, count - offset);
    // This rank's slot holds, for each rank r, the piece of r's part that r reduces.
    for (int r = 0; r < size_; ++r) {
      std::memcpy(slot(rank_) + r * n * element, in + (r * count + offset) * element, n * element);
    }
    meet(tag);
    for (int r = 0; r < size_; ++r) inputs_[r] = slot(r) + rank_ * n * element;
    combine(out + offset * element, nullptr, inputs_.data(), size_, n);
    half_ ^= 1;
  }
}

void ShmTransport::barrier(uint32_t tag) {
  start_call();
  meet(tag);
}

}  // namespace lockstep
