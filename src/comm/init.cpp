#include <csignal>
#include <cstdlib>
#include <iostream>
#include <mutex>

#include <mpi.h>

#include "comm/environment.h"
#include "comm/process_group.h"
#include "comm/rendezvous.h"
#include "lockstep/comm/error.h"
#include "lockstep/comm/init.h"

namespace lockstep {
namespace {

// The one process-group singleton (see STYLE.md): created by init(), ended by shutdown()
// or at exit.
std::mutex group_mutex;
Group* group = nullptr;


Group& joined() {
  if (group == nullptr) throw Error("lockstep: call lockstep::init() first");
  return *group;
}

void leave(bool gracefully) {
  std::lock_guard<std::mutex> lock(group_mutex);
  if (group == nullptr) return;
  std::unique_ptr<Group> ending(group);
  group = nullptr;
  // A last barrier keeps rank 0 (which may host the store) alive until everyone is done.
  if (gracefully && !ending->communicator->has_failed()) {
    ending->communicator->barrier(/*blocking=*/true);
  }
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

}  // namespace

Communicator& default_group() { return *joined().communicator; }

void init(const InitOptions& options) {
  static std::once_flag exit_hook;
  std::call_once(exit_hook, [] {
    std::atexit(leave_at_exit);
    survive_dead_peers();
  });
  const WorldSpec spec = discover_world(options, process_environment());
  std::lock_guard<std::mutex> lock(group_mutex);
  if (group != nullptr) {
    throw Error("lockstep::init() was called twice; call lockstep::shutdown() first");
  }
  group = new Group(join_group(spec));
}

void shutdown() { leave(/*gracefully=*/true); }

bool is_initialized() {
  std::lock_guard<std::mutex> lock(group_mutex);
  return group != nullptr;
}

int rank() { return joined().communicator->rank(); }
int world_size() { return joined().communicator->world_size(); }
int local_rank() { return joined().local_rank; }
int local_world_size() { return joined().local_world_size; }
Backend backend() { return joined().communicator->backend(); }

}  // namespace lockstep
