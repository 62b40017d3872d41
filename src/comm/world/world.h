#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/world/environment.h"
#include "comm/transports/transport.h"

namespace lockstep {

/// What every process group of one init() shares: the settled spec, a way to connect the
/// host backend (gloo through the rendezvous store, or MPI) among any set of ranks, and which host
/// each rank is on.
class World {
 public:
  World(WorldSpec spec, std::vector<std::string> hosts) : spec_(std::move(spec)), hosts_(std::move(hosts)) {}
  virtual ~World() = default;

  const WorldSpec& spec() const { return spec_; }
  /// The identity of every rank's host: ranks with equal ones can share memory.
  const std::vector<std::string>& hosts() const { return hosts_; }
  /// This rank's place among its host's ranks, and their number, unless the spec gave them.
  int local_rank() const;
  int local_world_size() const;

  /// Small strings from every rank, indexed by rank; every rank calls it with the same key.
  virtual std::vector<std::string> gather(const std::string& key, const std::string& mine) = 0;
  /// Connects the host backend among `ranks` (world ranks, in the new group's order). Called by
  /// exactly those ranks, with the same `name`, which no other connection has used.
  virtual std::unique_ptr<HostTransport> connect_backend(const std::vector<int>& ranks, const std::string& name) = 0;
  /// Where the ranks of group `name` report failures to each other (FailureReports): a part
  /// of the world's store; null where the world has none (MPI, replicas).
  virtual std::shared_ptr<gloo::rendezvous::Store> failure_store(const std::string& /*name*/) { return nullptr; }

 private:
  WorldSpec spec_;
  std::vector<std::string> hosts_;
};

/// Meets the other ranks as `spec` says. Throws ConfigError for settings that cannot work
/// and TimeoutError when ranks do not all arrive in time.
std::shared_ptr<World> join_world(const WorldSpec& spec);

/// The MPI half of join_world (mpi_world.cpp).
std::shared_ptr<World> join_mpi_world(const WorldSpec& spec);

/// What identifies this host to the others: its name, boot, /dev/shm and pid namespace
/// (ranks can share memory and see each other's pids only when all agree), and the
/// launcher's node rank, if any.
std::string host_identity(const WorldSpec& spec);

}  // namespace lockstep
