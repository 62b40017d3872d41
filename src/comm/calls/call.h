#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

#include "lockstep/comm/types.h"

namespace lockstep {

enum class Collective {
  AllReduce,
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  ReduceToOwners,
  Barrier,
  NewGroup,
  EmptyShared
};

std::string to_string(Collective kind);

/// The names PyTorch users know (float32, int64, uint8), not c10's (Float, Long, Byte).
std::string dtype_name(at::ScalarType dtype);

/// One collective as one rank called it. Ranks that call "the same" collective must build
/// equal Calls; the fingerprint and tag let backends and checks compare them cheaply.
struct Call {
  Collective kind;
  ReduceOp op = ReduceOp::Sum;
  int root = 0;
  // Inline storage: a Call is made for every collective, and small ones cost about as much
  // as a few heap allocations.
  c10::SmallVector<at::ScalarType, 2> dtypes;
  c10::SmallVector<c10::SmallVector<int64_t, 4>, 2> shapes;
  /// Where the tensors are (one device per call): ranks must agree on its type, not its
  /// index, since each rank may have a GPU of its own.
  at::DeviceType device_type = at::kCPU;
  uint64_t seq = 0;     // how many collectives this rank called before this one
  uint64_t layout = 0;  // reduce_to_owners: a hash of its ranges, which ranks must agree on

  Call(Collective kind, const std::vector<at::Tensor>& tensors, ReduceOp op = ReduceOp::Sum, int root = 0);

  /// e.g. "all_reduce #3 (float32[4, 3], Sum)": what an error message shows.
  std::string describe() const;
  /// Hash of everything ranks must agree on, sequence number included.
  uint64_t fingerprint() const;
  /// Fingerprint folded to a gloo tag below kFirstReservedTag, with room for the tags
  /// counting up from it (one per dtype of a packed call): calls that differ across ranks
  /// use different tags, so their messages never meet (they time out instead of corrupting).
  uint32_t tag() const;
};

/// Tags of the exchanges that are not collectives a user called: Call::tag() never
/// produces them.
enum class ReservedTag : uint32_t {
  GatherOverParent = 0x40000000u,  // new_group's small exchange over the parent group
  ConnectDevice = 0x40000010u,     // a device transport connecting (and the tag after it)
  HowCallsDiffer = 0x80000000u,    // | the sequence number of the call being compared
};
constexpr uint32_t kFirstReservedTag = 0x40000000u;

inline uint32_t tag_of(ReservedTag reserved) { return static_cast<uint32_t>(reserved); }

}  // namespace lockstep
