#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace lockstep {

class ProcessGroup;

namespace detail {
struct GroupState;
/// What a handle stands for (the default group's state when default-constructed): for
/// lockstep's own code, not part of the API.
GroupState& state_of(const ProcessGroup& group);
}  // namespace detail

/// A set of ranks that run collectives together, each group in its own order and on its
/// own background thread. A cheap handle: copies share the group. Default-constructed, it
/// stands for the default group that init() made (whichever init() is current).
class ProcessGroup {
 public:
  ProcessGroup() = default;
  explicit ProcessGroup(std::shared_ptr<detail::GroupState> state);

  /// This process's rank in the group, or -1 when it is not a member.
  int rank() const;
  int size() const;
  bool is_member() const { return rank() >= 0; }
  /// The members' ranks in the default group, in the order of their ranks in this one.
  std::vector<int> ranks() const;
  /// How the group's bytes travel: "shm" (shared memory), "gloo", "mpi", "shm+gloo" or
  /// "shm+mpi" (shared memory inside hosts, the backend between them), "threads" (replicas
  /// of one process), or "self" (one rank); then any device transport and the tensors it
  /// moves: ", nccl for cuda" (", self for cuda" in a group of one). CUDA tensors staged
  /// through host memory travel as the first part says.
  std::string transport() const;
  /// How many collectives this rank has called on the group so far: the sequence number
  /// of its next one (the timeline counts a step's collectives by it).
  uint64_t collectives_called() const;

 private:
  friend detail::GroupState& detail::state_of(const ProcessGroup& group);

  std::shared_ptr<detail::GroupState> state_;
};

/// Makes a sub-group of `ranks` (ranks of `parent`; their order gives the new ranks). It is
/// a collective over the parent: every rank of the parent calls it, in the same order
/// relative to its other collectives, with the same ranks. Ranks left out get a handle
/// whose rank() is -1 and on which collectives throw.
ProcessGroup new_group(const std::vector<int>& ranks, const ProcessGroup& parent = ProcessGroup());

}  // namespace lockstep
