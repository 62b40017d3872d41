#include "comm/groups/connect_group.h"

#include <algorithm>
#include <map>

#include "comm/transports/device_call.h"
#include "comm/transports/device_transports.h"
#include "comm/transports/hierarchical_transport.h"
#include "comm/transports/self_device_transport.h"
#include "comm/transports/self_transport.h"
#include "comm/transports/shm_transport.h"
#include "lockstep/error.h"

namespace lockstep {
namespace {

// The members grouped by host, hosts in the order their first member appears: the same
// plan on every rank.
struct Plan {
  std::vector<HierarchicalTransport::HostRank> places;  // per group rank
  std::vector<std::vector<int>> hosts;                  // group ranks on each host
};

Plan plan(const World& world, const std::vector<int>& members) {
  Plan plan;
  std::map<std::string, int> host_index;
  for (int g = 0; g < static_cast<int>(members.size()); ++g) {
    const std::string& host = world.hosts().at(members[g]);
    const auto found = host_index.emplace(host, static_cast<int>(plan.hosts.size()));
    if (found.second) plan.hosts.emplace_back();
    auto& on_host = plan.hosts[found.first->second];
    plan.places.push_back({found.first->second, static_cast<int>(on_host.size())});
    on_host.push_back(g);
  }
  return plan;
}

// This host's shared memory among the group's ranks on it, or a SelfTransport where it has
// one of them. Each host's first rank makes the segment; the others learn its name from the
// gather, or its error ("!" first), so that they fail with it instead of waiting. Every rank
// of the parent group gathers; one that is not a member gets null.
std::unique_ptr<HostTransport> connect_on_host(const WorldSpec& spec, const std::vector<int>& members, int rank,
                                               const Plan& p, const GatherOverParent& gather) {
  const HierarchicalTransport::HostRank place = rank >= 0 ? p.places[rank] : HierarchicalTransport::HostRank{-1, -1};
  const int local_size = rank >= 0 ? static_cast<int>(p.hosts[place.host].size()) : 0;
  std::optional<ShmSegment> segment;
  std::exception_ptr failed;
  std::string mine;
  if (local_size > 1 && place.local == 0) {
    try {
      remove_abandoned_segments();
      segment.emplace(ShmSegment::create(ShmTransport::segment_bytes(local_size)));
      mine = segment->name();
    } catch (const std::exception& e) {
      failed = std::current_exception();
      mine = std::string("!") + e.what();
    }
  }
  const auto names = gather(mine);
  if (failed) std::rethrow_exception(failed);
  if (rank < 0) return nullptr;
  if (local_size <= 1) return std::make_unique<SelfTransport>();

  const int leader = members[p.hosts[place.host][0]];
  const std::string& name = names.at(leader);
  if (!name.empty() && name[0] == '!') {
    throw Error("lockstep: rank " + std::to_string(leader) +
                ", the first on this host, could not "
                "make the group's shared memory: " +
                name.substr(1));
  }
  if (!segment) segment.emplace(ShmSegment::open(name, ShmTransport::segment_bytes(local_size)));
  return std::make_unique<ShmTransport>(std::move(*segment), place.local, local_size, spec.timeout,
                                        p.hosts[place.host]);
}

// What moves the group's host memory: the host backend, shared memory inside hosts, or both.
std::unique_ptr<HostTransport> connect_host_transport(World& world, const std::vector<int>& members,
                                                      const std::string& name, const GatherOverParent& gather) {
  const WorldSpec& spec = world.spec();
  const auto me = std::find(members.begin(), members.end(), spec.rank);
  const int rank = me == members.end() ? -1 : static_cast<int>(me - members.begin());
  const Plan p = plan(world, members);
  const bool shared_memory =
      spec.shared_memory && std::any_of(p.hosts.begin(), p.hosts.end(), [](const auto& h) { return h.size() > 1; });

  if (!shared_memory) {
    if (rank < 0) return nullptr;
    if (members.size() == 1) return std::make_unique<SelfTransport>();
    return world.connect_backend(members, name);
  }
  std::unique_ptr<HostTransport> local = connect_on_host(spec, members, rank, p, gather);
  if (rank < 0) return nullptr;
  // Shared memory has no store of its own: for device work that never finished, its ranks
  // report through the world's, so that the watchdog names calls that differ over NCCL on
  // one host as between hosts.
  const auto reported = [&](std::unique_ptr<HostTransport> transport) {
    if (auto store = world.failure_store(name)) {
      transport->report_device_failures_through(
          std::make_shared<FailureReports>(store, rank, static_cast<int>(members.size()), members));
    }
    return transport;
  };
  if (p.hosts.size() == 1) return reported(std::move(local));

  std::vector<int> leaders;
  for (const auto& host : p.hosts) leaders.push_back(members[host[0]]);
  std::unique_ptr<HostTransport> between_hosts;
  if (p.places[rank].local == 0) between_hosts = world.connect_backend(leaders, name + "/leaders");
  const bool backend_checks = spec.backend == Backend::Mpi;
  return reported(std::make_unique<HierarchicalTransport>(rank, p.places, std::move(local), std::move(between_hosts),
                                                          to_string(spec.backend), backend_checks));
}

}  // namespace

GroupTransports connect_group(World& world, const std::vector<int>& members, const std::string& name,
                              const GatherOverParent& gather) {
  GroupTransports transports;
  transports.host = connect_host_transport(world, members, name, gather);
  if (transports.host && members.size() > 1) {
    transports.devices = device_transports(*transports.host, world.spec().device_backend, world.spec().timeout);
  } else if (transports.host && built_with_cuda()) {
    // A group of one has no one to send to: its device tensors stay where they are.
    transports.devices.emplace(at::kCUDA, std::make_unique<SelfDeviceTransport>());
  }
  return transports;
}

}  // namespace lockstep
