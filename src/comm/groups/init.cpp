#include <csignal>
#include <cstdlib>
#include <iostream>
#include <mutex>

#include <mpi.h>

#include "comm/groups/call_observer.h"
#include "comm/transports/device_call.h"
#include "comm/world/environment.h"
#include "comm/groups/process_group.h"
#include "comm/groups/regroup.h"
#include "lockstep/error.h"
#include "lockstep/comm/init.h"

namespace lockstep {
namespace {

// The one process-group singleton (see STYLE.md): created by init(), ended by shutdown()
// or at exit. Sub-groups are remembered so that shutdown can end them too.
std::mutex group_mutex;
std::shared_ptr<detail::GroupState> world_group;
std::vector<std::weak_ptr<detail::GroupState>> sub_groups;
int world_generation = 0;  // live recovery's, of the default group

detail::GroupState& joined() {
  if (auto* replica = detail::current_replica()) return *replica->group;
  std::lock_guard<std::mutex> lock(group_mutex);
  if (world_group == nullptr) throw Error("lockstep: call lockstep::init() first");
  return *world_group;
}

void leave(bool gracefully) {
  std::shared_ptr<detail::GroupState> ending;
  std::vector<std::weak_ptr<detail::GroupState>> ending_subs;
  {
    std::lock_guard<std::mutex> lock(group_mutex);
    ending = std::move(world_group);
    ending_subs = std::move(sub_groups);
    world_group = nullptr;
    sub_groups.clear();
  }
  if (ending == nullptr) return;
  std::vector<std::shared_ptr<detail::GroupState>> subs;
  for (auto& weak : ending_subs) {
    if (auto sub = weak.lock(); sub && sub->communicator) {
      sub->communicator->close();
      subs.push_back(std::move(sub));
    }
  }
  // A last barrier keeps rank 0 (which may host the store) alive until everyone is done.
  Communicator& communicator = *ending->communicator;
  if (gracefully && !communicator.has_failed()) {
    communicator.barrier(/*blocking=*/true);
    // Every rank is here: NCCL may flush what is queued rather than abort it.
    for (const auto& sub : subs) {
      if (!sub->communicator->has_failed()) sub->communicator->leave_gracefully();
    }
    communicator.leave_gracefully();
  }
  communicator.close();
}

void leave_at_exit() {
  try {
    leave(/*gracefully=*/false);
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
  }
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();  // mpirun treats a missing finalize as a crash
}

// Gloo writes to its sockets with writev(), which raises SIGPIPE when a peer has just
// died; by default that kills this rank too, before lockstep can say which peer failed.
// Ignoring it turns the write into an EPIPE error that the collective reports. A handler
// the program installed itself is left alone.
void survive_dead_peers() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
    std::signal(SIGPIPE, SIG_IGN);
  }
}

// A replica's group is run_replicas's to make and end.
void refuse_on_replicas(const char* call) {
  if (auto* replica = detail::current_replica()) {
    throw Error(std::string("lockstep::") + call + "() was called on replica " + std::to_string(replica->index) +
                " of lockstep::run_replicas, whose group is " +
                "already joined and ends when the replica returns; leave the call out of the body");
  }
}

}  // namespace

namespace detail {

GroupState& default_group_state() { return joined(); }

void remember_group(const std::shared_ptr<GroupState>& group) {
  if (auto* replica = current_replica()) return replica->sub_groups.push_back(group);
  std::lock_guard<std::mutex> lock(group_mutex);
  sub_groups.push_back(group);
}

}  // namespace detail

namespace {

void install_exit_hooks() {
  static std::once_flag exit_hook;
  std::call_once(exit_hook, [] {
    std::atexit(leave_at_exit);
    survive_dead_peers();
  });
}

void join(const WorldSpec& spec, const InitOptions& options) {
  if (options.device()) use_cuda_device(*options.device());  // before meeting anyone
  auto world = join_world(spec);
  // `torch::kCUDA` then means a GPU of this rank's own, which NCCL needs (and staging prefers);
  // its context is made only if the job uses it.
  if (!options.device()) {
    if (auto gpu = gpu_of_local_rank(world->local_rank(), visible_cuda_devices())) prefer_cuda_device(*gpu);
  }
  auto group = detail::make_world_group(std::move(world));
  {
    std::lock_guard<std::mutex> lock(group_mutex);
    world_group = std::move(group);
    world_generation = spec.generation;
  }
  if (auto* observer = detail::call_observer()) observer->joined(spec);
}

}  // namespace

void init(const InitOptions& options) {
  refuse_on_replicas("init");
  install_exit_hooks();
  const WorldSpec spec = discover_world(options, process_environment());
  if (is_initialized()) {
    throw Error("lockstep::init() was called twice; call lockstep::shutdown() first");
  }
  join(spec, options);
}

void detail::regroup(int member_id, int rank, int world_size, int generation) {
  refuse_on_replicas("regroup");
  install_exit_hooks();
  if (auto* observer = detail::call_observer()) observer->leaving();  // this generation's timeline ends
  leave(/*gracefully=*/false);
  // The launcher's local places were of the workers as launched: found anew from the hosts.
  const EnvLookup without_local_places = [process = process_environment()](const std::string& name) {
    for (const char* launched :
         {"LOCKSTEP_LOCAL_RANK", "LOCAL_RANK", "LOCKSTEP_LOCAL_WORLD_SIZE", "LOCAL_WORLD_SIZE"}) {
      if (name == launched) return std::optional<std::string>();
    }
    return process(name);
  };
  const auto options = InitOptions().rank(rank).world_size(world_size);
  WorldSpec spec = discover_world(options, without_local_places);
  spec.member_id = member_id;
  spec.generation = generation;
  join(spec, options);
}

int detail::generation() {
  std::lock_guard<std::mutex> lock(group_mutex);
  return world_generation;
}

void detail::abort_default_group(int generation, const std::string& why) {
  std::shared_ptr<detail::GroupState> group;
  {
    std::lock_guard<std::mutex> lock(group_mutex);
    if (world_group == nullptr || world_generation != generation) return;
    group = world_group;  // alive while it is aborted, whatever the caller's thread does
  }
  group->communicator->abort(why);
}

bool detail::default_group_failed() {
  std::lock_guard<std::mutex> lock(group_mutex);
  return world_group != nullptr && world_group->communicator->has_failed();
}

void shutdown() {
  refuse_on_replicas("shutdown");
  if (auto* observer = detail::call_observer()) observer->leaving();
  leave(/*gracefully=*/true);
}

bool launched() {
  for (const char* name : {"RANK", "LOCKSTEP_RANK", "OMPI_COMM_WORLD_RANK"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  // srun starts each task of a step as a rank; a batch script's own shell has no step id.
  return std::getenv("SLURM_STEP_ID") != nullptr && std::getenv("SLURM_PROCID") != nullptr;
}

bool is_initialized() {
  if (detail::current_replica()) return true;
  std::lock_guard<std::mutex> lock(group_mutex);
  return world_group != nullptr;
}

int rank() { return joined().rank; }
int world_size() { return static_cast<int>(joined().world_ranks.size()); }
int local_rank() { return joined().world->local_rank(); }
int local_world_size() { return joined().world->local_world_size(); }
Backend backend() { return joined().world->spec().backend; }
DeviceBackend device_backend() { return joined().world->spec().device_backend; }

}  // namespace lockstep
