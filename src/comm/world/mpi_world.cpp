#include <mpi.h>

#include <algorithm>
#include <cstring>

#include "comm/transports/mpi_transport.h"
#include "comm/world/world.h"
#include "lockstep/error.h"

namespace lockstep {
namespace {

constexpr int kRecordBytes = 512;

// The ranks mpirun started; the host backend is MPI, one communicator per group.
class MpiWorld : public World {
 public:
  MpiWorld(const WorldSpec& spec, MPI_Comm world, std::vector<std::string> hosts)
      : World(spec, std::move(hosts)), world_(world) {}
  ~MpiWorld() override { MPI_Comm_free(&world_); }

  std::vector<std::string> gather(const std::string&, const std::string& mine) override {
    return gather_over(world_, spec().world_size, mine);
  }

  std::unique_ptr<HostTransport> connect_backend(const std::vector<int>& ranks, const std::string& name) override {
    MPI_Group world_group, members;
    MPI_Comm_group(world_, &world_group);
    MPI_Group_incl(world_group, static_cast<int>(ranks.size()), ranks.data(), &members);
    MPI_Comm comm;
    // Collective over the members only, as new_group's sub-groups need. The tag tells apart
    // groups being made at once.
    const int tag = static_cast<int>(std::hash<std::string>()(name) & 0x3fff);
    check_mpi(MPI_Comm_create_group(world_, members, tag, &comm), "MPI_Comm_create_group");
    MPI_Group_free(&members);
    MPI_Group_free(&world_group);
    return std::make_unique<MpiTransport>(comm);
  }

  static std::vector<std::string> gather_over(MPI_Comm comm, int size, const std::string& mine) {
    std::vector<char> record(kRecordBytes, 0);
    std::memcpy(record.data(), mine.data(), std::min<size_t>(mine.size(), kRecordBytes - 1));
    std::vector<char> all(static_cast<size_t>(kRecordBytes) * size);
    check_mpi(MPI_Allgather(record.data(), kRecordBytes, MPI_CHAR, all.data(), kRecordBytes, MPI_CHAR, comm),
              "MPI_Allgather");
    std::vector<std::string> strings;
    for (int r = 0; r < size; ++r) strings.emplace_back(all.data() + r * kRecordBytes);
    return strings;
  }

 private:
  MPI_Comm world_;
};

}  // namespace

std::shared_ptr<World> join_mpi_world(const WorldSpec& spec) {
  start_mpi();
  MPI_Comm world;
  MPI_Comm_dup(MPI_COMM_WORLD, &world);
  int rank = 0, size = 1;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  if (size != spec.world_size || rank != spec.rank) {
    MPI_Comm_free(&world);
    throw ConfigError("lockstep: MPI reports rank " + std::to_string(rank) + " of " + std::to_string(size) +
                      " but the environment says rank " + std::to_string(spec.rank) + " of " +
                      std::to_string(spec.world_size) + "; launch the mpi backend with `mpirun -n " +
                      std::to_string(spec.world_size) + "` (or `lockstep run --backend mpi`)");
  }
  auto hosts = MpiWorld::gather_over(world, size, host_identity(spec));
  return std::make_shared<MpiWorld>(spec, world, std::move(hosts));
}

}  // namespace lockstep
