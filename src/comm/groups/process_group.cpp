#include "comm/groups/process_group.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "comm/groups/connect_group.h"
#include "lockstep/error.h"

namespace lockstep {
namespace {

constexpr size_t kGatherRecordBytes = 256;

// Small strings from every rank of `parent`, through the parent's own transport, indexed
// by world rank.
std::vector<std::string> gather_over(detail::GroupState& parent, const std::string& mine) {
  const int n = static_cast<int>(parent.world_ranks.size());
  std::vector<char> record(kGatherRecordBytes, 0);
  std::memcpy(record.data(), mine.data(), std::min(mine.size(), kGatherRecordBytes - 1));
  std::vector<char> all(kGatherRecordBytes * n);
  parent.communicator->host_transport().all_gather_bytes(record.data(), all.data(), kGatherRecordBytes,
                                                         tag_of(ReservedTag::GatherOverParent));
  std::vector<std::string> by_world_rank(parent.world->spec().world_size);
  for (int r = 0; r < n; ++r) {
    by_world_rank[parent.world_ranks[r]] = std::string(all.data() + r * kGatherRecordBytes);
  }
  return by_world_rank;
}

std::string list(const std::vector<int>& ranks) {
  std::string text;
  for (int r : ranks) text += (text.empty() ? "" : ", ") + std::to_string(r);
  return "[" + text + "]";
}

}  // namespace

namespace detail {

std::shared_ptr<GroupState> make_world_group(std::shared_ptr<World> world) {
  auto group = std::make_shared<GroupState>();
  const WorldSpec& spec = world->spec();
  group->world = std::move(world);
  group->name = "world";
  group->rank = spec.rank;
  for (int r = 0; r < spec.world_size; ++r) group->world_ranks.push_back(r);
  World& joined = *group->world;
  auto transports = connect_group(joined, group->world_ranks, group->name,
                                  [&](const std::string& mine) { return joined.gather("world/gather", mine); });
  group->communicator = std::make_unique<Communicator>(std::move(transports), spec.timeout, spec.debug);
  group->communicator->name_for_timeline(spec.rank, group->name);
  return group;
}

}  // namespace detail

ProcessGroup::ProcessGroup(std::shared_ptr<detail::GroupState> state) : state_(std::move(state)) {}

detail::GroupState& detail::state_of(const ProcessGroup& group) {
  return group.state_ ? *group.state_ : default_group_state();
}

int ProcessGroup::rank() const { return detail::state_of(*this).rank; }

int ProcessGroup::size() const { return static_cast<int>(detail::state_of(*this).world_ranks.size()); }

std::vector<int> ProcessGroup::ranks() const { return detail::state_of(*this).world_ranks; }

std::string ProcessGroup::transport() const {
  const auto& s = detail::state_of(*this);
  return s.communicator ? s.communicator->transport_name() : "none (not a member)";
}

Communicator& communicator_of(const ProcessGroup& group, const char* call) {
  detail::GroupState& state = detail::state_of(group);
  if (!state.communicator) {
    throw Error(std::string("lockstep::") + call + ": rank " + std::to_string(state.world->spec().rank) +
                " is not a member of the group of ranks " + list(state.world_ranks));
  }
  return *state.communicator;
}

ProcessGroup new_group(const std::vector<int>& ranks, const ProcessGroup& parent) {
  Communicator& parent_communicator = communicator_of(parent, "new_group");
  detail::GroupState& from = detail::state_of(parent);
  const int parent_size = static_cast<int>(from.world_ranks.size());
  if (ranks.empty()) throw Error("lockstep::new_group: the list of ranks is empty");
  std::set<int> seen;
  for (int r : ranks) {
    if (r < 0 || r >= parent_size) {
      throw Error("lockstep::new_group: rank " + std::to_string(r) +
                  " is not in the parent "
                  "group, whose ranks are 0.." +
                  std::to_string(parent_size - 1));
    }
    if (!seen.insert(r).second) {
      throw Error("lockstep::new_group: rank " + std::to_string(r) + " appears twice in " + list(ranks));
    }
  }
  auto group = std::make_shared<detail::GroupState>();
  group->world = from.world;
  for (int r : ranks) group->world_ranks.push_back(from.world_ranks[r]);
  const auto me = std::find(ranks.begin(), ranks.end(), from.rank);
  group->rank = me == ranks.end() ? -1 : static_cast<int>(me - ranks.begin());
  // Runs in the parent's turn, so that its gather and the backend's connections happen in
  // the same order as the parent's collectives on every rank.
  parent_communicator.run_in_call_order([&] {
    group->name = from.name + "/" + std::to_string(from.sub_groups_made++);
    auto transports = connect_group(*group->world, group->world_ranks, group->name,
                                    [&](const std::string& mine) { return gather_over(from, mine); });
    if (transports.host) {
      const WorldSpec& spec = group->world->spec();
      group->communicator = std::make_unique<Communicator>(std::move(transports), spec.timeout, spec.debug);
      group->communicator->name_for_timeline(group->world_ranks[group->rank], group->name);
    }
  });
  detail::remember_group(group);
  return ProcessGroup(group);
}

uint64_t ProcessGroup::collectives_called() const {
  return communicator_of(*this, "ProcessGroup::collectives_called").collectives_called();
}

}  // namespace lockstep
