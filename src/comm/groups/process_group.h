#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/groups/communicator.h"
#include "comm/world/world.h"
#include "lockstep/comm/process_group.h"

namespace lockstep::detail {

/// One process group as this rank sees it.
struct GroupState : std::enable_shared_from_this<GroupState> {
  std::shared_ptr<World> world;
  std::vector<int> world_ranks;                // the members, in group rank order
  int rank = -1;                               // in the group; -1 when not a member
  std::string name;                            // unique among the world's groups, the same on every rank
  std::unique_ptr<Communicator> communicator;  // null when not a member
  int sub_groups_made = 0;                     // names the next sub-group
};

/// What a replica thread of run_replicas has in place of init()'s process-wide group: its
/// default group, the sub-groups it made (closed when it returns), and its random stream.
struct ReplicaContext {
  int index = 0;
  std::shared_ptr<GroupState> group;
  std::vector<std::weak_ptr<GroupState>> sub_groups;
  at::Tensor random_state;  // of its own default generator (with_replica_generator)
};

/// The default group of `world`: every rank, connected as connect_group chooses.
std::shared_ptr<GroupState> make_world_group(std::shared_ptr<World> world);

/// The replica this thread runs, or null outside run_replicas.
ReplicaContext* current_replica();

/// The default group's state: this thread's replica's, else init()'s. Throws an Error
/// saying to call init() when there is none.
GroupState& default_group_state();

/// Every group of the current init() or replica still in use (new_group adds them; shutdown,
/// or the replica's return, ends them).
void remember_group(const std::shared_ptr<GroupState>& group);

}  // namespace lockstep::detail

namespace lockstep {

/// The communicator of `group`; throws an Error naming the call when this rank is not a member.
Communicator& communicator_of(const ProcessGroup& group, const char* call);

}  // namespace lockstep
