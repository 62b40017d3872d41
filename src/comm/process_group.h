#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/world.h"
#include "lockstep/comm/process_group.h"

namespace lockstep::detail {

/// One process group as this rank sees it.
struct GroupState : std::enable_shared_from_this<GroupState> {
  std::shared_ptr<World> world;
  std::vector<int> world_ranks;  // the members, in group rank order
  int rank = -1;                 // in the group; -1 when not a member
  std::string name;              // unique among the world's groups, the same on every rank
  std::unique_ptr<Communicator> communicator;  // null when not a member
  int sub_groups_made = 0;       // names the next sub-group
};

/// The default group's state; throws an Error saying to call init() when there is none.
GroupState& default_group_state();

/// Every group of the current init() still in use (new_group adds them; shutdown ends them).
void remember_group(const std::shared_ptr<GroupState>& group);

}  // namespace lockstep::detail

namespace lockstep {

/// The communicator of `group`; throws an Error naming the call when this rank is not a member.
Communicator& communicator_of(const ProcessGroup& group, const char* call);

}  // namespace lockstep
